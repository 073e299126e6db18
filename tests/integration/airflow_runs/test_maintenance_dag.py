"""dag.test() of the generated DAG wait → publish → checkpoint and compaction → cleanup, on a local
table with the embedded coordinator and a local Spark checkpoint; a second run changes nothing."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from airflow_delta_maintenance.demo.sample_table import create_actions
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator
from tests._infra.exit_probe import ExitProbe

from .conftest import EXAMPLE_DAGS, airflow_env
from .dag_runner import DagRunner

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(1800)]  # above the run deadline below


def run_dag(home: Path, config: Path, conf: dict[str, Any] | None = None) -> tuple[dict[str, Any], str]:
    """The run's outcome (states, XCom) and what its tasks logged. The process, whose tasks used
    Arrow, ends without the interpreter's teardown (as `make demo`'s does)."""
    probe = ExitProbe(config.parent / "exit-probe")
    proc = subprocess.run(
        [sys.executable, "-m", "airflow_delta_maintenance.demo.run_dag", str(EXAMPLE_DAGS / "delta_maintenance.py"), json.dumps(conf or {})],
        env=probe.env(airflow_env(home, EXAMPLE_DAGS, DELTA_MAINTENANCE_CONFIG=str(config))),
        capture_output=True,
        text=True,
        timeout=1500,  # a generous deadline: a Spark checkpoint on a busy machine
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert proc.returncode == 0 and line, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert [words for program, words in probe.ended() if program.endswith("run_dag.py")] == [["atexit"]], probe.ended()
    return json.loads(line[len("RESULT "):]), proc.stdout + proc.stderr


def log_state(uri: str) -> dict[str, tuple[int, int]]:
    return {s.name: (s.size, s.modification_time) for s in open_table_storage(uri).list_dir()}


def test_generated_dag_runs_end_to_end_and_a_second_run_changes_nothing(airflow_home: Path, tmp_path: Path) -> None:
    spec, uri = f"local://{tmp_path}/coordinator.db", str(tmp_path / "table")
    client = open_coordinator(spec + "?create=true")  # the DAG's spec requires it to exist
    client.commit(uri, 0, create_actions(ict=True))
    for v in range(1, 25):
        client.commit(uri, v, [{"add": {"path": f"f{v}", "partitionValues": {"region": "x"}, "size": 10, "modificationTime": 1, "dataChange": True}}])
    config = tmp_path / "tables.yaml"
    config.write_text(
        f"defaults:\n  coordinator: {spec}\n  checkpoint: {{interval: 10, engine: spark}}\n  compaction: {{interval: 10}}\n"
        f"tables:\n  - name: orders\n    uri: {uri}\n"
    )
    with DagRunner(airflow_home, config) as runner:  # both runs in one Airflow process: the second costs only its run
        first, logs = runner.run()
        before = log_state(uri)
        second, second_logs = runner.run({"skip_wait": True})
    assert first["state"] == "success" and set(first["tasks"].values()) == {"success"}, first
    # the task logs: a summary line per task, and Spark's warnings only (its INFO lines stay out)
    assert re.search(r"checkpoint: wrote v24 \(classic, 1 part, 26 actions, [\d.]+ KiB\) in \d+\.\d s", logs), logs[-5000:]
    assert "publish: published 1-24 (24 commits" in logs and "compaction: wrote 2 window(s) over 1-20" in logs, logs[-5000:]
    assert " INFO SparkContext" not in logs and " INFO DAGScheduler" not in logs, logs[-5000:]
    # nor what every JVM start prints (old code: "WARNING: Using incubator modules: jdk.incubator.vector")
    assert "Using incubator modules" not in logs, logs[-5000:]
    x = first["xcom"]
    # wait: saw 24 ratified commits beyond the published version 0
    assert x["wait_for_ratified_commits"]["latest_ratified_version"] == 24 and x["wait_for_ratified_commits"]["latest_published_version"] == 0
    # publish: every version, in order, then reported
    assert (x["publish"]["from_version"], x["publish"]["to_version"], x["publish"]["count"]) == (1, 24, 24)
    assert client.get_commits(uri).commits == ()
    files = list_log_files(open_table_storage(uri))
    assert [c.version for c in files.commits] == list(range(25))
    # checkpoint (Spark, local mode) at the latest published version, readable by our reader
    assert x["checkpoint"]["version"] == 24 and x["checkpoint"]["engine"] == "spark" and not x["checkpoint"]["skipped"]
    snap = load_snapshot(uri)
    assert snap.checkpoint_version == 24 and snap.num_files == 24
    # compaction: aligned windows before the checkpoint
    assert (x["compact_log"]["from_version"], x["compact_log"]["to_version"], x["compact_log"]["count"]) == (1, 20, 2)
    assert [(c.version, c.end_version) for c in files.compactions] == [(1, 10), (11, 20)]
    # cleanup: a dry run that found nothing expired (every commit is minutes old)
    assert x["cleanup"]["dry_run"] and x["cleanup"]["deleted"] == 0 and x["cleanup"]["skipped"] and x["cleanup"]["reason"]

    logs = second_logs
    assert second["state"] == "success", second
    assert "wait: skipped — skip requested (skip_wait" in logs and "checkpoint: skipped — a checkpoint already exists at 24" in logs, logs[-5000:]
    assert second["xcom"]["publish"]["count"] == 0 and second["xcom"]["checkpoint"]["skipped"]
    assert second["xcom"]["compact_log"]["count"] == 0 and second["xcom"]["compact_log"]["skipped"]
    assert log_state(uri) == before


def test_generated_dag_without_a_coordinator_acts_through_the_one_the_table_declares(airflow_home: Path, tmp_path: Path) -> None:
    """tables.yaml names no coordinator for a table the embedded coordinator created. Before, the
    tasks saw only the published log: the cleanup (mode delete) took retention and
    enableExpiredLogCleanup from it and deleted commits while the ratified, unpublished version 6
    said "keep"; the checkpoint ignored the catalog's head."""
    import os
    import time

    spec, uri = f"local://{tmp_path}/coordinator.db", str(tmp_path / "table")
    client = open_coordinator(spec + "?create=true")
    client.commit(uri, 0, create_actions())
    for v in range(1, 6):
        client.commit(uri, v, [{"add": {"path": f"f{v}", "partitionValues": {"region": "x"}, "size": 10, "modificationTime": 1, "dataChange": True}}])
    from airflow_delta_maintenance.cli import main

    assert main(["publish", uri, "--coordinator", spec]) == 0
    past = time.time() - 60 * 86400
    for p in (Path(uri) / "_delta_log").iterdir():
        if p.is_file():
            os.utime(p, (past, past))
    meta = load_snapshot(uri).metadata.to_dict()
    meta["configuration"] = {**meta["configuration"], "delta.enableExpiredLogCleanup": "false"}
    client.commit(uri, 6, [{"metaData": meta}])  # ratified, not published
    config = tmp_path / "tables.yaml"
    config.write_text(
        "tables:\n"
        f"  - name: undeclared\n    uri: {uri}\n    publish: false\n    schedule: null\n"
        "    checkpoint: {interval: 1, engine: local}\n    compaction: {enabled: false}\n    cleanup: {mode: delete}\n"
    )
    before = {p.name for p in (Path(uri) / "_delta_log").iterdir()}
    run, _ = run_dag(airflow_home, config)
    assert run["state"] == "success", run
    x = run["xcom"]
    assert x["checkpoint"]["version"] == 5 and not x["checkpoint"]["skipped"], x["checkpoint"]
    assert x["cleanup"]["skipped"] and "enableExpiredLogCleanup" in x["cleanup"]["reason"] and x["cleanup"]["deleted"] == 0, x["cleanup"]
    after = {p.name for p in (Path(uri) / "_delta_log").iterdir()}
    assert before <= after and [c.version for c in list_log_files(open_table_storage(uri)).commits] == list(range(6))
