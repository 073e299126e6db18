"""Local Spark for the tests (a pytest plugin, see ``tests/conftest.py``).

- ``spark``: a session-scoped pyspark 4.2.0 ``local[2]`` with delta-spark 4.4.0 and hadoop-aws 3.5.0
  from ``.cache/jars/delta-spark`` (``make jars``), everything bound to 127.0.0.1, no UI;
  ``start_local_spark()`` starts the same session outside pytest.
- ``spark_s3a``: the same session with s3a pointed at the session's moto server.
- ``spark_submit_env()``: the environment for running a job with ``spark-submit`` (the CLI's
  Spark engine in the tests) in local mode.
- ``spark_standalone``: a standalone master and one worker on 127.0.0.1, stopped by PID.

pyspark is imported inside the fixtures only, so collecting the tests never starts a JVM.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .jars import delta_spark_jars
from .servers import FAKE_AWS, REAL_AWS_SOURCES, fake_aws_env, record_startup, spawn, stop

# py4j logs "Closing down clientserver connection" from __del__ at interpreter exit, after
# pytest has closed the stream: a "--- Logging error ---" trace that is not an error.
logging.getLogger("py4j").setLevel(logging.WARNING)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MASTER = "local[2]"  # the machines running the suite have 2 cores

# Spark settings shared by the session fixture and spark-submit runs (without the jars).
LOCAL_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    # Delta replays the log of a tiny test table with 50 tasks by default
    "spark.databricks.delta.snapshotPartitions": "2",
    # and delta-spark's VACUUM lists the table in 10,000 tasks (Spark's listing parallelism):
    # about a minute per VACUUM on 2 cores, for a table of a few dozen files
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # a failed checkpoint must fail the test, not be logged and ignored
    "spark.databricks.delta.checkpoint.exceptionThrowing.enabled": "true",
}


def s3a_conf(endpoint: str) -> dict[str, str]:
    """Hadoop settings for s3a against a local S3 (moto): path-style, plain HTTP, fake credentials.

    Keys are Hadoop's; prefix them with ``spark.hadoop.`` for Spark conf.
    """
    return {
        "fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "fs.s3a.endpoint": endpoint,
        "fs.s3a.endpoint.region": "us-east-1",
        "fs.s3a.path.style.access": "true",
        "fs.s3a.connection.ssl.enabled": "false",
        # the credentials come from this configuration, never from the environment or a profile
        "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        "fs.s3a.access.key": FAKE_AWS["AWS_ACCESS_KEY_ID"],
        "fs.s3a.secret.key": FAKE_AWS["AWS_SECRET_ACCESS_KEY"],
        "fs.s3a.bucket.probe": "0",
    }


def configure_s3a(session: SparkSession, endpoint: str) -> None:
    """Point s3a of a running session at ``endpoint`` (applies to s3a filesystems created afterwards)."""
    conf = session.sparkContext._jsc.hadoopConfiguration()
    for key, value in s3a_conf(endpoint).items():
        conf.set(key, value)


def spark_submit_env() -> dict[str, str]:
    """Environment for ``spark-submit`` from the test venv: loopback only, fake AWS credentials,
    this interpreter for the Python workers and the venv's ``spark-submit`` first on ``PATH``."""
    return {
        **fake_aws_env(),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def start_local_spark(work: Path, extra_conf: Mapping[str, str] | None = None) -> SparkSession:
    """A ``local[2]`` pyspark 4.2.0 with delta-spark 4.4.0 and hadoop-aws 3.5.0, its scratch space
    under ``work``: the ``spark`` fixture's session, also for scripts (``python -m tests._infra...``).
    The caller stops it. At most one per process (``getOrCreate``)."""
    jars = delta_spark_jars()  # before the JVM: a clear error when `make jars` was not run
    from pyspark.sql import SparkSession

    (work / "local").mkdir(parents=True, exist_ok=True)
    conf = {
        **LOCAL_CONF,
        "spark.jars": ",".join(jars),
        "spark.sql.warehouse.dir": str(work / "warehouse"),
        "spark.local.dir": str(work / "local"),
        "spark.driver.extraJavaOptions": f"-Djava.io.tmpdir={work / 'local'} -Djava.net.preferIPv4Stack=true",
        **(extra_conf or {}),
    }
    builder = SparkSession.builder.master(MASTER).appName("airflow-delta-maintenance-tests")
    for key, value in conf.items():
        builder = builder.config(key, value)
    # The JVM keeps the environment it is launched with: loopback only, and fake AWS credentials
    # (delta-spark's DynamoDB coordinator, AWS SDK v1, reads them from there). Only the launch
    # sees them, so the caller's own environment does not depend on whether Spark ran first.
    with pytest.MonkeyPatch.context() as env:
        for key in REAL_AWS_SOURCES:
            env.delenv(key, raising=False)
        for key, value in {**fake_aws_env({}), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}.items():
            env.setenv(key, value)
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Iterator[SparkSession]:
    """``local[2]`` pyspark 4.2.0 with delta-spark 4.4.0 and hadoop-aws 3.5.0, stopped at session end."""
    started = time.monotonic()
    session = start_local_spark(tmp_path_factory.mktemp("spark"))
    seconds = time.monotonic() - started
    jars = len(delta_spark_jars())
    record_startup(pytestconfig, "spark", f"pyspark {session.version} {MASTER} with {jars} jars from .cache/jars/delta-spark, started in {seconds:.1f}s")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def spark_s3a(spark: SparkSession, s3_endpoint: str) -> SparkSession:
    """The session's Spark with s3a pointed at the session's moto S3 (``s3a://<bucket>/...``)."""
    configure_s3a(spark, s3_endpoint)
    return spark


# --- a Spark standalone cluster on 127.0.0.1 ----------------------------------------------------

MASTER_URL = re.compile(rb"Starting Spark master at (spark://127\.0\.0\.1:\d+)")
WORKER_REGISTERED = re.compile(rb"Successfully registered with master")


@dataclass(frozen=True)
class StandaloneCluster:
    master_url: str  # spark://127.0.0.1:<port>
    master_pid: int
    worker_pid: int
    logs: Path


def _spark_class() -> Path:
    """pyspark's own ``bin/spark-class`` (its SPARK_HOME is the package: no PATH needed)."""
    spec = importlib.util.find_spec("pyspark")
    assert spec is not None and spec.origin, "pyspark is not installed"
    return Path(spec.origin).parent / "bin" / "spark-class"


def _wait_for(pattern: re.Pattern[bytes], proc: subprocess.Popen[bytes], log: Path, timeout: float) -> re.Match[bytes]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        match = pattern.search(log.read_bytes())
        if match:
            return match
        if proc.poll() is not None:
            raise RuntimeError(f"{log.name}: exited with {proc.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)
    raise RuntimeError(f"{log.name}: no {pattern.pattern!r} within {timeout}s:\n{log.read_text(errors='replace')[-3000:]}")


@pytest.fixture(scope="session")
def spark_standalone(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Iterator[StandaloneCluster]:
    """A Spark standalone master and one worker (2 cores) from the pyspark package, on 127.0.0.1
    only (RPC, web UIs, executors; no REST server), stopped by PID. The cluster's environment holds
    no AWS credentials: whatever a job needs must come with its submission."""
    work = tmp_path_factory.mktemp("spark-standalone")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k not in ("SPARK_HOME", "PYSPARK_PYTHON")}
    env.update(
        SPARK_LOCAL_IP="127.0.0.1",  # every web UI binds where this says (else on every interface)
        SPARK_LOG_DIR=str(work / "logs"),
        SPARK_DAEMON_MEMORY="256m",
        SPARK_DAEMON_JAVA_OPTS="-Djava.net.preferIPv4Stack=true -Dspark.master.rest.enabled=false -XX:+UseSerialGC -XX:TieredStopAtLevel=1",
    )
    spark_class = str(_spark_class())
    started = time.monotonic()
    master_log = work / "master.log"
    master = spawn([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", "0", "--webui-port", "0"],
                   master_log, env, work)
    try:
        url = _wait_for(MASTER_URL, master, master_log, 120).group(1).decode()
        worker_log = work / "worker.log"
        worker = spawn([spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", "0", "--webui-port", "0",
                        "--cores", "2", "--memory", "2g", "--work-dir", str(work / "worker"), url], worker_log, env, work)
        try:
            _wait_for(WORKER_REGISTERED, worker, worker_log, 120)
            seconds = time.monotonic() - started
            record_startup(pytestconfig, "spark_standalone", f"Spark standalone master {url} (pid {master.pid}) and a 2-core worker (pid {worker.pid}) "
                           f"from pyspark's spark-class, started in {seconds:.1f}s")
            yield StandaloneCluster(url, master.pid, worker.pid, work)
        finally:
            stop(worker)
    finally:
        stop(master)
