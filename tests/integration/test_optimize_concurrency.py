"""OPTIMIZE racing writers, seeded: the deltalake wheel appends, deletes (rewriting files) and
updates while two OPTIMIZE runs commit batch by batch on the same plain table, on local disk and on
moto S3; on tables of the embedded coordinator and of DynamoDB Local, the test's own writers commit
appends, deletes and updates through the same coordinator. Afterwards every version reads as it
was recorded when committed, every OPTIMIZE version reads exactly as the version before it (no row
lost or resurrected), and no version references a file twice.

A failing seed replays: ``pytest tests/integration/test_optimize_concurrency.py -k 'seed-<n>'``
(the seed fixes the writers' operations; the interleaving is the scheduler's)."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

from airflow_delta_maintenance.deltalog.optimize.plan import OptimizeOptions
from airflow_delta_maintenance.maintenance.operations.optimize import OptimizeConflictError, run_optimize
from airflow_delta_maintenance.maintenance.table.maintained import open_table

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

SEEDS = [11, 23, 37]
EngineFor = Callable[[Any], Any]  # the table → the engine of the first OPTIMIZE thread (default: the worker's)


def rows_at(path: str, version: int, options: dict[str, str] | None = None) -> list[tuple[Any, ...]]:
    table = deltalake.DeltaTable(path, version=version, storage_options=options).to_pyarrow_table()
    return sorted(zip(*(table.column(c).to_pylist() for c in ("id", "v", "region")), strict=True))


def batch(start: int, n: int, region: str) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "v": pa.array([0] * n, pa.int64()), "region": [region] * n})


@pytest.mark.parametrize("seed", SEEDS, ids=[f"seed-{s}" for s in SEEDS])
def test_optimize_races_writers_and_loses_nothing(tmp_path: Path, seed: int) -> None:
    _race_with_the_wheel(str(tmp_path / "t"), seed, None, None, ops=18)


@pytest.mark.parametrize("seed", [29], ids=["seed-29"])
def test_optimize_races_writers_on_s3(s3_bucket: tuple[str, dict[str, Any]], seed: int) -> None:
    """The same on moto S3: the wheel commits by conditional put, ours by put-if-absent."""
    bucket, options = s3_bucket
    _race_with_the_wheel(f"s3://{bucket}/t", seed, wheel_s3_options(options), options, ops=6)  # every S3 request is moto's: few ops


def wheel_s3_options(options: dict[str, Any]) -> dict[str, str]:
    """The wheel's storage options for the moto bucket of ``s3_bucket`` (ours: s3fs's ``options``)."""
    client = options["client_kwargs"]
    return {"AWS_ENDPOINT_URL": client["endpoint_url"], "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": options["key"],
            "AWS_SECRET_ACCESS_KEY": options["secret"], "AWS_ALLOW_HTTP": "true", "AWS_CONDITIONAL_PUT": "etag", "AWS_FORCE_PATH_STYLE": "true"}


def _race_with_the_wheel(path: str, seed: int, wheel: dict[str, str] | None, options: dict[str, Any] | None, *, ops: int,
                         engine: EngineFor | None = None) -> None:
    rng = random.Random(seed)
    next_id = 0
    for region in ("a", "b", "c"):
        for _ in range(4):
            deltalake.write_deltalake(path, batch(next_id, 10, region), mode="append", partition_by=["region"], storage_options=wheel)
            next_id += 10
    recorded: dict[int, list[tuple[Any, ...]]] = {}
    stop = threading.Event()
    errors: list[BaseException] = []
    raced = {"conflicts": 0, "dropped": 0, "commits": 0}

    def optimizer(k: int) -> None:
        local = random.Random(seed * 10 + k)
        while not stop.is_set():
            try:
                table = open_table(path, options)
                r = run_optimize(table, OptimizeOptions(), commit_batch_bytes=local.choice([1, 1 << 30]), rng=local,
                                 engine=engine(table) if engine is not None and k == 0 else None)
                raced["conflicts"] += r.conflicts
                raced["dropped"] += r.bins_dropped
                raced["commits"] += len(r.commits)
            except OptimizeConflictError:
                pass  # protocol/metadata changes or retries exhausted: the run stops, nothing partial
            except BaseException as exc:  # noqa: BLE001 - surfaced by the assertion below
                errors.append(exc)
                return

    threads = [threading.Thread(target=optimizer, args=(k,), daemon=True) for k in range(2)]
    for t in threads:
        t.start()
    try:
        for _ in range(ops):
            op = rng.choice(["append", "append", "delete", "update"])
            region = rng.choice("abc")
            for _attempt in range(20):
                try:
                    dt = deltalake.DeltaTable(path, storage_options=wheel)
                    if op == "append":
                        deltalake.write_deltalake(dt, batch(next_id, 5, region), mode="append", partition_by=["region"])
                    elif op == "delete":
                        dt.delete(f"region = '{region}' AND id % 7 = {rng.randrange(7)}")
                    else:
                        dt.update(updates={"v": "v + 1"}, predicate=f"region = '{region}' AND id % 3 = {rng.randrange(3)}")
                    break
                except Exception as exc:  # the wheel lost a race with an OPTIMIZE commit: retry as its users do
                    if "onflict" not in type(exc).__name__ + str(exc) and "Commit" not in type(exc).__name__:
                        raise
            else:
                pytest.fail(f"seed {seed}: the writer's {op} lost 20 races in a row")
            if op == "append":
                next_id += 5
            v = deltalake.DeltaTable(path, storage_options=wheel).version()
            recorded[v] = rows_at(path, v, wheel)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=300)
    assert not errors, errors
    # and once more after the writers, with work it must commit: on a busy machine the racing
    # OPTIMIZE runs may lose every race, and the writers may leave one file per partition
    for _ in range(2):
        deltalake.write_deltalake(path, batch(next_id, 5, "a"), mode="append", partition_by=["region"], storage_options=wheel)
        next_id += 5
        v = deltalake.DeltaTable(path, storage_options=wheel).version()
        recorded[v] = rows_at(path, v, wheel)
    assert run_optimize(open_table(path, options)).commits, f"seed {seed}: the OPTIMIZE after the writers committed nothing"
    latest = deltalake.DeltaTable(path, storage_options=wheel).version()
    store = open_table(path, options).store
    optimize_versions = []
    for v in range(latest + 1):
        commit = store.read(f"{v:020d}.json").decode().splitlines()
        info = next(json.loads(line)["commitInfo"] for line in commit if '"commitInfo"' in line)
        uris = deltalake.DeltaTable(path, version=v, storage_options=wheel).file_uris()
        assert len(uris) == len(set(uris)), f"seed {seed}: v{v} references a file twice"
        if info.get("operation") == "OPTIMIZE" and info.get("engineInfo", "").startswith("airflow-delta-maintenance"):
            optimize_versions.append(v)
            assert rows_at(path, v, wheel) == rows_at(path, v - 1, wheel), f"seed {seed}: OPTIMIZE v{v} changed the rows of v{v - 1}"
    for v, expected in recorded.items():
        assert rows_at(path, v, wheel) == expected, f"seed {seed}: v{v} no longer reads as recorded"
    assert optimize_versions, f"seed {seed}: no OPTIMIZE committed"
    print(f"seed {seed}: {raced}")
    final = rows_at(path, latest, wheel)
    assert len({r[0] for r in final}) == len(final)  # no id twice: nothing resurrected beside its update


# ---- tables on a commit coordinator ---------------------------------------------------------------
# No other engine writes these (the wheel refuses coordinated tables): the writers are the test's,
# committing through the same coordinator client: appends, deletes of whole files, updates that
# rewrite a file. Each op reads the latest ratified version and proposes the next one; a lost race
# reads again. Recorded rows are read back after every write and again at the end.


def _coordinated_rows(table: Any, version: int | None = None) -> list[tuple[Any, ...]]:
    from airflow_delta_maintenance.deltalog.datafiles.files import DataFiles
    from airflow_delta_maintenance.deltalog.datafiles.reader import iter_live_rows, source_file
    from airflow_delta_maintenance.deltalog.datafiles.schema import data_schema
    from airflow_delta_maintenance.deltalog.optimize.tasks import live_adds
    from airflow_delta_maintenance.maintenance.table.catalog_view import load_ratified_snapshot

    snap = load_ratified_snapshot(table, version)
    target = data_schema(snap.metadata.schema, snap.metadata.partition_columns, "none").without_partitions()
    out: list[tuple[Any, ...]] = []
    for add in live_adds(snap.files):
        for live in iter_live_rows(DataFiles(table.store), source_file(add), target, match_by_id=False):
            out += [(i, a, add["partitionValues"]["region"]) for i, a in zip(live.table.column("id").to_pylist(), live.table.column("amount").to_pylist(), strict=True)]
    return sorted(out)


def _race_on_coordinator(spec: str, uri: str, seed: int, client: Any, *, ops: int = 14, engine: EngineFor | None = None) -> None:
    from airflow_delta_maintenance.coordinators.errors import CommitConflictError
    from airflow_delta_maintenance.deltalog.optimize.tasks import live_adds
    from airflow_delta_maintenance.demo.sample_table import add_action_for, create_actions, data_batch
    from airflow_delta_maintenance.maintenance.operations.publish import publish_ratified_commits
    from airflow_delta_maintenance.maintenance.table.catalog_view import load_ratified_snapshot

    rng = random.Random(seed)
    client.commit(uri, 0, create_actions(ict=True))
    next_id = 0
    for v in range(1, 9):
        region = "abc"[v % 3]
        client.commit(uri, v, [add_action_for(uri, data_batch(next_id, 10, region), region)])
        next_id += 10
    table = open_table(uri, coordinator=spec)
    recorded: dict[int, list[tuple[Any, ...]]] = {}
    stop = threading.Event()
    errors: list[BaseException] = []
    raced = {"conflicts": 0, "dropped": 0, "commits": 0}

    def optimizer(k: int) -> None:
        local = random.Random(seed * 10 + k)
        while not stop.is_set():
            try:
                opened = open_table(uri, coordinator=spec)
                r = run_optimize(opened, OptimizeOptions(), commit_batch_bytes=local.choice([1, 1 << 30]), rng=local,
                                 engine=engine(opened) if engine is not None and k == 0 else None)
                raced["conflicts"] += r.conflicts
                raced["dropped"] += r.bins_dropped
                raced["commits"] += len(r.commits)
            except OptimizeConflictError:
                pass
            except BaseException as exc:  # noqa: BLE001 - surfaced by the assertion below
                errors.append(exc)
                return

    threads = [threading.Thread(target=optimizer, args=(k,), daemon=True) for k in range(2)]
    for t in threads:
        t.start()
    try:
        for _ in range(ops):
            op = rng.choice(["append", "append", "delete", "update"])
            for _attempt in range(20):
                snap = load_ratified_snapshot(table)
                adds = live_adds(snap.files)
                region = rng.choice("abc")
                if op == "append" or not adds:
                    actions = [add_action_for(uri, data_batch(next_id, 5, region), region)]
                else:
                    victim = rng.choice(adds)
                    now = int(time.time() * 1000)
                    actions = [{"remove": {"path": victim["path"], "deletionTimestamp": now, "dataChange": True, "size": victim["size"],
                                           "partitionValues": victim["partitionValues"], "extendedFileMetadata": True}}]
                    if op == "update":
                        # UPDATE … SET amount = amount + 1 WHERE region = <the victim's>: every live file there rewritten
                        kept = [r for r in _coordinated_rows(table, snap.version) if r[2] == victim["partitionValues"]["region"]]
                        batch = pa.table({"id": pa.array([r[0] for r in kept], pa.int64()), "amount": [r[1] + 1 for r in kept],
                                          "region": [r[2] for r in kept]})
                        actions = [{"remove": {"path": a["path"], "deletionTimestamp": now, "dataChange": True, "size": a["size"],
                                               "partitionValues": a["partitionValues"], "extendedFileMetadata": True}}
                                   for a in adds if a["partitionValues"] == victim["partitionValues"]]
                        actions.append(add_action_for(uri, batch, victim["partitionValues"]["region"]))
                try:
                    client.commit(uri, snap.version + 1, actions)
                except CommitConflictError:
                    continue  # lost to an OPTIMIZE commit: read again, as a writer does
                break
            else:
                pytest.fail(f"seed {seed}: the writer's {op} lost 20 races in a row")
            if op == "append":
                next_id += 5
            v = snap.version + 1
            recorded[v] = _coordinated_rows(table, v)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=300)
    assert not errors, errors
    # and once more after the writers, with work it must commit (see _race_with_the_wheel)
    for _ in range(2):
        v = load_ratified_snapshot(table).version + 1
        client.commit(uri, v, [add_action_for(uri, data_batch(next_id, 5, "a"), "a")])
        next_id += 5
        recorded[v] = _coordinated_rows(table, v)
    assert run_optimize(open_table(uri, coordinator=spec)).commits, f"seed {seed}: the OPTIMIZE after the writers committed nothing"
    latest = load_ratified_snapshot(table).version
    publish_ratified_commits(table)  # what every reader then sees in _delta_log
    optimize_versions = []
    for v in range(latest + 1):
        commit = [json.loads(line) for line in Path(uri, "_delta_log", f"{v:020d}.json").read_text().splitlines()]
        info = next((a["commitInfo"] for a in commit if "commitInfo" in a), {})
        paths = [a["add"]["path"] for a in commit if "add" in a]
        assert len(paths) == len(set(paths)), f"seed {seed}: v{v} adds a file twice"
        live = live_adds(load_ratified_snapshot(table, v).files)
        assert len({a["path"] for a in live}) == len(live), f"seed {seed}: v{v} references a file twice"
        if info.get("operation") == "OPTIMIZE":
            optimize_versions.append(v)
            assert _coordinated_rows(table, v) == _coordinated_rows(table, v - 1), f"seed {seed}: OPTIMIZE v{v} changed the rows of v{v - 1}"
    for v, expected in recorded.items():
        assert _coordinated_rows(table, v) == expected, f"seed {seed}: v{v} no longer reads as recorded"
    assert optimize_versions, f"seed {seed}: no OPTIMIZE committed"
    print(f"seed {seed} on {spec.split(':')[0]}: {raced}")


@pytest.mark.parametrize("seed", [41], ids=["seed-41"])
def test_optimize_races_writers_on_the_embedded_coordinator(tmp_path: Path, seed: int) -> None:
    from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator

    spec = f"local://{tmp_path}/c.db"
    client = open_coordinator(spec + "?create=true")
    try:
        _race_on_coordinator(spec, str(tmp_path / "t"), seed, client)
    finally:
        client.close()


@pytest.mark.parametrize("seed", [43], ids=["seed-43"])
def test_optimize_races_writers_on_dynamodb(tmp_path: Path, seed: int, dynamodb_endpoint: str, dynamodb_table_name: str,
                                            aws_env: dict[str, str]) -> None:
    from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator

    spec = f"dynamodb://{dynamodb_table_name}?region=us-east-1&endpoint={dynamodb_endpoint}"
    client = open_coordinator(spec)
    client.create_dynamodb_table()
    try:
        _race_on_coordinator(spec, str(tmp_path / "t"), seed, client)
    finally:
        client.close()
