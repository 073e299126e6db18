"""An inconsistent coordinator is loud end to end: a ratified head no pending commit reaches, pending
commits out of order, twice or with gaps → ``InconsistentCoordinatorError``, the CLI's one line
and exit 4, nothing written, and a problem in the fleet's health view. Before: ``publish`` printed
"skipped — nothing to publish" and exited 0, run after run (the task log and the DAG green while
the table was wedged). The failed Airflow tasks are in tests/unit/provider."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from airflow_delta_maintenance.cli import main
from airflow_delta_maintenance.coordinators.base import CommitsResponse
from airflow_delta_maintenance.demo.sample_table import create_actions
from airflow_delta_maintenance.maintenance.errors import InconsistentCoordinatorError
from airflow_delta_maintenance.maintenance.operations.publish import publish_ratified_commits
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator
from airflow_delta_maintenance.maintenance.table.maintained import open_table


def add(path: str) -> dict[str, Any]:
    return {"add": {"path": path, "partitionValues": {"region": "x"}, "size": 1, "modificationTime": 1, "dataChange": True}}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def log_state(uri: str) -> dict[str, bytes]:
    log = Path(uri) / "_delta_log"
    return {str(p.relative_to(log)): p.read_bytes() for p in sorted(log.rglob("*")) if p.is_file()}


@pytest.fixture
def wedged(tmp_path: Path) -> tuple[str, str]:
    """0..3 published and reported, then the coordinator's head jumps to 9 with nothing pending."""
    spec, uri = f"local://{tmp_path}/c.db", str(tmp_path / "t")
    client = open_coordinator(spec + "?create=true")
    client.commit(uri, 0, create_actions())
    for v in range(1, 4):
        client.commit(uri, v, [add(f"f{v}")])
    assert main(["publish", uri, "--coordinator", spec]) == 0
    with sqlite3.connect(tmp_path / "c.db") as db:
        db.execute("UPDATE tables SET latest_version = 9 WHERE table_uri = ?", (uri,))
    return spec, uri


def test_publish_on_a_head_nothing_reaches_exits_4_with_one_line(wedged: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    spec, uri = wedged
    capsys.readouterr()
    before = log_state(uri)
    for argv in (["publish"], ["publish", "--json"], ["checkpoint"], ["cleanup", "--execute"], ["compact-log"]):
        code, out, err = run(capsys, argv[0], uri, "--coordinator", spec, *argv[1:])
        assert code == 4 and out == "" and err.count("\n") == 1, (argv, code, out, err)
        assert "InconsistentCoordinatorError" in err and "latest ratified version 9 is beyond anything published or pending (nothing above 3)" in err
    assert log_state(uri) == before
    code, out, _ = run(capsys, "versions", uri, "--coordinator", spec, "--json")
    assert code == 0 and any("beyond anything published" in p for p in json.loads(out)["problems"])


def test_the_health_view_lists_the_wedged_table(wedged: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec, uri = wedged
    config = tmp_path / "tables.yaml"
    config.write_text(f"tables:\n  - name: wedged\n    uri: {uri}\n    coordinator: {spec}\n")
    capsys.readouterr()
    code, out, _ = run(capsys, "status", "--config", str(config), "--json")
    table = json.loads(out)["tables"][0]
    assert code == 0 and table["lag_score"] >= 1 and any("beyond anything published" in p for p in table["problems"]), table
    assert run(capsys, "status", "--config", str(config), "--strict")[0] == 4


@pytest.mark.parametrize(
    ("versions", "named"),
    [((1, 3, 2), r"version 2 after version 3 \(out of order\)"), ((1, 2, 2, 3), "version 2 twice"), ((1, 3), "do not follow")],
    ids=["out-of-order", "duplicated", "a-gap"],
)
def test_pending_commits_out_of_order_twice_or_with_gaps_publish_nothing(
    tmp_path: Path, versions: tuple[int, ...], named: str
) -> None:
    """What a coordinator answers, handed to publish as it was received (the embedded one cannot
    be made to answer so; the clients' own answer checks are in tests/unit/coordinators)."""
    spec, uri = f"local://{tmp_path}/c.db", str(tmp_path / "t")
    client = open_coordinator(spec + "?create=true")
    client.commit(uri, 0, create_actions())
    for v in (1, 2, 3):
        client.commit(uri, v, [add(f"f{v}")])
    real = {c.version: c for c in client.get_commits(uri).commits}
    before = log_state(uri)
    with open_table(uri, coordinator=spec) as table, pytest.raises(InconsistentCoordinatorError, match=named):
        publish_ratified_commits(table, response=CommitsResponse(tuple(real[v] for v in versions), 3))
    assert log_state(uri) == before
    assert [c.version for c in client.get_commits(uri).commits] == [1, 2, 3]  # nothing reported
