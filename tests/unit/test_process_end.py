"""The processes that are ours alone end without the interpreter's teardown once their work is
done, keeping their exit code, output and exit handlers: the installed command and the Spark jobs
as spark-submit runs them (the demo's processes: tests/integration/airflow_runs and test_packaging).
Teardown destroys Arrow's thread pools, which now and then aborts a process whose work succeeded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import airflow_delta_maintenance.spark_jobs as spark_jobs
from tests._infra.exit_probe import ExitProbe

JOBS = Path(spark_jobs.__file__).parent


def _run(argv: list[str], probe: ExitProbe) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, env=probe.env())


@pytest.mark.slow  # two commands, minutes on a busy machine: make test runs it, the fast tier does not
def test_the_installed_command_ends_without_teardown_keeping_output_exit_code_and_exit_handlers(tmp_path: Path) -> None:
    from airflow_delta_maintenance.demo.sample_table import create_sample_table

    probe = ExitProbe(tmp_path / "probe")
    root = str(tmp_path / "t")
    create_sample_table(root, commits=3)
    command = str(Path(sys.executable).with_name("delta-maintenance"))
    done = _run([command, "checkpoint", root, "--force", "--json"], probe)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["version"] == 2  # the whole JSON document, flushed
    failed = _run([command, "checkpoint", str(tmp_path / "missing")], probe)
    assert failed.returncode == 2 and "TableNotFoundError" in failed.stderr
    assert probe.ended() == [(command, ["atexit"]), (command, ["atexit"])]


@pytest.mark.parametrize(
    ("job", "args", "code"),
    [
        ("checkpoint", ["--version", "3"], 1),
        ("log_compaction", ["--start", "0", "--end", "2"], 1),
        ("optimize", ["--run-dir", "elsewhere"], 2),
        ("vacuum", ["--run-dir", "elsewhere"], 2),
    ],
)
def test_a_spark_job_run_as_spark_submit_runs_it_ends_without_teardown(tmp_path: Path, job: str, args: list[str], code: int) -> None:
    probe = ExitProbe(tmp_path / "probe")
    script = str(JOBS / f"{job}.py")
    failed = _run([sys.executable, script, "--table-uri", str(tmp_path / "missing"), *args], probe)
    assert failed.returncode == code and failed.stderr.startswith("delta-maintenance spark job failed:"), failed.stderr[-2000:]
    assert probe.ended() == [(script, ["atexit"])]
