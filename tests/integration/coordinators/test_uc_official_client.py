"""The UC OpenAPI test server (not the OSS server) as Unity Catalog's official Java client sees it.

``io.unitycatalog:unitycatalog-client`` 0.6.0 (Maven Central, ``.ci/maven/unitycatalog.xml``) is
generated from the same OpenAPI documents as the OSS server. ``OfficialClientCheck.java`` ratifies
commits that this test staged, through the official request models, replays one, provokes a
conflict and lists the commits through the official response models; our client then reads,
publishes and extends what the official client ratified.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from airflow_delta_maintenance.coordinators.commit_file import commit_bytes, next_in_commit_timestamp, staged_name
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from airflow_delta_maintenance.maintenance.operations.publish import publish_ratified_commits
from airflow_delta_maintenance.maintenance.table.coordinator_client import StoreFileWriter, open_coordinator
from tests._infra.jars import classpath
from tests.helpers.tables import bind_table
from tests.integration.coordinators._targets import add, create_table, make_spec

pytestmark = pytest.mark.integration

CHECKER = Path(__file__).resolve().parents[2] / "uc_openapi_server" / "OfficialClientCheck.java"


@pytest.mark.parametrize("kind", ["uc-v1", "uc-preview"])
def test_the_official_java_client_ratifies_and_lists_through_the_test_server(request: pytest.FixtureRequest, kind: str, tmp_path: Path, uc_server) -> None:
    spec = make_spec(request, kind, tmp_path)
    ours = open_coordinator(spec)
    table_uri = create_table(kind, ours, tmp_path)
    uc_table_id = load_snapshot(table_uri).properties.uc_table_id  # what the Java writer knows of its table
    writer = StoreFileWriter(open_table_storage(table_uri))
    staged, ict = [], None
    for v in (1, 2, 3):
        ict = next_in_commit_timestamp(ict)
        written = writer.write_new(staged_name(v), commit_bytes([add(f"java-{v}")], ict))
        staged.append(f"{v}:{written.file_name.split('/')[-1]}:{written.size}:{written.modification_time}:{ict}")
    host, port = uc_server.host.split(":")
    cmd = ["java", "-XX:TieredStopAtLevel=1", "-cp", classpath("unitycatalog"), str(CHECKER), kind[3:], host, port, uc_server.token,
           ours.full_name, uc_table_id, f"file://{table_uri}", *staged]  # type: ignore[attr-defined]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert [line.split()[1] for line in lines if line.startswith("RATIFIED")] == ["1", "2", "3"]
    assert "REPLAY OK" in lines  # the same version and file name again: an idempotent no-op
    expected_conflict = "CONFLICT 409 CommitVersionConflictException" if kind == "uc-v1" else "CONFLICT 409 COMMIT_VERSION_CONFLICT"
    assert expected_conflict in lines
    assert "LISTED 3,2,1 LATEST 3" in lines  # newest first, as the APIs say

    table = bind_table(open_table_storage(table_uri), ours)  # our side reads the id from the table
    resp = table.get_commits()
    assert [(c.version, c.file_name.split("/")[-1]) for c in resp.commits] == [(int(s.split(":")[0]), s.split(":")[1]) for s in staged]
    result = publish_ratified_commits(bind_table(open_table_storage(table_uri), ours))
    assert result.published == [1, 2, 3] and result.reported_version == 3
    assert table.commit(4, [add("ours-4")]).commit_timestamp > (ict or 0)
    assert load_snapshot(table_uri).version == 3
