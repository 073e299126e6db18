"""The Spark jobs on a real Spark standalone cluster over S3 (moto), as a user configures them.

The master and a worker run from the pyspark package on 127.0.0.1 with no AWS credentials in
their environment; a table written by the ``deltalake`` wheel lives on ``s3://``. The operators run
with real Airflow connections from ``AIRFLOW_CONN_*`` (the Spark one names the master and the
hadoop-aws jars, nothing else), the CLI with ``--master`` and ``--jars`` only: no ``--spark-conf``,
no ``SPARK_LOCAL_IP``, no ``PATH``. While the jobs run every listening socket of this process tree
is sampled: none may be on a wildcard address. The result is read back with the ``deltalake`` wheel.

One submission per front end, each with the other job (a submission to the cluster costs half a
minute on two cores): the operator compacts the log, the CLI checkpoints. The submission path
(the cluster, the shipped zip, s3a and its credentials) does not depend on which job it carries.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.log_segment.segment import build_log_segment
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from tests._infra.jars import jar_list
from tests._infra.servers import FAKE_AWS, fake_aws_env
from tests._infra.spark import StandaloneCluster

pytestmark = [pytest.mark.spark, pytest.mark.integration]

LOOPBACK_ADDRESSES = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}
# what one would tune in the connection for tiny tables on a 2-core machine (performance only)
SMALL_JOB_CONF = {"spark.executor.memory": "512m", "spark.sql.shuffle.partitions": "2",
                  "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
                  "spark.executor.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"}


def s3a_jars() -> str:
    """What s3a needs on the cluster (hadoop-aws and the AWS SDK v2), without delta-spark."""
    jars = [j for j in jar_list("delta-spark") if not Path(j).name.startswith(("delta-", "aws-java-sdk-"))]
    assert any(Path(j).name.startswith("hadoop-aws-") for j in jars), jars
    return ",".join(jars)


def deltalake_options(endpoint: str) -> dict[str, str]:
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": FAKE_AWS["AWS_ACCESS_KEY_ID"], "AWS_SECRET_ACCESS_KEY": FAKE_AWS["AWS_SECRET_ACCESS_KEY"],
            "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true", "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}


def write_versions(uri: str, endpoint: str, ids: dict[int, list[int]], count: int) -> None:
    """``count`` more commits by the deltalake wheel (appends, and a delete every fourth), with
    the ids each version must read recorded in ``ids``."""
    import deltalake

    options = deltalake_options(endpoint)
    for _ in range(count):
        version = max(ids, default=-1) + 1
        current = list(ids.get(version - 1, []))
        if version and version % 4 == 3:
            deltalake.DeltaTable(uri, storage_options=options).delete(f"id = {current[0]}")
            current = current[1:]
        else:
            new = [version * 10 + i for i in range(3)]
            deltalake.write_deltalake(uri, pa.table({"id": pa.array(new, pa.int64()), "p": [f"p{version % 2}"] * 3}), mode="append",
                                      partition_by=["p"], storage_options=options, configuration={"delta.checkpointInterval": "1000"})
            current += new
        assert deltalake.DeltaTable(uri, storage_options=options).version() == version
        ids[version] = sorted(current)


def check_with_deltalake(uri: str, endpoint: str, ids: dict[int, list[int]]) -> None:
    """The wheel reads every version with the expected rows."""
    import deltalake

    options = deltalake_options(endpoint)
    for version, expected in ids.items():
        table = deltalake.DeltaTable(uri, version=version, storage_options=options).to_pyarrow_table()
        assert sorted(table.column("id").to_pylist()) == expected, f"version {version}"


def check_checkpoint_selected(uri: str, storage_options: dict[str, Any], endpoint: str, version: int, ids: dict[int, list[int]]) -> None:
    """The wheel reads ``version`` from a copy of the table whose log lacks every commit the
    checkpoint covers: it can only have used the checkpoint (and our reader selects it too)."""
    import deltalake

    store = open_table_storage(uri, storage_options)
    segment = build_log_segment(list_log_files(store), version)
    assert segment.checkpoint is not None and segment.checkpoint.version == version
    fs = store.fs
    root = uri.removeprefix("s3://")
    copy = f"{root}-checkpoint-only"
    for path in fs.find(root):
        name = path.rsplit("/", 1)[-1]
        if "/_delta_log/" in path and re.fullmatch(r"\d{20}\.json", name) and int(name[:20]) <= version:
            continue
        fs.copy(path, copy + path[len(root):])
    fs.invalidate_cache()
    table = deltalake.DeltaTable(f"s3://{copy}", version=version, storage_options=deltalake_options(endpoint))
    assert sorted(table.to_pyarrow_table().column("id").to_pylist()) == ids[version]


def check_compaction_selected(uri: str, storage_options: dict[str, Any], endpoint: str, start: int, end: int) -> None:
    """The compaction file exists, the log segment at ``end`` uses it, and the files live through
    it are the ones the wheel reads at ``end``."""
    import deltalake

    store = open_table_storage(uri, storage_options)
    files = list_log_files(store)
    assert any(c.version == start and c.end_version == end for c in files.compactions), [c.name for c in files.compactions]
    segment = build_log_segment(files, end)
    assert any(getattr(d, "end_version", None) == end for d in segment.deltas), segment
    live = {path for path, _ in load_snapshot(store, end, files=files).active_file_keys()}
    wheel = deltalake.DeltaTable(uri, version=end, storage_options=deltalake_options(endpoint)).file_uris()
    assert {f"{uri}/{path}" for path in live} == set(wheel)


# --- who listens where, while the jobs run ------------------------------------------------------

SS_LINE = re.compile(r"^LISTEN\s+\S+\s+\S+\s+(\S+):(\d+)\s+\S+\s+users:\((.*)\)\s*$")


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = set(), [root]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


@contextmanager
def listeners_of_this_test() -> Iterator[dict[tuple[int, str, str], str]]:
    """Samples ``ss -ltnp`` until exit: {(pid, address, port): command} of this process's descendants."""
    seen: dict[tuple[int, str, str], str] = {}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            ours = _descendants(os.getpid())
            out = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True).stdout
            for line in out.splitlines():
                m = SS_LINE.match(line)
                if not m:
                    continue
                address, port, users = m.groups()
                for comm, pid in re.findall(r'\("([^"]+)",pid=(\d+)', users):
                    if int(pid) in ours:
                        seen[(int(pid), address.strip("[]"), port)] = comm
            done.wait(0.3)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        done.set()
        thread.join()


# --- the test -----------------------------------------------------------------------------------


def test_checkpoint_and_compaction_jobs_on_a_standalone_cluster_over_s3(
    spark_standalone: StandaloneCluster, s3_bucket: tuple[str, dict[str, Any]], s3_endpoint: str, monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    from airflow_delta_maintenance.operators.log_compaction import DeltaLogCompactionOperator

    bucket, storage_options = s3_bucket
    uri = f"s3://{bucket}/tables/events"
    ids: dict[int, list[int]] = {}
    timings = {}
    started = time.monotonic()
    write_versions(uri, s3_endpoint, ids, 12)  # versions 0..11
    timings["deltalake writes"] = time.monotonic() - started
    host, port = spark_standalone.master_url.removeprefix("spark://").split(":")
    # what a user configures: the cluster and the jars its s3a needs; the table's storage
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLUSTER", json.dumps({"conn_type": "spark", "host": f"spark://{host}", "port": int(port),
                                                               "extra": {"jars": s3a_jars(), "conf": SMALL_JOB_CONF}}))
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps({"conn_type": "delta_storage", "login": FAKE_AWS["AWS_ACCESS_KEY_ID"],
                                                       "password": FAKE_AWS["AWS_SECRET_ACCESS_KEY"],
                                                       "extra": {"endpoint_url": s3_endpoint, "region_name": "us-east-1"}}))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the shipped zip's cache
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # the venv is not on PATH
    for key in [k for k in os.environ if k.startswith("AWS_")]:  # the operators' credentials come from the connection only
        monkeypatch.delenv(key)
    common: dict[str, Any] = {"table_uri": uri, "delta_storage_conn_id": "lake", "spark_conn_id": "spark_cluster", "engine": "spark"}
    with listeners_of_this_test() as listeners:
        started = time.monotonic()
        compaction = DeltaLogCompactionOperator(task_id="compact", interval=10, **common).execute({})
        timings["operator compaction"] = time.monotonic() - started
        assert (compaction["from_version"], compaction["to_version"], compaction["count"]) == (1, 10, 1), compaction

        cli = str(Path(sys.executable).with_name("delta-maintenance"))  # the installed command, by path
        cli_env = {**fake_aws_env({"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", str(tmp_path)), "XDG_CACHE_HOME": str(tmp_path / "cache")})}
        spark = ["--engine", "spark", "--master", spark_standalone.master_url, "--jars", s3a_jars(),
                 "-o", f"endpoint_url={s3_endpoint}", "-o", "region_name=us-east-1"]
        started = time.monotonic()
        out = subprocess.run([cli, "checkpoint", uri, "--force", "--json", *spark], capture_output=True, text=True, env=cli_env, timeout=600)
        timings["CLI checkpoint"] = time.monotonic() - started
        assert out.returncode == 0, out.stderr[-3000:]
        assert json.loads(out.stdout)["version"] == 11 and json.loads(out.stdout)["skipped"] is False
    print("\n[cluster] " + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()), file=sys.stderr)

    # no listener of the jobs (drivers, executors, Python) on a wildcard address, and some were seen
    cluster = {spark_standalone.master_pid, spark_standalone.worker_pid}
    job_listeners = {k: v for k, v in listeners.items() if k[0] not in cluster}
    assert job_listeners, "no listener of the jobs was observed: the check saw nothing"
    wildcard = {k: v for k, v in listeners.items() if k[1] not in LOOPBACK_ADDRESSES}
    assert not wildcard, f"listening beyond loopback: {wildcard}"
    print(f"[cluster] {len(job_listeners)} listening sockets of {len({k[0] for k in job_listeners})} job processes seen, "
          f"all on {sorted({address for _, address, _ in listeners})}", file=sys.stderr)

    started = time.monotonic()
    check_with_deltalake(uri, s3_endpoint, ids)
    check_compaction_selected(uri, storage_options, s3_endpoint, 1, 10)
    check_checkpoint_selected(uri, storage_options, s3_endpoint, 11, ids)
    print(f"[cluster] checks {time.monotonic() - started:.1f}s", file=sys.stderr)
