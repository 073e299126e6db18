"""Seeded random schedules of maintenance runs at once, driven through the CLI as a user would.

While a writer keeps committing through the embedded coordinator, several processes run
``publish``, ``checkpoint`` (single-node and Spark), ``compact-log`` (single-node and Spark) and
``cleanup --execute`` (a short retention with the override, so it deletes during the run); one
single-node checkpoint is killed. Afterwards every retained version reads in the ``deltalake``
wheel exactly as the writer recorded it (a sample in delta-spark too), every visible checkpoint
holds exactly its version's files, and nothing of a finished run is left behind.

The seed is printed; ``DELTA_CONCURRENCY_SEED=<n>`` replays a schedule.
"""

from __future__ import annotations

import io
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from airflow_delta_maintenance.deltalog.checkpoint.readback import read_back_checkpoint
from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.model.paths import commit_name
from airflow_delta_maintenance.deltalog.storage import LogStore, open_table_storage
from airflow_delta_maintenance.deltalog.storage.run_identity import STAGING_DIR, find_run_tag
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
DAY_MS = 24 * 3600 * 1000
OLD_VERSIONS = 9  # versions 0..8 committed three days ago (filesystem table, then registered)
SEED_ENV = "DELTA_CONCURRENCY_SEED"
WINDOW_S = 10.0  # single-node runs start within this many seconds of the Spark ones (the writer's commits span as long)


def _seed() -> int:
    raw = os.environ.get(SEED_ENV)
    return int(raw) if raw else random.SystemRandom().randrange(1 << 32)


@dataclass
class Table:
    uri: str
    options: dict[str, Any]
    cli_options: list[str]
    coordinator: str
    v2: bool
    wheel_uri: str | None = None  # the table as the deltalake wheel names it, when not as we do
    wheel: dict[str, Any] | None = None  # {"wheel": the wheel's storage options}, when not derived from ours
    expected: dict[int, frozenset[str]] = field(default_factory=dict)  # version -> active paths when committed
    live: set[str] = field(default_factory=set)
    counter: int = 0

    def store(self) -> LogStore:
        return open_table_storage(self.uri, self.options)

    def next_actions(self, rng: random.Random) -> list[dict[str, Any]]:
        actions: list[dict[str, Any]] = []
        if self.live and rng.random() < 0.4:  # never a path added in this same commit
            gone = rng.choice(sorted(self.live))
            self.live.discard(gone)
            actions.append({"remove": {"path": gone, "deletionTimestamp": int(time.time() * 1000), "dataChange": True,
                                       "partitionValues": {"region": "x"}, "size": 1}})
        for _ in range(rng.randint(1, 4)):
            self.counter += 1
            path = f"region=x/part-{self.counter:05d}.parquet"
            actions.append({"add": {"path": path, "partitionValues": {"region": "x"}, "size": 100 + self.counter,
                                    "modificationTime": 1, "dataChange": True}})
            self.live.add(path)
        return actions


def _protocol(v2: bool) -> dict[str, Any]:
    writer = ["inCommitTimestamp", "appendOnly", "invariants"] + (["v2Checkpoint"] if v2 else [])
    return {"protocol": {"minReaderVersion": 3 if v2 else 1, "minWriterVersion": 7, "writerFeatures": writer,
                         **({"readerFeatures": ["v2Checkpoint"]} if v2 else {})}}


def _metadata(v2: bool) -> dict[str, Any]:
    schema = {"type": "struct", "fields": [{"name": "value", "type": "long", "nullable": True, "metadata": {}},
                                           {"name": "region", "type": "string", "nullable": True, "metadata": {}}]}
    conf = {"delta.enableInCommitTimestamps": "true", **({"delta.checkpointPolicy": "v2"} if v2 else {})}
    return {"metaData": {"id": "concurrency-table", "format": {"provider": "parquet", "options": {}}, "schemaString": json.dumps(schema),
                         "partitionColumns": ["region"], "configuration": conf, "createdTime": 1}}


def _cli(args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    entry = Path(sys.executable).with_name("delta-maintenance")  # the installed console script, as a user runs it
    return subprocess.Popen([str(entry), *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def _build(table: Table, rng: random.Random, env: dict[str, str]) -> None:
    """Versions 0..8 three days old (ICTs) with a checkpoint at 8, registered with the coordinator."""
    store = table.store()
    base = int(time.time() * 1000) - 3 * DAY_MS
    for v in range(OLD_VERSIONS):
        info = {"commitInfo": {"inCommitTimestamp": base + v * 1000, "timestamp": base + v * 1000, "operation": "WRITE"}}
        actions = [_protocol(table.v2), _metadata(table.v2)] if v == 0 else table.next_actions(rng)
        store.put_if_absent(commit_name(v), "".join(json.dumps(a) + "\n" for a in [info, *actions]).encode())
        table.expected[v] = frozenset(table.live)
    proc = _cli(["checkpoint", table.uri, "--force", "--version", str(OLD_VERSIONS - 1), *table.cli_options], env)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    client = open_coordinator(table.coordinator + "?create=true", table.options)  # the coordinator starts here
    client.register_table(table.uri, OLD_VERSIONS - 1, base + (OLD_VERSIONS - 1) * 1000)
    client.close()


class Writer(threading.Thread):
    """Commits through the embedded coordinator until stopped, recording each version's files."""

    def __init__(self, table: Table, rng: random.Random, commits: int) -> None:
        super().__init__(daemon=True)
        self.table, self.rng, self.stop, self.commits = table, rng, threading.Event(), commits
        self.error: BaseException | None = None

    def commit_one(self, client: Any) -> None:
        v = max(self.table.expected) + 1
        client.commit(self.table.uri, v, self.table.next_actions(self.rng))
        self.table.expected[v] = frozenset(self.table.live)

    def run(self) -> None:
        client = open_coordinator(self.table.coordinator, self.table.options)
        try:
            for _ in range(self.commits):  # bounded: the wheel reads every version afterwards
                if self.stop.wait(self.rng.uniform(0.3, 1.2)):
                    break
                self.commit_one(client)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
        finally:
            client.close()


def _schedule(table: Table, rng: random.Random, spark_args: list[str], spark_checkpoints: int, spark_compaction: bool) -> list[tuple[float, str, list[str]]]:
    """(start delay, label, CLI args) for every run; Spark runs start first (they are the slowest)."""
    t = table.uri
    coord = ["--coordinator", table.coordinator]
    o = [*table.cli_options, *coord]  # every command is told the table's coordinator, as a user would
    runs: list[tuple[float, str, list[str]]] = []
    for i in range(spark_checkpoints):
        runs.append((rng.uniform(0, 2), f"spark-checkpoint-{i}", ["checkpoint", t, "--force", "--engine", "spark", "--master", "local[1]", *spark_args, *o]))
    start = OLD_VERSIONS + rng.randint(0, 1)
    if spark_compaction:
        runs.append((rng.uniform(0, 2), "spark-compaction", ["compact-log", t, "--engine", "spark", "--master", "local[1]", "--start", str(start),
                                                         "--end", str(start + rng.randint(2, 4)), *spark_args, *o]))
    # two or three of each kind: enough for every kind to race its twin and the others (each more is CPU, no new race)
    for i in range(rng.randint(2, 3)):
        runs.append((rng.uniform(0, WINDOW_S), f"publish-{i}", ["publish", t, *o]))
    for i in range(rng.randint(2, 3)):
        runs.append((rng.uniform(0, WINDOW_S), f"checkpoint-{i}", ["checkpoint", t, "--force", *o]))
    for i in range(rng.randint(1, 2)):
        runs.append((rng.uniform(0, WINDOW_S), f"compact-{i}", ["compact-log", t, "--interval", str(rng.choice([3, 4, 5])), *o]))
    for i in range(rng.randint(2, 3)):
        runs.append((rng.uniform(0, WINDOW_S), f"cleanup-{i}", ["cleanup", t, "--execute", "--retention-days", "1", "--allow-shorter-retention", *o]))
    runs.append((rng.uniform(1, WINDOW_S), "killed-checkpoint", ["checkpoint", t, "--force", *o]))
    return sorted(runs)


def _run_schedule(table: Table, rng: random.Random, env: dict[str, str], spark_args: list[str], spark_checkpoints: int,
                  spark_compaction: bool) -> set[int]:
    """Run everything; returns the pids of the runs killed on purpose."""
    runs = _schedule(table, rng, spark_args, spark_checkpoints, spark_compaction)
    kill_after = rng.uniform(0.3, 2.5)
    writer = Writer(table, rng, rng.randint(8, 12))  # over ~WINDOW_S: every run races it; the wheel reads each version afterwards
    client = open_coordinator(table.coordinator, table.options)
    for _ in range(6):  # published before anything starts: the Spark compaction's window
        writer.commit_one(client)
    client.close()
    first = _cli(["publish", table.uri, "--coordinator", table.coordinator, *table.cli_options], env)
    _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err.decode()
    writer.start()
    started = time.monotonic()
    procs: list[tuple[str, subprocess.Popen[bytes], float]] = []
    killed: set[int] = set()
    ended: dict[str, float] = {}
    pending = list(runs)
    try:
        while pending or any(p.poll() is None for _, p, _ in procs):
            now = time.monotonic() - started
            while pending and pending[0][0] <= now:
                _, label, args = pending.pop(0)
                procs.append((label, _cli(args, env), time.monotonic()))
            for label, p, t0 in procs:
                if p.poll() is not None and label not in ended:
                    ended[label] = time.monotonic() - t0
                if label == "killed-checkpoint" and p.poll() is None and time.monotonic() - t0 >= kill_after and p.pid not in killed:
                    os.killpg(p.pid, signal.SIGKILL)
                    killed.add(p.pid)
            if time.monotonic() - started > 400:
                raise AssertionError("the schedule did not finish in 400 s")
            time.sleep(0.05)
        for label, _p, t0 in procs:
            ended.setdefault(label, time.monotonic() - t0)
    finally:
        writer.stop.set()
        writer.join(30)
        for _, p, _ in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
    assert writer.error is None, repr(writer.error)
    failures = []
    for label, p, _ in procs:
        out, err = p.communicate()
        print(f"  {label}: exit {p.returncode} after {ended.get(label, -1):.1f}s")
        if p.pid not in killed and p.returncode != 0:
            failures.append(f"{label} exited {p.returncode}: {err.decode()[-1500:]}\nstdout: {out.decode()[-500:]}")
    assert not failures, "\n".join(failures)
    final = _cli(["publish", table.uri, "--coordinator", table.coordinator, *table.cli_options], env)  # the writer's last ones
    _, err = final.communicate(timeout=120)
    assert final.returncode == 0, err.decode()
    return killed


def _checkpoint_adds(store: LogStore, names: list[str]) -> set[str]:
    paths: set[str] = set()
    for name in names:
        rows = pq.read_table(io.BytesIO(store.read(name))).to_pylist()
        for r in rows:
            if r.get("add"):
                paths.add(r["add"]["path"])
            if r.get("sidecar"):
                for s in pq.read_table(io.BytesIO(store.read(f"_sidecars/{r['sidecar']['path']}")), columns=["add"]).to_pylist():
                    if s.get("add"):
                        paths.add(s["add"]["path"])
    return paths


def _leftovers(store: LogStore) -> list[str]:
    found = [f"{d}/" for d in store.list_subdirs(STAGING_DIR)]
    for sub in ("", "_sidecars", "_staged_commits"):
        found += [s.name for s in store.list_dir(sub) if s.name.rsplit("/", 1)[-1].startswith(".") and s.name.endswith(".tmp")]
    files = list_log_files(store)
    referenced: set[str] = set()
    for c in files.checkpoints:
        for r in pq.read_table(io.BytesIO(store.read(c.name))).to_pylist():
            if r.get("sidecar"):
                referenced.add(r["sidecar"]["path"])
    found += [s.name for s in store.list_log("_sidecars") if s.filename not in referenced]
    return found


def _verify(table: Table, killed: set[int], env: dict[str, str], spark: Any, seed: int) -> dict[str, Any]:
    import deltalake

    store = table.store()
    files = list_log_files(store)
    latest = files.latest_commit_version
    assert latest == max(table.expected), f"seed {seed}: published up to {latest}, committed {max(table.expected)}"
    # every visible checkpoint: complete, readable, exactly its version's files
    groups = files.complete_checkpoints()
    assert groups, f"seed {seed}: no checkpoint at all"
    for g in groups:
        names = [f.name for f in g.files]
        read_back_checkpoint(store, names)
        assert _checkpoint_adds(store, names) == table.expected[g.version], f"seed {seed}: checkpoint {names} is not version {g.version}"
    hint = json.loads(store.read("_last_checkpoint"))
    assert any(g.version == hint["version"] for g in groups), f"seed {seed}: _last_checkpoint names {hint['version']}"
    # every retained version reads in the wheel exactly as committed; versions in retention all do
    def wheel_files(v: int) -> set[str] | None:
        try:
            dt = deltalake.DeltaTable(table.wheel_uri or table.uri, version=v, storage_options=_wheel_options(table.wheel or table.options))
        except Exception:  # noqa: BLE001 - an unreadable version is judged below
            return None
        return set(dt.get_add_actions(flatten=True).column("path").to_pylist())

    t0 = time.monotonic()
    with ThreadPoolExecutor(4) as pool:
        in_wheel = dict(zip(sorted(table.expected), pool.map(wheel_files, sorted(table.expected)), strict=True))
    readable = []
    for v, got in in_wheel.items():
        if got is None:
            assert v < OLD_VERSIONS - 1, f"seed {seed}: version {v} (inside retention) is unreadable"
            continue
        assert got == set(table.expected[v]), f"seed {seed}: version {v} differs in the wheel"
        readable.append(v)
    deleted = [v for v in range(OLD_VERSIONS - 1) if v not in {c.version for c in files.commits}]
    assert deleted, f"seed {seed}: cleanup deleted nothing"
    t1 = time.monotonic()
    # a sample in delta-spark (the session fixture reaches local disk and moto; the other stores are
    # read by the wheel above)
    for v in [random.Random(seed).choice(readable)] if spark is not None else []:  # one version: each delta-spark snapshot is Spark jobs
        df = spark.read.format("delta").option("versionAsOf", v).load(table.uri.replace("s3://", "s3a://"))
        got = {f.replace("%3D", "=").rsplit("/", 2)[-2] + "/" + f.rsplit("/", 1)[-1] for f in df.inputFiles()}
        assert got == set(table.expected[v]), f"seed {seed}: version {v} differs in delta-spark"
    t2 = time.monotonic()
    # nothing of a finished run is left; the killed run's leftovers go with the next cleanup
    left = _leftovers(store)
    strangers = [n for n in left if (tag := find_run_tag(n)) is None or tag.pid not in killed]
    assert not strangers, f"seed {seed}: leftovers of finished runs: {strangers}"
    proc = _cli(["cleanup", table.uri, "--execute", "--retention-days", "1", "--allow-shorter-retention", "--coordinator", table.coordinator,
                 *table.cli_options], env)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    assert not _leftovers(store), f"seed {seed}: leftovers after the final cleanup: {_leftovers(store)}"
    return {"latest": latest, "checkpoints": len(groups), "readable": len(readable), "deleted_versions": len(deleted),
            "compactions": len(files.compactions), "killed": len(killed),
            "verify_seconds": {"wheel": round(t1 - t0), "delta_spark": round(t2 - t1), "leftovers": round(time.monotonic() - t2)}}


def _wheel_options(options: dict[str, Any]) -> dict[str, str]:
    if not options:
        return {}
    if "wheel" in options:  # Azurite and fake-gcs-server: the test gives the wheel's own options
        return dict(options["wheel"])
    client = options.get("client_kwargs", {})
    return {"AWS_ENDPOINT_URL": client["endpoint_url"], "AWS_REGION": client.get("region_name", "us-east-1"),
            "AWS_ACCESS_KEY_ID": options["key"], "AWS_SECRET_ACCESS_KEY": options["secret"], "AWS_ALLOW_HTTP": "true",
            "AWS_S3_ALLOW_UNSAFE_RENAME": "true", "AWS_FORCE_PATH_STYLE": "true"}


def _run(table: Table, env: dict[str, str], spark_args: list[str], spark_checkpoints: int, spark_compaction: bool, spark: Any,
         capsys: Any) -> None:
    seed = _seed()
    print(f"concurrency schedule on {table.uri}: seed {seed} (replay with {SEED_ENV}={seed})")
    rng = random.Random(seed)
    started = time.monotonic()
    _build(table, rng, env)
    built = time.monotonic()
    killed = _run_schedule(table, rng, env, spark_args, spark_checkpoints, spark_compaction)
    ran = time.monotonic()
    summary = _verify(table, killed, env, spark, seed)
    summary["seconds"] = {"build": round(built - started), "schedule": round(ran - built), "verify": round(time.monotonic() - ran)}
    with capsys.disabled():
        print(f"\n  seed {seed} ({SEED_ENV}) on {table.uri.split('://')[0] if '://' in table.uri else 'local'}: "
              f"{summary} in {time.monotonic() - started:.0f}s")


def _env() -> dict[str, str]:
    from tests._infra.spark import spark_submit_env

    return {**os.environ, **spark_submit_env(), "PYTHONPATH": str(REPO)}


SPARK_CONF = ["--spark-conf", "spark.sql.shuffle.partitions=2", "--spark-conf", "spark.default.parallelism=2"]


def test_concurrent_runs_on_local_disk_v2_with_sidecars(tmp_path: Path, spark: Any, capsys: Any) -> None:
    table = Table(str(tmp_path / "t"), {}, [], f"local://{tmp_path}/c.db", v2=True)
    # one Spark checkpoint and the Spark compaction racing the single-node runs (two Spark checkpoints'
    # sidecars and staging beside each other: tests/spark/test_spark_jobs::
    # test_another_live_runs_staging_and_sidecars_survive_a_spark_checkpoint, without a third JVM here)
    _run(table, _env(), SPARK_CONF, 1, True, spark, capsys)


def test_concurrent_runs_on_s3_classic(s3_bucket: tuple[str, dict], tmp_path: Path, spark_s3a: Any, capsys: Any) -> None:
    from tests._infra.jars import delta_spark_jars

    bucket, options = s3_bucket
    endpoint = options["client_kwargs"]["endpoint_url"]
    cli = ["-o", f"endpoint_url={endpoint}", "-o", "region_name=us-east-1"]
    spark_args = [*SPARK_CONF, "--spark-conf", f"spark.jars={','.join(delta_spark_jars())}", "--spark-conf", "spark.hadoop.fs.s3a.bucket.probe=0"]
    table = Table(f"s3://{bucket}/t", options, cli, f"local://{tmp_path}/c.db", v2=False)
    _run(table, _env(), spark_args, 1, False, spark_s3a, capsys)  # copy-based moves: the widest window


def test_concurrent_runs_on_every_store_server(store_bucket: Any, tmp_path: Path, capsys: Any) -> None:
    """The same schedule on MinIO, Azurite and fake-gcs-server, credentials in the environment as a
    user's CLI runs get them. A Spark checkpoint races on Azurite (ABFS); on MinIO and
    fake-gcs-server the single-node engine only: Spark over s3a races on moto
    (test_concurrent_runs_on_s3_classic), the Spark job's commit on MinIO is put_if_absent_from
    (test_store_contract), the GCS connector is tests/spark/test_spark_stores'."""
    from tests._infra.jars import HADOOP_AZURE, delta_spark_jars, jar_list
    from tests._infra.store_servers import AZURITE_ACCOUNT, AZURITE_KEY, MINIO_PASSWORD, MINIO_USER

    store, bucket = store_bucket.store, store_bucket.name
    env = _env()
    extra_conf: list[str] = []  # Spark settings of the store, where a Spark checkpoint runs
    jars = delta_spark_jars()
    wheel_uri, wheel = None, None
    if store.protocol == "s3":
        uri = f"s3://{bucket}/t"
        env.update(AWS_ACCESS_KEY_ID=MINIO_USER, AWS_SECRET_ACCESS_KEY=MINIO_PASSWORD)
        cli = ["-o", f"endpoint_url={store.endpoint}", "-o", "region_name=us-east-1"]
        spark_checkpoints = 0
    elif store.protocol == "az":
        uri = f"abfss://{bucket}@{AZURITE_ACCOUNT}.dfs.core.windows.net/t"
        env["AZURE_STORAGE_CONNECTION_STRING"] = store.storage_options["connection_string"]
        cli, spark_checkpoints = [], 1
        jars = jars + jar_list(HADOOP_AZURE)
        wheel_uri = f"az://{bucket}/t"
        wheel = {"wheel": {"azure_storage_account_name": AZURITE_ACCOUNT, "azure_storage_account_key": AZURITE_KEY,
                           "azure_storage_endpoint": f"{store.endpoint}/{AZURITE_ACCOUNT}", "azure_allow_http": "true"}}
    else:
        uri = f"gs://{bucket}/t"
        cli = ["-o", f"endpoint_url={store.endpoint}", "-o", "token=anon", "-o", "project=test-project"]
        spark_checkpoints = 0
        # object_store (the wheel) reaches an emulator through a service-account file naming its base URL
        account = tmp_path / "fake-gcs-account.json"
        account.write_text(json.dumps({"gcs_base_url": store.endpoint, "disable_oauth": True, "client_email": "", "private_key": "", "private_key_id": ""}))
        wheel = {"wheel": {"google_service_account": str(account), "allow_http": "true"}}
    spark_args = [*SPARK_CONF, "--spark-conf", f"spark.jars={','.join(jars)}", *extra_conf]
    table = Table(uri, store.storage_options, cli, f"local://{tmp_path}/c.db", v2=False, wheel_uri=wheel_uri, wheel=wheel)
    _run(table, env, spark_args, spark_checkpoints, False, None, capsys)
