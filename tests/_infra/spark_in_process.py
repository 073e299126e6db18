"""A Spark job run in this process, in the suite's shared session, instead of a ``spark-submit``.

A ``spark-submit`` costs a JVM start and a Python driver start (25-40 s on a busy 2-core box); a
test whose point is the job's logic (what it writes, what it refuses) runs the job's ``main`` here:
the job finds the running session and leaves it running (``spark_jobs._common._OWNED_SESSIONS``).
The submission path itself (the launcher, a killed driver, the credentials file, the exit code
and the one line the launcher keeps) stays proven by the tests that still call ``spark-submit``.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from airflow_delta_maintenance.maintenance.errors import SparkJobError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_delta_maintenance.maintenance.spark.submit import SparkJobSpec

__all__ = ["run_in_session"]


def run_in_session(spark: SparkSession, spec: SparkJobSpec) -> str:
    """Run ``spec``'s job with its arguments, driver environment and SQL settings in ``spark``'s
    process; returns what it printed. A non-zero exit raises ``SparkJobError`` with the job's
    failure line, as ``run_spark_submit`` does."""
    assert not spec.credentials, "a job with a credentials file goes through spark-submit"
    job = importlib.import_module(f"airflow_delta_maintenance.spark_jobs.{Path(spec.application).stem}")
    out, err = io.StringIO(), io.StringIO()
    previous = {key: spark.conf.get(key, None) for key in spec.conf}
    try:
        for key, value in spec.conf.items():
            spark.conf.set(key, value)
        with pytest.MonkeyPatch.context() as env, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            for key, value in spec.env_vars.items():
                env.setenv(key, value)
            code = job.main(list(spec.application_args))
    finally:
        for key, old in previous.items():
            spark.conf.unset(key) if old is None else spark.conf.set(key, old)
    sys.stderr.write(err.getvalue())
    if code != 0:
        failed = "\n".join(line for line in err.getvalue().splitlines() if "delta-maintenance spark job failed" in line)
        raise SparkJobError(f"Spark job {spec.name} (in process) exited with {code}: {failed or err.getvalue()[-2000:]}")
    assert not spark.sparkContext._jsc.sc().isStopped(), "the job stopped the session it found"
    return out.getvalue()
