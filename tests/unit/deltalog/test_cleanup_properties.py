"""Property-based cleanup tests: random logs, mtimes, ICT enablement, checkpoints and compactions."""

from __future__ import annotations

import json

import fsspec
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from airflow_delta_maintenance.deltalog.cleanup.plan import execute_cleanup, plan_log_cleanup, utc_midnight
from airflow_delta_maintenance.deltalog.errors import DeltaLogError
from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.model.paths import compaction_name
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import open_table_storage

from .logbuilder import LogBuilder, add, commit_info, metadata, ndjson, protocol, remove

DAY = 86_400_000
NOW = utc_midnight(1_800_000_000_000) + 9 * 3_600_000


@st.composite
def random_logs(draw: st.DrawFn) -> dict:
    n = draw(st.integers(3, 30))
    ict_from = draw(st.one_of(st.none(), st.integers(0, n - 1)))
    # commit ages in hours before NOW, mostly decreasing with noise (mtimes are not monotonic)
    ages = sorted((draw(st.integers(0, 60 * 24)) for _ in range(n)), reverse=True)
    noise = [draw(st.integers(-72, 72)) for _ in range(n)]
    ops = [draw(st.lists(st.sampled_from(["add", "remove"]), min_size=1, max_size=3)) for _ in range(n)]
    checkpoints = sorted(set(draw(st.lists(st.integers(0, n - 1), max_size=4))))
    incomplete = draw(st.one_of(st.none(), st.integers(0, n - 1)))
    compactions = draw(st.lists(st.tuples(st.integers(1, n - 1), st.integers(1, 5)), max_size=3))
    retention_days = draw(st.integers(1, 40))
    return dict(n=n, ict_from=ict_from, ages=ages, noise=noise, ops=ops, checkpoints=checkpoints, incomplete=incomplete,
                compactions=compactions, retention_days=retention_days)


def build(spec: dict) -> tuple[LogBuilder, dict[int, int]]:
    fs = fsspec.filesystem("memory")
    fs.store.clear()
    fs.pseudo_dirs.clear()
    fs.pseudo_dirs.append("")
    log = LogBuilder(fs, "/p")
    conf = {"delta.logRetentionDuration": f"interval {spec['retention_days']} days"}
    proto = protocol()
    if spec["ict_from"] is not None:
        proto = protocol(1, 7, None, ["inCommitTimestamp"])
        conf.update({"delta.enableInCommitTimestamps": "true", "delta.inCommitTimestampEnablementVersion": str(spec["ict_from"])})
    live: list[str] = []
    truth: dict[int, int] = {}  # version -> timestamp a protocol-following reader would use
    prev_ts = None
    ict_prev = None
    for v in range(spec["n"]):
        mtime = NOW - spec["ages"][v] * 3_600_000 + spec["noise"][v] * 3_600_000
        ict = None
        if spec["ict_from"] is not None and v >= spec["ict_from"]:
            ict = max(NOW - spec["ages"][v] * 3_600_000, (ict_prev or 0) + 1)
            ict_prev = ict
        actions = [commit_info(ict)]
        if v == 0:
            actions += [proto, metadata(conf)]
        for i, op in enumerate(spec["ops"][v]):
            if op == "remove" and live and not live[0].startswith(f"v{v}-"):  # one commit never adds and removes a file
                actions.append(remove(live.pop(0), NOW))
            else:
                live.append(f"v{v}-{i}")
                actions.append(add(live[-1]))
        log.commit(v, actions, mtime_ms=mtime)
        spec.setdefault("live", {})[v] = {(path, None) for path in live}  # what version v reads when no compaction file is in the log
        adjusted = mtime if prev_ts is None or mtime > prev_ts else prev_ts + 1
        prev_ts = adjusted
        truth[v] = ict if ict is not None else adjusted
    return log, truth


def state(store, version: int) -> set:
    return load_snapshot(store, version, now_ms=NOW).active_file_keys()


@pytest.mark.slow  # minutes on a busy machine: make test runs it, the fast tier does not
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_logs())
def test_cleanup_keeps_every_retained_version_and_removes_what_the_protocol_says(spec: dict) -> None:
    log, truth = build(spec)
    store = open_table_storage("memory://p")
    for v in spec["checkpoints"]:
        snap = load_snapshot(store, v, now_ms=NOW)
        log.checkpoint(v, [{"protocol": snap.protocol.to_dict()}, {"metaData": snap.metadata.to_dict()}, *[add(p) for p, _ in snap.active_file_keys()]])
    if spec["incomplete"] is not None and spec["incomplete"] not in spec["checkpoints"]:
        log.checkpoint(spec["incomplete"], [protocol(), metadata()], parts=2, write_parts=[1])
    for start, length in spec["compactions"]:
        end = min(start + length, spec["n"] - 1)
        if end > start:
            keys = state(store, end) - state(store, start - 1)
            log.write(compaction_name(start, end), ndjson([add(p) for p, _ in keys]))  # adds only: enough to be read
    latest = spec["n"] - 1
    cutoff = utc_midnight(NOW - spec["retention_days"] * DAY)
    oracle_commit = max((v for v, ts in truth.items() if ts <= cutoff), default=None)
    retained = [] if oracle_commit is None else list(range(oracle_commit, latest + 1))
    before = {v: state(store, v) for v in (retained or range(latest + 1))}  # our reader: compaction files (adds only) are part of what it reads

    snapshot = load_snapshot(store, now_ms=NOW)
    plan = plan_log_cleanup(store, snapshot, now_ms=NOW)
    assert plan.cutoff_commit == oracle_commit or plan.skipped, (plan, oracle_commit)
    complete = sorted({g.version for g in list_log_files(store).complete_checkpoints()})
    expected_anchor = max((c for c in complete if oracle_commit is not None and c <= oracle_commit), default=None)
    if expected_anchor is None:
        assert plan.skipped and plan.paths == []
        return
    assert plan.cutoff_checkpoint == expected_anchor
    execute_cleanup(store, plan, dry_run=False)

    files = list_log_files(store)
    cp = expected_anchor
    # removes everything the protocol says to remove
    assert all(c.version >= cp for c in files.commits)
    assert all(c.version >= cp for c in files.checkpoints)
    assert all(c.version > cp for c in files.compactions)
    # leaves a complete checkpoint for the oldest retained version, and its commit
    assert cp in {g.version for g in files.complete_checkpoints()}
    assert cp in {c.version for c in files.commits}
    # every version from the cutoff commit on reads exactly as before
    for v in retained:
        assert state(store, v) == before[v], v
    # versions below the anchor are refused with a typed error, never silently wrong
    if cp > 0:
        try:
            load_snapshot(store, cp - 1, now_ms=NOW)
        except DeltaLogError:
            pass
        else:
            raise AssertionError(f"version {cp - 1} should no longer be readable")


# ---- hostile input: damaged candidate anchors, corrupted in-commit timestamps, symbolic links ----

V2_PROTO = protocol(3, 7, ["v2Checkpoint"], ["v2Checkpoint"])


@st.composite
def damaged_logs(draw: st.DrawFn) -> dict:
    spec = draw(random_logs())
    spec["incomplete"] = None
    spec["compactions"] = []
    spec["v2"] = draw(st.booleans())
    forms = ["classic", "multipart"] + (["sidecar"] if spec["v2"] else [])
    spec["forms"] = [draw(st.sampled_from(forms)) for _ in spec["checkpoints"]]
    spec["damage"] = [draw(st.sampled_from([None, None, "torn", "empty", "missing"])) for _ in spec["checkpoints"]]
    spec["bad_ict"] = draw(st.one_of(st.none(), st.integers(1, 30))) if spec["ict_from"] is not None else None
    return spec


def _write_checkpoint(log: LogBuilder, store, v: int, form: str, v2: bool) -> list[str]:
    """Writes the checkpoint of version v in the given form; returns the file that damage hits."""
    snap = load_snapshot(store, v, now_ms=NOW)
    head = [{"protocol": snap.protocol.to_dict()}, {"metaData": snap.metadata.to_dict()}]
    if v2:
        head.insert(0, {"checkpointMetadata": {"version": v}})
    adds = [add(p) for p, _ in snap.active_file_keys()]
    if form == "sidecar":
        name = f"{v:020d}.checkpoint.0000000001.0000000001.s{v}.parquet"
        side = log.sidecar(name, adds)
        log.checkpoint(v, [*head, side], uuid=f"u{v}")
        return [f"_sidecars/{name}", f"{v:020d}.checkpoint.u{v}.parquet"]
    if form == "multipart":
        paths = log.checkpoint(v, [*head, *adds], parts=2)
        names = [p.rsplit("/", 1)[-1] for p in paths]
        return [names[1], *names]
    log.checkpoint(v, [*head, *adds])
    return [f"{v:020d}.checkpoint.parquet"] * 2


@pytest.mark.slow  # minutes on a busy machine: make test runs it, the fast tier does not
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged_logs())
def test_damaged_anchors_and_corrupt_timestamps_never_lead_to_a_deletion_that_breaks_a_retained_version(spec: dict) -> None:
    from airflow_delta_maintenance.deltalog.errors import NonMonotonicTimestampError

    log, truth = build(spec) if not spec["v2"] else build_v2(spec)
    store = open_table_storage("memory://p")
    damaged: list[str] = []  # files of damaged checkpoints (the hit file first)
    written = {}
    for v, form, damage in zip(spec["checkpoints"], spec["forms"], spec["damage"], strict=True):
        names = _write_checkpoint(log, store, v, form, spec["v2"])
        written[v] = names
        if damage is not None and not (damage == "missing" and form != "sidecar"):
            damaged.append(names[0])
    latest = spec["n"] - 1
    cutoff = utc_midnight(NOW - spec["retention_days"] * DAY)
    oracle_commit = max((v for v, ts in truth.items() if ts <= cutoff), default=None)
    retained = list(range(latest + 1)) if oracle_commit is None else list(range(oracle_commit, latest + 1))
    before = {v: spec["live"][v] for v in retained}  # the builder's model (checkpoints hold the same files): one replay per version less
    for v, damage in zip(spec["checkpoints"], spec["damage"], strict=True):
        hit = written[v][0]
        if hit not in damaged:
            continue
        path = f"/p/_delta_log/{hit}"
        data = log.fs.cat_file(path)
        if damage == "missing":
            log.fs.rm(path)
        else:
            log.fs.pipe_file(path, b"" if damage == "empty" else data[: len(data) // 2])
    bad_ict = spec["bad_ict"]
    if bad_ict is not None:
        k = spec["ict_from"] + bad_ict % max(1, spec["n"] - spec["ict_from"])
        if k > spec["ict_from"]:  # needs a predecessor in the ICT era
            name = f"{k:020d}.json"
            lines = log.fs.cat_file(f"/p/_delta_log/{name}").split(b"\n")
            first = json.loads(lines[0])
            first["commitInfo"]["inCommitTimestamp"] = 1000
            log.write(name, b"\n".join([json.dumps(first).encode(), *lines[1:]]), mtime_ms=log.fs.store[f"/p/_delta_log/{name}"].modified.timestamp() * 1000)
        else:
            bad_ict = None
    listing_before = sorted(log.fs.find("/p/_delta_log"))

    snapshot = load_snapshot(store, now_ms=NOW)
    try:
        plan = plan_log_cleanup(store, snapshot, now_ms=NOW)
    except NonMonotonicTimestampError:
        assert bad_ict is not None
        assert sorted(log.fs.find("/p/_delta_log")) == listing_before  # nothing deleted
        return
    except DeltaLogError:
        assert damaged, "only damage may stop cleanup"
        assert sorted(log.fs.find("/p/_delta_log")) == listing_before
        return
    assert bad_ict is None, "a non-monotonic in-commit timestamp must stop cleanup"
    if plan.cutoff_checkpoint is not None:
        anchor_files = [n for v, names in written.items() if v == plan.cutoff_checkpoint for n in names]
        assert not any(n in damaged for n in anchor_files) or any(
            g.version == plan.cutoff_checkpoint and all(f.name not in damaged for f in g.files) for g in list_log_files(store).complete_checkpoints()
        ), (plan, damaged)
    execute_cleanup(store, plan, dry_run=False)
    # our reader falls back past the damage; and with the damage removed, the commits are all there
    for v in retained:
        assert state(store, v) == before[v], v
    for names in written.values():
        if names[0] in damaged:
            for n in set(names[1:]) | {names[0]}:
                if log.fs.exists(f"/p/_delta_log/{n}"):
                    log.fs.rm(f"/p/_delta_log/{n}")
    for v in retained:
        assert state(store, v) == before[v], v


def build_v2(spec: dict) -> tuple[LogBuilder, dict[int, int]]:
    """``build`` with the v2Checkpoint feature added to the protocol of version 0."""
    log, truth = build(spec)
    name = "/p/_delta_log/" + f"{0:020d}.json"
    entry = log.fs.store[name]
    mtime = entry.modified.timestamp() * 1000
    lines = [json.loads(x) for x in log.fs.cat_file(name).decode().splitlines() if x]
    for a in lines:
        if "protocol" in a:
            p = a["protocol"]
            p["minReaderVersion"], p["minWriterVersion"] = 3, 7
            p["readerFeatures"] = ["v2Checkpoint"]
            p["writerFeatures"] = sorted({*(p.get("writerFeatures") or []), "v2Checkpoint"})
    log.write(f"{0:020d}.json", ndjson(lines), mtime_ms=mtime)
    return log, truth


LINKS = ["commit", "checkpoint", "_last_checkpoint", "_sidecars", "_staged_commits", "_commits", "sidecar-file", "staged-file", "unknown"]


@pytest.mark.slow  # a property run (2.2 s CPU): make test runs it, the fast tier does not
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(n=st.integers(4, 20), link=st.sampled_from(LINKS), after_planning=st.booleans(), data=st.data())
def test_a_symbolic_link_in_the_log_is_refused_and_nothing_is_deleted_inside_or_outside(
    tmp_path_factory, n: int, link: str, after_planning: bool, data: st.DataObject
) -> None:
    import os
    from pathlib import Path

    from airflow_delta_maintenance.deltalog.errors import SymlinkInLogError

    base = tmp_path_factory.mktemp("links")
    root = base / "t"
    log = LogBuilder(fsspec.filesystem("file"), str(root))
    old = NOW - 40 * DAY
    for v in range(n):
        log.commit(v, [commit_info(), *([protocol(), metadata({"delta.logRetentionDuration": "interval 1 days"})] if v == 0 else []), add(f"f{v}")], mtime_ms=old + v)
    cp = data.draw(st.integers(1, n - 1))
    older = data.draw(st.integers(0, cp - 1))  # a checkpoint the plan deletes (after the commits)
    for c in (older, cp):
        snap = load_snapshot(str(root), c, now_ms=NOW)
        log.checkpoint(c, [{"protocol": snap.protocol.to_dict()}, {"metaData": snap.metadata.to_dict()}, *[add(p) for p, _ in snap.active_file_keys()]])
    outside = base / "elsewhere"
    outside.mkdir()
    for name in ("old.parquet", f"{0:020d}.x.json", "victim"):
        (outside / name).write_bytes(b"not this table's")
        os.utime(outside / name, (old / 1000, old / 1000))
    victims = {p: p.read_bytes() for p in outside.iterdir()}
    logdir = root / "_delta_log"
    store = open_table_storage(str(root))
    plan = plan_log_cleanup(store, load_snapshot(store, now_ms=NOW), now_ms=NOW) if after_planning else None

    v = older if link == "checkpoint" else data.draw(st.integers(0, cp - 1)) if link == "commit" else 0
    target: Path
    if link in ("_sidecars", "_staged_commits", "_commits"):
        (logdir / link).symlink_to(outside, target_is_directory=True)
        target = logdir / link
    elif link in ("sidecar-file", "staged-file"):
        sub = logdir / ("_sidecars" if link == "sidecar-file" else "_staged_commits")
        sub.mkdir(exist_ok=True)
        target = sub / ("old.parquet" if link == "sidecar-file" else f"{0:020d}.x.json")
        target.symlink_to(outside / target.name)
    else:
        name = {"commit": f"{v:020d}.json", "checkpoint": f"{v:020d}.checkpoint.parquet", "_last_checkpoint": "_last_checkpoint", "unknown": "notes"}[link]
        target = logdir / name
        if target.exists():
            target.unlink()
        target.symlink_to(outside / "victim")
    inside = sorted(str(p) for p in logdir.rglob("*"))
    try:
        if plan is None:
            plan = plan_log_cleanup(store, load_snapshot(store, now_ms=NOW), now_ms=NOW)
        execute_cleanup(store, plan, dry_run=False)
    except SymlinkInLogError as exc:
        assert target.name in str(exc)
    else:
        # only a link the plan never touches may stay unnoticed when planning came first
        assert after_planning and not any(d.path.split("/")[0] == target.name or d.path.endswith("/" + target.name) or d.path == target.name for d in plan.deletions), plan
        return
    assert sorted(str(p) for p in logdir.rglob("*")) == inside  # nothing deleted in the table
    assert {p: p.read_bytes() for p in outside.iterdir()} == victims  # nor outside it
