"""Publishing on the embedded coordinator: order, forks, bad staged files, crashes, races."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_delta_maintenance.coordinators.base import CommitsResponse, RatifiedCommit
from airflow_delta_maintenance.deltalog.errors import AtomicWriteUnsupportedError, InvalidLogPathError
from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.storage import LogStore, open_table_storage
from airflow_delta_maintenance.demo.sample_table import create_actions
from airflow_delta_maintenance.maintenance.errors import PublishForkError, StagedCommitError
from airflow_delta_maintenance.maintenance.operations.publish import publish_ratified_commits
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator
from tests.helpers.tables import bind_table


def add(path: str) -> dict[str, Any]:
    return {"add": {"path": path, "partitionValues": {"region": "x"}, "size": 1, "modificationTime": 1, "dataChange": True}}


@pytest.fixture
def table(tmp_path: Path) -> tuple[str, str]:
    spec = f"local://{tmp_path}/c.db?create=true"
    uri = str(tmp_path / "t")
    client = open_coordinator(spec)
    client.commit(uri, 0, create_actions(ict=True))
    for v in range(1, 6):
        client.commit(uri, v, [add(f"f{v}")])
    return spec, uri


def published(uri: str) -> list[int]:
    return [c.version for c in list_log_files(open_table_storage(uri)).commits]


def test_publishes_in_order_with_identical_bytes_then_reports(table: tuple[str, str]) -> None:
    spec, uri = table
    client = open_coordinator(spec)
    staged = {c.version: open_table_storage(uri).read(c.file_name) for c in client.get_commits(uri).commits}
    result = publish_ratified_commits(bind_table(open_table_storage(uri), client), up_to=3)
    assert result.published == [1, 2, 3] and result.latest_published_version == 3 and result.reported_version == 3
    assert [c.version for c in client.get_commits(uri).commits] == [4, 5]
    store = open_table_storage(uri)
    assert all(store.read(f"{v:020d}.json") == staged[v] for v in (1, 2, 3))
    again = publish_ratified_commits(bind_table(store, client))
    assert again.published == [4, 5] and again.latest_ratified_version == 5
    assert publish_ratified_commits(bind_table(store, client)).published == []


def test_a_different_published_file_is_a_fork_and_nothing_is_reported(table: tuple[str, str]) -> None:
    spec, uri = table
    store = open_table_storage(uri)
    store.put_if_absent(f"{2:020d}.json", b'{"commitInfo":{"inCommitTimestamp":1}}\n')
    client = open_coordinator(spec)
    with pytest.raises(PublishForkError) as err:
        publish_ratified_commits(bind_table(store, client))
    assert err.value.version == 2 and "forked" in str(err.value)
    assert published(uri) == [0, 1, 2] and [c.version for c in client.get_commits(uri).commits] == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("damage", ["missing", "not-json", "altered-ict"])
def test_a_bad_staged_file_is_a_clear_error_and_nothing_is_reported(tmp_path: Path, damage: str) -> None:
    spec, uri = f"local://{tmp_path}/c.db?create=true", str(tmp_path / "t")
    client = open_coordinator(spec)
    client.commit(uri, 0, create_actions(ict=True))
    for v in range(1, 4):
        client.commit(uri, v, [add(f"f{v}")])
    # large commits are not kept inline, so the staged file is the only copy: damage it
    commits = client.get_commits(uri).commits
    target = next(c for c in commits if c.version == 2)
    path = Path(uri) / "_delta_log" / target.file_name
    if damage == "missing":
        path.unlink()
    elif damage == "not-json":
        path.write_bytes(b"{oops\n")
    else:
        lines = path.read_bytes().splitlines()
        first = json.loads(lines[0])
        first["commitInfo"]["inCommitTimestamp"] += 5
        path.write_bytes(b"\n".join([json.dumps(first).encode(), *lines[1:]]) + b"\n")
    inline_free = CommitsResponse(tuple(RatifiedCommit(c.version, c.commit_timestamp, c.file_name, c.file_size, c.file_modification_time) for c in commits), 3)
    with pytest.raises(StagedCommitError) as err:
        publish_ratified_commits(bind_table(open_table_storage(uri), client), response=inline_free)
    assert err.value.version == 2 and target.file_name.split("/")[-1] in str(err.value)
    assert published(uri) == [0] and [c.version for c in client.get_commits(uri).commits] == [1, 2, 3]


def test_names_escaping_the_log_are_refused(table: tuple[str, str]) -> None:
    spec, uri = table
    evil = CommitsResponse((RatifiedCommit(1, -1, "../../etc/passwd"),), 1)
    with pytest.raises(StagedCommitError):
        publish_ratified_commits(bind_table(open_table_storage(uri), open_coordinator(spec)), response=evil)
    evil = CommitsResponse((RatifiedCommit(1, -1, "_staged_commits/../../x/00000000000000000001.a.json"),), 1)
    with pytest.raises((StagedCommitError, InvalidLogPathError)):
        publish_ratified_commits(bind_table(open_table_storage(uri), open_coordinator(spec)), response=evil)


def test_storage_without_atomic_create_is_refused_unless_accepted(table: tuple[str, str], tmp_path: Path) -> None:
    from fsspec.implementations.dirfs import DirFileSystem
    from fsspec.implementations.local import LocalFileSystem

    spec, uri = table
    fs = DirFileSystem(path=str(Path(uri).parent), fs=LocalFileSystem())
    with pytest.raises(AtomicWriteUnsupportedError):
        publish_ratified_commits(bind_table(LogStore(fs, "t", uri=uri), open_coordinator(spec)))
    assert published(uri) == [0]
    result = publish_ratified_commits(bind_table(LogStore(fs, "t", uri=uri, allow_unsafe_writes=True), open_coordinator(spec)))
    assert result.published == [1, 2, 3, 4, 5]


def test_a_publisher_killed_between_copy_and_report_converges(table: tuple[str, str]) -> None:
    spec, uri = table
    client = open_coordinator(spec)

    class DiesBeforeReport:
        def __getattr__(self, name: str) -> Any:
            return getattr(client, name)

        def report_published(self, *a: Any, **k: Any) -> None:
            raise KeyboardInterrupt("killed")

    with pytest.raises(KeyboardInterrupt):
        publish_ratified_commits(bind_table(open_table_storage(uri), DiesBeforeReport()))  # type: ignore[arg-type]
    assert published(uri) == [0, 1, 2, 3, 4, 5] and len(client.get_commits(uri).commits) == 5
    result = publish_ratified_commits(bind_table(open_table_storage(uri), client))
    assert result.published == [] and result.already_published == [1, 2, 3, 4, 5] and result.reported_version == 5
    assert client.get_commits(uri).commits == ()


def _publisher(spec: str, uri: str, rounds: int, out: Any) -> None:
    client = open_coordinator(spec)
    mine: list[int] = []
    for _ in range(rounds):
        mine += publish_ratified_commits(bind_table(open_table_storage(uri), client)).published
        time.sleep(0.01)
    out.put(mine)


def _writer(spec: str, uri: str, first: int, count: int) -> None:
    client = open_coordinator(spec)
    for v in range(first, first + count):
        client.commit(uri, v, [add(f"w{v}")])


@pytest.mark.slow  # minutes on a busy machine: make test runs it, the fast tier does not
def test_four_racing_publishers_and_a_writer_lose_nothing(table: tuple[str, str]) -> None:
    spec, uri = table
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    writer = ctx.Process(target=_writer, args=(spec, uri, 6, 40))
    publishers = [ctx.Process(target=_publisher, args=(spec, uri, 30, out)) for _ in range(4)]
    for p in [writer, *publishers]:
        p.start()
    writer.join(120)
    for p in publishers:
        p.join(120)
    claimed = [v for _ in publishers for v in out.get(timeout=10)]
    final = publish_ratified_commits(bind_table(open_table_storage(uri), open_coordinator(spec)))
    claimed += final.published
    assert sorted(claimed) == list(range(1, 46)), "every version published exactly once"
    assert published(uri) == list(range(46))
    store = open_table_storage(uri)
    for v in range(1, 46):
        assert json.loads(store.read(f"{v:020d}.json").splitlines()[1])["add"]["path"] in (f"f{v}", f"w{v}")
    assert open_coordinator(spec).get_commits(uri).commits == ()


KILL = r"""
import sys, time
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator
from airflow_delta_maintenance.maintenance.operations.publish import publish_ratified_commits
from airflow_delta_maintenance.deltalog.storage import open_table_storage
print("go", flush=True)
while True:
    publish_ratified_commits(bind_table(open_table_storage(sys.argv[2]), open_coordinator(sys.argv[1])))
"""


def test_sigkilled_publishers_converge_on_the_next_run(table: tuple[str, str]) -> None:
    spec, uri = table
    client = open_coordinator(spec)
    for v in range(6, 60):
        client.commit(uri, v, [add(f"g{v}")])
    proc = subprocess.Popen([sys.executable, "-c", KILL, spec, uri], stdout=subprocess.PIPE, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"go"
    time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)
    result = publish_ratified_commits(bind_table(open_table_storage(uri), client))
    assert result.latest_published_version == 59 and published(uri) == list(range(60))
    assert client.get_commits(uri).commits == ()


def test_a_commit_another_publisher_wrote_and_a_cleanup_removed_before_we_read_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CI (concurrent runs on S3): ``publish-1 exited 2: FileNotFoundError: .../00000000000000000023.json``.
    Our create found the file there and a concurrent cleanup removed it before we compared it. It
    is created again from the ratified bytes: a version is counted published only once its file
    was seen holding them (no checkpoint is taken on trust), and a file that keeps vanishing stops
    the run."""
    from airflow_delta_maintenance.deltalog.errors import LogFileExistsError, MissingCommitError
    from airflow_delta_maintenance.demo.sample_table import create_sample_table
    from airflow_delta_maintenance.maintenance.operations import publish_copy

    store = create_sample_table(str(tmp_path / "t"), commits=2)
    real_put = store.put_if_absent
    attempts: list[str] = []

    def exists_once(name: str, data: bytes) -> None:
        attempts.append(name)
        if len(attempts) == 1:
            raise LogFileExistsError(name)  # then "removed" before our read
        real_put(name, data)

    monkeypatch.setattr(store, "put_if_absent", exists_once)
    assert publish_copy.copy_bytes(store, RatifiedCommit(version=2, commit_timestamp=1), b"{}\n") is True
    assert attempts == [f"{2:020d}.json"] * 2 and store.read(f"{2:020d}.json") == b"{}\n"

    def exists(name: str, data: bytes) -> None:
        raise LogFileExistsError(name)

    def vanished(name: str) -> bytes:
        raise FileNotFoundError(name)

    monkeypatch.setattr(store, "put_if_absent", exists)
    monkeypatch.setattr(store, "read", vanished)
    with pytest.raises(MissingCommitError, match="kept vanishing"):
        publish_copy.copy_bytes(store, RatifiedCommit(version=3, commit_timestamp=1), b"{}\n")
