"""Issue 17, discovery: the managed tables of a schema on the real Unity Catalog OSS server are
discovered and maintained with only what a user configures.

22 catalog-managed tables (on 0.6.0 with authorization; 4 + 2 on 0.5.1: the per-table path is the same,
the version-specific parts — discovery by the CLI, paging, the whole catalog, the sample catalog —
need no more) are created through the catalog (staging table, version 0 at the allocated location,
then ratified commits of real Parquet data through the Delta API v1, none published), plus an
external table that must not be picked up. The YAML names only the server's
endpoint and the schema, with overrides: a table property leaves two tables out, a name glob
changes the compaction interval of ten. The discovery DAG (0.6.0 with authorization, the token only
in an Airflow connection) or ``delta-maintenance discover`` (0.5.1) writes the fleet file; the
generated DAGs of the discovered tables run (``dag.test()``) and publish, checkpoint and, where
the override says so, compact; the ``_delta_log`` results are checked, the catalog has nothing left
to backfill, and the ``deltalake`` wheel reads every table.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from airflow_delta_maintenance.coordinators.unity_catalog_listing import UnityCatalogBrowser
from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import normalize_table_uri, open_table_storage
from airflow_delta_maintenance.demo.sample_table import add_action_for, create_actions, data_batch
from airflow_delta_maintenance.fleet.config import load_fleet
from airflow_delta_maintenance.maintenance.table.coordinator_client import UC_TOKEN_ENV, open_coordinator
from tests._infra.uc_oss import OSSServer, OSSServers, server_id

from .dag_runner import DagRunner

pytestmark = pytest.mark.integration

MAINTAINED = tuple(range(20))  # t00 .. t19
FEW = (0, 3, 10, 17)  # still both sides of the t1* override and the auth variant's grants (t03, t17)
COMMITS = 5  # versions 1..5 ratified and unpublished (UC keeps at most 10 per table)

def create_managed_table(server: OSSServer, schema: str, name: str, properties: dict[str, str]) -> str:
    """A catalog-managed table with ``COMMITS`` ratified, unpublished commits; returns its URI."""
    client = open_coordinator(f"unity-catalog://{server.host}/main.{schema}.{name}?api=v1&tls=false")
    uri = normalize_table_uri(client.create_staging_table())
    client.commit(uri, 0, create_actions(properties, ict=True))
    for v in range(1, COMMITS + 1):
        client.commit(uri, v, [add_action_for(uri, data_batch(v * 10, 10, "emea"), "emea")])
    return uri


def wheel_readable_copy(uri: str, dest: Path, checkpoint_version: int) -> str:
    """A copy of the table that the ``deltalake`` wheel can open on its own.

    delta-kernel refuses a catalog-managed table unless the caller passes the catalog's latest
    version (``with_max_catalog_version``), which the Python wheel does not expose. The copy drops
    only the ``catalogManaged`` feature name from the protocol actions, the ``.crc`` files (they
    repeat the protocol), and every commit below the checkpoint, so the wheel must replay *our*
    checkpoint (and its sidecars) plus the published commits after it; nothing else is changed.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    def strip(protocol: dict[str, Any]) -> dict[str, Any]:
        for key in ("readerFeatures", "writerFeatures"):
            if protocol.get(key) is not None:
                protocol[key] = [f for f in protocol[key] if f != "catalogManaged"]
        return protocol

    shutil.copytree(uri, dest)
    log = dest / "_delta_log"
    for f in sorted(log.iterdir()):
        head = f.name.split(".", 1)[0]
        if f.name.endswith(".crc") or (f.name.endswith(".json") and head.isdigit() and ".checkpoint" not in f.name
                                        and int(head) < checkpoint_version):
            f.unlink()
        elif f.name.endswith(".json") and head.isdigit():
            lines = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
            f.write_text("".join(json.dumps({"protocol": strip(a["protocol"])} if "protocol" in a else a) + "\n" for a in lines))
        elif f.name.endswith(".parquet") and ".checkpoint" in f.name:
            table = pq.read_table(f)
            rows = [dict(r, protocol=strip(r["protocol"])) if r.get("protocol") else r for r in table.to_pylist()]
            pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), f)
    return str(dest)


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    exe = str(Path(sys.executable).with_name("delta-maintenance"))
    return subprocess.run([exe, *args], capture_output=True, text=True, env=env, timeout=600)


# 0.6.0 with authorization: discovery by the discovery DAG, the token only in an Airflow connection
# (the source's conn_id, which the discovered tables' tasks use too). 0.5.1: `delta-maintenance discover`.
@pytest.mark.parametrize("version,auth,via,maintained", [("0.6.0", True, "dag", MAINTAINED), ("0.5.1", False, "cli", FEW)],
                         ids=[server_id("0.6.0", True), server_id("0.5.1", False)])
def test_twenty_managed_tables_of_a_schema_are_discovered_and_maintained(
    version: str, auth: bool, via: str, maintained: tuple[int, ...], uc_oss_servers: OSSServers, dag_runner: Callable[..., DagRunner], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = uc_oss_servers.get(version, auth)
    if server.token:  # the test's own client (creating tables) is the admin
        monkeypatch.setenv(UC_TOKEN_ENV, server.token)
    else:
        monkeypatch.delenv(UC_TOKEN_ENV, raising=False)
    schema = f"fleet_{uuid.uuid4().hex[:8]}"
    server.create_schema(schema)

    began = time.monotonic()
    uris = {f"t{i:02d}": create_managed_table(server, schema, f"t{i:02d}", {"team": "sales"}) for i in maintained}
    ops = {f"z_ops{i}": create_managed_table(server, schema, f"z_ops{i}", {"team": "ops"}) for i in range(2)}
    created_s = time.monotonic() - began
    if not auth:  # an external Delta table in the same schema: listed by the catalog, not coordinated by it
        server.json("POST", "/tables", {"name": "ext", "catalog_name": "main", "schema_name": schema, "table_type": "EXTERNAL",
                                        "data_source_format": "DELTA", "storage_location": f"file://{tmp_path / 'external'}", "columns": []})

    endpoint = f"unity-catalog://{server.host}?api=v1&tls=false"
    config = tmp_path / "tables.yaml"
    config.write_text(
        "defaults:\n"
        "  checkpoint: {interval: 5, engine: local}\n  compaction: false\n  cleanup: false\n"
        "  sensor: {timeout_minutes: 1, poke_interval_seconds: 1}\n"
        "discovery:\n"
        "  fleet_file: fleet/fleet.json\n"
        "  sources:\n"
        f"    - name: uc\n      unity_catalog: {endpoint}\n"
        f"      catalog: main\n      schemas: [{schema}]\n" + ("      conn_id: uc_prod\n" if via == "dag" else "") +
        "  overrides:\n"
        "    - match: {properties: {team: ops}}\n      enabled: false\n"
        f"    - match: {{name: 'main.{schema}.t1*'}}\n      compaction: {{interval: 2}}\n"
    )
    # what the Airflow deployment has: the connection (dag) or nothing (cli, authorization off)
    airflow_extra = {"AIRFLOW_CONN_UC_PROD": json.dumps({"conn_type": "delta_coordinator", "host": endpoint, "password": server.token})} if via == "dag" else {}

    with monkeypatch.context() as airflow_side:  # the Airflow process has no token in its environment (this test's client keeps its own)
        airflow_side.delenv(UC_TOKEN_ENV, raising=False)
        runner = dag_runner(config, **airflow_extra)  # discovery and the discovered tables' runs in one Airflow process
    began = time.monotonic()
    if via == "dag":
        result = runner.run(dag_ids=["delta_maintenance__discovery"])[0]["delta_maintenance__discovery"]
        assert result["state"] == "success", result
        summary = result["xcom"]["discover_tables"]
        assert str(server.token) not in json.dumps(result)
    else:
        out = cli("discover", "--config", str(config), "--json", env={k: v for k, v in os.environ.items() if k != UC_TOKEN_ENV})
        assert out.returncode == 0, out.stderr
        summary = json.loads(out.stdout)
    discover_s = time.monotonic() - began
    assert summary["tables"] == len(maintained) + len(ops)
    skipped = summary["sources"][0]["skipped"]
    assert skipped == ([] if auth else [{"table": f"main.{schema}.ext", "reason": "EXTERNAL table: not managed by the catalog"}])
    fleet_tables = load_fleet(config)  # what the DAG file makes of the fleet file
    assert fleet_tables.fleet_error is None and fleet_tables.invalid == []
    assert sorted(t.name for t in fleet_tables.discovered) == sorted(f"main.{schema}.{n}" for n in uris)
    assert sorted(fleet_tables.disabled) == sorted(f"main.{schema}.{n}" for n in ops)
    fleet = json.loads((tmp_path / "fleet" / "fleet.json").read_text())
    by_name = {t["name"]: t for t in fleet["tables"]}
    for name, uri in {**uris, **ops}.items():
        entry = by_name[f"main.{schema}.{name}"]
        assert entry["uri"] == uri and entry["properties"]["team"] in ("sales", "ops")
        assert entry["coordinator"].startswith(f"unity-catalog://{server.host}/main.{schema}.{name}?api=v1&tls=false&table_id=")
        assert "delta.coordinatedCommits.tableConf-preview" not in json.dumps(entry) and str(server.token) not in json.dumps(fleet)

    listed = sorted([*uris, *ops, *([] if auth else ["ext"])])
    if auth:
        # a principal sees only the tables it may read; UC filters a page *after* paging, so short
        # pages still have a next page: the listing follows the token across them all
        user = server.user_token(f"reader-{schema}@example.com")
        server.grant("catalog", "main", f"reader-{schema}@example.com", "USE CATALOG")
        server.grant("schema", f"main.{schema}", f"reader-{schema}@example.com", "USE SCHEMA")
        for name in ("t03", "t17", "z_ops1"):
            server.grant("table", f"main.{schema}.{name}", f"reader-{schema}@example.com", "SELECT")
        seen = UnityCatalogBrowser(server.host, tls=False, token=user, page_size=2).list_tables("main", schema)
        assert [t.name for t in seen] == ["t03", "t17", "z_ops1"]
    else:
        # the real server's paging (3 per page), and a whole catalog (every schema) in one source
        assert [t.name for t in UnityCatalogBrowser(server.host, tls=False, page_size=3).list_tables("main", schema)] == listed
        whole = tmp_path / "catalog.yaml"
        whole.write_text(f"discovery:\n  sources:\n    - name: uc\n      unity_catalog: {endpoint}\n      catalog: main\n")
        out = cli("discover", "--config", str(whole), "--out", str(tmp_path / "catalog.json"), "--json", env=dict(os.environ))
        assert out.returncode == 0, out.stderr
        names = {t["name"] for t in json.loads((tmp_path / "catalog.json").read_text())["tables"]}
        assert {f"main.{schema}.{n}" for n in [*uris, *ops]} <= names
        # upstream's sample catalog: a MANAGED Delta table from before catalog-managed commits (no
        # io.unitycatalog.tableId) and external ones; none is coordinated by the catalog
        whole.write_text(f"discovery:\n  sources:\n    - name: uc\n      unity_catalog: {endpoint}\n      catalog: unity\n")
        out = cli("discover", "--config", str(whole), "--out", str(tmp_path / "unity.json"), "--json", env=dict(os.environ))
        assert out.returncode == 0, out.stderr
        sample = json.loads(out.stdout)["sources"][0]
        assert sample["tables"] == 0
        assert {"table": "unity.default.marksheet", "reason": "no io.unitycatalog.tableId property: the catalog does not coordinate its commits"} in sample["skipped"]
        assert {"table": "unity.default.numbers", "reason": "EXTERNAL table: not managed by the catalog"} in sample["skipped"]

    dag_ids = [f"delta_maintenance__main.{schema}.{n}" for n in sorted(uris)]
    began = time.monotonic()
    results = runner.run(dag_ids=dag_ids)[0]  # no token in the environment
    maintain_s = time.monotonic() - began

    import deltalake

    for dag_id, (name, uri) in zip(dag_ids, sorted(uris.items()), strict=True):
        r = results[dag_id]
        assert r["state"] == "success" and set(r["tasks"].values()) == {"success"}, (dag_id, r)
        published = r["xcom"]["publish"]
        assert (published["from_version"], published["to_version"], published["count"]) == (1, COMMITS, COMMITS), r["xcom"]
        assert r["xcom"]["checkpoint"]["version"] == COMMITS and not r["xcom"]["checkpoint"]["skipped"]
        files = list_log_files(open_table_storage(uri))
        assert [c.version for c in files.commits] == list(range(COMMITS + 1))
        assert [g.version for g in files.complete_checkpoints()] == [COMMITS]
        windows = {(c.version, c.end_version) for c in files.compactions}
        if name.startswith("t1"):  # the name-glob override: compaction every 2 versions
            assert "compact_log" in r["tasks"] and windows and all(end - start == 1 for start, end in windows), windows
        else:
            assert "compact_log" not in r["tasks"] and windows == set()
        # the catalog has nothing left to backfill
        client = open_coordinator(by_name[f"main.{schema}.{name}"]["coordinator"])
        assert client.get_commits(uri, 0, None).commits == () or [c.version for c in client.get_commits(uri, 0, None).commits] == [COMMITS]
        assert client.latest_ratified_version(uri) == COMMITS
        # an independent reader, from our checkpoint, sees every commit's rows and our file list
        # (its log replay; its query paths refuse the v2Checkpoint / vacuumProtocolCheck features UC requires)
        dt = deltalake.DeltaTable(wheel_readable_copy(uri, tmp_path / "wheel" / name, COMMITS))
        assert dt.version() == COMMITS
        wheel_files = sorted(dt.file_uris())
        assert wheel_files == sorted(f"{tmp_path}/wheel/{name}/{f['path']}" for f in load_snapshot(uri).file_list())
        ids = sorted(i for f in wheel_files for i in pq.read_table(f).column("id").to_pylist())
        assert ids == list(range(10, 10 * (COMMITS + 1)))
    for uri in ops.values():  # left out by the property override: untouched
        assert [c.version for c in list_log_files(open_table_storage(uri)).commits] == [0]
    print(f"\n{server.label}: created {len(uris) + len(ops)} tables in {created_s:.1f} s, discover {discover_s:.1f} s, "
          f"{len(uris)} DAG runs {maintain_s:.1f} s ({', '.join(str(results[d]['seconds']) for d in dag_ids[:3])} s …)")
