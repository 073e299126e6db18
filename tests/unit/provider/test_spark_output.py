"""Spark's output in the task log and the CLI: the scheduler's lines become a throttled progress
line, Spark's own INFO lines and the job's raw result line stay out unless asked for, warnings stay.

``data/spark_driver_stderr.txt`` is what a local Spark 4 driver printed for a small job under our
log4j2 configuration (paths shortened; a warning line and the job's result line added)."""

from __future__ import annotations

import json
import os
import stat
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from airflow_delta_maintenance.hooks import spark as spark_hook
from airflow_delta_maintenance.hooks.spark import DeltaSparkSubmitHook
from airflow_delta_maintenance.maintenance.operations.summary import Throttled
from airflow_delta_maintenance.maintenance.spark import progress as spark_progress, submit as spark_submit
from airflow_delta_maintenance.maintenance.spark.jobs import checkpoint_job
from airflow_delta_maintenance.maintenance.spark.progress import LOG4J2_PROPERTIES, SparkOutput, quiet_spark_conf

LINES = (Path(__file__).with_name("data") / "spark_driver_stderr.txt").read_text().splitlines()


def test_scheduler_lines_become_progress_and_the_rest_passes() -> None:
    heard: list[str] = []
    output = SparkOutput(heard.append, clock=lambda: 12.0)
    shown = [line for line in LINES if output.feed(line)]
    assert shown == [LINES[1]]  # Spark's warning; the JVM's start-up note is not shown, the job's result line is read, not shown
    assert output.job_result == {"version": 29, "existed": False, "num_actions": 31}
    assert output.stages_done == 2 and output.jobs_done == 1
    assert heard[0] == "spark: stage 0 (collect at checkpoint.py:3) started, 3 task(s) (0 stage(s) done, 0 s)"
    assert "spark: stage 0 (collect at checkpoint.py:3): 3/3 task(s) done (0 stage(s) done, 0 s)" in heard
    assert "spark: stage 0 (collect at checkpoint.py:3) finished in 3.5 s (1 stage(s) done, 0 s)" in heard
    assert heard[-1] == "spark: stage 2 (collect at checkpoint.py:3) finished in 1.0 s (2 stage(s) done, 0 s)"
    verbose = SparkOutput(verbose=True)
    assert all(verbose.feed(line) for line in LINES)


def test_progress_is_throttled() -> None:
    now = [0.0]
    heard: list[str] = []
    sink = Throttled(heard.append, every_s=5.0, clock=lambda: now[0])
    for t in range(0, 21):
        now[0] = float(t)
        sink(f"at {t}")
    assert heard == ["at 5", "at 10", "at 15", "at 20"]  # a quick step (< 5 s) says nothing


def test_the_driver_logs_at_warn_unless_asked() -> None:
    conf = quiet_spark_conf({"spark.executor.memory": "1g"})
    options = conf["spark.driver.extraJavaOptions"]
    assert options.startswith("-Dlog4j2.configurationFile=file:")
    assert Path(options.split("file:", 1)[1]).read_text() == LOG4J2_PROPERTIES
    assert "rootLogger.level = warn" in LOG4J2_PROPERTIES
    # a user's own logging configuration wins; other driver options are kept
    own = {"spark.driver.extraJavaOptions": "-Dlog4j2.configurationFile=file:/etc/spark/log4j2.properties"}
    assert quiet_spark_conf(own) == own
    assert quiet_spark_conf({"spark.driver.extraJavaOptions": "-Xss4m"})["spark.driver.extraJavaOptions"].endswith(" -Xss4m")


def test_the_task_log_gets_progress_not_sparks_info_lines(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("AIRFLOW_CONN_SPARK_DEFAULT", raising=False)
    monkeypatch.setattr(spark_hook, "Throttled", lambda emit: emit)  # every progress line, for the test
    hook = DeltaSparkSubmitHook(application_args=["--version", "29"])
    assert "log4j2.configurationFile" in hook._conf["spark.driver.extraJavaOptions"]
    capsys.readouterr()
    hook._process_spark_submit_log(iter(line + "\n" for line in LINES))  # the upstream hook reading spark-submit's output
    out = capsys.readouterr().out
    assert "INFO DAGScheduler" not in out and "INFO TaskSetManager" not in out and "Using incubator modules" not in out
    assert "WARN MetricsConfig" in out and "spark: stage 2 (collect at checkpoint.py:3) finished in 1.0 s" in out
    assert hook.job_result == {"version": 29, "existed": False, "num_actions": 31}
    verbose = DeltaSparkSubmitHook(application_args=["--version", "29"], show_spark_logs=True)
    assert "spark.driver.extraJavaOptions" not in verbose._conf
    verbose._process_spark_submit_log(iter(line + "\n" for line in LINES))
    assert "INFO DAGScheduler: Submitting 3 missing tasks" in capsys.readouterr().out


def test_the_cli_runner_streams_progress_while_spark_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A stand-in spark-submit prints the driver's lines on stderr and the result on stdout; the
    runner passes progress on as it comes and keeps Spark's INFO lines off the terminal."""
    fake = tmp_path / "spark-submit"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import sys, pathlib\n"
        f"lines = pathlib.Path({str(Path(__file__).with_name('data') / 'spark_driver_stderr.txt')!r}).read_text().splitlines()\n"
        "for line in lines[:-1]:\n    print(line, file=sys.stderr, flush=True)\n"
        "print(' '.join(sys.argv[1:]), file=sys.stderr)\n"
        "print(lines[-1])\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(spark_submit, "spark_submit_binary", lambda: str(fake))
    job = checkpoint_job("/t", 29)
    heard: list[str] = []
    out = spark_submit.run_spark_submit(job, progress=heard.append)
    assert json.loads(out.strip().splitlines()[-1])["num_actions"] == 31
    assert any(h.startswith("spark: stage 2 (collect at checkpoint.py:3) finished in 1.0 s (2 stage(s) done, ") for h in heard), heard
    assert capsys.readouterr().err == ""  # quiet: nothing but progress, which went to the sink
    spark_submit.run_spark_submit(job, progress=heard.append, verbose=True)
    err = capsys.readouterr().err
    assert "INFO DAGScheduler" in err and "log4j2.configurationFile" not in err  # verbose: Spark's own configuration


def test_a_submission_leaves_nothing_in_the_temporary_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each process that submitted a job (every Airflow task, every command) left a copy of the
    log4j2 configuration in the temporary directory for good, and a run killed while Spark ran
    left its credentials file behind, even one with no secret in it. The configuration now ships
    with the package; the credentials file exists only when there is a secret, only while the job
    runs."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.setattr(spark_progress, "_FILE", None)
    fake = tmp_path / "spark-submit"
    fake.write_text(f"#!{sys.executable}\nimport json, os\nprint(json.dumps({{'in_tmp': sorted(os.listdir({str(temp)!r}))}}))\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(spark_submit, "spark_submit_binary", lambda: str(fake))
    job = checkpoint_job("/t", 29)
    during = json.loads(spark_submit.run_spark_submit(job).strip().splitlines()[-1])["in_tmp"]
    assert during == []  # nothing secret, so nothing a kill could strand
    secret = replace(job, credentials={"storage_options": {"key": "AKIA-test", "secret": "not-a-real-secret"}})
    during = json.loads(spark_submit.run_spark_submit(secret).strip().splitlines()[-1])["in_tmp"]
    assert len(during) == 1 and during[0].startswith("delta-maintenance-")  # the secret's file, while the job runs
    assert os.listdir(temp) == []
    path = quiet_spark_conf({})["spark.driver.extraJavaOptions"].split("file:", 1)[1]
    assert Path(path).parent == Path(spark_progress.__file__).parent and Path(path).read_text() == LOG4J2_PROPERTIES


def test_the_task_log_hears_from_a_silent_driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A driver that prints nothing for a while (the JVM starting) still gets a line in the task log."""
    fake = tmp_path / "spark-submit"
    fake.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(3)\nprint('{{\"version\": 1, \"existed\": true}}')\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("AIRFLOW_CONN_SPARK_DEFAULT", raising=False)
    monkeypatch.setattr(spark_hook, "Throttled", lambda emit: emit)
    hook = DeltaSparkSubmitHook(application_args=["--version", "1"], spark_binary=str(fake))
    hook.submit(str(tmp_path / "app.py"))
    out = capsys.readouterr().out
    assert out.count("spark: waiting for the first stage (0 stage(s) done,") >= 2, out
    assert hook.job_result == {"version": 1, "existed": True}
