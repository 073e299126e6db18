"""The fleet health use cases without Airflow: scores and order, alert crossings, the bounded
history, a failed notification sent again, cleanup candidates and compaction coverage figures."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from airflow_delta_maintenance.demo.sample_table import create_actions
from airflow_delta_maintenance.fleet.history import (
    HISTORY_FILE,
    append_history,
    crossings,
    history_sample,
    read_history,
    read_last_success,
    record_task_success,
)
from airflow_delta_maintenance.fleet.report import (
    publish_fleet_report,
    render_html,
)
from airflow_delta_maintenance.fleet.status import TableHealth, fleet_status
from airflow_delta_maintenance.maintenance.config.tables import (
    CompactionConfig,
    HealthConfig,
    TableConfig,
    parse_config,
)
from airflow_delta_maintenance.maintenance.operations.checkpoint import (
    plan_checkpoint,
    run_local_checkpoint,
)
from airflow_delta_maintenance.maintenance.operations.log_cleanup import run_metadata_cleanup
from airflow_delta_maintenance.maintenance.operations.log_compaction import run_log_compaction
from airflow_delta_maintenance.maintenance.operations.publish import publish_ratified_commits
from airflow_delta_maintenance.maintenance.operations.status import TableStatus
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator
from airflow_delta_maintenance.maintenance.table.maintained import MaintainedTable, open_table

DAY_MS = 86_400_000


def status(pending: int, since: int, **kw: object) -> TableStatus:
    base: dict[str, object] = dict(
        table_uri="/t", latest_ratified_version=since + pending, latest_published_version=since - 1,
        pending_versions=list(range(since, since + pending)), checkpoint_version=-1, compactions=[], commits_since_checkpoint=since,
        log_files=1, log_bytes=1, cleanup_candidates=0, cleanup_bytes=0, cleanup_skipped_reason=None,
    )
    base.update(kw)
    return TableStatus(**base)  # type: ignore[arg-type]


def health(name: str, pending: int, since: int, *, error: str | None = None) -> TableHealth:
    limits = HealthConfig(max_pending_commits=10, max_commits_since_checkpoint=20)
    if error:
        return TableHealth(name, f"/{name}", limits, error=error)
    return TableHealth(name, f"/{name}", limits, status=status(pending, since))


def test_lag_score_breaches_and_validation() -> None:
    h = health("a", 30, 5)
    assert h.lag_score == 3.0 and h.breaches == ["pending_commits"]
    assert health("b", 10, 20).breaches == [] and health("b", 10, 20).lag_score == 1.0  # at the threshold is not above it
    assert health("c", 0, 0, error="boom").lag_score == 1.0
    assert TableHealth("d", "/d", HealthConfig(enabled=False), status=status(99, 99)).breaches == []
    with pytest.raises(ValueError, match=re.escape("health.max_pending_commits")):
        parse_config({"tables": [{"name": "x", "uri": "/x", "publish": False, "health": {"max_pending_commits": 0}}]})
    with pytest.raises(ValueError, match=re.escape("health.bogus")):
        parse_config({"tables": [{"name": "x", "uri": "/x", "publish": False, "health": {"bogus": 1}}]})


def test_alerts_fire_once_per_crossing() -> None:
    runs = [
        [health("a", 30, 5), health("b", 1, 1)],  # a crosses
        [health("a", 40, 5), health("b", 1, 1)],  # still above: nothing
        [health("a", 0, 0, error="unreachable"), health("b", 1, 1)],  # unknown is not a recovery
        [health("a", 35, 30), health("b", 1, 1)],  # a's checkpoint lag crosses; its backlog was already above
        [health("a", 1, 1), health("b", 1, 1)],  # recovered
        [health("a", 11, 1), health("b", 11, 21)],  # a crosses again, b crosses both
    ]
    previous = None
    fired = []
    for i, run in enumerate(runs):
        fired.append(sorted((a.table, a.figure) for a in crossings(run, previous)))
        previous = history_sample(run, f"2026-01-0{i + 1}T00:00:00+00:00", previous)
    assert fired == [
        [("a", "pending_commits")],
        [],
        [],
        [("a", "commits_since_checkpoint")],
        [],
        [("a", "pending_commits"), ("b", "commits_since_checkpoint"), ("b", "pending_commits")],
    ]


def test_history_is_bounded_and_skips_a_torn_line(tmp_path: Path) -> None:
    for i in range(10):
        append_history(tmp_path, {"time": f"t{i}", "tables": {}}, max_samples=3)
        assert len((tmp_path / HISTORY_FILE).read_text().splitlines()) <= 6
    assert [s["time"] for s in read_history(tmp_path)][-3:] == ["t7", "t8", "t9"]
    with (tmp_path / HISTORY_FILE).open("a") as f:
        f.write('{"time": "t10", "tab')  # an append killed half-way
    assert read_history(tmp_path, limit=1)[0]["time"] == "t9"
    append_history(tmp_path, {"time": "t11", "tables": {}}, max_samples=3)
    assert read_history(tmp_path, limit=1)[0]["time"] == "t11"


def test_a_failed_notification_is_sent_again_and_the_report_is_still_written(tmp_path: Path) -> None:
    fleet = [health("a", 30, 5)]
    sent: list[list[str]] = []

    def broken(alerts: list) -> None:
        raise ConnectionError("webhook down")

    with pytest.raises(ConnectionError):
        publish_fleet_report(fleet, tmp_path, "2026-01-01T00:00:00+00:00", notify=broken)
    assert json.loads((tmp_path / "report.json").read_text())["lagging"] == ["a"]
    publish_fleet_report(fleet, tmp_path, "2026-01-01T01:00:00+00:00", notify=lambda alerts: sent.append([a.table for a in alerts]))
    publish_fleet_report(fleet, tmp_path, "2026-01-01T02:00:00+00:00", notify=lambda alerts: sent.append([a.table for a in alerts]))
    assert sent == [["a"]]
    assert len(read_history(tmp_path)) == 3


def test_the_html_report_escapes_what_it_shows(tmp_path: Path) -> None:
    page = render_html([health("a", 0, 0, error="<script>alert(1)</script>")], [], "now")
    assert "<script>" not in page and "&lt;script&gt;" in page


def test_task_runs_are_recorded_under_plain_names_only(tmp_path: Path) -> None:
    record_task_success(tmp_path, "orders", "publish", "2026-01-01T00:00:00+00:00", "manual__1")
    record_task_success(tmp_path, "orders", "publish", "2026-01-02T00:00:00+00:00", "manual__2")
    assert read_last_success(tmp_path) == {"orders": {"publish": "2026-01-02T00:00:00+00:00"}}
    for table, task in (("..", "publish"), ("orders", "../../x"), ("a/b", "publish")):
        with pytest.raises(ValueError, match="not a plain name"):
            record_task_success(tmp_path, table, task, "t")
    assert read_last_success(tmp_path / "nowhere") == {} and read_last_success(None) == {}


def _table(tmp_path: Path) -> tuple[str, str]:
    spec, uri = f"local://{tmp_path}/c.db", str(tmp_path / "t")
    client = open_coordinator(spec + "?create=true")
    client.commit(uri, 0, create_actions(ict=True))
    for v in range(1, 26):
        client.commit(uri, v, [{"add": {"path": f"f{v}", "partitionValues": {}, "size": 1, "modificationTime": 1, "dataChange": True}}])
    client.close()
    return spec, uri


def test_cleanup_candidates_and_compaction_coverage_figures(tmp_path: Path) -> None:
    spec, uri = _table(tmp_path)
    with open_table(uri, coordinator=spec) as table:
        publish_ratified_commits(table, up_to=23)
        run_local_checkpoint(table, plan_checkpoint(table, version=10, force=True))
        run_log_compaction(table, interval=5)  # windows after the checkpoint: [11, 15], [16, 20]
    config = TableConfig(name="t", uri=uri, coordinator=spec)
    now = int(time.time() * 1000) + 40 * DAY_MS  # every commit expired under the default 30-day retention

    def opener(t: TableConfig) -> MaintainedTable:
        return open_table(t.uri, coordinator=t.coordinator)

    before = sorted(p.name for p in Path(uri, "_delta_log").iterdir())
    [h] = fleet_status([config], opener, now_ms=now)
    with open_table(uri, coordinator=spec) as table:
        planned = run_metadata_cleanup(table, dry_run=True, now_ms=now, allow_future_now=True).plan
    assert sorted(p.name for p in Path(uri, "_delta_log").iterdir()) == before  # nothing deleted
    assert h.status is not None and planned.deletions
    assert (h.status.cleanup_candidates, h.status.cleanup_bytes) == (len(planned.deletions), planned.bytes)
    assert h.status.commits_since_checkpoint == 13 and len(h.status.pending_versions) == 2
    assert h.compaction_coverage == (10, 13)
    assert h.to_dict()["compaction_coverage"] == round(10 / 13, 4)
    # last successes: the tasks the configuration enables, plus any other task recorded for the table
    quiet = TableConfig(name="t", uri=uri, coordinator=spec, compaction=CompactionConfig(enabled=False))
    runs = {"t": {"publish": "2026-01-01T00:00:00+00:00", "emit_asset": "2026-01-02T00:00:00+00:00"}}
    [h] = fleet_status([quiet], opener, last_success=runs)
    assert h.last_success == {"wait_for_ratified_commits": None, "publish": "2026-01-01T00:00:00+00:00", "checkpoint": None,
                              "cleanup": None, "emit_asset": "2026-01-02T00:00:00+00:00"}


def test_small_files_are_measured_for_tables_that_optimize_and_alert_above_their_threshold(tmp_path: Path) -> None:
    from airflow_delta_maintenance.fleet.report import render_html
    from airflow_delta_maintenance.maintenance.config.tables import OptimizeConfig

    spec, uri = _table(tmp_path)  # 25 files of 1 byte: all below any minimum size

    def opener(t: TableConfig) -> MaintainedTable:
        return open_table(t.uri, coordinator=t.coordinator)

    plain = TableConfig(name="t", uri=uri, coordinator=spec)
    [h] = fleet_status([plain], opener)
    assert h.small_files is None and "small_files" not in h.figures  # not measured: no file is replayed
    shown = TableConfig(name="t", uri=uri, coordinator=spec, optimize=OptimizeConfig(enabled=True))
    [h] = fleet_status([shown], opener)
    assert h.small_files == (25, 25) and h.figures["small_files"] == 25 and "small_files" not in h.breaches
    watched = TableConfig(name="t", uri=uri, coordinator=spec, optimize=OptimizeConfig(enabled=True),
                          health=HealthConfig(max_pending_commits=100, max_small_files=20))
    [h] = fleet_status([watched], opener)
    assert h.breaches == ["small_files"] and h.lag_score == 1.25
    [alert] = [a for a in crossings([h], None) if a.figure == "small_files"]
    assert "small files is 25, above its threshold 20" in alert.message()
    assert 'data-figure="small_files">25 / 25 bytes<small> / 20</small>' in render_html([h], [], "2026-01-01T00:00:00Z")
    with pytest.raises(ValueError, match=re.escape("health.max_small_files")):
        parse_config({"tables": [{"name": "x", "uri": "/x", "publish": False, "health": {"max_small_files": 0}}]})
