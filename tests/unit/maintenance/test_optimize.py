"""OPTIMIZE on the worker engine, driven as users drive ``run_optimize``: tables the ``deltalake``
wheel wrote, read back by the wheel; concurrent writers between the rewrite and the commit; a
failing task; the embedded coordinator; the gates."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import deltalake
import numpy as np
import pyarrow as pa
import pytest

from airflow_delta_maintenance.deltalog.datafiles.files import DataFiles
from airflow_delta_maintenance.deltalog.datafiles.writer import BinTask
from airflow_delta_maintenance.deltalog.errors import UnsupportedFeatureError
from airflow_delta_maintenance.deltalog.optimize.plan import OptimizeOptions
from airflow_delta_maintenance.deltalog.optimize.predicate import parse_partition_predicate
from airflow_delta_maintenance.deltalog.optimize.tasks import live_adds
from airflow_delta_maintenance.deltalog.optimize.worker import BinFailedError, WorkerEngine
from airflow_delta_maintenance.maintenance.errors import CoordinatorMismatchError
from airflow_delta_maintenance.maintenance.operations.optimize import CATALOG_MANAGED_RULE, run_optimize
from airflow_delta_maintenance.maintenance.table.catalog_view import load_ratified_snapshot
from airflow_delta_maintenance.maintenance.table.maintained import open_table

SPECIAL = ["a b", "100%", "x=y", "s/t", "日本語", None]


def rows(path: str, version: int | None = None) -> list[dict[str, Any]]:
    dt = deltalake.DeltaTable(path, version=version)
    table = dt.to_pyarrow_table()
    return sorted(table.to_pylist(), key=lambda r: r["id"])


def data(start: int, n: int, region: str | None) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "v": [f"v{i}" for i in range(start, start + n)],
                     "region": pa.array([region] * n, pa.string())})


def make_table(tmp_path: Path, appends: int = 3, regions: Sequence[str | None] = ("us", "eu")) -> str:
    path = str(tmp_path / "t")
    start = 0
    for _ in range(appends):
        for r in regions:
            deltalake.write_deltalake(path, data(start, 5, r), mode="append", partition_by=["region"])
            start += 5
    return path


class HookEngine(WorkerEngine):
    """The worker engine, with something done between the rewrite and the commit (a concurrent writer)."""

    def __init__(self, files: DataFiles, hook: Callable[[], None]) -> None:
        super().__init__(files, max_workers=1)
        self.hook = hook

    def run(self, tasks: Sequence[BinTask]) -> list[Mapping[str, Any] | None]:
        out = super().run(tasks)
        self.hook()
        return out


def latest(path: str) -> int:
    return deltalake.DeltaTable(path).version()


def test_special_partition_values_are_compacted_and_every_version_reads_the_same(tmp_path: Path) -> None:
    path = make_table(tmp_path, appends=3, regions=SPECIAL)
    before = {v: rows(path, v) for v in range(latest(path) + 1)}
    table = open_table(path)
    dry = run_optimize(table, dry_run=True)
    assert len(dry.plan.bins) == len(SPECIAL) and dry.plan.files_in == 3 * len(SPECIAL) and latest(path) == max(before)
    assert "would compact 18 file(s)" in dry.report().summary()
    result = run_optimize(table)
    new = latest(path)
    assert result.commits == [new] and result.files_added == len(SPECIAL) and result.files_removed == 18
    for v, expected in before.items():
        assert rows(path, v) == expected
    assert rows(path, new) == before[new - 1]
    dt = deltalake.DeltaTable(path)
    assert len(dt.file_uris()) == len(SPECIAL)
    # data skipping on the new files' statistics returns the same rows as a full scan
    got = dt.to_pyarrow_table(filters=[("id", ">=", 20), ("id", "<", 47)]).column("id").to_pylist()
    assert sorted(got) == list(range(20, 47))
    info = json.loads(Path(path, "_delta_log", f"{new:020d}.json").read_text().splitlines()[0])["commitInfo"]
    assert info["operation"] == "OPTIMIZE" and info["readVersion"] == new - 1 and info["operationMetrics"]["numRemovedFiles"] == "18"
    assert run_optimize(table).plan.bins == ()  # converged: nothing left


def test_a_predicate_and_a_budget_limit_what_is_compacted(tmp_path: Path) -> None:
    path = make_table(tmp_path, appends=2, regions=("us", "eu", "ap"))
    table = open_table(path)
    pred = parse_partition_predicate("region IN ('us', 'eu')", {"region": "string"})
    result = run_optimize(table, OptimizeOptions(predicate=pred, max_bytes=1))
    assert result.bins_committed == 1 and len(result.plan.deferred_bins) == 1
    info = json.loads(Path(path, "_delta_log", f"{result.commits[0]:020d}.json").read_text().splitlines()[0])["commitInfo"]
    assert info["operationParameters"]["predicate"] == json.dumps(["region IN ('us', 'eu')"])


def test_batches_commit_one_by_one(tmp_path: Path) -> None:
    path = make_table(tmp_path, appends=2, regions=("a", "b", "c"))
    before = rows(path)
    result = run_optimize(open_table(path), commit_batch_bytes=1)
    assert len(result.commits) == 3 and result.bins_committed == 3
    assert rows(path) == before


def test_a_concurrent_append_never_conflicts(tmp_path: Path) -> None:
    path = make_table(tmp_path)
    table = open_table(path)
    engine = HookEngine(DataFiles(table.store), lambda: deltalake.write_deltalake(path, data(1000, 3, "us"), mode="append", partition_by=["region"]))
    result = run_optimize(table, engine=engine, sleep=lambda _: None)
    assert result.conflicts == 1 and result.bins_committed == 2 and result.bins_dropped == 0
    assert [r["id"] for r in rows(path)] == [*list(range(30)), 1000, 1001, 1002]


def test_a_concurrent_delete_drops_exactly_the_bins_it_touched(tmp_path: Path) -> None:
    path = make_table(tmp_path)
    table = open_table(path)
    engine = HookEngine(DataFiles(table.store), lambda: deltalake.DeltaTable(path).delete("region = 'us' AND id = 0"))
    result = run_optimize(table, engine=engine, sleep=lambda _: None)
    assert result.conflicts == 1 and result.bins_committed == 1 and result.bins_dropped == 1
    ids = [r["id"] for r in rows(path)]
    assert 0 not in ids and len(ids) == 29  # the deleted row stays deleted: nothing resurrected
    paths = [a["path"] for a in live_adds(load_ratified_snapshot(table).files)]
    assert len(paths) == len(set(paths))  # no file referenced twice
    assert unreferenced(path) == set()  # the dropped bin's file was removed


def unreferenced(path: str) -> set[str]:
    """Parquet files on disk that no version of the table references."""
    referenced: set[str] = set()
    for v in range(latest(path) + 1):
        referenced |= {Path(u).relative_to(path).as_posix() for u in deltalake.DeltaTable(path, version=v).file_uris()}
    return {p.relative_to(path).as_posix() for p in Path(path).rglob("*.parquet")} - referenced


def test_a_concurrent_metadata_change_stops_the_run(tmp_path: Path) -> None:
    path = make_table(tmp_path)
    table = open_table(path)
    engine = HookEngine(DataFiles(table.store), lambda: deltalake.DeltaTable(path).alter.set_table_properties({"delta.appendOnly": "false"}))
    result = run_optimize(table, engine=engine, sleep=lambda _: None)
    assert result.commits == [] and result.stopped and "protocol or metadata" in result.stopped
    assert len(deltalake.DeltaTable(path).file_uris()) == 6


def test_a_second_optimize_racing_wins_and_the_first_drops_its_bins(tmp_path: Path) -> None:
    path = make_table(tmp_path)
    table = open_table(path)
    engine = HookEngine(DataFiles(table.store), lambda: run_optimize(open_table(path)))
    before = rows(path)
    result = run_optimize(table, engine=engine, sleep=lambda _: None)
    assert result.bins_dropped == 2 and result.commits == []
    assert rows(path) == before and len(deltalake.DeltaTable(path).file_uris()) == 2
    assert unreferenced(path) == set()  # the loser's files were removed


def test_a_failed_task_commits_nothing_and_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = make_table(tmp_path, regions=("a", "b", "c"))
    table = open_table(path)
    files_before = {p.as_posix() for p in Path(path).rglob("*.parquet")}
    import airflow_delta_maintenance.deltalog.optimize.worker as worker

    real = worker.write_bin
    calls = []

    def flaky(files: DataFiles, task: BinTask, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            raise OSError("disk full")
        return real(files, task, **kwargs)

    monkeypatch.setattr(worker, "write_bin", flaky)
    with pytest.raises(BinFailedError, match="disk full"):
        run_optimize(table, engine=WorkerEngine(DataFiles(table.store), max_workers=1))
    assert latest(path) == 8
    assert {p.as_posix() for p in Path(path).rglob("*.parquet")} == files_before


def test_the_bins_allocate_from_the_system_pool_and_the_default_is_restored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pyarrow's default pool (mimalloc) faulted fresh pages in for every small file's buffers:
    ~10% of a 10,000-file run's CPU. The bins' threads allocate from the system pool instead."""
    path = make_table(tmp_path, regions=("a", "b"))
    table = open_table(path)
    import airflow_delta_maintenance.deltalog.optimize.worker as worker

    real = worker.write_bin
    pools: list[str] = []

    def recording(files: DataFiles, task: BinTask, **kwargs: Any) -> Any:
        out = real(files, task, **kwargs)
        pools.append(pa.default_memory_pool().backend_name)
        return out

    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    monkeypatch.setattr(worker, "write_bin", recording)
    default = pa.default_memory_pool().backend_name
    result = run_optimize(table)  # the engine a user gets: the worker's, its default threads
    assert result.commits and pools == ["system", "system"]
    assert pa.default_memory_pool().backend_name == default


def test_spare_cores_are_granted_only_once_no_bin_waits_and_a_core_is_idle() -> None:
    from airflow_delta_maintenance.deltalog.optimize.worker import SpareCores

    spare = SpareCores(cores=2, bins=3)
    a, b = spare.start(), spare.start()
    assert not a.grant()  # a bin still waits to start: it uses the core better
    c = spare.start()
    assert not c.grant()  # three bins on two cores
    a.finish()
    assert not b.grant()  # two bins on two cores
    b.finish()
    assert c.grant() and c.granted and c.grant()  # the last bin, alone: the core is its own until it ends
    c.finish()
    alone = SpareCores(cores=1, bins=1).start()
    assert not alone.grant()  # one core (or max_workers=1): nothing to spare


@pytest.mark.parametrize(("max_workers", "cores", "expected"), [(None, 2, [True, True]), (1, 2, [False, False]), (None, 1, [False, False])])
def test_a_bin_running_alone_shares_its_reading_with_a_spare_core(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  max_workers: int | None, cores: int, expected: list[bool]) -> None:
    """The engine a user gets (its defaults, or max_workers=1), on two cores or one: each partition
    holds ~8 MB of small files (two 4 MiB slices), and with one commit batch per bin each
    bin runs alone. On two cores each is granted the idle core for a second reading thread; with
    one worker, or one core, none is. The rows are the same."""
    path = str(tmp_path / "t")
    rng = np.random.default_rng(5)
    for i in range(6):
        n = 160_000  # ~2.6 MB of incompressible doubles per file: two slices per partition
        deltalake.write_deltalake(path, pa.table({"id": pa.array(range(i * n, (i + 1) * n), pa.int64()), "x": rng.random(n),
                                                  "region": pa.array(["a" if i % 2 else "b"] * n)}), mode="append", partition_by=["region"])
    table = open_table(path)
    ids_before = sorted(deltalake.DeltaTable(path).to_pyarrow_table(columns=["id"]).column("id").to_pylist())
    import airflow_delta_maintenance.deltalog.optimize.worker as worker

    real = worker.write_bin
    granted: list[bool] = []

    def recording(files: DataFiles, task: BinTask, **kwargs: Any) -> Any:
        answers: list[bool] = []

        def asked() -> bool:  # asked by the bin itself, before a slice that has another after it
            answers.append(kwargs["spare_core"]())
            return answers[-1]

        out = real(files, task, spare_core=asked)
        granted.append(any(answers))
        return out

    monkeypatch.setattr(worker, "write_bin", recording)
    monkeypatch.setattr(worker, "usable_cores", lambda: cores)
    engine = WorkerEngine(DataFiles(table.store), max_workers) if max_workers else None
    result = run_optimize(table, engine=engine, commit_batch_bytes=1)
    assert len(result.commits) == 2 and result.files_removed == 6 and granted == expected
    assert sorted(deltalake.DeltaTable(path).to_pyarrow_table(columns=["id"]).column("id").to_pylist()) == ids_before


def test_unknown_and_unsupported_writer_features_are_refused_by_name(tmp_path: Path) -> None:
    path = make_table(tmp_path, appends=1)
    log = Path(path, "_delta_log")
    proto = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["appendOnly", "icebergCompatV2"]}}
    (log / "00000000000000000002.json").write_text(json.dumps(proto) + "\n")
    with pytest.raises(UnsupportedFeatureError, match="icebergCompatV2"):
        run_optimize(open_table(path))
    proto["protocol"]["writerFeatures"] = ["appendOnly", "someFutureFeature"]
    (log / "00000000000000000003.json").write_text(json.dumps(proto) + "\n")
    with pytest.raises(UnsupportedFeatureError, match="someFutureFeature"):
        run_optimize(open_table(path))


def test_catalog_managed_tables_need_the_catalogs_permission(tmp_path: Path) -> None:
    from airflow_delta_maintenance.demo.sample_table import add_action_for, create_actions, data_batch
    from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator

    spec, uri = f"local://{tmp_path}/c.db?create=true", str(tmp_path / "cm")
    client = open_coordinator(spec, {})
    create = create_actions(ict=True)
    for a in create:
        if "protocol" in a:
            a["protocol"] = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["catalogManaged"],
                             "writerFeatures": ["catalogManaged", "inCommitTimestamp", "appendOnly", "invariants"]}
    client.commit(uri, 0, create)
    for v in range(1, 4):
        client.commit(uri, v, [add_action_for(uri, data_batch(v * 10, 10, "us"), "us")])
    refused = run_optimize(open_table(uri, coordinator=spec))
    assert refused.skip_reason == CATALOG_MANAGED_RULE and refused.commits == []
    assert refused.report().skipped and "catalog's explicit permission" in refused.report().summary()
    done = run_optimize(open_table(uri, coordinator=spec), catalog_permits_optimize=True)
    assert done.commits == [4] and done.files_added == 1
    snap = load_ratified_snapshot(open_table(uri, coordinator=spec))
    assert snap.version == 4 and snap.num_files == 1
    assert not Path(uri, "_delta_log", "00000000000000000004.json").exists()  # ratified, not yet published


def test_a_coordinated_table_is_optimized_through_its_coordinator_and_reads_the_same(tmp_path: Path) -> None:
    from airflow_delta_maintenance.deltalog.datafiles.reader import iter_live_rows, source_file
    from airflow_delta_maintenance.deltalog.datafiles.schema import data_schema
    from airflow_delta_maintenance.demo.sample_table import add_action_for, create_actions, data_batch
    from airflow_delta_maintenance.maintenance.operations.publish import publish_ratified_commits
    from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator

    spec, uri = f"local://{tmp_path}/c.db?create=true", str(tmp_path / "co")
    client = open_coordinator(spec, {})
    client.commit(uri, 0, create_actions(ict=True))
    for v in range(1, 7):
        client.commit(uri, v, [add_action_for(uri, data_batch(v * 10, 10, "us" if v % 2 else "eu"), "us" if v % 2 else "eu")])
    table = open_table(uri, coordinator=spec)

    def ids(version: int | None = None) -> list[int]:
        snap = load_ratified_snapshot(table, version)
        ds = data_schema(snap.metadata.schema, snap.metadata.partition_columns, "none")
        out: list[int] = []
        for a in live_adds(snap.files):
            for live in iter_live_rows(DataFiles(table.store), source_file(a), ds.without_partitions(), match_by_id=False):
                out += live.table.column("id").to_pylist()
        return sorted(out)

    before = ids()
    result = run_optimize(table)
    assert result.commits == [7] and ids() == before
    assert client.get_commits(uri).latest_table_version == 7
    publish_ratified_commits(table)
    assert sorted(r["id"] for r in rows(uri)) == before
    assert os.path.exists(Path(uri, "_delta_log", "00000000000000000007.json"))


def test_a_table_that_declares_a_coordinator_is_never_committed_around_it(tmp_path: Path) -> None:
    path = make_table(tmp_path, appends=1)
    log = Path(path, "_delta_log")
    meta = json.loads(next(ln for ln in (log / "00000000000000000000.json").read_text().splitlines() if "metaData" in ln))
    meta["metaData"]["configuration"]["delta.coordinatedCommits.commitCoordinator-preview"] = "dynamodb"
    (log / "00000000000000000002.json").write_text(json.dumps(meta) + "\n")
    # no coordinator given: the table's own is used, and one that cannot be opened from what the
    # table says is refused by name (CoordinatorNotConfiguredError), never committed around
    with pytest.raises(CoordinatorMismatchError, match="the table declares DynamoDB coordinator"):
        run_optimize(open_table(path))


def test_the_commit_lines_and_the_source_row_counts_read_as_the_json_module_reads_them() -> None:
    """The driver's per-file work goes through orjson (tens of thousands of removes and stats per
    run): the commit's bytes are exactly ``json``'s compact UTF-8 lines, and a stats string orjson
    refuses (``NaN``, an integer beyond 64 bits) or that is no object still gives ``json``'s answer."""
    import json as std_json

    from airflow_delta_maintenance.deltalog.datafiles.stats import stats_num_records
    from airflow_delta_maintenance.maintenance.operations.optimize import _ndjson

    actions = [{"commitInfo": {"operation": "OPTIMIZE", "operationParameters": {"predicate": "[]"}}},
               {"remove": {"path": "p=é %2F\u2028/x\x7f.parquet", "partitionValues": {"p": "é /\u2028\x1f\"\\"}, "size": 1, "dataChange": False,
                           "stats": '{"numRecords":3}', "deletionVector": None}},
               {"add": {"path": "x", "size": 2**70}}]  # beyond orjson's integers: json writes the lines
    for batch in (actions[:2], actions):
        assert _ndjson(batch) == "".join(std_json.dumps(a, separators=(",", ":"), ensure_ascii=False) + "\n" for a in batch).encode()
    assert stats_num_records('{"numRecords": 7, "minValues": {"x": NaN}}') == 7
    assert stats_num_records('{"numRecords": 18446744073709551616}') == 2**64
    assert [stats_num_records(s) for s in (None, "", "[1]", "{", '{"minValues": {}}')] == [None] * 5
