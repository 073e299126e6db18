"""Logs a person reads and a small, consistent XCom: one summary line per task, the reason on every
skip, progress for long steps, one record shape for every operator, one rule for templated values."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException

from airflow_delta_maintenance.operators.checkpoint import DeltaCheckpointOperator
from airflow_delta_maintenance.operators.log_cleanup import DeltaLogCleanupOperator
from airflow_delta_maintenance.operators.log_compaction import DeltaLogCompactionOperator
from airflow_delta_maintenance.operators.publish import DeltaPublishCommitsOperator
from airflow_delta_maintenance.sensors.ratified_version import DeltaRatifiedVersionSensor

from .conftest import add

COMMON_KEYS = {"table", "operation", "skipped", "reason", "version", "from_version", "to_version", "count", "bytes", "duration_s", "finished_at"}


def _lines(capsys: pytest.CaptureFixture[str], needle: str) -> list[str]:
    out = capsys.readouterr()
    return [line for line in (out.out + out.err).splitlines() if needle in line]


def _run_all(spec: str, uri: str, capsys: pytest.CaptureFixture[str]) -> dict[str, tuple[dict[str, Any], list[str]]]:
    """Each operator once; its XCom and the lines its task log got."""
    coord = {"table_uri": uri, "coordinator_spec": spec}
    ops = {
        "publish": DeltaPublishCommitsOperator(task_id="publish", **coord),
        "compaction": DeltaLogCompactionOperator(task_id="compact_log", interval=5, **coord),
        "checkpoint": DeltaCheckpointOperator(task_id="checkpoint", engine="local", interval=10, **coord),
        "cleanup": DeltaLogCleanupOperator(task_id="cleanup", **coord),
    }
    out = {}
    for name, op in ops.items():
        capsys.readouterr()
        xcom = op.execute({})
        out[name] = (xcom, _lines(capsys, f"{name}: "))
    return out


def test_every_operator_logs_one_summary_line(coordinated_table: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    spec, uri = coordinated_table
    first = _run_all(spec, uri, capsys)
    expected = {
        "publish": r"publish: published 1-12 \(12 commits, [\d.]+ KiB\), reported v12 in \d+\.\d s",
        "compaction": r"compaction: wrote 2 window\(s\) over 1-10 \([\d.,]+ (KiB|bytes)\) in \d+\.\d s",
        "checkpoint": r"checkpoint: wrote v12 \(classic, 1 part, 14 actions, [\d.]+ KiB\) in \d+\.\d s",
        "cleanup": r"cleanup: skipped — no commit is older than the retention cutoff",
    }
    for name, pattern in expected.items():
        lines = first[name][1]
        assert len(lines) == 1 and re.search(pattern, lines[0]), (name, lines)
    # a second run: every skip says why, in the same one line
    second = _run_all(spec, uri, capsys)
    reasons = {
        "publish": "publish: skipped — nothing to publish: latest ratified v12 is published",
        "compaction": "compaction: skipped — no window of 5 to compact through v12",
        "checkpoint": "checkpoint: skipped — a checkpoint already exists at 12",
        "cleanup": "cleanup: skipped — no commit is older than the retention cutoff",
    }
    for name, needle in reasons.items():
        xcom, lines = second[name]
        assert len(lines) == 1 and needle in lines[0], (name, lines)
        assert xcom["skipped"] is True and xcom["reason"] and xcom["reason"] in lines[0]


def test_xcom_is_small_and_has_the_same_keys_everywhere(coordinated_table: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    spec, uri = coordinated_table
    records = {name: xcom for name, (xcom, _) in _run_all(spec, uri, capsys).items()}
    for name, record in records.items():
        assert set(record) >= COMMON_KEYS, name
        assert record["operation"] == name and record["table"] == uri
        json.dumps(record)  # plain JSON
        # ranges and counts: no list anywhere (publish used to return every version number)
        assert not [k for k, v in record.items() if isinstance(v, list)], (name, record)
        # ISO-8601 UTC timestamps, never epoch milliseconds
        assert datetime.fromisoformat(record["finished_at"].replace("Z", "+00:00")).utcoffset().total_seconds() == 0
        assert not [k for k in record if k.endswith("_ms")], (name, record)
    assert (records["publish"]["from_version"], records["publish"]["to_version"], records["publish"]["count"]) == (1, 12, 12)
    assert records["checkpoint"]["version"] == 12 and records["checkpoint"]["bytes"] > 0
    cleanup = records["cleanup"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT00:00:00Z", cleanup["cutoff"]) and cleanup["now"].endswith("Z")
    # the record stays the same size however many versions were published
    assert len(json.dumps(records["publish"])) < 600


def test_the_sensor_record_has_the_common_keys(coordinated_table: tuple[str, str]) -> None:
    spec, uri = coordinated_table
    done = DeltaRatifiedVersionSensor(task_id="wait", table_uri=uri, coordinator_spec=spec, min_new_commits=3).poke({})
    skipped = DeltaRatifiedVersionSensor(task_id="wait", table_uri=uri, coordinator_spec=spec, skip=True).poke({})
    for record in (done.xcom_value, skipped.xcom_value):
        assert set(record) >= COMMON_KEYS and record["operation"] == "wait", record
    assert (done.xcom_value["version"], done.xcom_value["count"], done.xcom_value["skipped"]) == (12, 12, False)
    assert skipped.xcom_value["skipped"] and "skip requested (skip_wait" in skipped.xcom_value["reason"]


def test_the_sensor_logs_an_observation_only_when_it_changes(coordinated_table: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    spec, uri = coordinated_table
    sensor = DeltaRatifiedVersionSensor(task_id="wait", table_uri=uri, coordinator_spec=spec, target_version=99)
    capsys.readouterr()
    for _ in range(4):
        assert sensor.poke({}) is False
    assert len(_lines(capsys, "waiting for version 99")) == 1


@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda uri, spec: DeltaLogCleanupOperator(task_id="d", table_uri=uri, coordinator_spec=spec, dry_run="ture"), "dry_run"),
        (lambda uri, spec: DeltaCheckpointOperator(task_id="c", table_uri=uri, coordinator_spec=spec, engine="local", force="yes please"), "force"),
        (lambda uri, spec: DeltaPublishCommitsOperator(task_id="p", table_uri=uri, coordinator_spec=spec, up_to_version="eight"), "up_to_version"),
        (lambda uri, spec: DeltaLogCompactionOperator(task_id="k", table_uri=uri, coordinator_spec=spec, interval="10.5"), "interval"),
        (lambda uri, spec: DeltaRatifiedVersionSensor(task_id="w", table_uri=uri, coordinator_spec=spec, skip="maybe"), "skip"),
    ],
)
def test_a_templated_value_that_means_nothing_fails_naming_the_parameter(coordinated_table: tuple[str, str], make: Any, name: str) -> None:
    """It used to be read with a rule of its own: dry_run="ture" meant a dry run, force="yes please"
    meant no force, skip="maybe" meant waiting, and "eight" a raw ValueError."""
    spec, uri = coordinated_table
    op = make(uri, spec)
    with pytest.raises(AirflowFailException, match=rf"parameter {name} must be"):
        op.poke({}) if isinstance(op, DeltaRatifiedVersionSensor) else op.execute({})


@pytest.mark.parametrize("rendered", [False, "False", "false", "0", "no", "off", 0])
def test_the_same_rendered_false_means_the_same_for_every_flag(coordinated_table: tuple[str, str], rendered: Any) -> None:
    spec, uri = coordinated_table
    DeltaPublishCommitsOperator(task_id="p", table_uri=uri, coordinator_spec=spec).execute({})
    assert DeltaCheckpointOperator(task_id="c", table_uri=uri, coordinator_spec=spec, engine="local", interval=100, force=rendered).execute({})["skipped"]
    assert DeltaLogCleanupOperator(task_id="d", table_uri=uri, coordinator_spec=spec, dry_run=rendered).execute({})["dry_run"] is False
    sensor = DeltaRatifiedVersionSensor(task_id="w", table_uri=uri, coordinator_spec=spec, target_version=99, skip=rendered)
    assert sensor.poke({}) is False  # not skipped: it waits


def test_a_long_local_checkpoint_reports_progress_by_row_group(coordinated_table: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_delta_maintenance.deltalog.checkpoint import writer as checkpoint_writer
    from airflow_delta_maintenance.maintenance.operations.checkpoint import plan_checkpoint, run_local_checkpoint
    from airflow_delta_maintenance.maintenance.operations.publish import publish_ratified_commits
    from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator
    from airflow_delta_maintenance.maintenance.table.maintained import open_table

    spec, uri = coordinated_table
    client = open_coordinator(spec)
    for v in range(13, 20):
        client.commit(uri, v, [add(f"g{v}")])
    monkeypatch.setattr(checkpoint_writer, "ROWS_PER_ROW_GROUP", 5)
    heard: list[str] = []
    with open_table(uri, coordinator=spec) as table:
        publish_ratified_commits(table)
        run_local_checkpoint(table, plan_checkpoint(table, force=True), progress=heard.append)
    assert heard == [f"checkpoint: v19 {n} of 19 file actions written" for n in (5, 10, 15, 19)]


def test_a_long_cleanup_reports_progress_by_batch(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    from airflow_delta_maintenance.deltalog.cleanup import plan as cleanup
    from airflow_delta_maintenance.deltalog.cleanup.plan import CleanupPlan, Deletion, execute_cleanup
    from airflow_delta_maintenance.deltalog.storage import open_table_storage, removal as storage

    log = tmp_path / "_delta_log"
    log.mkdir()
    names = [*(f"{v:020d}.json" for v in range(5)), f"{5:020d}.checkpoint.parquet"]
    for n in names:
        (log / n).write_bytes(b"x")
    gone_at_batch: list[set[str]] = []
    monkeypatch.setattr(storage, "DELETE_BATCH", 2)
    monkeypatch.setattr(cleanup, "find_abandoned", lambda store: [])
    deletions = (*(Deletion(n, "commit", 1) for n in names[:5]), Deletion(names[5], "checkpoint_classic", 1))
    plan = CleanupPlan(str(tmp_path), 0, 0, 0, cutoff_commit=5, cutoff_checkpoint=5, deletions=deletions)
    heard: list[str] = []

    def hear(line: str) -> None:
        heard.append(line)
        gone_at_batch.append(set(names) - {p.name for p in log.iterdir()})

    result = execute_cleanup(open_table_storage(str(tmp_path)), plan, dry_run=False, progress=hear)
    assert result.deleted == 6 and not list(log.iterdir())
    assert [f"cleanup: deleted {n} of 6 files below v5" for n in (2, 4, 5, 6)] == heard
    # commits first, in batches within a kind: a line is heard once its batch is gone
    assert gone_at_batch == [set(names[:2]), set(names[:4]), set(names[:5]), set(names)]


def _twin_table(root: Any) -> tuple[str, str]:
    from airflow_delta_maintenance.demo.sample_table import create_actions
    from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator

    root.mkdir()
    spec, uri = f"local://{root}/coordinator.db?create=true", str(root / "table")
    client = open_coordinator(spec)
    client.commit(uri, 0, create_actions(ict=True))
    for v in range(1, 13):
        client.commit(uri, v, [add(f"f{v}")])
    return spec, uri


def test_the_cli_json_is_the_xcom_record(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """One vocabulary: ``--json`` of every command prints the record the operator pushes to XCom
    (same keys, same units), for the run that works and the run that skips. Old code: the CLI's
    own keys (``published`` lists, ``delete_bytes``, ``skipped_reason``, ms ``cutoff_timestamp``)."""
    from airflow_delta_maintenance.cli import main
    from airflow_delta_maintenance.operators.checksums import DeltaChecksumsOperator
    from airflow_delta_maintenance.operators.vacuum import DeltaVacuumOperator

    spec_a, uri_a = _twin_table(tmp_path / "a")
    spec_b, uri_b = _twin_table(tmp_path / "b")
    steps = [  # (operation, CLI arguments, operator)
        ("publish", ["publish"], lambda c: DeltaPublishCommitsOperator(task_id="publish", **c)),
        ("compaction", ["compact-log", "--interval", "5"], lambda c: DeltaLogCompactionOperator(task_id="compact_log", interval=5, **c)),
        ("checkpoint", ["checkpoint", "--engine", "local", "--interval", "10"], lambda c: DeltaCheckpointOperator(task_id="checkpoint", engine="local", interval=10, **c)),
        ("cleanup", ["cleanup"], lambda c: DeltaLogCleanupOperator(task_id="cleanup", **c)),
        ("checksums", ["checksums"], lambda c: DeltaChecksumsOperator(task_id="checksums", **c)),
        ("vacuum", ["vacuum"], lambda c: DeltaVacuumOperator(task_id="vacuum", **c)),
    ]
    volatile = {"table", "duration_s", "finished_at", "now"}
    for attempt in ("works", "skips"):
        for operation, argv, make in steps:
            capsys.readouterr()
            assert main([argv[0], uri_a, *argv[1:], "--coordinator", spec_a, "--json"]) == 0, capsys.readouterr().err
            cli = json.loads(capsys.readouterr().out)
            xcom = make({"table_uri": uri_b, "coordinator_spec": spec_b}).execute({})
            assert set(cli) == set(xcom) >= COMMON_KEYS, (attempt, operation, set(cli) ^ set(xcom))
            moving = volatile | ({"cutoff"} if operation == "vacuum" else set())  # VACUUM's cutoff is now minus the retention
            if operation == "checkpoint":  # the twins' commit timestamps differ, so their compressed Parquet may by a byte
                moving = moving | {"bytes"}
                assert (cli["bytes"] > 0) == (xcom["bytes"] > 0), (cli, xcom)
            same = {k: v for k, v in cli.items() if k not in moving}
            assert same == {k: v for k, v in xcom.items() if k not in moving}, (attempt, operation, cli, xcom)
            assert cli["operation"] == operation and not [k for k in cli if k.endswith("_ms")], cli
