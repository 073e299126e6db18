"""The spark-submit command for every master kind, as the Spark provider's own hook builds it from
what a user configures (the connection, operator arguments, CLI flags) — no cluster needed.

What the command must say: where the driver listens (loopback by default on this machine, never a
wildcard), whether the UI runs, what is shipped (the package's modules zipped for --py-files, jars,
packages), where the driver's environment goes (YARN/k8s conf, without secrets), and the k8s image
and namespace. The standalone cluster test runs the same path for real."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from airflow.providers.apache.spark.hooks import spark_submit as upstream
from airflow.providers.common.compat.sdk import AirflowException

from airflow_delta_maintenance.hooks.spark import DeltaSparkSubmitHook
from airflow_delta_maintenance.maintenance.spark import packaging
from airflow_delta_maintenance.maintenance.spark.credentials import CREDENTIALS_FILE_ENV, STORAGE_OPTIONS_ENV
from airflow_delta_maintenance.maintenance.spark.jobs import checkpoint_job, compaction_job
from airflow_delta_maintenance.maintenance.spark.packaging import package_zip
from airflow_delta_maintenance.maintenance.spark.settings import SparkSettings
from airflow_delta_maintenance.maintenance.spark.submit import plan_submission

SECRET = "fake-secret-access-key-value"
OPTIONS = {"key": "AKIAFAKEKEYID0000", "secret": SECRET, "client_kwargs": {"endpoint_url": "https://s3.example", "region_name": "eu-west-1"}}


@pytest.fixture(autouse=True)
def zip_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DELTA_MAINTENANCE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(upstream, "kube_client", object(), raising=False)  # the provider wants it for k8s masters
    return tmp_path / "cache"


def build(extra: dict[str, Any], *, host: str, port: int | None = None, settings: dict[str, Any] | None = None,
          monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], dict[str, str], DeltaSparkSubmitHook]:
    """(argv, --conf as a dict, hook) for the checkpoint job through connection ``spark_target``."""
    conn: dict[str, Any] = {"conn_type": "spark", "host": host, "extra": extra}
    if port:
        conn["port"] = port
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_TARGET", json.dumps(conn))
    job = checkpoint_job("s3://lake/orders", 10, OPTIONS)
    hook = DeltaSparkSubmitHook(conn_id="spark_target", name=job.name, settings=settings, **job.hook_kwargs())
    cmd = hook._build_spark_submit_command(job.application)
    conf = dict(cmd[i + 1].split("=", 1) for i, arg in enumerate(cmd) if arg == "--conf")
    return cmd, conf, hook


def option(cmd: list[str], flag: str) -> str | None:
    return cmd[cmd.index(flag) + 1] if flag in cmd else None


def test_standalone_on_loopback_needs_only_the_master(monkeypatch: pytest.MonkeyPatch) -> None:
    cmd, conf, hook = build({}, host="spark://127.0.0.1", port=7077, monkeypatch=monkeypatch)
    try:
        assert option(cmd, "--master") == "spark://127.0.0.1:7077" and option(cmd, "--deploy-mode") == "client"
        assert conf["spark.driver.host"] == conf["spark.driver.bindAddress"] == "127.0.0.1" and conf["spark.ui.enabled"] == "false"
        assert hook.process_env["SPARK_LOCAL_IP"] == "127.0.0.1"  # where a UI would bind, were it on
        # spark-submit of the installed pyspark, by path; this interpreter for the driver and the (local) executors
        assert cmd[0].endswith("/pyspark/bin/spark-submit") and os.path.isabs(cmd[0])
        assert conf["spark.pyspark.driver.python"] == conf["spark.pyspark.python"] == sys.executable
        shipped = option(cmd, "--py-files")
        assert shipped is not None and Path(shipped).is_file()
        assert "0.0.0.0" not in " ".join(cmd) and SECRET not in " ".join(cmd)
        assert hook.process_env[STORAGE_OPTIONS_ENV] and hook.process_env[CREDENTIALS_FILE_ENV]  # the driver is here
        assert "--files" not in cmd
    finally:
        hook.remove_credentials()


def test_the_shipped_zip_holds_what_the_jobs_import_and_is_cached_by_content(zip_cache: Path, tmp_path: Path) -> None:
    path = package_zip()
    assert package_zip() == path and len(list(zip_cache.iterdir())) == 1  # built once per content
    names = zipfile.ZipFile(path).namelist()
    assert "airflow_delta_maintenance/__init__.py" in names
    assert "airflow_delta_maintenance/spark_jobs/checkpoint.py" in names and "airflow_delta_maintenance/deltalog/replay/snapshot.py" in names
    assert not [n for n in names if n.split("/")[1] not in ("__init__.py", "deltalog", "spark_jobs")], names  # no Airflow layer
    assert oct(zip_cache.stat().st_mode & 0o777) == "0o700"
    # executors import the package from the zip alone (the installed copy out of the way)
    probe = "import sys; sys.path.insert(0, sys.argv[1]); import airflow_delta_maintenance.deltalog.log_segment.segment as m; print(m.__file__)"
    out = subprocess.run([sys.executable, "-c", probe, path], capture_output=True, text=True, cwd=tmp_path, check=True).stdout
    assert out.startswith(path), out
    # another content, another name
    copy = tmp_path / "pkg"
    files = [(name, p) for name, p in packaging._shipped_files()]
    changed = copy / "deltalog_extra.py"
    copy.mkdir()
    changed.write_text("X = 1\n")
    with mock.patch.object(packaging, "_shipped_files", return_value=[*files, ("airflow_delta_maintenance/deltalog/extra.py", changed)]):
        other = package_zip()
    assert other != path and len(list(zip_cache.glob("*.zip"))) == 2


def test_a_remote_standalone_master_uses_the_connection_network(monkeypatch: pytest.MonkeyPatch) -> None:
    cmd, conf, hook = build({}, host="spark://10.1.2.3", port=7077, monkeypatch=monkeypatch)
    hook.remove_credentials()
    # not forced onto loopback (executors elsewhere could not reach it), and not the cluster's Python
    assert "spark.driver.host" not in conf and "spark.driver.bindAddress" not in conf and "spark.pyspark.python" not in conf
    assert conf["spark.ui.enabled"] == "false" and "SPARK_LOCAL_IP" not in hook.process_env
    extra = {"driver-host": "10.1.2.4", "driver-port": "40000", "block-manager-port": 40001, "ui-enabled": "true", "ui-port": 4050,
             "python": "/opt/python/bin/python3", "packages": "org.apache.hadoop:hadoop-aws:3.5.0", "repositories": "https://repo.example/maven"}
    cmd, conf, hook = build(extra, host="spark://10.1.2.3", port=7077, monkeypatch=monkeypatch)
    hook.remove_credentials()
    assert conf["spark.driver.host"] == "10.1.2.4" and "spark.driver.bindAddress" not in conf  # Spark binds the host's address
    assert (conf["spark.driver.port"], conf["spark.driver.blockManager.port"], conf["spark.ui.port"]) == ("40000", "40001", "4050")
    assert conf["spark.ui.enabled"] == "true" and hook.process_env["SPARK_LOCAL_IP"] == "10.1.2.4"
    assert conf["spark.pyspark.python"] == "/opt/python/bin/python3" and conf["spark.pyspark.driver.python"] == sys.executable
    assert option(cmd, "--packages") == extra["packages"] and option(cmd, "--repositories") == extra["repositories"]
    # operator arguments override the connection
    cmd, conf, hook = build(extra, host="spark://10.1.2.3", port=7077, settings={"driver_host": "10.1.2.5", "ui_enabled": False,
                                                                                   "ship_package": False}, monkeypatch=monkeypatch)
    hook.remove_credentials()
    assert conf["spark.driver.host"] == "10.1.2.5" and conf["spark.ui.enabled"] == "false" and "--py-files" not in cmd


def test_yarn_cluster_mode_ships_the_package_and_keeps_secrets_off_argv(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = {"deploy-mode": "cluster", "queue": "maintenance", "jars": "/opt/jars/hadoop-aws.jar", "python": "./env/bin/python",
             "py-files": "/opt/extra.zip", "conf": {"spark.executor.memory": "2g"}}
    cmd, conf, hook = build(extra, host="yarn", monkeypatch=monkeypatch)
    try:
        line = " ".join(cmd)
        assert option(cmd, "--master") == "yarn" and option(cmd, "--deploy-mode") == "cluster" and option(cmd, "--queue") == "maintenance"
        shipped = option(cmd, "--py-files")
        assert shipped is not None and shipped.split(",")[0].endswith(".zip") and shipped.split(",")[1] == "/opt/extra.zip"
        assert option(cmd, "--jars") == "/opt/jars/hadoop-aws.jar" and conf["spark.executor.memory"] == "2g"
        # the driver runs in the cluster: its environment as YARN conf, its credentials as a shipped file
        assert json.loads(conf["spark.yarn.appMasterEnv." + STORAGE_OPTIONS_ENV]) == {"client_kwargs": OPTIONS["client_kwargs"]}
        assert option(cmd, "--files") == conf["spark.yarn.appMasterEnv." + CREDENTIALS_FILE_ENV] == hook._credentials_file
        assert conf["spark.pyspark.python"] == conf["spark.pyspark.driver.python"] == "./env/bin/python"
        assert not [k for k in conf if k.startswith("spark.driver.host") or k.startswith("spark.driver.bindAddress")]
        assert SECRET not in line and OPTIONS["key"] not in line and sys.executable not in line
        assert "SPARK_LOCAL_IP" not in hook.process_env and STORAGE_OPTIONS_ENV not in hook.process_env
    finally:
        hook.remove_credentials()


def test_yarn_client_mode_keeps_the_driver_environment_in_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    cmd, conf, hook = build({"driver-host": "edge-1.example"}, host="yarn", monkeypatch=monkeypatch)
    hook.remove_credentials()
    assert option(cmd, "--deploy-mode") == "client" and conf["spark.driver.host"] == "edge-1.example"
    assert not [k for k in conf if k.startswith("spark.yarn.appMasterEnv.")]  # nothing rendered into argv
    assert hook.process_env[STORAGE_OPTIONS_ENV] and "--files" not in cmd


def test_kubernetes_takes_image_namespace_and_account_from_the_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = {"deploy-mode": "cluster", "container-image": "registry.example/delta-maintenance:1", "namespace": "lake",
             "service-account": "spark", "file-upload-path": "s3a://lake/spark-uploads"}
    cmd, conf, hook = build(extra, host="k8s://https://10.0.0.1:6443", monkeypatch=monkeypatch)
    try:
        assert option(cmd, "--master") == "k8s://https://10.0.0.1:6443" and option(cmd, "--deploy-mode") == "cluster"
        assert conf["spark.kubernetes.container.image"] == extra["container-image"] and conf["spark.kubernetes.namespace"] == "lake"
        assert conf["spark.kubernetes.authenticate.driver.serviceAccountName"] == "spark"
        assert conf["spark.kubernetes.file.upload.path"] == "s3a://lake/spark-uploads"
        assert conf["spark.kubernetes.driverEnv." + CREDENTIALS_FILE_ENV] == option(cmd, "--files")
        assert option(cmd, "--py-files") is not None
        # Kubernetes refuses spark.driver.host / bindAddress in cluster mode: none is set
        assert "spark.driver.host" not in conf and "spark.driver.bindAddress" not in conf
        assert SECRET not in " ".join(cmd)
    finally:
        hook.remove_credentials()
    with pytest.raises(AirflowException, match="container-image"):
        build({"deploy-mode": "cluster"}, host="k8s://https://10.0.0.1:6443", monkeypatch=monkeypatch)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (SparkSettings(master="yarn", deploy_mode="cluster", driver_host="10.0.0.2"), "client deploy mode only"),
        (SparkSettings(master="spark://127.0.0.1:7077", deploy_mode="cluster"), "cannot run a Python driver"),
    ],
)
def test_settings_that_cannot_work_are_refused(settings: SparkSettings, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        plan_submission(settings, compaction_job("s3://lake/orders", 1, 10))


@pytest.mark.parametrize(("bad", "message"), [({"ui-port": "http"}, "port number"), ({"ui-enabled": "maybe"}, "true or false"),
                                              ({"conf": "[1]"}, "object of Spark conf")])
def test_bad_connection_settings_fail_loudly(bad: dict[str, Any], message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(AirflowException, match=message):
        build(bad, host="spark://127.0.0.1", port=7077, monkeypatch=monkeypatch)


def test_cli_flags_reach_the_command() -> None:
    from airflow_delta_maintenance.cli import build_parser
    from airflow_delta_maintenance.cli.maintain_cmd import _spark_settings

    args = build_parser().parse_args(["checkpoint", "s3://lake/orders", "--engine", "spark", "--master", "k8s://https://10.0.0.1:6443",
                                      "--deploy-mode", "cluster", "--container-image", "img:1", "--namespace", "lake", "--jars", "a.jar",
                                      "--packages", "g:a:1", "--py-files", "extra.zip", "--spark-ui-port", "4041"])
    settings = _spark_settings(args)
    job = checkpoint_job("s3://lake/orders", 3)
    cmd = plan_submission(settings, job).command(job)
    conf = dict(cmd[i + 1].split("=", 1) for i, arg in enumerate(cmd) if arg == "--conf")
    assert option(cmd, "--deploy-mode") == "cluster" and option(cmd, "--jars") == "a.jar" and option(cmd, "--packages") == "g:a:1"
    assert (option(cmd, "--py-files") or "").endswith(",extra.zip")
    assert conf["spark.kubernetes.container.image"] == "img:1" and conf["spark.kubernetes.namespace"] == "lake"
    assert conf["spark.ui.enabled"] == "true" and conf["spark.ui.port"] == "4041"
    local = build_parser().parse_args(["checkpoint", "/t", "--engine", "spark"])
    cmd = plan_submission(_spark_settings(local), job).command(job)
    assert "--py-files" not in cmd and "spark.driver.bindAddress=127.0.0.1" in cmd  # local: nothing to ship, loopback


def test_spark_compaction_operator_submits_one_job_per_window_and_verifies(coordinated_table: tuple[str, str]) -> None:
    """engine="spark" keeps the use case's gates and windows; a job that exits 0 without writing fails."""
    from airflow_delta_maintenance.deltalog.log_compaction.windows import write_compaction
    from airflow_delta_maintenance.deltalog.storage import open_table_storage
    from airflow_delta_maintenance.operators.log_compaction import DeltaLogCompactionOperator
    from airflow_delta_maintenance.operators.publish import DeltaPublishCommitsOperator

    spec, uri = coordinated_table
    DeltaPublishCommitsOperator(task_id="p", table_uri=uri, coordinator_spec=spec).execute({})
    submitted: list[list[str]] = []

    def fake_submit(self: DeltaSparkSubmitHook, application: str = "", **kwargs: Any) -> None:
        args = self._application_args
        submitted.append(args)
        assert application.endswith("spark_jobs/log_compaction.py")
        start, end = int(args[args.index("--start") + 1]), int(args[args.index("--end") + 1])
        write_compaction(open_table_storage(uri), start, end)

    op = DeltaLogCompactionOperator(task_id="k", table_uri=uri, coordinator_spec=spec, interval=5, engine="spark")
    with mock.patch.object(DeltaSparkSubmitHook, "submit", fake_submit):
        result = op.execute({})
    assert (result["from_version"], result["to_version"], result["count"]) == (1, 10, 2)
    assert [a[a.index("--start") + 1 :][::2] for a in submitted] == [["1", "5"], ["6", "10"]]
    with mock.patch.object(DeltaSparkSubmitHook, "submit"):  # exits 0, writes nothing
        op2 = DeltaLogCompactionOperator(task_id="k", table_uri=uri, coordinator_spec=spec, interval=3, engine="spark")
        with pytest.raises(AirflowException, match=re.escape("compacted.json is missing")):
            op2.execute({})
