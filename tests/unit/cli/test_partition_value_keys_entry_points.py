"""The partition-value keys rule (``test_partition_value_keys``: an add whose ``partitionValues``
names a column the table lacks is a typed error) wherever adds enter, not only replay's commits:

- **publish** validates every ratified commit it is about to copy (``CommitStreamValidator``): a
  commit carrying such an add is refused, naming its staged file, line and key, and nothing of the
  backlog is published — whichever way its lines are validated (the compiled scanner, orjson, the
  strict decoder) and whether the commit is read whole or streamed; a metaData of the backlog (even
  one after the adds of its commit) changes the keys from its commit on. Before, publish copied it
  into the published log, which the ``deltalake`` wheel then refuses to load (``Schema error``
  naming the unknown partition column) — as it refuses every table below.
- **log compactions** (another engine's ``<x>.<y>.compacted.json``): refused by every reader that
  uses one, naming the file, line and key (already so: the replay's and the tail check's NDJSON
  readers check every source).
- **checkpoints** (classic, multi-part, V2 with sidecars): an add row whose map names an unknown key
  makes the checkpoint unreadable (``UnreadableCheckpointError``, as a torn one): when it is the
  only way to the table every command refuses it naming the checkpoint file and key, and cleanup
  deletes nothing; when the commits are still there it is passed over and never the anchor cleanup
  deletes below (before: cleanup anchored on it and deleted the commits, leaving a table the wheel
  cannot load).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_delta_maintenance.deltalog._runtime import accelerators
from airflow_delta_maintenance.deltalog.replay import commit_stream
from airflow_delta_maintenance.demo.sample_table import create_actions
from airflow_delta_maintenance.maintenance.table import staged_commits
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator

from ..deltalog.logbuilder import LogBuilder, add, commit_info, metadata, ndjson, protocol
from .test_partition_value_keys import ROOT, wheel_reads
from .test_strict_log import DAY, listing, run

KIB = 1024


# ---- publish -------------------------------------------------------------------------------------


@pytest.fixture(params=["scanner", "orjson", "strict"])
def line_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which way commit lines are validated: the compiled scanner (checks the keys in C), orjson's
    round trip, or the strict decoder (no orjson)."""
    if request.param == "scanner":
        if not commit_stream._SCAN_KEYS:
            if accelerators.MODE == "require":
                pytest.fail("the accelerators are required but their scanner does not check partition-value keys (an old build)")
            pytest.skip("no accelerator scanner that checks partition-value keys")
    else:
        monkeypatch.setattr(commit_stream, "_log_lines", None)
        if request.param == "strict":
            monkeypatch.setattr(commit_stream, "_orjson", None)
    return str(request.param)


def files(version: int, n: int, values: dict[str, str]) -> list[dict[str, Any]]:
    return [add(f"v{version}/part-{i:05d}.parquet", 1000 + i, partition_values=values,
                stats=json.dumps({"numRecords": 10, "minValues": {"id": i}, "maxValues": {"id": i}})) for i in range(n)]


def coordinated(tmp_path: Path, commits: list[list[dict[str, Any]]]) -> tuple[str, str]:
    """Version 0 (partitioned by ``region``, declaring the embedded coordinator) published, then
    ``commits`` ratified and waiting (1, 2, ...)."""
    spec, uri = f"local://{tmp_path}/c.db", str(tmp_path / "t")
    client = open_coordinator(spec + "?create=true")
    client.commit(uri, 0, create_actions())
    for v, actions in enumerate(commits, start=1):
        client.commit(uri, v, actions)
    return spec, uri


def published_metadata(uri: str, partition_columns: list[str]) -> dict[str, Any]:
    """Version 0's metaData (the coordinator's declaration kept) with other partition columns."""
    lines = (Path(uri) / "_delta_log" / f"{0:020d}.json").read_text().splitlines()
    meta = next(json.loads(line) for line in lines if '"metaData"' in line)
    schema = json.loads(meta["metaData"]["schemaString"])
    schema["fields"] += [{"name": c, "type": "string", "nullable": True, "metadata": {}} for c in partition_columns if c != "region"]
    meta["metaData"] |= {"schemaString": json.dumps(schema), "partitionColumns": partition_columns}
    return meta


def published(uri: str) -> list[str]:
    return sorted(p.name for p in (Path(uri) / "_delta_log").glob("*.json"))


@pytest.mark.parametrize("where", ["whole", "streamed"])
def test_publish_refuses_a_ratified_commit_with_an_unknown_partition_key_and_publishes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line_path: str, where: str
) -> None:
    if where == "streamed":  # commit 2 above the limit: verified in chunks, never whole
        monkeypatch.setattr(staged_commits, "WHOLE_FILE_LIMIT", 64 * KIB)
        monkeypatch.setattr(staged_commits, "CHUNK", 16 * KIB)
    bad = files(2, 600, {"region": "x"})
    bad[450]["add"]["partitionValues"] = {"begion": "x"}
    spec, uri = coordinated(tmp_path, [files(1, 3, {"region": "x"}), bad, files(3, 3, {"region": "y"})])
    rc, out, err = run("publish", uri)
    assert rc == 2 and err.count("\n") == 1 and "CorruptLogError" in err, (rc, out, err)
    assert "_staged_commits/00000000000000000002." in err and "line 452" in err and "'begion'" in err, err
    assert published(uri) == [f"{0:020d}.json"], "nothing at or after it (nor before: every commit is verified first)"
    assert [c.version for c in open_coordinator(spec).get_commits(uri).commits] == [1, 2, 3]


@pytest.mark.parametrize("where", ["whole", "streamed"])
@pytest.mark.parametrize("order", ["metadata-first", "metadata-after-adds"])
def test_a_metadata_in_the_backlog_changes_the_keys_from_its_commit_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line_path: str, order: str, where: str
) -> None:
    """Commit 2 partitions the table by ``region`` and ``day``: its own adds (wherever its metaData
    sits) and commit 3's carry ``day``; the table publishes and the wheel reads it. Adds keyed by
    the old columns beside a metaData that drops one are refused. Streamed: the 300-add commits are
    verified in chunks (a metaData after adds: read again from the start with its keys)."""
    if where == "streamed":
        monkeypatch.setattr(staged_commits, "WHOLE_FILE_LIMIT", 16 * KIB)
        monkeypatch.setattr(staged_commits, "CHUNK", 4 * KIB)
    spec, uri = coordinated(tmp_path, [files(1, 2, {"region": "x"})])
    client = open_coordinator(spec)
    meta = published_metadata(uri, ["region", "day"])
    adds = files(2, 300, {"region": "x", "day": "1"})
    client.commit(uri, 2, [meta, *adds] if order == "metadata-first" else [*adds, meta])
    client.commit(uri, 3, files(3, 2, {"region": "y", "day": "2"}))
    rc, out, err = run("publish", uri)
    assert rc == 0, (out, err)
    assert published(uri) == [f"{v:020d}.json" for v in range(4)] and wheel_reads(Path(uri))

    spec, uri = coordinated(tmp_path / "narrowed", [])
    client = open_coordinator(spec)
    meta = published_metadata(uri, ["day"])
    adds = files(1, 300, {"region": "x"})  # valid before the metaData, not under it
    client.commit(uri, 1, [meta, *adds] if order == "metadata-first" else [*adds, meta])
    rc, out, err = run("publish", uri)
    assert rc == 2 and "CorruptLogError" in err and "'region'" in err and "not a partition column" in err, (out, err)
    assert published(uri) == [f"{0:020d}.json"]


def test_the_installed_command_refuses_it_alike_with_and_without_the_accelerators(tmp_path: Path) -> None:
    """``DELTA_MAINTENANCE_ACCEL=require`` and ``=off``: the same one-line error, nothing published."""
    errors = []
    for accel in ("off", "require"):
        bad = files(1, 40, {"region": "x"})
        bad[7]["add"]["partitionValues"] = {"region": "x", "x": "1"}
        _, uri = coordinated(tmp_path / accel, [bad])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])), DELTA_MAINTENANCE_ACCEL=accel)
        done = subprocess.run([str(Path(sys.executable).with_name("delta-maintenance")), "publish", uri],
                              env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and "CorruptLogError" in done.stderr, (accel, done.stdout, done.stderr)
        assert published(uri) == [f"{0:020d}.json"]
        errors.append(done.stderr.replace(str(tmp_path / accel), "T").split("_staged_commits/")[1].split(".", 1)[0] + done.stderr.split(".json:")[-1])
    assert errors[0] == errors[1], errors


# ---- log compactions ------------------------------------------------------------------------------


def test_a_log_compaction_carrying_an_unknown_partition_key_stops_every_command(tmp_path: Path) -> None:
    """A ``12.13.compacted.json`` (another engine's) whose add of f12 is keyed ``begion``, the commits
    themselves valid: every reader that uses the compaction refuses it naming the file, line and
    key, and nothing is written or deleted. (The wheel reads the commits, not compactions: it
    loads this table.)"""
    root = tmp_path / "t"
    log = LogBuilder(__import__("fsspec").filesystem("file"), str(root))
    now = int(time.time() * 1000)
    meta = metadata({"delta.logRetentionDuration": "interval 1 days"}, ["region"])
    for v in range(14):
        log.commit(v, [commit_info(), *([protocol(), meta] if v == 0 else []), add(f"region=r0/f{v}", 100 + v, partition_values={"region": "r0"})],
                   mtime_ms=now - (30 - v) * DAY)
    name = f"{12:020d}.{13:020d}.compacted.json"
    log.write(name, ndjson([add("region=r0/f12", 112, partition_values={"begion": "r0"}), add("region=r0/f13", 113, partition_values={"region": "r0"})]),
              now - 17 * DAY)
    assert wheel_reads(root)
    before = listing(root)
    for command in (["inspect"], ["checkpoint", "--force"], ["compact-log", "--interval", "2"], ["cleanup", "--execute"]):
        rc, out, err = run(command[0], str(root), *command[1:])
        assert rc == 2 and err.count("\n") == 1 and "CorruptLogError" in err, (command, out, err)
        assert f"{name}: line 1" in err and "'begion'" in err and "not a partition column" in err, (command, err)
    assert listing(root) == before


# ---- checkpoints ---------------------------------------------------------------------------------


def checkpointed(tmp_path: Path, kind: str, key: str, *, keep_commits: bool = False) -> tuple[Path, str]:
    """Commits 0..11 thirty to nineteen days old (partitioned by ``region``, one-day retention), a
    checkpoint at 11 of ``kind`` whose add of ``f7`` is keyed ``key``, commit 12 now. Without
    ``keep_commits`` commits 0..10 are gone (a cleanup removed them): the checkpoint is the only
    way to the table; with it, a good classic checkpoint at 5 is there too. Returns the table and
    the file holding the adds."""
    root = tmp_path / kind / "t"
    log = LogBuilder(__import__("fsspec").filesystem("file"), str(root))
    now = int(time.time() * 1000)
    v2 = kind.startswith("v2-")
    proto = protocol(3, 7, ["v2Checkpoint"], ["v2Checkpoint"]) if v2 else protocol()
    meta = metadata({"delta.logRetentionDuration": "interval 1 days", **({"delta.checkpointPolicy": "v2"} if v2 else {})}, ["region"])
    adds = []
    for v in range(12):
        a = add(f"region=r{v % 2}/f{v}", 100 + v, partition_values={"region": f"r{v % 2}"})
        log.commit(v, [commit_info(), *([proto, meta] if v == 0 else []), a], mtime_ms=now - (30 - v) * DAY)
        adds.append({"add": {**a["add"], "partitionValues": {key: "r1"}} if v == 7 else a["add"]})
    head: list[dict[str, Any]] = [proto, meta]
    if kind == "classic":
        holder = log.checkpoint(11, [*head, *adds], mtime_ms=now - 19 * DAY)[0]
    elif kind == "multi-part":  # round-robin over 2 parts: the metaData in part 1, f7's add in part 2
        holder = log.checkpoint(11, [*head, *adds], parts=2, mtime_ms=now - 19 * DAY)[1]
    elif kind == "v2-json":  # the adds inline in the JSON top-level file
        holder = log.checkpoint(11, [{"checkpointMetadata": {"version": 11}}, *head, *adds], uuid="2b0c45f1-6d3e-4a59-9b1e-1f0d2c3a4b5c",
                                fmt="json", mtime_ms=now - 19 * DAY)[0]
    else:
        side = log.sidecar("s1.parquet", adds)
        log.checkpoint(11, [{"checkpointMetadata": {"version": 11}}, *head, side], uuid="2b0c45f1-6d3e-4a59-9b1e-1f0d2c3a4b5c",
                       mtime_ms=now - 19 * DAY)
        holder = str(root / "_delta_log" / "_sidecars" / "s1.parquet")
    log.commit(12, [commit_info(), add("region=r0/f12", 112, partition_values={"region": "r0"})], mtime_ms=now)
    if keep_commits:  # and a good checkpoint at 5
        log.checkpoint(5, [protocol(), metadata(meta["metaData"]["configuration"], ["region"]),
                           *({"add": {**a["add"], "partitionValues": {"region": a["add"]["partitionValues"].get("region", "r1")}}} for a in adds[:6])],
                       mtime_ms=now - 25 * DAY)
    else:
        for v in range(11):
            (root / "_delta_log" / f"{v:020d}.json").unlink()
    return root, Path(holder).name


KINDS = ["classic", "multi-part", "v2-sidecars", "v2-json"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_checkpoint_carrying_an_unknown_partition_key_stops_every_command(tmp_path: Path, kind: str) -> None:
    good, _ = checkpointed(tmp_path / "good", kind, "region")
    assert wheel_reads(good)
    rc, out, err = run("status", str(good), "--strict")
    assert rc == 0, (out, err)  # the same table with the right key reads

    root, holder = checkpointed(tmp_path, kind, "begion")
    assert not wheel_reads(root)
    before = listing(root)
    # the Spark engine copies the adds of the checkpoint it starts from: refused before submitting anything
    for command in (["status", "--strict"], ["inspect"], ["checkpoint", "--force"], ["checkpoint", "--force", "--engine", "spark"], ["cleanup", "--execute"]):
        rc, out, err = run(command[0], str(root), *command[1:])
        assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, (command, rc, out, err)
        assert "CorruptLogError" in err and holder in err and "f7" in err and "'begion'" in err and "not a partition column" in err, (command, err)
    assert listing(root) == before, "nothing is written or deleted"


@pytest.mark.parametrize("kind", KINDS)
def test_such_a_checkpoint_is_never_the_anchor_cleanup_deletes_below(tmp_path: Path, kind: str) -> None:
    """Commits 0..12 there, the bad checkpoint at 11 and a good one at 5: cleanup anchors on 5 and
    deletes commits 0..4 only (before: it anchored on 11 and deleted commits 0..10 and checkpoint
    5, leaving the table to the bad checkpoint); the latest state reads from 5 and the commits."""
    root, _ = checkpointed(tmp_path, kind, "begion", keep_commits=True)
    before = listing(root)
    rc, out, err = run("cleanup", str(root), "--execute", "--json")
    assert rc == 0, (out, err)
    result = json.loads(out)
    assert result["version"] == 5 and result["unreadable_checkpoints"] == 1, out  # the anchor; 11 passed over
    assert sorted(set(before) - set(listing(root))) == [f"{v:020d}.json" for v in range(5)]
    rc, out, err = run("inspect", str(root), "--json")
    assert rc == 0 and json.loads(out)["version"] == 12, err


def test_the_installed_cleanup_refuses_such_a_checkpoint_without_numpy(tmp_path: Path) -> None:
    """The cleanup command keeps numpy out of its process: the checkpoint's keys are checked with
    pyarrow alone, and the refusal is the typed one, not a missing module."""
    root, holder = checkpointed(tmp_path, "classic", "begion", keep_commits=False)
    before = listing(root)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    done = subprocess.run([str(Path(sys.executable).with_name("delta-maintenance")), "cleanup", str(root), "--execute"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, (done.stdout, done.stderr)
    assert "CorruptLogError" in done.stderr and holder in done.stderr and "'begion'" in done.stderr, done.stderr
    assert listing(root) == before


# ---- a tail that changes the partition columns ---------------------------------------------------


def repartitioned(tmp_path: Path, key: str, adds: int) -> Path:
    """Partitioned by ``region`` up to a checkpoint at 5; in the tail, commit 6 adds ``adds`` files
    keyed ``key``, commit 7 replaces the table partitioned by ``country`` (every file removed),
    commits 8 and 9 add ``country`` files. Everything is a day old or newer (nothing to delete)."""
    from ..deltalog.logbuilder import remove

    root = tmp_path / key / "t"
    log = LogBuilder(__import__("fsspec").filesystem("file"), str(root))
    now = int(time.time() * 1000)
    by_region = metadata({}, ["region"])
    live = []
    for v in range(6):
        a = add(f"region=r{v % 2}/f{v}", 100 + v, partition_values={"region": f"r{v % 2}"})
        log.commit(v, [commit_info(), *([protocol(), by_region] if v == 0 else []), a], mtime_ms=now)
        live.append(a)
    log.checkpoint(5, [protocol(), by_region, *live], mtime_ms=now)
    tail = [add(f"region=r0/g{i}", 10, partition_values={key: "r0"}) for i in range(adds)]
    log.commit(6, [commit_info(), *tail], mtime_ms=now)
    gone = [remove(a["add"]["path"], now) for a in [*live, *tail]]
    log.commit(7, [commit_info(), metadata({}, ["country"]), *gone], mtime_ms=now)
    for v in (8, 9):
        log.commit(v, [commit_info(), add(f"country=nl/h{v}", 10, partition_values={"country": "nl"})], mtime_ms=now)
    return root


@pytest.mark.parametrize("tail", ["line-by-line", "columnar", "columnar-batches"])
def test_adds_before_a_partition_change_in_the_tail_are_checked_against_the_columns_before_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tail: str) -> None:
    """The tail check knew the keys only from the state (the newest metaData): adds of commits
    before the tail's metaData were checked against nothing (an unknown key passed), or against
    the newest columns (a valid table refused), and a long tail read in batches checked a batch
    without a metaData against nothing. Now the keys before the tail's first metaData are the
    checkpoint's and each batch starts under the last metaData before it: the valid table reads
    and is maintained, the bad key stops every command."""
    from airflow_delta_maintenance.deltalog.replay import tail_check

    if tail.startswith("columnar"):
        monkeypatch.setattr(tail_check, "SMALL_TAIL_BYTES", 0)
    if tail == "columnar-batches":  # one commit per batch, as a tail of several batch sizes reads
        monkeypatch.setattr(tail_check, "_BATCH_BYTES", 1)
    import deltalake

    good = repartitioned(tmp_path, "region", 50)
    assert wheel_reads(good)
    assert deltalake.DeltaTable(str(good), version=6).get_add_actions(flatten=True).num_rows == 56
    # a compaction of 6..8 (its commits, which a reader may fall back to, start under `region`)
    for command in (["compact-log", "--interval", "4"], ["inspect"], ["cleanup", "--execute"], ["checkpoint", "--force"]):
        rc, out, err = run(command[0], str(good), *command[1:])
        assert rc == 0, (command, out, err)
    assert (good / "_delta_log" / f"{6:020d}.{8:020d}.compacted.json").exists(), listing(good)
    bad = repartitioned(tmp_path, "begion", 50)
    with pytest.raises(Exception, match="begion"):  # the wheel: version 6, inside retention, does not read
        deltalake.DeltaTable(str(bad), version=6).get_add_actions(flatten=True)
    before = listing(bad)
    for command in (["inspect"], ["checkpoint", "--force"], ["cleanup", "--execute"], ["compact-log", "--interval", "2"]):
        rc, out, err = run(command[0], str(bad), *command[1:])
        assert rc == 2 and err.count("\n") == 1, (command, rc, out, err)
        assert "CorruptLogError" in err and "00000000000000000006.json" in err and "'begion'" in err, (command, err)
    assert listing(bad) == before
