"""OPTIMIZE's Spark engine as users run it: ``delta-maintenance optimize --engine spark`` on a
``local[2]`` master. Zoo tables written by delta-spark 4.4 and the deltalake wheel: every version
still reads as recorded in both, the new version reads as the one before it, the commit's counts
are the plan's, and the files are the worker engine's (one result, two engines). A SIGKILL of the
run (the command and its Spark job) at random moments leaves nothing visible, and a re-run converges."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_delta_maintenance.maintenance.operations.optimize import run_optimize
from airflow_delta_maintenance.maintenance.table.maintained import open_table
from tests._infra.table_zoo import ZooTable
from tests._infra.zoo_oracle import assert_versions_unchanged
from tests._infra.zoo_tier import zoo_tables
from tests.spark.test_cluster import SMALL_JOB_CONF
from tests.spark.test_optimize_zoo import _commit, assert_optimized

pytestmark = [pytest.mark.spark, pytest.mark.interop, pytest.mark.timeout(1800)]

CLI = str(Path(sys.executable).with_name("delta-maintenance"))
SPARK = ["--engine", "spark", "--master", "local[2]", *(f"--spark-conf={k}={v}" for k, v in SMALL_JOB_CONF.items())]
# deletion vectors, column mapping by id (field ids, random prefixes), special partition values
# written by each engine, row tracking (row ids kept), and many small files in partitions
TABLES = ["spark_deletion_vectors", "spark_column_mapping_id", "spark_special_partitions", "wheel_special_partitions",
          "spark_row_tracking", "wheel_many_small_files_partitioned"]


def optimize_cli(path: Path, *args: str, timeout: float = 900) -> dict[str, Any]:
    out = subprocess.run([CLI, "optimize", str(path), "--json", *args], capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-3000:]
    record: dict[str, Any] = json.loads(out.stdout)
    return record


def _files(path: Path, version: int) -> list[tuple[Any, ...]]:
    """What a commit adds, without what differs by run (path, time): partition, size, stats, row ids."""
    return sorted((json.dumps(a["add"].get("partitionValues"), sort_keys=True), a["add"]["size"], a["add"]["stats"],
                   a["add"].get("baseRowId"), a["add"].get("defaultRowCommitVersion")) for a in _commit(path, version) if "add" in a)


@pytest.mark.parametrize("name", zoo_tables(TABLES, ["spark_deletion_vectors", "wheel_special_partitions"]))
def test_the_spark_engine_keeps_every_version_and_writes_the_worker_engines_files(name: str, zoo_copy: Any, spark: Any) -> None:
    t: ZooTable = zoo_copy(name)
    before = t.manifest.latest_version
    details = optimize_cli(t.path, *SPARK)  # the record: the summary's keys and OPTIMIZE's details
    if not details["bins"]:
        pytest.skip(f"{name}: nothing to compact ({details.get('reason')})")
    assert details["engine"] == "spark" and details["bins_committed"] == details["bins"], details
    commits = list(range(details["first_commit"], details["last_commit"] + 1))
    assert_optimized(t, name, before, commits, details["plan"]["files_in"], details["bins"], spark)
    assert not any((t.path / "_delta_log" / "_spark_staging").glob("optimize-*")), "the run's directory is removed"

    worker = zoo_copy(name)
    result = run_optimize(open_table(str(worker.path), coordinator="auto"))
    assert result.commits == commits and _files(worker.path, commits[-1]) == _files(t.path, commits[-1])


def _referenced(path: Path) -> set[str]:
    names = set()
    for f in sorted((path / "_delta_log").glob("*.json")):
        for line in f.read_text().splitlines():
            a = json.loads(line) if line.strip() else {}
            for kind in ("add", "remove"):
                if kind in a:
                    names.add(a[kind]["path"])
    return names


@pytest.mark.parametrize("seed", zoo_tables([3, 7], [3]))
def test_a_killed_spark_run_leaves_nothing_visible_and_a_rerun_converges(seed: int, zoo_copy: Any, spark: Any) -> None:
    rng = random.Random(seed)
    t: ZooTable = zoo_copy("wheel_many_small_files_partitioned")
    before = t.manifest.latest_version
    data_before = {p for p in t.path.rglob("*.parquet") if "_delta_log" not in p.parts}
    proc = subprocess.Popen([CLI, "optimize", str(t.path), *SPARK], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not any((t.path / "_delta_log" / "_spark_staging").glob("optimize-*")) and proc.poll() is None:
            assert time.monotonic() < deadline, "the run never handed its bins to Spark"
            time.sleep(0.1)
        time.sleep(rng.uniform(0, 12))  # before the job starts, while its tasks write, or as it collects
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the command and its spark-submit and JVM, as a lost node
        proc.wait()
    if proc.returncode == 0:
        pytest.skip(f"seed {seed}: the run finished before the kill")
    assert not (t.path / "_delta_log" / f"{before + 1:020d}.json").exists(), "nothing is committed by a killed run"
    # every version in the wheel now; in delta-spark too after the re-run (assert_optimized), which
    # only adds a commit: a version the killed run damaged would read differently there
    assert_versions_unchanged(t.path, t.manifest, keys=("wheel",))
    written = {p for p in t.path.rglob("*.parquet") if "_delta_log" not in p.parts} - data_before
    assert not {str(p.relative_to(t.path)) for p in written} & _referenced(t.path)

    # converges: the dead run's files stay unreferenced (VACUUM's). The re-run's Spark job runs in
    # this suite's session (the command's spark-submit path is the test above's)
    from airflow_delta_maintenance.maintenance.spark.optimize_engine import SparkOptimizeEngine
    from airflow_delta_maintenance.spark_jobs.optimize import main as optimize_job_main

    def submit(job: Any) -> dict[str, Any]:
        assert optimize_job_main(job.application_args) == 0
        return {}

    table = open_table(str(t.path), coordinator="auto")
    result = run_optimize(table, engine=SparkOptimizeEngine(table.store, table.uri, table.storage_options, submit))
    assert result.commits == [before + 1] and result.bins_committed == len(result.plan.bins), result
    assert_optimized(t, "wheel_many_small_files_partitioned", before, result.commits, result.plan.files_in, len(result.plan.bins), spark)


def test_the_spark_engine_races_writers_and_a_worker_optimize(spark: Any, tmp_path: Path, s3_bucket: tuple[str, dict[str, Any]],
                                                               dynamodb_endpoint: str, dynamodb_table_name: str) -> None:
    """The seeded race of ``tests/integration/test_optimize_concurrency.py`` with the Spark engine
    in the first OPTIMIZE thread (the worker engine in the second), on every store and coordinator
    the worker engine races on: a plain table the wheel writes on local disk and on moto S3, and
    tables of the embedded coordinator and of DynamoDB Local. The engine's job runs in this suite's
    Spark session (``spark_jobs/optimize.py``'s driver on local executors; no spark-submit per run,
    which would spend the race starting JVMs)."""
    from airflow_delta_maintenance.maintenance.spark.credentials import CREDENTIALS_FILE_ENV, credentials_file
    from airflow_delta_maintenance.maintenance.spark.optimize_engine import SparkOptimizeEngine
    from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator
    from airflow_delta_maintenance.spark_jobs.optimize import _main as optimize_job_main
    from tests.integration.test_optimize_concurrency import _race_on_coordinator, _race_with_the_wheel, wheel_s3_options

    jobs: list[int] = []

    def engine(table: Any) -> SparkOptimizeEngine:
        def submit(job: Any) -> dict[str, Any]:
            # as spark-submit hands them to the driver: the job's environment (no secrets) and its
            # credentials file (the S3 keys); only the first OPTIMIZE thread runs Spark jobs
            with credentials_file(job.credentials) as path, pytest.MonkeyPatch.context() as env:
                for k, v in {**job.env_vars, CREDENTIALS_FILE_ENV: path}.items():
                    env.setenv(k, v)
                assert optimize_job_main(job.application_args) == 0
            jobs.append(1)
            return {}

        return SparkOptimizeEngine(table.store, table.uri, table.storage_options, submit)

    _race_with_the_wheel(str(tmp_path / "plain"), 31, None, None, ops=8, engine=engine)
    ran = len(jobs)
    bucket, options = s3_bucket
    _race_with_the_wheel(f"s3://{bucket}/t", 29, wheel_s3_options(options), options, ops=4, engine=engine)
    assert len(jobs) > ran, "the Spark engine never ran a job on S3"
    for spec, name in ((f"local://{tmp_path}/c.db", "embedded"),
                       (f"dynamodb://{dynamodb_table_name}?region=us-east-1&endpoint={dynamodb_endpoint}", "dynamodb")):
        ran = len(jobs)
        client: Any = open_coordinator(spec + ("?create=true" if name == "embedded" else ""))
        if name == "dynamodb":
            client.create_dynamodb_table()
        try:
            _race_on_coordinator(spec, str(tmp_path / name), 47, client, ops=6, engine=engine)
        finally:
            client.close()
        assert len(jobs) > ran, f"the Spark engine never ran a job on the {name} coordinator"
