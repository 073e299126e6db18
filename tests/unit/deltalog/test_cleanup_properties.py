"""Property-based cleanup tests: random logs, mtimes, ICT enablement, checkpoints and compactions."""

from __future__ import annotations

import fsspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_delta_maintenance.deltalog.cleanup import execute_cleanup, plan_log_cleanup, utc_midnight
from airflow_delta_maintenance.deltalog.errors import DeltaLogError
from airflow_delta_maintenance.deltalog.listing import list_log_files
from airflow_delta_maintenance.deltalog.paths import compaction_name
from airflow_delta_maintenance.deltalog.snapshot import load_snapshot
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
            if op == "remove" and live:
                actions.append(remove(live.pop(0), NOW))
            else:
                live.append(f"v{v}-{i}")
                actions.append(add(live[-1]))
        log.commit(v, actions, mtime_ms=mtime)
        adjusted = mtime if prev_ts is None or mtime > prev_ts else prev_ts + 1
        prev_ts = adjusted
        truth[v] = ict if ict is not None else adjusted
    return log, truth


def state(store, version: int) -> set:
    return load_snapshot(store, version, now_ms=NOW).active_file_keys()


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
    before = {v: state(store, v) for v in (retained or range(latest + 1))}

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
