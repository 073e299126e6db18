"""Differential tests against the ``deltalake`` wheel on randomised histories.

The wheel writes each table with a random sequence of operations: appends (some with app
transactions), overwrites (whole table, by predicate, or with a new partitioning), deletes, updates,
merges, restores, schema evolution, table properties, names, constraints and protocol features,
``create_checkpoint()``, ``compact_logs(start, end)``, ``optimize.compact()``/``z_order()``, vacuum
and ``cleanup_metadata()``. At EVERY version our snapshot must equal the wheel's (see
``tests/golden/wheel_oracle.py``: active files by path and size, partition values, protocol,
metadata with the schema string parsed as JSON, txns), must sit on the newest checkpoint at or below
that version, and a version whose commits ``cleanup_metadata()`` deleted must be refused with
``MissingCommitError`` exactly where the wheel refuses it too.

Seeds are fresh on every run and printed on failure (in every assertion message and in a
``delta-diff`` report section). Replay one, or several separated by commas::

    DELTA_DIFF_SEED=<seed> .venv/bin/python -m pytest tests/interop/test_deltalake_differential.py -q -p no:cacheprovider

``DELTA_DIFF_RUNS`` changes how many random tables one run builds (default 16).

Facts about the oracle (deltalake 1.6.6) these tests rely on, checked by the last two tests:
it writes no ``.crc`` files and cannot write deletion vectors (deletes rewrite files, even with the
feature enabled); it writes reconciled ``x.y.compacted.json`` files but never reads them, so every
version inside or at the end of a compaction is compared against the wheel's plain commit replay.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import deltalake  # the independent oracle: a test dependency, never skipped
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import CommitProperties, TableFeatures, Transaction

from airflow_delta_maintenance.deltalog.errors import MissingCommitError
from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.model.paths import LogFileType
from airflow_delta_maintenance.deltalog.replay.snapshot import Snapshot, load_snapshot
from airflow_delta_maintenance.deltalog.replay.table_state import load_table_state
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from tests.golden.wheel_oracle import assert_same_as_wheel, wheel_files

pytestmark = pytest.mark.interop

RUNS = int(os.environ.get("DELTA_DIFF_RUNS", "16"))
MIN_OPS, MAX_OPS = 15, 25


def _seeds() -> list[int]:
    fixed = os.environ.get("DELTA_DIFF_SEED")
    if fixed:
        return [int(s) for s in fixed.split(",") if s.strip()]
    sysrand = random.SystemRandom()
    return [sysrand.randrange(2**32) for _ in range(RUNS)]


# Drawn once per process; the ids are the run index so that collection is stable across runs.
SEEDS = _seeds()

# Partition values chosen to stress path escaping (delta-rs percent-encodes them twice in paths),
# null and empty-string values, and JSON inference (dates, numbers and booleans stay strings).
PART_VALUES = ["a", "b", "a b", "c/d", "e=f", "g%h", "ü", "x:y", "#1", None, ""]
PARTITIONINGS: list[list[str]] = [[], [], ["part"], ["part", "day"], ["day"], ["flag", "n"], ["n", "part"], ["ts"]]
FEATURES = [
    TableFeatures.ChangeDataFeed,
    TableFeatures.CheckConstraints,
    TableFeatures.ColumnMapping,
    TableFeatures.DeletionVectors,
    TableFeatures.GeneratedColumns,
    TableFeatures.TimestampWithoutTimezone,
    TableFeatures.V2Checkpoint,
]
PROPERTIES = [
    ("delta.checkpointInterval", lambda rng: str(rng.randint(2, 8))),
    ("delta.logRetentionDuration", lambda rng: f"interval {rng.randint(1, 60)} days"),
    ("delta.deletedFileRetentionDuration", lambda rng: f"interval {rng.randint(0, 48)} hours"),
    ("delta.setTransactionRetentionDuration", lambda rng: f"interval {rng.randint(1, 30)} days"),
    ("delta.dataSkippingNumIndexedCols", lambda rng: str(rng.randint(1, 32))),
    ("delta.enableChangeDataFeed", lambda rng: rng.choice(["true", "false"])),
]


@dataclass
class History:
    """What the wheel did to one table, for replay messages and the failure report."""

    seed: int
    path: str
    rng: random.Random
    partition_by: list[str]
    extra_columns: list[str] = field(default_factory=list)
    ops: list[str] = field(default_factory=list)
    restorable_from: int = 0  # vacuum deletes the data files of older versions
    readable_from: int = 0  # cleanup_metadata deletes the commits of older versions
    constraints: int = 0
    added_columns: int = 0
    expired_apps: int = 0
    column_mapping: bool = False

    def describe(self) -> str:
        return (
            f"seed={self.seed} partition_by={self.partition_by} (replay: DELTA_DIFF_SEED={self.seed})\n"
            + "\n".join(f"  {op}" for op in self.ops)
        )

    def why(self, version: int) -> str:
        return f"version {version}; seed={self.seed}; replay with DELTA_DIFF_SEED={self.seed}"

    @property
    def table(self) -> deltalake.DeltaTable:
        return deltalake.DeltaTable(self.path)

    def sync(self) -> None:
        """Partitioning and added columns as the table has them now (a restore may undo changes)."""
        table = self.table
        self.partition_by = list(table.metadata().partition_columns)
        self.extra_columns = [f.name for f in table.schema().fields if f.name.startswith("extra")]


# ---- the wheel's operations -------------------------------------------------------------------------


def _batch(h: History, n: int | None = None, part: str | None = None, unique_ids: bool = False) -> pa.Table:
    rng = h.rng
    n = n if n is not None else (0 if rng.random() < 0.05 else rng.randint(1, 8))  # empty writes too
    ids = rng.sample(range(61), n) if unique_ids else [rng.randint(0, 60) for _ in range(n)]
    columns: dict[str, pa.Array] = {
        "id": pa.array(ids, pa.int64()),
        "name": pa.array([f"n{i}" if rng.random() > 0.2 else None for i in ids], pa.string()),
        "amount": pa.array([round(rng.random() * 100, 2) for _ in ids], pa.float64()),
        "part": pa.array([part if part is not None else rng.choice(PART_VALUES) for _ in ids], pa.string()),
        "day": pa.array([datetime.date(2024, 1, rng.randint(1, 3)) if rng.random() > 0.1 else None for _ in ids], pa.date32()),
        "flag": pa.array([rng.choice([True, False, None]) for _ in ids], pa.bool_()),
        "n": pa.array([rng.choice([-1, 0, 7, 10**12, None]) for _ in ids], pa.int64()),
        "ts": pa.array(
            [datetime.datetime(2024, 1, 1, rng.randint(0, 2), 30, 0, rng.choice([0, 5]), tzinfo=datetime.timezone.utc) for _ in ids],
            pa.timestamp("us", tz="UTC"),
        ),
    }
    for extra in h.extra_columns:
        columns[extra] = pa.array([rng.choice(["x", "y", None]) for _ in ids], pa.string())
    return pa.table(columns)


def op_append(h: History) -> str:
    props = None
    note = ""
    if h.rng.random() < 0.3:  # an app transaction, sometimes already expired by lastUpdated
        app, version = f"app{h.rng.randint(0, 2)}", h.rng.randint(0, 100)
        last_updated = h.rng.choice([None, 1000, int(datetime.datetime.now().timestamp() * 1000)])
        if last_updated == 1000:
            # The wheel's compact_logs drops expired txns, which would let an older txn of the same
            # app win in the compaction (its commit replay says "expired"): expired ones get own apps.
            h.expired_apps += 1
            app = f"expired{h.expired_apps}"
        props = CommitProperties(app_transactions=[Transaction(app, version, last_updated)])
        note = f" txn({app}, {version}, {last_updated})"
    deltalake.write_deltalake(h.path, _batch(h), mode="append", partition_by=h.partition_by or None, commit_properties=props)
    return "append" + note


def op_overwrite(h: History) -> str:
    if "part" in h.partition_by and h.rng.random() < 0.5:
        value = h.rng.choice(["a", "b"])
        deltalake.write_deltalake(h.path, _batch(h, part=value), mode="overwrite", predicate=f"part = '{value}'")
        return f"overwrite where part = '{value}'"
    deltalake.write_deltalake(h.path, _batch(h), mode="overwrite", partition_by=h.partition_by or None)
    return "overwrite"


def op_repartition(h: History) -> str:
    new = h.rng.choice([p for p in PARTITIONINGS if p != h.partition_by])
    deltalake.write_deltalake(h.path, _batch(h), mode="overwrite", schema_mode="overwrite", partition_by=new or None)
    h.partition_by = list(new)
    return f"overwrite with partition_by={new}"


def op_delete(h: History) -> str:
    if h.rng.random() < 0.1:
        h.table.delete()
        return "delete all"
    predicate = h.rng.choice([f"id < {h.rng.randint(0, 60)}", "part = 'a'", "flag", "n IS NULL", f"id = {h.rng.randint(0, 60)}"])
    h.table.delete(predicate)
    return f"delete where {predicate}"


def op_update(h: History) -> str:
    predicate = f"id > {h.rng.randint(0, 60)}"
    h.table.update(updates={"amount": "amount + 1"}, predicate=predicate)
    return f"update where {predicate}"


def op_merge(h: History) -> str:
    source = _batch(h, unique_ids=True)  # MERGE refuses a target row matched by two source rows
    (
        h.table.merge(source, "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update(updates={"amount": "s.amount"})
        .when_not_matched_insert_all()
        .execute()
    )
    return "merge on id"


def op_restore(h: History) -> str:
    latest = h.table.version()
    start = max(h.restorable_from, h.readable_from)
    if latest - 1 < start:
        return op_append(h)
    target = h.rng.randint(start, latest - 1)
    h.table.restore(target)
    return f"restore to {target}"


def op_add_columns(h: History) -> str:
    h.added_columns += 1
    name = f"extra{h.added_columns}"
    if h.rng.random() < 0.5:
        h.table.alter.add_columns([deltalake.Field(name, "string")])
        h.extra_columns.append(name)
        return f"alter add column {name}"
    h.extra_columns.append(name)
    deltalake.write_deltalake(h.path, _batch(h), mode="append", schema_mode="merge", partition_by=h.partition_by or None)
    return f"append with schema_mode=merge adding {name}"


def op_properties(h: History) -> str:
    key, value = h.rng.choice(PROPERTIES)
    chosen = {key: value(h.rng)}
    h.table.alter.set_table_properties(chosen)
    return f"set properties {chosen}"


def op_name(h: History) -> str:
    if h.rng.random() < 0.5:
        h.table.alter.set_table_name(f"name-{h.rng.randint(0, 9)}")
        return "set name"
    h.table.alter.set_table_description(f"description {h.rng.randint(0, 9)}")
    return "set description"


def op_constraint(h: History) -> str:
    h.constraints += 1
    h.table.alter.add_constraint({f"c{h.constraints}": "id >= 0"})
    return f"add constraint c{h.constraints}"


def op_feature(h: History) -> str:
    feature = h.rng.choice(FEATURES)
    h.table.alter.add_feature(feature, allow_protocol_versions_increase=True)
    return f"add feature {feature}"


def op_checkpoint(h: History) -> str:
    h.table.create_checkpoint()
    return f"checkpoint at {h.table.version()}"


def op_compact_logs(h: History) -> str:
    latest = h.table.version()
    if latest - 1 < h.readable_from:
        return op_checkpoint(h)
    start = h.rng.randint(h.readable_from, latest - 1)
    end = h.rng.randint(start + 1, min(latest, start + 8))
    h.table.compact_logs(start, end)
    return f"compact_logs({start}, {end})"


def op_optimize(h: History) -> str:
    if h.rng.random() < 0.5:
        h.table.optimize.compact()
        return "optimize.compact"
    h.table.optimize.z_order(["id"])
    return "optimize.z_order(id)"


def op_vacuum(h: History) -> str:
    latest = h.table.version()
    h.table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    h.restorable_from = latest  # files of older versions are gone now
    return "vacuum (retention 0)"


def op_cleanup(h: History) -> str:
    """Expire every log file older than the newest checkpoint, then let the wheel delete them."""
    log = Path(h.path) / "_delta_log"
    checkpoints = [int(m.group(1)) for n in os.listdir(log) if (m := re.match(r"^(\d+)\.checkpoint\.parquet$", n))]
    if not checkpoints:
        return op_checkpoint(h)
    newest = max(checkpoints)
    for name in os.listdir(log):
        if (m := re.match(r"^(\d+)\.", name)) and int(m.group(1)) < newest:
            os.utime(log / name, (86400, 86400))  # 1970-01-02: expired for any retention
    h.table.cleanup_metadata()
    h.readable_from = max(h.readable_from, newest)
    return f"cleanup_metadata (newest checkpoint {newest})"


OPERATIONS: list[tuple[Callable[[History], str], int]] = [
    (op_append, 8),
    (op_overwrite, 2),
    (op_repartition, 1),
    (op_delete, 3),
    (op_update, 2),
    (op_merge, 2),
    (op_restore, 2),
    (op_add_columns, 1),
    (op_properties, 1),
    (op_name, 1),
    (op_constraint, 1),
    (op_feature, 1),
    (op_checkpoint, 3),
    (op_compact_logs, 3),
    (op_optimize, 2),
    (op_vacuum, 1),
    (op_cleanup, 1),
]


# The wheel refuses these on column-mapped tables ("not yet supported"; add_feature fails to find the
# partition column by its physical name).
NOT_WITH_COLUMN_MAPPING = {op_repartition, op_add_columns, op_optimize, op_feature}


def build_history(path: str, seed: int) -> History:
    rng = random.Random(seed)
    h = History(seed=seed, path=path, rng=rng, partition_by=list(rng.choice(PARTITIONINGS)))
    configuration: dict[str, str | None] = {}
    if rng.random() < 0.5:  # the wheel's post-commit hook then writes checkpoints on its own
        configuration["delta.checkpointInterval"] = str(rng.randint(2, 6))
    if rng.random() < 0.3:
        configuration["delta.enableChangeDataFeed"] = "true"  # cdc actions and _change_data files
    if rng.random() < 0.25:
        configuration["delta.columnMapping.mode"] = "name"  # partitionValues keyed by physical names
    name, description = rng.choice([None, "t"]), rng.choice([None, "random history"])
    if rng.random() < 0.2:  # an empty version 0: protocol and metadata only
        deltalake.DeltaTable.create(
            path,
            schema=_batch(h, n=0).schema,
            partition_by=h.partition_by or None,
            configuration=configuration or None,
            name=name,
            description=description,
        )
        how = "DeltaTable.create (no files)"
    else:
        deltalake.write_deltalake(
            path,
            _batch(h),
            mode="append",
            partition_by=h.partition_by or None,
            configuration=configuration or None,
            name=name,
            description=description,
        )
        how = "write_deltalake"
    h.ops.append(f"v0: {how} partition_by={h.partition_by} configuration={configuration}")
    h.column_mapping = "delta.columnMapping.mode" in configuration
    allowed = [(f, w) for f, w in OPERATIONS if not (h.column_mapping and f in NOT_WITH_COLUMN_MAPPING)]
    functions, weights = zip(*allowed, strict=True)
    for _ in range(rng.randint(MIN_OPS, MAX_OPS)):
        operation = rng.choices(functions, weights)[0]
        try:
            done = operation(h)
        except Exception as exc:  # the wheel refused an operation: report it with the replay seed
            raise AssertionError(f"the wheel failed in {operation.__name__}: {exc!s:.300}\n{h.describe()}") from exc
        h.sync()
        h.ops.append(f"v{h.table.version()}: {done}")
    return h


# ---- comparison -------------------------------------------------------------------------------------


def _newest_checkpoint_at_or_below(log: Path, version: int) -> int:
    found = [int(m.group(1)) for n in os.listdir(log) if (m := re.match(r"^(\d+)\.checkpoint\.", n)) and int(m.group(1)) <= version]
    return max(found, default=-1)


def compare_every_version(h: History) -> dict[str, int]:
    """Compare each version with the wheel; returns counts for the report."""
    log = Path(h.path) / "_delta_log"
    latest = h.table.version()
    stats = {"versions": 0, "refused": 0, "via_compaction": 0}
    for v in range(latest + 1):
        why = f"{h.why(v)}\n{h.describe()}"
        try:
            table = deltalake.DeltaTable(h.path, version=v)
        except Exception as wheel_error:  # noqa: BLE001 - the wheel raises untyped errors here
            assert v < h.readable_from, f"the wheel cannot load {v} ({wheel_error!s:.200}) though no cleanup removed it: {why}"
            with pytest.raises(MissingCommitError) as refused:
                load_snapshot(h.path, v)
            assert refused.type is MissingCommitError and refused.value.version <= v, why
            with pytest.raises(MissingCommitError):
                load_table_state(h.path, v)
            stats["refused"] += 1
            continue
        ours = load_snapshot(h.path, v)
        assert_same_as_wheel(ours, table, why, check_partition_values=True)
        state = load_table_state(h.path, v, now_ms=ours.now_ms)  # the light load agrees with the full one
        assert (state.version, state.protocol, state.metadata, state.properties) == (ours.version, ours.protocol, ours.metadata, ours.properties), why
        assert (state.timestamp, state.checkpoint_version) == (ours.timestamp, ours.checkpoint_version), why
        assert ours.checkpoint_version == _newest_checkpoint_at_or_below(log, v), f"not on the newest checkpoint: {why}"
        stats["versions"] += 1
        stats["via_compaction"] += _used_compaction(ours)
    return stats


def compare_with_wheel_checkpoints(h: History) -> int:
    """Each checkpoint the wheel wrote is a second oracle, for tombstones too: our replay of the
    commits (that checkpoint hidden from the listing, its mtime as "now") must hold the same adds
    and the same unexpired removes. Returns how many checkpoints were compared."""
    log = Path(h.path) / "_delta_log"
    store = open_table_storage(h.path)
    files = list_log_files(store)
    compared = 0
    for name in sorted(os.listdir(log)):
        if not (m := re.match(r"^(\d+)\.checkpoint\.parquet$", name)):
            continue
        version = int(m.group(1))
        checkpoint = pq.read_table(log / name)
        if "sidecar" in checkpoint.column_names and checkpoint.column("sidecar").null_count < checkpoint.num_rows:
            continue  # a V2 checkpoint with sidecars: its files are elsewhere
        hidden = dataclasses.replace(files, checkpoints=tuple(f for f in files.checkpoints if f.version != version))
        try:
            ours = load_snapshot(store, version, files=hidden, now_ms=int((log / name).stat().st_mtime * 1000))
        except MissingCommitError:
            continue  # cleanup_metadata deleted the commits before it
        if ours.properties.deleted_file_retention_ms < 3_600_000:
            continue  # tombstones expire within the test: "now" at writing vs the file's mtime is a race
        why = f"wheel checkpoint {name}; seed={h.seed}; replay with DELTA_DIFF_SEED={h.seed}\n{h.describe()}"
        adds = {a["path"] for a in checkpoint.column("add").to_pylist() if a}
        removes = {r["path"] for r in checkpoint.column("remove").to_pylist() if r}
        assert set(ours.files.column("path").to_pylist()) == adds, why
        assert set(ours.tombstones.column("path").to_pylist()) == removes, f"unexpired tombstones differ: {why}"
        compared += 1
    return compared


def _used_compaction(snapshot: Snapshot) -> int:
    return int(any(getattr(d, "type", None) is LogFileType.COMPACTION for d in snapshot.segment.deltas))


@pytest.mark.parametrize("run", range(len(SEEDS)), ids=[f"run{i}" for i in range(len(SEEDS))])
def test_every_version_matches_the_wheel(run: int, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    seed = SEEDS[run]
    request.node.add_report_section("call", "delta-diff", f"seed={seed}; replay with DELTA_DIFF_SEED={seed}")
    print(f"delta-diff seed={seed} (replay: DELTA_DIFF_SEED={seed})")  # shown with the captured output on failure
    h = build_history(str(tmp_path / "t"), seed)
    request.node.add_report_section("call", "delta-diff history", h.describe())
    stats = compare_every_version(h)
    assert stats["versions"] > 0, h.describe()
    latest = deltalake.DeltaTable(h.path)  # and the default (latest) version, loaded without one
    assert_same_as_wheel(load_snapshot(h.path), latest, f"latest; seed={seed}\n{h.describe()}", check_partition_values=True)
    stats["wheel_checkpoints"] = compare_with_wheel_checkpoints(h)
    request.node.add_report_section("call", "delta-diff stats", str(stats))


# ---- deterministic checks of what the random runs rely on --------------------------------------------


def _append(path: str, i: int) -> None:
    deltalake.write_deltalake(path, pa.table({"id": [i]}), mode="append")


def test_compaction_files_are_read_by_us_and_ignored_by_the_wheel(tmp_path: Path) -> None:
    """The wheel ignores compactions, so comparing over compacted ranges checks our compaction reading
    against a plain commit replay; this proves we really read the compaction (a tampered one shows)."""
    path = str(tmp_path / "t")
    for i in range(4):
        _append(path, i)
    deltalake.DeltaTable(path).delete("id = 1")
    deltalake.DeltaTable(path).optimize.compact()
    table = deltalake.DeltaTable(path)
    table.compact_logs(1, table.version())
    latest = table.version()
    for v in range(latest + 1):
        ours = load_snapshot(path, v)
        assert_same_as_wheel(ours, deltalake.DeltaTable(path, version=v), f"version {v}")
        assert _used_compaction(ours) == (v == latest), f"version {v}: a compaction applies only at its end"
    compaction = next((Path(path) / "_delta_log").glob("*.compacted.json"))
    compaction.write_text("".join(line + "\n" for line in compaction.read_text().splitlines() if not line.startswith('{"add"')))
    assert load_snapshot(path).num_files == 0, "we read the (tampered) compaction"
    assert len(wheel_files(deltalake.DeltaTable(path))) == 1, "the wheel replays the commits"


def test_the_wheel_writes_no_crc_and_no_deletion_vectors(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    deltalake.write_deltalake(path, pa.table({"id": list(range(10))}), configuration={"delta.enableDeletionVectors": "true"})
    deltalake.DeltaTable(path).alter.add_feature(TableFeatures.DeletionVectors, allow_protocol_versions_increase=True)
    deltalake.DeltaTable(path).delete("id < 3")
    deltalake.DeltaTable(path).create_checkpoint()
    names = os.listdir(Path(path) / "_delta_log")
    assert not [n for n in names if n.endswith(".crc")], names
    ours = load_snapshot(path)
    assert ours.protocol.has_reader_feature("deletionVectors")
    assert ours.files.column("deletionVector").null_count == ours.num_files, "the wheel rewrote the file instead"
    assert_same_as_wheel(ours, deltalake.DeltaTable(path), "delete on a deletion-vector table")
