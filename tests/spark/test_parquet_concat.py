"""Joining the part files of a Spark write into one Parquet file (the classic Spark checkpoint)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_maintenance.spark_jobs._parquet_concat import ConcatFailed, concatenate_parquet

pytestmark = pytest.mark.spark


def _parts(spark: Any, out: Path, n: int = 4) -> list[str]:
    from pyspark.sql import functions as F

    frame = spark.range(0, 9_000, numPartitions=n).select(
        F.struct(F.col("id").alias("a"), F.create_map(F.lit("k"), F.col("id").cast("string")).alias("m")).alias("s"),
        F.when(F.col("id") % 3 == 0, F.lit(None)).otherwise(F.col("id") * 2).alias("x"),
    )
    frame.write.option("compression", "zstd").parquet(f"file://{out}")
    return sorted(str(p) for p in out.glob("part-*.parquet"))


def test_parts_are_joined_in_order_with_every_row_group_and_spark_metadata(tmp_path: Path, spark: Any) -> None:
    parts = _parts(spark, tmp_path / "parts")
    assert len(parts) == 4
    target = tmp_path / "joined.parquet"
    concatenate_parquet(spark, [f"file://{p}" for p in parts], f"file://{target}")
    joined = pq.ParquetFile(target)
    expected = pa.concat_tables(pq.read_table(p) for p in parts)
    assert joined.read().equals(expected)
    assert joined.metadata.num_row_groups == sum(pq.ParquetFile(p).metadata.num_row_groups for p in parts)
    assert b"org.apache.spark.sql.parquet.row.metadata" in (joined.metadata.metadata or {})
    assert spark.read.parquet(f"file://{target}").count() == 9_000


def test_a_part_with_another_schema_is_refused_by_name(tmp_path: Path, spark: Any) -> None:
    parts = _parts(spark, tmp_path / "parts", n=2)
    odd = tmp_path / "odd.parquet"
    pq.write_table(pa.table({"y": [1, 2]}), odd)
    with pytest.raises(ConcatFailed, match=r"odd\.parquet: its schema differs"):
        concatenate_parquet(spark, [f"file://{parts[0]}", f"file://{odd}", f"file://{parts[1]}"], f"file://{tmp_path / 'joined.parquet'}")


def test_an_existing_target_is_never_overwritten(tmp_path: Path, spark: Any) -> None:
    parts = _parts(spark, tmp_path / "parts", n=2)
    target = tmp_path / "joined.parquet"
    target.write_bytes(b"someone else's file")
    with pytest.raises(ConcatFailed):
        concatenate_parquet(spark, [f"file://{p}" for p in parts], f"file://{target}")
    assert target.read_bytes() == b"someone else's file"
