"""End to end with the real writer: delta-spark 4.4 writes a catalog-managed (UC managed) table
through the real Unity Catalog OSS server 0.6.0 (authorization on), our maintenance publishes,
checkpoints, compacts and cleans it, and Spark reads every retained version as before and commits
on top.

Why delta-spark's own UC commit coordinator client and not the UC Spark connector: the connector
(``io.unitycatalog:unitycatalog-spark_<spark>_2.13``, class ``io.unitycatalog.spark.UCSingleCatalog``)
is not on Maven Central for 0.5.1 or 0.6.0 (nor for any Spark line: the coordinates 404), only
``unitycatalog-client`` and ``unitycatalog-hadoop`` are. delta-spark 4.4 itself carries the UC
commit path (``UCCommitCoordinatorClient`` over ``UCTokenBasedRestClient``, which ships with it)
and looks it up per catalog in ``CatalogOwnedCommitCoordinatorProvider``; without the connector
nothing registers it, so the test registers a builder for ``spark_catalog`` that returns exactly
what delta-spark builds for a UC catalog (``UCCommitCoordinatorBuilder.buildForCatalog`` over
``spark.sql.catalog.<uc>.uri``/``token``). delta-spark loads the table from UC by the Spark name
``spark_catalog.default.<t>``, so the UC catalog is named ``spark_catalog``. Two more things the
connector would do are done here: the session catalog entry points at the managed location (the
connector resolves names in UC), and version 0 is created through UC's staging flow by our client,
because delta-spark refuses to create catalog-managed tables outside a UC catalog.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, ClassVar

import pytest

from airflow_delta_maintenance.cli import main as cli_main
from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import normalize_table_uri, open_table_storage
from airflow_delta_maintenance.demo.sample_table import add_action_for, create_actions, data_batch
from airflow_delta_maintenance.maintenance.table.catalog_view import load_ratified_snapshot
from airflow_delta_maintenance.maintenance.table.coordinator_client import UC_TOKEN_ENV, open_coordinator
from tests._infra.uc_oss import OSSServer, OSSServers
from tests.helpers.tables import bind_table
from tests.integration.airflow_runs.conftest import REPO, airflow_env, airflow_home  # noqa: F401 - fixture

pytestmark = [pytest.mark.spark, pytest.mark.integration]

UC_SPARK_CATALOG = "uc_e2e"  # the Spark-side UC catalog config delta-spark's builder reads
_KEEP: list[Any] = []  # the py4j callback must outlive the test


def register_uc_commit_path(spark: Any, server: OSSServer) -> None:
    """Route catalog-managed tables of ``spark_catalog`` to delta-spark's UC commit coordinator client."""
    jvm = spark._jvm
    spark.conf.set(f"spark.sql.catalog.{UC_SPARK_CATALOG}", "io.unitycatalog.spark.UCSingleCatalog")  # the name delta-spark matches
    spark.conf.set(f"spark.sql.catalog.{UC_SPARK_CATALOG}.uri", f"http://{server.host}")
    spark.conf.set(f"spark.sql.catalog.{UC_SPARK_CATALOG}.token", server.token or "")
    coordinated = jvm.org.apache.spark.sql.delta.coordinatedcommits
    provider = getattr(getattr(coordinated, "CatalogOwnedCommitCoordinatorProvider$"), "MODULE$")
    if provider.getBuilder("spark_catalog").isDefined():
        return
    from pyspark.java_gateway import ensure_callback_server_started

    ensure_callback_server_started(spark.sparkContext._gateway)
    uc_builder = getattr(getattr(coordinated, "UCCommitCoordinatorBuilder$"), "MODULE$")

    class SessionCatalogToUC:
        class Java:
            implements: ClassVar[list[str]] = ["org.apache.spark.sql.delta.coordinatedcommits.CatalogOwnedCommitCoordinatorBuilder"]

        def getName(self) -> str:  # Java interface name
            return "unity-catalog"

        def build(self, session: Any, conf: Any) -> Any:
            raise NotImplementedError("catalog-owned tables are built per catalog")

        def buildForCatalog(self, session: Any, catalog_name: str) -> Any:  # Java interface name
            return uc_builder.buildForCatalog(session, UC_SPARK_CATALOG)

    builder = SessionCatalogToUC()
    _KEEP.append(builder)
    provider.registerBuilder("spark_catalog", builder)


def rows_at(spark: Any, name: str, version: int) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in spark.sql(f"SELECT id, amount, region FROM {name} VERSION AS OF {version}").collect())


def run_dag(home: Path, config: Path, token: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "airflow_delta_maintenance.demo.run_dag", str(REPO / "dags" / "delta_maintenance.py"), json.dumps({})],
        env=airflow_env(home, REPO / "dags", DELTA_MAINTENANCE_CONFIG=str(config), **{UC_TOKEN_ENV: token}),
        capture_output=True, text=True, timeout=600,
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert proc.returncode == 0 and line, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(line[len("RESULT "):])


@pytest.mark.parametrize("uc_version", ["0.6.0"], ids=["uc-oss-0.6.0-auth"])  # the id names the server it ran on
def test_delta_spark_writes_through_uc_and_our_dag_maintains_it(spark: Any, uc_oss_servers: OSSServers, airflow_home: Path, uc_version: str,  # noqa: F811 - the fixture imported above
                                                                 request: pytest.FixtureRequest,
                                                                 tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    server = uc_oss_servers.get(uc_version, True)
    clock = [time.monotonic()]

    def lap(what: str) -> None:
        now = time.monotonic()
        print(f"[uc e2e] {what}: {now - clock[0]:.1f}s", file=sys.__stderr__)  # past capsys
        clock[0] = now
    for path, body in (("/catalogs", {"name": "spark_catalog"}), ("/schemas", {"name": "default", "catalog_name": "spark_catalog"})):
        status, _, text = server.call("POST", path, body)
        assert status in (200, 409), text
    table = f"e2e_{uuid.uuid4().hex[:8]}"
    full = f"spark_catalog.default.{table}"
    # the maintenance principal: a user with exactly the privileges docs/coordinators.md lists
    maint = f"maintenance-{table}@example.com"
    maint_token = server.user_token(maint)
    server.grant("catalog", "spark_catalog", maint, "USE CATALOG")
    server.grant("schema", "spark_catalog.default", maint, "USE SCHEMA")

    # version 0 through UC's staging flow (as the admin), at the location UC allocates
    monkeypatch.setenv(UC_TOKEN_ENV, server.token or "")
    writer = open_coordinator(f"unity-catalog://{server.host}/{full}?api=preview&tls=false")
    uri = normalize_table_uri(writer.create_staging_table())  # type: ignore[attr-defined]
    # delta-spark would checkpoint every 10 commits itself; 100 leaves the checkpoints to the maintenance
    writer.commit(uri, 0, create_actions({"delta.checkpointInterval": "100"}, ict=True))
    os.makedirs(os.path.join(uri, "_delta_log", "_staged_commits"), exist_ok=True)  # delta-spark renames into it (local FS)
    server.grant("table", full, maint, "SELECT", "MODIFY")

    # the session catalog entry of the UC table (what UC's connector would resolve)
    register_uc_commit_path(spark, server)
    for key in ("", ".uri", ".token"):  # the shared session forgets the UC catalog config afterwards
        request.addfinalizer(lambda key=key: spark.conf.unset(f"spark.sql.catalog.{UC_SPARK_CATALOG}{key}"))
    name = f"default.{table}"
    spark.sql(f"CREATE TABLE {name} (id LONG, amount DOUBLE, region STRING) USING delta PARTITIONED BY (region) "
              f"LOCATION '{tmp_path / 'placeholder'}'")
    spark.sql(f"ALTER TABLE {name} SET LOCATION '{uri}'")

    def spark_writes(first: int, count: int) -> None:
        for i in range(first, first + count):
            spark.sql(f"INSERT INTO {name} VALUES ({i}, {i * 1.5}, '{'emea' if i % 2 else 'amer'}')")

    def our_writer_commits(versions: range) -> None:  # a second writer whose commits nobody published yet
        conf = {"io.unitycatalog.tableId": load_snapshot(uri).properties.uc_table_id}
        for v in versions:
            writer.commit(uri, v, [add_action_for(uri, data_batch(1000 + v * 10, 3, "apac"), "apac")], conf)

    spark_writes(1, 2)                       # versions 1-2, ratified by UC through delta-spark
    spark.sql(f"DELETE FROM {name} WHERE id = 2")  # version 3, with a deletion vector
    our_writer_commits(range(4, 6))          # versions 4-5, ratified, not published
    lap("spark writes 1-3, ours 4-5")
    assert writer.latest_ratified_version(uri) == 5
    assert [c.version for c in writer.get_commits(uri).commits][-2:] == [4, 5]

    # phase 1, the CLI as the maintenance principal: publish and a checkpoint at 5
    monkeypatch.setenv(UC_TOKEN_ENV, maint_token)
    spec = f"unity-catalog://{server.host}/{full}?api=v1&tls=false"
    assert cli_main(["publish", uri, "--coordinator", spec, "--json"]) == 0
    published = json.loads(capsys.readouterr().out)
    assert published["latest_published_version"] == 5 and published["to_version"] == 5 and published["from_version"] <= 4
    assert cli_main(["checkpoint", uri, "--coordinator", spec, "--force", "--engine", "local", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["version"] == 5
    lap("CLI publish + checkpoint")

    spark.sql(f"UPDATE {name} SET amount = -1.0 WHERE id = 1")  # version 6
    spark_writes(10, 1)                                          # version 7
    our_writer_commits(range(8, 9))                              # version 8, unpublished
    latest = 8
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    before = {v: rows_at(spark, name, v) for v in range(5, latest + 1)}  # the versions the cleanup below retains
    ids = [r[0] for r in before[5]]
    assert 2 not in ids and 1 in ids and 1040 in ids and 1050 in ids and len(before[latest]) == len(before[7]) + 3
    assert [r for r in before[6] if r[0] == 1] == [(1, -1.0, "emea")]
    lap("spark writes 6-7, ours 8, reads 5-8")

    # cleanup with the catalog's permission, planned a day ahead: the protocol's cutoff is the UTC
    # midnight before now - retention, so nothing written today could expire otherwise. It works on
    # the published versions (0-7): anchored on the checkpoint at 5, it deletes what only 0-4 need.
    tomorrow = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 2 * 86400))
    assert cli_main(["cleanup", uri, "--coordinator", spec, "--execute", "--allow-catalog-managed", "--allow-shorter-retention", "--retention-days", "0",
                     "--now", tomorrow, "--allow-future-now", "--json"]) == 0
    cleaned = json.loads(capsys.readouterr().out)
    assert cleaned["deleted"] > 0 and not cleaned["dry_run"], cleaned
    files = list_log_files(open_table_storage(uri))
    oldest = min(c.version for c in files.commits)
    assert oldest == 5 and 5 in {c.version for c in files.checkpoints}, cleaned
    lap("CLI cleanup")

    # phase 2, the generated DAG: wait, publish 8, checkpoint, compaction, cleanup with the catalog's permission
    config = tmp_path / "tables.yaml"
    config.write_text(
        f"tables:\n  - name: {table}\n    uri: {uri}\n    coordinator: '{spec}'\n"
        f"    checkpoint: {{interval: 1, engine: local}}\n    compaction: {{interval: 7}}\n"
        f"    cleanup: {{mode: delete, retention_days: 0, allow_shorter_retention: true, catalog_permits_cleanup: true}}\n"
    )
    result = run_dag(airflow_home, config, maint_token)
    lap("DAG run")
    assert result["state"] == "success" and set(result["tasks"].values()) == {"success"}, result
    x = result["xcom"]
    assert x["publish"]["reported_version"] == latest and x["publish"]["to_version"] == latest, x["publish"]
    assert x["checkpoint"]["version"] == latest and not x["checkpoint"]["skipped"], x["checkpoint"]
    # the aligned window ending at 7 starts after the checkpoint at 5 (and does not depend on the parallel checkpoint at 8)
    assert (x["compact_log"]["from_version"], x["compact_log"]["to_version"], x["compact_log"]["count"]) == (6, 7, 1), x["compact_log"]
    assert not x["cleanup"]["dry_run"], x["cleanup"]  # ran for real; nothing of today is past the midnight cutoff
    files = list_log_files(open_table_storage(uri))
    assert min(c.version for c in files.commits) == oldest and {5, latest} <= {c.version for c in files.checkpoints}
    assert writer.get_commits(uri).commits == ()  # UC was told: everything is published

    # Spark reads every retained version exactly as before, and commits on top
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    for v in range(oldest, latest + 1):
        assert rows_at(spark, name, v) == before[v], v
    spark_writes(100, 1)
    assert writer.latest_ratified_version(uri) == latest + 1
    assert sorted(tuple(r) for r in spark.sql(f"SELECT id, amount, region FROM {name}").collect()) == sorted(before[latest] + [(100, 150.0, "amer")])
    ours = load_ratified_snapshot(bind_table(open_table_storage(uri), writer))
    assert ours.version == latest + 1 and len(list(ours.active_file_keys())) == len(spark.table(name).inputFiles())
    lap("spark reads 5-8 and writes 9")
