"""No secret on a command line or in a log: the real ``SparkSubmitHook`` builds the spark-submit
command for YARN and Kubernetes masters (which turn environment variables into ``--conf``
arguments) from what the checkpoint operator passes; the credentials reach the job only through
a private file, shipped with ``--files`` where the driver may run in the cluster."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import pytest
from airflow.providers.apache.spark.hooks import spark_submit as upstream

from airflow_delta_maintenance.hooks.spark import DeltaSparkSubmitHook
from airflow_delta_maintenance.maintenance.spark.credentials import CREDENTIALS_FILE_ENV, STORAGE_OPTIONS_ENV
from airflow_delta_maintenance.maintenance.spark.jobs import checkpoint_job

SECRETS = ("AKIAFAKEKEYID0000", "fake-secret-access-key-value", "FwoGZXIvYXdzEFAKESESSIONTOKEN")
OPTIONS = {"key": SECRETS[0], "secret": SECRETS[1], "token": SECRETS[2], "client_kwargs": {"endpoint_url": "http://127.0.0.1:9000", "region_name": "eu-west-1"}}


@pytest.fixture
def k8s_dependencies(monkeypatch: pytest.MonkeyPatch) -> None:
    """The provider refuses k8s masters without the cncf.kubernetes provider; building the command needs none of it."""
    monkeypatch.setattr(upstream, "kube_client", object(), raising=False)


@pytest.mark.parametrize(
    ("master", "env_conf"),
    [("yarn", "spark.yarn.appMasterEnv."), ("k8s://https://127.0.0.1:6443", "spark.kubernetes.driverEnv.")],
)
def test_no_secret_in_the_spark_submit_command_or_its_log(master: str, env_conf: str, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str], k8s_dependencies: None) -> None:
    extra = {"deploy-mode": "cluster", "container-image": "registry.example/spark-py:4.2.0"}
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLUSTER", json.dumps({"conn_type": "spark", "host": master, "extra": extra}))
    job = checkpoint_job("s3://lake/orders", 10, OPTIONS)
    assert not any(s in repr(job) for s in SECRETS)
    hook = DeltaSparkSubmitHook(conn_id="spark_cluster", name="delta-checkpoint", **job.hook_kwargs())
    try:
        cmd = hook._build_spark_submit_command(job.application)  # the provider's own argv
        line = " ".join(cmd)
        out = capsys.readouterr()
        for secret in SECRETS:
            assert secret not in line and secret not in out.out + out.err
        assert f"--master {master}" in line
        # the job finds its secrets through a path, and the file travels with the job
        conf = dict(cmd[i + 1].split("=", 1) for i, arg in enumerate(cmd) if arg == "--conf")
        path = conf[env_conf + CREDENTIALS_FILE_ENV]
        assert cmd[cmd.index("--files") + 1] == path
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and stat.S_IMODE(os.stat(Path(path).parent).st_mode) == 0o700
        assert json.loads(Path(path).read_text()) == {"storage_options": {"key": SECRETS[0], "secret": SECRETS[1], "token": SECRETS[2]}}
        assert json.loads(conf[env_conf + STORAGE_OPTIONS_ENV]) == {"client_kwargs": OPTIONS["client_kwargs"]}
        assert not any(k.startswith(env_conf + "AWS_") for k in conf), "no credential environment variables at all"
    finally:
        hook.remove_credentials()
    assert not Path(path).exists()


def test_without_a_connection_the_job_runs_locally_and_keeps_the_file_local(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("AIRFLOW_CONN_SPARK_DEFAULT", raising=False)
    job = checkpoint_job("s3://lake/orders", 10, OPTIONS)
    hook = DeltaSparkSubmitHook(name="delta-checkpoint", **job.hook_kwargs())
    try:
        cmd = hook._build_spark_submit_command(job.application)
        out = capsys.readouterr()
        assert cmd[cmd.index("--master") + 1] == "local[*]" and "--files" not in cmd
        assert "defaulting to yarn" not in out.out + out.err
        assert "spark.driver.bindAddress=127.0.0.1" in cmd
        assert not any(s in " ".join(cmd) for s in SECRETS)
        assert hook.process_env[CREDENTIALS_FILE_ENV] == hook._credentials_file and hook.process_env["SPARK_LOCAL_IP"] == "127.0.0.1"
        assert not any(s in json.dumps(hook.process_env) for s in SECRETS), "the process environment holds the path only"
    finally:
        hook.remove_credentials()


def test_the_spark_hook_overrides_no_private_upstream_method() -> None:
    own = {name for name in vars(DeltaSparkSubmitHook) if name.startswith("_") and not name.startswith("__")}
    assert not own & set(dir(upstream.SparkSubmitHook)), own & set(dir(upstream.SparkSubmitHook))


def test_the_job_reads_its_secrets_from_the_file_where_the_driver_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """Driver on the submitting machine: the path as given; driver in the cluster: the file shipped
    by --files into its working directory. Both end up in the job's storage options."""
    import argparse

    from airflow_delta_maintenance.maintenance.spark.credentials import remove_credentials_file, write_credentials_file
    from airflow_delta_maintenance.spark_jobs import _common

    job = checkpoint_job("s3://lake/orders", 10, OPTIONS)
    path = write_credentials_file(job.credentials)
    request.addfinalizer(lambda: remove_credentials_file(path))  # the fake keys leave with the test
    args = argparse.Namespace(table_uri="s3://lake/orders", storage_options_env=STORAGE_OPTIONS_ENV)
    monkeypatch.setenv(STORAGE_OPTIONS_ENV, job.env_vars[STORAGE_OPTIONS_ENV])
    for where, value in (("client", path), ("cluster", "/driver/host/does/not/have/credentials.json")):
        _common.load_credentials.cache_clear()
        monkeypatch.setenv(CREDENTIALS_FILE_ENV, value)
        if where == "cluster":
            shipped = tmp_path / "container"
            shipped.mkdir()
            (shipped / "credentials.json").write_bytes(Path(path).read_bytes())
            monkeypatch.chdir(shipped)
        store = _common.open_store(args)
        assert store.fs.key == SECRETS[0] and store.fs.secret == SECRETS[1] and store.fs.token == SECRETS[2], where
    _common.load_credentials.cache_clear()
    monkeypatch.setenv(CREDENTIALS_FILE_ENV, "/nowhere/credentials.json")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(_common.JobFailed, match=re.escape("credentials file /nowhere/credentials.json not found")):
        _common.open_store(args)
    _common.load_credentials.cache_clear()


AZURE_SECRETS = ("azure-account-key-value==", "sv=2026-01-01&sig=sas-signature-value", "sp-client-secret-value")
GCS_KEY = {"type": "service_account", "project_id": "p", "private_key_id": "kid", "private_key": "-----BEGIN PRIVATE KEY-----\nGCSPRIVATEKEYVALUE\n-----END PRIVATE KEY-----\n",
           "client_email": "sa@p.iam.gserviceaccount.com"}


@pytest.mark.parametrize(
    ("uri", "options", "secrets"),
    [
        ("abfss://lake@acct.dfs.core.windows.net/orders", {"account_name": "acct", "account_key": AZURE_SECRETS[0]}, [AZURE_SECRETS[0]]),
        ("abfss://lake@acct.dfs.core.windows.net/orders", {"account_name": "acct", "sas_token": AZURE_SECRETS[1]}, [AZURE_SECRETS[1]]),
        ("az://lake/orders", {"account_name": "acct", "tenant_id": "t", "client_id": "c", "client_secret": AZURE_SECRETS[2]}, [AZURE_SECRETS[2]]),
        ("az://lake/orders", {"connection_string": f"AccountName=acct;AccountKey={AZURE_SECRETS[0]};BlobEndpoint=http://127.0.0.1:10000/acct"},
         [AZURE_SECRETS[0]]),
        ("gs://lake/orders", {"token": GCS_KEY, "project": "p"}, ["GCSPRIVATEKEYVALUE", "kid"]),
    ],
)
def test_azure_and_gcs_secrets_reach_the_job_only_through_its_file(uri: str, options: dict, secrets: list[str], monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str], k8s_dependencies: None) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLUSTER", json.dumps({"conn_type": "spark", "host": "yarn", "extra": {"deploy-mode": "cluster"}}))
    job = checkpoint_job(uri, 10, options)
    assert not any(s in repr(job) for s in secrets)
    hook = DeltaSparkSubmitHook(conn_id="spark_cluster", name="delta-checkpoint", **job.hook_kwargs())
    try:
        cmd = hook._build_spark_submit_command(job.application)
        out = capsys.readouterr()
        visible = " ".join(cmd) + out.out + out.err + json.dumps(hook.process_env or {})
        assert not any(s in visible for s in secrets), [s for s in secrets if s in visible]
        conf = dict(cmd[i + 1].split("=", 1) for i, arg in enumerate(cmd) if arg == "--conf")
        path = conf["spark.yarn.appMasterEnv." + CREDENTIALS_FILE_ENV]
        stored = json.loads(Path(path).read_text())["storage_options"]
        assert all(s in json.dumps(stored) for s in secrets)
    finally:
        hook.remove_credentials()


def test_the_job_sets_azure_and_gcs_settings_on_hadoop_not_in_spark_conf() -> None:
    """The job's Hadoop settings carry the secret (set in-process on the session's Hadoop
    configuration); none of them is Spark conf (shown in Spark's UI, unredacted for an account key)."""
    from airflow_delta_maintenance.deltalog.storage import open_table_storage
    from airflow_delta_maintenance.spark_jobs._hadoop_stores import hadoop_settings, hadoop_uri

    store = open_table_storage("abfss://lake@acct.dfs.core.windows.net/orders", {"account_name": "acct", "account_key": "a2V5"})
    conf = hadoop_settings(store, {"account_name": "acct", "account_key": "a2V5"})
    assert conf == {"fs.azure.account.auth.type.acct.dfs.core.windows.net": "SharedKey", "fs.azure.account.key.acct.dfs.core.windows.net": "a2V5"}
    assert hadoop_uri(store, store.path("x.json")) == "abfss://lake@acct.dfs.core.windows.net/orders/_delta_log/x.json"
    sp = {"account_name": "acct", "tenant_id": "ten", "client_id": "app", "client_secret": "s"}
    conf = hadoop_settings(open_table_storage("az://lake/t", sp), sp)
    assert conf["fs.azure.account.oauth2.client.endpoint.acct.dfs.core.windows.net"] == "https://login.microsoftonline.com/ten/oauth2/token"
    assert conf["fs.azure.account.oauth2.client.secret.acct.dfs.core.windows.net"] == "s"
    gcs = open_table_storage("gs://lake/t", {"token": "anon"})  # the settings come from the options alone
    conf = hadoop_settings(gcs, {"token": GCS_KEY, "project": "p"})
    keyfile = Path(conf["fs.gs.auth.service.account.json.keyfile"])
    assert conf["fs.gs.auth.type"] == "SERVICE_ACCOUNT_JSON_KEYFILE" and json.loads(keyfile.read_text()) == GCS_KEY
    assert stat.S_IMODE(keyfile.stat().st_mode) == 0o600 and stat.S_IMODE(keyfile.parent.stat().st_mode) == 0o700
    assert hadoop_settings(open_table_storage("gs://lake/t", {"token": "anon", "endpoint_url": "http://127.0.0.1:4443"}),
                           {"token": "anon", "endpoint_url": "http://127.0.0.1:4443"}) == {
        "fs.gs.storage.root.url": "http://127.0.0.1:4443/", "fs.gs.auth.type": "UNAUTHENTICATED"}
