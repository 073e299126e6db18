"""``delta-maintenance ... --json | jq``: stdout carries the result and nothing else, whatever logging
the process has — Airflow's (configured when it is imported: 3.0's console handler writes to
``sys.stdout``), a user's handler on stdout — and the log records still reach stderr. Before, every
record a command logged was printed in front of its JSON (Airflow 3.0's fast tier: 12 failures)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_delta_maintenance.cli import main
from airflow_delta_maintenance.deltalog.model.paths import crc_name
from airflow_delta_maintenance.demo.sample_table import create_sample_table

# A process with Airflow's logging and a user's own handler on stdout, set up before the command runs.
SITECUSTOMIZE = """
import logging, sys
import airflow  # Airflow configures logging when it is imported
logging.getLogger("airflow_delta_maintenance").addHandler(logging.StreamHandler(sys.stdout))
"""


def _table_that_logs(tmp_path: Path) -> str:
    """A table whose newest checksum is garbage: ``status`` logs a WARNING naming it and reports it."""
    root = str(tmp_path / "t")
    create_sample_table(root, commits=3)
    assert main(["checksums", root]) == 0
    (Path(root) / "_delta_log" / crc_name(2)).write_text("{not json")
    return root


def _problems(stdout: str) -> list[str]:
    lines = stdout.splitlines()
    assert len(lines) == 1, stdout  # exactly the one JSON object
    return list(json.loads(lines[0])["problems"])


@pytest.mark.slow  # 2.3 CPU s: make test runs it; the fast tier (plain pytest) stays under two minutes
def test_the_installed_command_prints_only_its_result_on_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _table_that_logs(tmp_path)
    capsys.readouterr()
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p))
    done = subprocess.run([str(Path(sys.executable).with_name("delta-maintenance")), "status", root, "--json"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert any("v2" in p for p in _problems(done.stdout)), done.stdout
    assert "00000000000000000002.crc: not used" in done.stderr, done.stderr  # the logs are kept, on stderr


def test_main_in_a_process_with_a_handler_on_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``main()`` called in a process whose root logger writes to stdout (Airflow's own, in this test
    process, and a user's): the records go to stderr for the command's run, and the handler is back
    on stdout afterwards."""
    root = _table_that_logs(tmp_path)
    capsys.readouterr()
    users = logging.StreamHandler(sys.stdout)  # sys.stdout is capsys's here
    logging.getLogger().addHandler(users)
    try:
        assert main(["status", root, "--json"]) == 0
        out, err = capsys.readouterr()
        assert any("v2" in p for p in _problems(out))
        assert "00000000000000000002.crc: not used" in err
        logging.getLogger("airflow_delta_maintenance.after").warning("after the command")
        assert "after the command" in capsys.readouterr().out
    finally:
        logging.getLogger().removeHandler(users)
