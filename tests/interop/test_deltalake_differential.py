"""Differential tests against the `deltalake` wheel on randomised histories.

Each run draws fresh seeds (printed in every assertion message); replay one with
``DELTA_DIFF_SEED=<seed> make test PYTEST_ARGS='-k differential'``. The wheel writes the tables
(appends, overwrites, deletes, updates, checkpoints, log compactions, optimize) and at every
version our active files (path, size), protocol and metadata must equal the wheel's.
"""

from __future__ import annotations

import datetime
import os
import random
from pathlib import Path

import pyarrow as pa
import pytest

from airflow_delta_maintenance.deltalog.errors import DeltaLogError
from airflow_delta_maintenance.deltalog.snapshot import load_snapshot

import deltalake  # the independent oracle: a test dependency, never skipped
pytestmark = pytest.mark.interop

RUNS = 12
OPS = ["append", "append", "overwrite", "delete", "update", "checkpoint", "compact_logs", "optimize"]


def _seeds() -> list[int]:
    fixed = os.environ.get("DELTA_DIFF_SEED")
    if fixed:
        return [int(fixed)]
    sysrand = random.SystemRandom()
    return [sysrand.randrange(2**32) for _ in range(RUNS)]


def _batch(rng: random.Random, partitioned: bool) -> pa.Table:
    n = rng.randint(1, 6)
    ids = [rng.randint(0, 50) for _ in range(n)]
    data = {"id": ids, "name": [f"n{i}" if rng.random() > 0.2 else None for i in ids], "amount": [rng.random() * 100 for _ in ids]}
    schema = [pa.field("id", pa.int64()), pa.field("name", pa.string()), pa.field("amount", pa.float64())]
    if partitioned:
        data["part"] = [rng.choice(["a", "b", "c"]) for _ in ids]
        schema.append(pa.field("part", pa.string()))
        # a date partition: its values must stay "2024-01-05" (JSON inference would make timestamps)
        data["day"] = [datetime.date(2024, 1, rng.randint(1, 3)) for _ in ids]
        schema.append(pa.field("day", pa.date32()))
    return pa.table(data, schema=pa.schema(schema))


def _wheel(path: str, version: int):  # noqa: ANN202
    table = deltalake.DeltaTable(path, version=version)
    actions = table.get_add_actions(flatten=True)
    return table, {(p, s) for p, s in zip(actions.column("path").to_pylist(), actions.column("size_bytes").to_pylist())}


def _partitions(table) -> dict[str, dict[str, str | None]]:  # noqa: ANN001
    actions = pa.table(table.get_add_actions(flatten=False))
    if "partition" not in actions.column_names:
        return {p: {} for p in actions.column("path").to_pylist()}
    return {
        p: {k: None if v is None else str(v) for k, v in (values or {}).items()}
        for p, values in zip(actions.column("path").to_pylist(), actions.column("partition").to_pylist())
    }


def _history(path: str, rng: random.Random, partitioned: bool, steps: int) -> list[str]:
    done = []
    kwargs = {"partition_by": ["part", "day"]} if partitioned else {}
    deltalake.write_deltalake(path, _batch(rng, partitioned), mode="append", **kwargs)
    done.append("create")
    for _ in range(steps):
        op = rng.choice(OPS)
        table = deltalake.DeltaTable(path)
        if op == "append":
            deltalake.write_deltalake(path, _batch(rng, partitioned), mode="append", **kwargs)
        elif op == "overwrite":
            deltalake.write_deltalake(path, _batch(rng, partitioned), mode="overwrite", **kwargs)
        elif op == "delete":
            table.delete(f"id < {rng.randint(0, 50)}")
        elif op == "update":
            table.update(updates={"amount": "amount + 1"}, predicate=f"id > {rng.randint(0, 50)}")
        elif op == "checkpoint":
            table.create_checkpoint()
        elif op == "compact_logs":
            v = table.version()
            if v >= 2:
                start = rng.randint(1, v - 1)
                table.compact_logs(start, rng.randint(start + 1, v))
        elif op == "optimize":
            table.optimize.compact()
        done.append(op)
    return done


@pytest.mark.parametrize("partitioned", [False, True], ids=["unpartitioned", "partitioned"])
def test_every_version_matches_the_wheel(tmp_path: Path, partitioned: bool) -> None:
    for seed in _seeds():
        rng = random.Random(seed)
        path = str(tmp_path / f"t{seed}")
        ops = _history(path, rng, partitioned, rng.randint(8, 18))
        latest = deltalake.DeltaTable(path).version()
        why = f"seed={seed} partitioned={partitioned} ops={ops} (replay: DELTA_DIFF_SEED={seed})"
        for v in range(latest + 1):
            table, files = _wheel(path, v)
            ours = load_snapshot(path, v)
            assert ours.version == v, why
            assert {(f["path"], f["size"]) for f in ours.file_list()} == files, f"version {v}: {why}"
            ours_pv = dict(zip(ours.files.column("path").to_pylist(), (dict(x or []) for x in ours.files.column("partitionValues").to_pylist())))
            assert ours_pv == _partitions(table), f"partition values at version {v}: {why}"
            proto = table.protocol()
            assert (ours.protocol.min_reader_version, ours.protocol.min_writer_version) == (proto.min_reader_version, proto.min_writer_version), why
            assert set(ours.protocol.writer_features or ()) == set(proto.writer_features or ()), why
            meta = table.metadata()
            assert (ours.metadata.id, list(ours.metadata.partition_columns), dict(ours.metadata.configuration)) == (
                meta.id, list(meta.partition_columns), dict(meta.configuration)), why
            assert ours.metadata.schema == __import__("json").loads(table.schema().to_json()), why


def test_versions_before_cleanup_are_refused_like_the_wheel(tmp_path: Path) -> None:
    seed = _seeds()[0]
    rng = random.Random(seed)
    path = str(tmp_path / "t")
    for _ in range(6):
        deltalake.write_deltalake(path, _batch(rng, False), mode="append")
    table = deltalake.DeltaTable(path)
    table.create_checkpoint()
    for name in os.listdir(Path(path) / "_delta_log"):
        if name.endswith(".json") and int(name.split(".")[0]) < 5:
            os.utime(Path(path) / "_delta_log" / name, (1, 1))  # ancient: expired for any retention
    deltalake.DeltaTable(path).cleanup_metadata()
    remaining = sorted(int(n.split(".")[0]) for n in os.listdir(Path(path) / "_delta_log") if n.endswith(".json"))
    first = remaining[0]
    assert load_snapshot(path, 5).active_file_keys() == {(p, None) for p, _ in _wheel(path, 5)[1]}, f"seed={seed}"
    if first > 0:
        with pytest.raises(DeltaLogError):
            load_snapshot(path, first - 1)
        with pytest.raises(Exception):
            deltalake.DeltaTable(path, version=first - 1)
