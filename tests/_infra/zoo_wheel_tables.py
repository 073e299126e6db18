"""Zoo tables written by the ``deltalake`` wheel (delta-rs 1.6): its deletes and updates rewrite
files (no deletion vectors), its overwrites remove every file or a predicate's files."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa

from .zoo_registry import zoo_table
from .zoo_spark_tables import SPECIAL_PARTITION_VALUES


def wide_batch(lo: int, hi: int) -> pa.Table:
    """Rows ``lo``..``hi`` with many types, nulls, NaN and long unicode strings."""
    ids = list(range(lo, hi))
    base = dt.datetime(2020, 9, 13, 12, 26, 40, tzinfo=dt.timezone.utc)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": [None if i % 11 == 3 else ("ü" * 34 + str(i) if i % 3 == 0 else f"name-{i}" + "x" * (i % 40)) for i in ids],
            "amount": [float("nan") if i % 17 == 7 else i * 1.25 for i in ids],
            "flag": [i % 2 == 0 for i in ids],
            "day": pa.array([dt.date(2020, 1, 1) + dt.timedelta(days=i) for i in ids], pa.date32()),
            "ts": pa.array([base + dt.timedelta(microseconds=i * 3601000001) for i in ids], pa.timestamp("us", tz="UTC")),
            "ntz": pa.array([None if i % 7 == 0 else dt.datetime(1969, 12, 31, 23, 59, 59, 999999) + dt.timedelta(hours=i) for i in ids], pa.timestamp("us")),
            "price": pa.array([decimal.Decimal(i * 125) / 100 if i % 9 else None for i in ids], pa.decimal128(10, 2)),
            "tags": pa.array([None if i % 4 == 0 else [f"t{i}", None] for i in ids], pa.list_(pa.string())),
            "info": pa.array([{"a": i, "b": None if i % 5 == 0 else f"b{i}"} for i in ids], pa.struct([("a", pa.int32()), ("b", pa.string())])),
            "raw": pa.array([i.to_bytes(2, "big") for i in ids], pa.binary()),
        }
    )


@zoo_table("wheel_unpartitioned", "wheel", {"unpartitioned", "deletes", "updates", "overwrites", "timestamp_ntz", "decimals", "nested"})
def wheel_unpartitioned(path: str) -> None:
    """Unpartitioned, many types (timestamp_ntz, decimal, nested, binary, NaN); append, delete and
    update (file rewrites), a full overwrite, an append."""
    import deltalake

    deltalake.write_deltalake(path, wide_batch(0, 40))
    deltalake.write_deltalake(path, wide_batch(40, 80), mode="append")
    deltalake.DeltaTable(path).delete("id % 5 = 0")
    deltalake.DeltaTable(path).update({"amount": "amount * 2"}, predicate="id < 20")
    deltalake.write_deltalake(path, wide_batch(200, 260), mode="overwrite")
    deltalake.write_deltalake(path, wide_batch(300, 320), mode="append")


def region_batch(lo: int, hi: int, region: str | None = None) -> pa.Table:
    ids = list(range(lo, hi))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "region": [region or ("us", "eu", "apac")[i % 3] for i in ids],
            "year": pa.array([2020 + i % 2 for i in ids], pa.int32()),
            "value": [i * 0.5 for i in ids],
        }
    )


@zoo_table("wheel_partitioned", "wheel", {"partitioned", "deletes", "updates", "overwrites", "checkpoint"})
def wheel_partitioned(path: str) -> None:
    """Partitioned by (region, year): whole-partition delete, rewriting delete, update, a predicate
    overwrite of one partition, an append, then the wheel's checkpoint of the last version."""
    import deltalake

    deltalake.write_deltalake(path, region_batch(0, 60), partition_by=["region", "year"])
    deltalake.write_deltalake(path, region_batch(60, 90), mode="append")
    deltalake.DeltaTable(path).delete("region = 'eu'")
    deltalake.DeltaTable(path).delete("id % 7 = 0")
    deltalake.DeltaTable(path).update({"value": "-value"}, predicate="region = 'us' AND year = 2021")
    deltalake.write_deltalake(path, region_batch(1000, 1030, "apac"), mode="overwrite", predicate="region = 'apac'")
    deltalake.write_deltalake(path, region_batch(90, 120), mode="append")
    deltalake.DeltaTable(path).create_checkpoint()


def special_batch(lo: int, hi: int) -> pa.Table:
    ids, ps, qs = [], [], []
    for k, value in enumerate(SPECIAL_PARTITION_VALUES):
        for r in range(lo, hi):
            ids.append(k * 100 + r)
            ps.append(value)
            qs.append(1 if r % 2 == 0 else None)
    return pa.table({"id": pa.array(ids, pa.int32()), "p": pa.array(ps, pa.string()), "q": pa.array(qs, pa.int32())})


@zoo_table("wheel_special_partitions", "wheel", {"partitioned", "special_partitions", "deletes", "updates"})
def wheel_special_partitions(path: str) -> None:
    """Partitioned by (p, q) with the same special values as spark_special_partitions ('' and null
    included); a partition delete, a delete inside the null partition, an update."""
    import deltalake

    deltalake.write_deltalake(path, special_batch(0, 4), partition_by=["p", "q"])
    deltalake.write_deltalake(path, special_batch(4, 6), mode="append")
    deltalake.DeltaTable(path).delete("p = 'k=v'")
    deltalake.DeltaTable(path).delete("p IS NULL AND id % 2 = 0")
    deltalake.DeltaTable(path).update({"id": "id + 10000"}, predicate="p = 'a/b'")


def small_rows(lo: int, hi: int, partitions: int = 0) -> pa.Table:
    ids = pa.array(range(lo, hi), pa.int64())
    cols = {"id": ids, "s": pa.array([f"payload-{i}" for i in range(lo, hi)])}
    if partitions:
        cols["p"] = pa.array([f"p{i % partitions}" for i in range(lo, hi)])
    return pa.table(cols)


@zoo_table("wheel_many_small_files", "wheel", {"unpartitioned", "many_small_files", "deletes"})
def wheel_many_small_files(path: str) -> None:
    """About 205 small files in one write (the wheel rolls a file every ~1,000 rows with a tiny
    target size), a delete rewriting some, an append."""
    import deltalake

    deltalake.write_deltalake(path, small_rows(0, 210_000), target_file_size=1)
    deltalake.DeltaTable(path).delete("id % 10000 = 0")
    deltalake.write_deltalake(path, small_rows(210_000, 220_000), mode="append", target_file_size=1)


@zoo_table("wheel_many_small_files_partitioned", "wheel", {"partitioned", "many_small_files", "deletes"})
def wheel_many_small_files_partitioned(path: str) -> None:
    """4 partitions of about 51 small files each (205 in one write), then a rewriting delete."""
    import deltalake

    deltalake.write_deltalake(path, small_rows(0, 210_000, 4), partition_by=["p"], target_file_size=1)
    deltalake.DeltaTable(path).delete("id % 9973 = 0")
