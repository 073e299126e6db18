"""Identity, gates and status take protocol and metadata from the newest version checksum instead
of reading every commit since the checkpoint — under the trust rule (docs: "Version checksums"):
commits after the checksum win; a checksum that does not parse, add up or name a readable protocol
is ignored (never a failure); a checksum may let a gate skip, never let a writer or cleanup act, and
never names the coordinator a table is acted on through. Driven as users run them: the CLI without
flags and the operators."""

from __future__ import annotations

import contextlib
import io
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException

from airflow_delta_maintenance.cli import main
from airflow_delta_maintenance.coordinators.local import EMBEDDED_COORDINATOR_PROPERTY
from airflow_delta_maintenance.deltalog.model.paths import commit_name, crc_name
from airflow_delta_maintenance.demo.sample_table import create_actions
from airflow_delta_maintenance.maintenance.table.maintained import open_table
from airflow_delta_maintenance.operators.checkpoint import DeltaCheckpointOperator
from airflow_delta_maintenance.operators.log_cleanup import DeltaLogCleanupOperator
from airflow_delta_maintenance.operators.log_compaction import DeltaLogCompactionOperator
from airflow_delta_maintenance.operators.publish import DeltaPublishCommitsOperator

from .conftest import add


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def commit(root: Path, version: int, actions: list[dict[str, Any]]) -> None:
    lines = [{"commitInfo": {"operation": "WRITE", "timestamp": int(time.time() * 1000)}}, *actions]
    (root / "_delta_log" / commit_name(version)).write_text("".join(json.dumps(a) + "\n" for a in lines))


def table(tmp_path: Path, commits: int, conf: dict[str, str]) -> Path:
    """A filesystem table: v0 creates it with ``conf``, then one add per commit; every version's
    checksum written by ``delta-maintenance checksums`` (no flags)."""
    root = tmp_path / "t"
    (root / "_delta_log").mkdir(parents=True)
    commit(root, 0, create_actions(conf))
    for v in range(1, commits + 1):
        commit(root, v, [add(f"f{v}")])
    assert run("checksums", str(root))[0] == 0
    return root


def tamper(root: Path, version: int, change: Callable[[dict[str, Any]], object]) -> None:
    path = root / "_delta_log" / crc_name(version)
    crc = json.loads(path.read_text())
    change(crc)
    path.write_text(json.dumps(crc))


def conf_of(crc: dict[str, Any]) -> dict[str, str]:
    conf: dict[str, str] = crc["metadata"]["configuration"]
    return conf


def test_identity_and_gates_stop_at_the_newest_checksum_and_later_commits_win(tmp_path: Path) -> None:
    root = table(tmp_path, 30, {"delta.checkpointInterval": "100"})
    commit_bytes = os.path.getsize(root / "_delta_log" / commit_name(30))
    state = open_table(str(root)).identity_state
    assert state is not None and state.checksum_version == 30 and state.bytes_read <= commit_bytes  # v30 alone, not v0..v30
    assert state.properties.checkpoint_interval == 100
    op = DeltaCheckpointOperator(task_id="checkpoint", table_uri=str(root), engine="local")
    assert op.execute({})["skipped"]  # 30 commits, interval 100: not due

    # A metadata change after the checksum wins over it (the protocol still comes from it).
    commit(root, 31, create_actions({"delta.checkpointInterval": "5"})[1:])
    state = open_table(str(root)).identity_state
    assert state is not None and state.checksum_version == 30 and state.properties.checkpoint_interval == 5
    record = op.execute({})
    assert not record["skipped"] and record["version"] == 31, record

    # A checksum claiming the checkpoint is due is not what writes it: the log says not yet.
    assert run("checksums", str(root))[0] == 0
    commit(root, 32, [add("f32")])
    assert run("checksums", str(root))[0] == 0
    tamper(root, 32, lambda c: conf_of(c).update({"delta.checkpointInterval": "1"}))
    assert op.execute({})["skipped"]  # one commit since 31, the log's interval 5

    for crc in (root / "_delta_log").glob("*.crc"):
        crc.unlink()
    state = open_table(str(root)).identity_state
    assert state is not None and state.checksum_version is None and state.properties.checkpoint_interval == 5


def _old_log(root: Path) -> None:
    old = time.time() - 40 * 86_400
    for f in (root / "_delta_log").iterdir():
        os.utime(f, (old, old))


def test_a_checksum_shortening_retention_deletes_nothing(tmp_path: Path) -> None:
    root = table(tmp_path, 12, {"delta.logRetentionDuration": "interval 365 days", "delta.checkpointInterval": "100"})
    assert run("checkpoint", str(root), "--force")[0] == 0  # at v12
    tamper(root, 12, lambda c: conf_of(c).update({"delta.logRetentionDuration": "interval 1 days"}))
    _old_log(root)
    before = sorted(p.name for p in (root / "_delta_log").iterdir())

    rc, out, err = run("status", str(root), "--json")
    status = json.loads(out)
    assert rc == 0 and status["cleanup_candidates"] == 0 and any("checksum of v12" in p for p in status["problems"]), (out, err)
    rc, out, err = run("cleanup", str(root), "--execute", "--json")
    assert rc == 0 and json.loads(out)["deleted"] == 0, (out, err)
    assert DeltaLogCleanupOperator(task_id="cleanup", table_uri=str(root), dry_run=False).execute({})["deleted"] == 0
    assert sorted(p.name for p in (root / "_delta_log").iterdir()) == before


def test_a_checksum_hiding_the_coordinator_stops_every_writer(coordinated_table: tuple[str, str]) -> None:
    spec, uri = coordinated_table
    DeltaPublishCommitsOperator(task_id="publish", table_uri=uri, up_to_version=10).execute({})
    assert run("checksums", uri)[0] == 0
    root = Path(uri)
    assert EMBEDDED_COORDINATOR_PROPERTY in conf_of(json.loads((root / "_delta_log" / crc_name(10)).read_text()))
    tamper(root, 10, lambda c: conf_of(c).pop(EMBEDDED_COORDINATOR_PROPERTY))
    before = sorted(p.name for p in (root / "_delta_log").iterdir())

    for op in (
        DeltaCheckpointOperator(task_id="checkpoint", table_uri=uri, force=True, engine="local"),
        DeltaLogCompactionOperator(task_id="compact", table_uri=uri, interval=3),
        DeltaLogCleanupOperator(task_id="cleanup", table_uri=uri, dry_run=False),
    ):
        with pytest.raises(AirflowFailException, match=r"ChecksumMismatchError: .*checksum of v10 .* the log says the embedded coordinator"):
            op.execute({})
    with pytest.raises(AirflowFailException):  # nothing is published around the coordinator either
        DeltaPublishCommitsOperator(task_id="publish", table_uri=uri).execute({})
    rc, out, err = run("status", uri, "--json")
    assert rc == 0 and any("checksum of v10" in p for p in json.loads(out)["problems"]), (out, err)
    assert sorted(p.name for p in (root / "_delta_log").iterdir()) == before
    # with the coordinator given, the same: the checksum's word is not the table's
    rc, out, err = run("checkpoint", uri, "--coordinator", spec)
    assert rc != 0 and "checksum of v10" in err, (out, err)


def test_a_checksum_declaring_a_coordinator_is_not_followed(tmp_path: Path) -> None:
    root = table(tmp_path, 5, {})
    rogue = tmp_path / "rogue.db"
    tamper(root, 5, lambda c: conf_of(c).update({EMBEDDED_COORDINATOR_PROPERTY: f"local://{rogue}?create=true"}))
    table_ = open_table(str(root))
    assert table_.coordinator is None and table_.coordination.kind is None
    rc, out, err = run("status", str(root), "--json")
    assert rc == 0 and any("checksum of v5" in p for p in json.loads(out)["problems"]), (out, err)
    assert DeltaCheckpointOperator(task_id="checkpoint", table_uri=str(root), force=True, engine="local").execute({})["version"] == 5
    assert not rogue.exists()


def _garbage(root: Path, version: int) -> None:
    (root / "_delta_log" / crc_name(version)).write_text("{not json")


def _unreadable_protocol(root: Path, version: int) -> None:
    tamper(root, version, lambda c: c["protocol"].update(minReaderVersion=99))


def _inconsistent(root: Path, version: int) -> None:
    tamper(root, version, lambda c: c.update(numFiles=c["numFiles"] + 1))


def _bad_property(root: Path, version: int) -> None:
    tamper(root, version, lambda c: conf_of(c).update({"delta.logRetentionDuration": "forever"}))


@pytest.mark.parametrize("damage", [_garbage, _unreadable_protocol, _inconsistent, _bad_property])
def test_an_unusable_checksum_never_fails_a_load(tmp_path: Path, damage: Callable[[Path, int], None]) -> None:
    root = table(tmp_path, 6, {"delta.checkpointInterval": "100"})
    damage(root, 6)
    state = open_table(str(root)).identity_state
    assert state is not None and state.checksum_version is None and state.protocol.min_reader_version == 1
    rc, out, err = run("status", str(root), "--json")
    assert rc == 0 and any("v6" in p for p in json.loads(out)["problems"]), (out, err)
    assert DeltaCheckpointOperator(task_id="checkpoint", table_uri=str(root), engine="local").execute({})["skipped"]
