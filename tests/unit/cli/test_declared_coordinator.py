"""Commands given no coordinator act through the one the table declares; a declared coordinator
that cannot be opened stops writes and cleanup with one typed line naming it and how to configure
it, and read-only commands show the published log alone only with ``--published-only`` (and say so).

Driven as users run the CLI: without ``--coordinator``. Each test failed before the table's own
declaration was the default (status printed "pending: 0" while commits waited, checkpoint wrote a
rogue file above the head, cleanup took its gates from the published log).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_delta_maintenance.cli import main
from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from airflow_delta_maintenance.demo.sample_table import create_actions
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator

WRITES = (["publish"], ["checkpoint"], ["compact-log", "--interval", "2"], ["cleanup", "--execute"])
READS = (["status"], ["versions"], ["inspect"])


def add(path: str) -> dict[str, Any]:
    return {"add": {"path": path, "partitionValues": {"region": "x"}, "size": 1, "modificationTime": 1, "dataChange": True}}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    try:
        parsed = json.loads(out) if out.strip() else None
    except ValueError:
        parsed = out
    return code, parsed, err


def log_state(uri: str) -> dict[str, bytes]:
    log = Path(uri) / "_delta_log"
    return {str(p.relative_to(log)): p.read_bytes() for p in sorted(log.rglob("*")) if p.is_file()}


def age_log(uri: str, days: int = 60) -> None:
    past = time.time() - days * 86400
    for p in (Path(uri) / "_delta_log").iterdir():
        if p.is_file():
            os.utime(p, (past, past))


@pytest.fixture
def table(tmp_path: Path) -> tuple[str, str]:
    """Created through the embedded coordinator (its version 0 names the coordinator): 0 published,
    1..5 ratified and waiting (no in-commit timestamps: file times date the commits)."""
    spec, uri = f"local://{tmp_path}/c.db", str(tmp_path / "t")
    client = open_coordinator(spec + "?create=true")
    client.commit(uri, 0, create_actions())
    for v in range(1, 6):
        client.commit(uri, v, [add(f"f{v}")])
    return spec, uri


def test_read_commands_without_a_coordinator_show_the_ratified_commits(table: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    _, uri = table
    code, out, _ = run(capsys, "status", uri)
    assert code == 0 and "unpublished (pending):     5 (1..5)" in out and "latest ratified version:   5" in out, out
    code, out, _ = run(capsys, "versions", uri, "--json")
    assert code == 0 and out["pending"] == [1, 2, 3, 4, 5] and out["latest_ratified_version"] == 5 and not out["published_only"]
    code, out, _ = run(capsys, "inspect", uri, "--json")
    assert code == 0 and out["version"] == 5 and out["num_files"] == 5

    # the published log alone, only when asked, and said so
    code, out, _ = run(capsys, "status", uri, "--published-only")
    assert code == 0 and "unpublished (pending):     0" in out and "published log only: the table declares the embedded coordinator" in out
    code, out, _ = run(capsys, "versions", uri, "--published-only", "--json")
    assert code == 0 and out["published_only"] and out["latest_published_version"] == 0
    code, out, _ = run(capsys, "inspect", uri, "--published-only")
    assert code == 0 and "version:            0" in out and "note:               published log only" in out
    code, _, err = run(capsys, "status", uri, "--published-only", "--coordinator", "auto")
    assert code == 2 and "not both" in err


def test_publish_without_a_coordinator_publishes_through_the_declared_one(table: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    spec, uri = table
    code, out, err = run(capsys, "publish", uri, "--json")
    assert code == 0 and (out["from_version"], out["to_version"], out["count"]) == (1, 5, 5) and out["reported_version"] == 5, err
    assert open_coordinator(spec).get_commits(uri).commits == ()


def test_checkpoint_without_a_coordinator_never_checkpoints_a_file_above_the_head(table: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """A rogue 6.json written around the coordinator (the catalog's head is 5)."""
    spec, uri = table
    assert run(capsys, "publish", uri, "--coordinator", spec)[0] == 0
    rogue = Path(uri) / "_delta_log" / f"{6:020d}.json"
    rogue.write_text(json.dumps({"commitInfo": {"timestamp": 1}}) + "\n" + json.dumps(add("rogue")) + "\n")
    code, out, err = run(capsys, "checkpoint", uri, "--force", "--json")
    assert code == 0 and out["version"] == 5 and not out["skipped"], (out, err)
    assert [g.version for g in list_log_files(open_table_storage(uri)).complete_checkpoints()] == [5]
    assert "rogue" not in {f["path"] for f in load_snapshot(uri, 5).file_list()}
    code, out, _ = run(capsys, "status", uri, "--json")
    assert code == 0 and any(rogue.name in p for p in out["problems"])


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [("delta.enableExpiredLogCleanup", "false", "enableExpiredLogCleanup"), ("delta.logRetentionDuration", "interval 365 days", None)],
)
def test_cleanup_without_a_coordinator_takes_its_gates_from_the_ratified_tail(
    table: tuple[str, str], capsys: pytest.CaptureFixture[str], key: str, value: str, reason: str | None
) -> None:
    spec, uri = table
    assert run(capsys, "publish", uri, "--coordinator", spec)[0] == 0
    assert run(capsys, "checkpoint", uri, "--force", "--coordinator", spec)[0] == 0
    age_log(uri)
    meta = load_snapshot(uri).metadata.to_dict()
    meta["configuration"] = {**meta["configuration"], key: value}
    open_coordinator(spec).commit(uri, 6, [{"metaData": meta}])  # ratified, not published: "keep"
    before = log_state(uri)
    code, out, err = run(capsys, "cleanup", uri, "--execute", "--json")
    assert code == 0, err
    assert out["deleted"] == 0 and (reason is None or reason in out["reason"]), out
    assert log_state(uri) == before


def test_a_declared_coordinator_that_cannot_be_opened_stops_every_command_but_a_published_only_read(
    table: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The embedded database the table names is not there (a copied table, another machine)."""
    _, uri = table
    (tmp_path / "c.db").rename(tmp_path / "elsewhere.db")
    before = log_state(uri)
    for argv in (*WRITES, *READS):
        code, out, err = run(capsys, argv[0], uri, *argv[1:])
        assert code == 2 and not out and err.count("\n") == 1, (argv, err)
        assert "CoordinatorNotConfiguredError" in err and f"embedded coordinator at {tmp_path}/c.db" in err, (argv, err)
        assert "--coordinator" in err and "--published-only" in err, err
    for argv in READS:
        code, out, _ = run(capsys, argv[0], uri, "--published-only")
        assert code == 0 and "published log only" in out, (argv, out)
    assert log_state(uri) == before
    (tmp_path / "elsewhere.db").rename(tmp_path / "c.db")  # back where the table says
    code, out, _ = run(capsys, "versions", uri, "--json")
    assert code == 0 and out["pending"] == [1, 2, 3, 4, 5]


def _declaring_table(root: Path, protocol: dict[str, Any], configuration: dict[str, str]) -> str:
    actions = create_actions(configuration)
    actions[0] = {"protocol": protocol}
    store = open_table_storage(str(root))
    store.put_if_absent(f"{0:020d}.json", "".join(json.dumps(a) + "\n" for a in [{"commitInfo": {"timestamp": 1}}, *actions]).encode())
    store.put_if_absent(f"{1:020d}.json", (json.dumps({"commitInfo": {"timestamp": 2}}) + "\n" + json.dumps(add("f1")) + "\n").encode())
    return str(root)


CATALOG_MANAGED = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["catalogManaged"],
                   "writerFeatures": ["catalogManaged", "inCommitTimestamp"]}


@pytest.mark.parametrize(
    ("protocol", "configuration", "named"),
    [
        (CATALOG_MANAGED, {"io.unitycatalog.tableId": "7f9c1e2a-uc"}, "Unity Catalog (table id 7f9c1e2a-uc)"),
        (CATALOG_MANAGED, {}, "an unknown catalog"),
        (
            {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["inCommitTimestamp"]},
            {"delta.coordinatedCommits.commitCoordinator-preview": "dynamodb",
             "delta.coordinatedCommits.commitCoordinatorConf-preview": '{"dynamoDBTableName":"delta_commits"}',
             "delta.coordinatedCommits.tableConf-preview": '{"tableId":"b2c3"}'},
            "DynamoDB coordinator table 'delta_commits' (tableId b2c3)",
        ),
        (
            {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["inCommitTimestamp"]},
            {"delta.coordinatedCommits.commitCoordinator-preview": "in-memory"},
            "coordinator 'in-memory'",
        ),
    ],
    ids=["unity-catalog-without-endpoint", "catalog-managed-unknown-catalog", "dynamodb-without-region", "unsupported-coordinator"],
)
def test_every_declaration_form_is_honoured_without_a_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    protocol: dict[str, Any], configuration: dict[str, str], named: str,
) -> None:
    """A table that declares a catalog or coordinator this command cannot reach from what the table
    says: writes and cleanup refuse, naming it; the published log is shown only when asked."""
    for var in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(var, raising=False)
    uri = _declaring_table(tmp_path / "t", protocol, configuration)
    before = log_state(uri)
    for argv in (*WRITES, *READS):
        code, _, err = run(capsys, argv[0], uri, *argv[1:])
        assert code == 2 and err.count("\n") == 1 and "CoordinatorNotConfiguredError" in err and named in err, (argv, err)
    code, out, err = run(capsys, "versions", uri, "--published-only", "--json")
    assert code == 0 and out["published_only"] and out["latest_published_version"] == 1, err
    assert log_state(uri) == before


def test_a_table_that_declares_nothing_keeps_its_published_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from airflow_delta_maintenance.demo.sample_table import create_sample_table

    uri = create_sample_table(str(tmp_path / "t"), commits=4).table_root
    code, out, _ = run(capsys, "versions", uri, "--json")
    assert code == 0 and out["latest_published_version"] == 3 and out["pending"] == [] and not out["published_only"]
    code, out, _ = run(capsys, "checkpoint", uri, "--force", "--json")
    assert code == 0 and out["version"] == 3
    code, _, err = run(capsys, "publish", uri)
    assert code == 2 and "needs the table's coordinator" in err
