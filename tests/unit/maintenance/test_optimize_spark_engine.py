"""OPTIMIZE's Spark engine without a JVM: the submission is replaced by what the job's driver does
(its executors' ``rewrite_bins`` over ``tasks.json``, the adds written to ``result.json``), so the
engine's side is tested here: the job spec, the tasks it hands over, and a result it does not trust
(missing, short, naming a file outside the table or a source) stops the run with nothing committed.
The real job on a local Spark is tests/spark/test_optimize_spark.py."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import deltalake
import pytest

from airflow_delta_maintenance.maintenance.errors import SparkJobError
from airflow_delta_maintenance.maintenance.operations.optimize import run_optimize
from airflow_delta_maintenance.maintenance.spark.optimize_engine import SparkOptimizeEngine
from airflow_delta_maintenance.maintenance.spark.submit import SparkJobSpec
from airflow_delta_maintenance.maintenance.table.maintained import open_table
from airflow_delta_maintenance.spark_jobs._bin_rewrite import rewrite_bins
from tests.unit.maintenance.test_optimize import make_table, rows


def fake_spark(store: Any, tamper: Callable[[list[Any]], Any] | None = None, jobs: list[SparkJobSpec] | None = None) -> Callable[[SparkJobSpec], Mapping[str, Any]]:
    """What spark_jobs/optimize.py's driver does, without Spark: every task through the executors'
    function, the adds (tampered with, if asked) created in the run's directory."""

    def submit(job: SparkJobSpec) -> Mapping[str, Any]:
        if jobs is not None:
            jobs.append(job)
        run_dir = job.application_args[job.application_args.index("--run-dir") + 1]
        tasks = json.loads(store.read(f"{run_dir}/tasks.json"))["tasks"]
        adds = [a for _, a in rewrite_bins(job.application_args[1], "{}", enumerate(tasks))]
        result = tamper(adds) if tamper else {"adds": adds}
        if result is not None:
            store.put_if_absent(f"{run_dir}/result.json", json.dumps(result).encode())
        return {"version": None, "bins": len(tasks)}

    return submit


def test_the_spark_engine_commits_the_jobs_adds_through_the_one_orchestration(tmp_path: Path) -> None:
    path = make_table(tmp_path)
    before = rows(path)
    jobs: list[SparkJobSpec] = []
    with open_table(path, coordinator="auto") as table:
        engine = SparkOptimizeEngine(table.store, table.uri, table.storage_options, fake_spark(table.store, jobs=jobs), conf={"spark.x": 1})
        result = run_optimize(table, engine=engine)
    assert result.engine == "spark" and result.commits == [6] and result.files_removed == 6 and result.files_added == 2
    assert rows(path) == before and len(deltalake.DeltaTable(path).file_uris()) == 2
    (job,) = jobs
    assert job.application.endswith("spark_jobs/optimize.py") and job.conf["spark.x"] == "1"
    assert not list((Path(path) / "_delta_log" / "_spark_staging").glob("*")), "the run's directory is removed"


@pytest.mark.parametrize(("why", "tamper", "message"), [
    ("no result", lambda adds: None, "without a readable result.json"),
    ("one add short", lambda adds: {"adds": adds[:-1]}, "expected 2 add"),
    ("outside the table", lambda adds: {"adds": [{**adds[0], "path": "../../etc/x.parquet"}, adds[1]]}, "add #0"),
    ("a source named", lambda adds: {"adds": [adds[0], {**adds[1], "path": adds[0]["path"]}]}, "twice or as one of its sources"),
    ("data change", lambda adds: {"adds": [{**adds[0], "dataChange": True}, adds[1]]}, "not the file its bin asked for"),
    ("another partition", lambda adds: {"adds": [{**adds[0], "partitionValues": {"region": "xx"}}, adds[1]]}, "not the file its bin asked for"),
])
def test_a_result_the_engine_cannot_trust_commits_nothing(tmp_path: Path, why: str, tamper: Callable[[list[Any]], Any], message: str) -> None:
    path = make_table(tmp_path)
    with open_table(path, coordinator="auto") as table:
        engine = SparkOptimizeEngine(table.store, table.uri, table.storage_options, fake_spark(table.store, tamper))
        with pytest.raises(SparkJobError, match=message):
            run_optimize(table, engine=engine)
    assert deltalake.DeltaTable(path).version() == 5, why
    assert not list((Path(path) / "_delta_log" / "_spark_staging").glob("*"))


def test_a_failed_job_commits_nothing_and_removes_its_directory(tmp_path: Path) -> None:
    path = make_table(tmp_path)

    def failing(job: SparkJobSpec) -> None:
        raise SparkJobError("Spark job delta-optimize exited with 1: lost executor")

    with open_table(path, coordinator="auto") as table:
        with pytest.raises(SparkJobError, match="lost executor"):
            run_optimize(table, engine=SparkOptimizeEngine(table.store, table.uri, None, failing))
    assert deltalake.DeltaTable(path).version() == 5
    assert not list((Path(path) / "_delta_log" / "_spark_staging").glob("*"))
