"""dag.test() of a generated DAG whose table has ``checksums: true``: after publish, checkpoint and
OPTIMIZE the run writes every published version's ``<v>.crc`` (OPTIMIZE's commit once the next run
published it), each verifying against the replay; the next run writes only the new versions',
from the last one."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from pathlib import Path

import pytest

from airflow_delta_maintenance.cli import main
from airflow_delta_maintenance.deltalog.model.paths import crc_name
from airflow_delta_maintenance.demo.sample_table import add_action_for, create_actions, data_batch
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator

from .dag_runner import DagRunner

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]


def test_the_generated_dag_writes_the_checksums_of_every_new_version(dag_runner: Callable[[Path], DagRunner], tmp_path: Path) -> None:
    spec, uri = f"local://{tmp_path}/coordinator.db", str(tmp_path / "table")
    client = open_coordinator(spec + "?create=true")
    client.commit(uri, 0, create_actions(ict=True))
    for v in range(1, 9):
        region = "us" if v % 2 else "eu"
        client.commit(uri, v, [add_action_for(uri, data_batch(v * 100, 50, region), region)])
    config = tmp_path / "tables.yaml"
    config.write_text(
        f"defaults:\n  coordinator: {spec}\n  checkpoint: {{engine: local}}\n"
        f"tables:\n  - name: orders\n    uri: {uri}\n    optimize: {{interval: 1d}}\n    checksums: true\n"
    )
    runner = dag_runner(config)  # both runs in one Airflow process
    first, logs = runner.run()
    assert first["state"] == "success" and first["tasks"]["checksums"] == "success", first
    log = Path(uri) / "_delta_log"
    # OPTIMIZE committed v9 through the coordinator: ratified, not yet published, so no checksum
    assert first["tasks"]["optimize"] == "success" and not (log / f"{9:020d}.json").exists()
    record = first["xcom"]["checksums"]
    assert (record["from_version"], record["to_version"], record["count"]) == (0, 8, 9), record
    assert all((log / crc_name(v)).exists() for v in range(9)) and not (log / crc_name(9)).exists()
    assert "checksums: wrote 9 checksum(s) v0..v8" in logs, logs[-4000:]

    for v in (10, 11):
        client.commit(uri, v, [add_action_for(uri, data_batch(v * 100, 50, "us"), "us")])
    second, logs = runner.run({"skip_wait": True})
    assert second["state"] == "success" and second["tasks"]["checksums"] == "success", second
    record = second["xcom"]["checksums"]
    # the next run publishes OPTIMIZE's v9 and the new v10, v11: their checksums follow v8's
    assert (record["from_version"], record["to_version"], record["anchor"]) == (9, 11, "checksum of v8"), record

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["verify", uri, "--coordinator", spec])
    assert rc == 0 and "12 checksum(s) agree" in out.getvalue(), (out.getvalue(), err.getvalue())
