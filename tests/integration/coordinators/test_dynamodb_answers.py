"""A DynamoDB item that departs from delta-spark's schema, or whose commits contradict each other,
met as users meet it: ``delta-maintenance publish|versions|cleanup TABLE --coordinator auto`` on
DynamoDB Local. Each shape is written as a raw item; every command must stop with one typed line
naming the table and the version or field, exit 4, and write nothing (no ``<v>.json``, no deletion,
no change to the item). Before, 24 of 27 such runs ended in a ``KeyError`` traceback, ``commits``
stored as a string was a green "nothing to publish", a duplicated entry was refused naming another
version, and ``fsLength`` 1.5 was a bare ``ValueError``.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from airflow_delta_maintenance.cli import main
from airflow_delta_maintenance.coordinators import commit_file
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.demo.sample_table import create_actions
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator
from tests.integration.coordinators._targets import add

pytestmark = pytest.mark.integration

DAY_MS = 86_400_000
Item = dict[str, Any]


@dataclass
class Coordinated:
    uri: str
    raw: Any  # a boto3 DynamoDB client, for the test's own reads and writes of the item
    dynamodb_table: str
    table_id: str
    item: Item  # the valid item: versions 0..6 published and checkpointed, 7 and 8 ratified

    def put(self, item: Item) -> None:
        self.raw.put_item(TableName=self.dynamodb_table, Item=item)

    def get(self) -> Item:
        return self.raw.get_item(TableName=self.dynamodb_table, Key={"tableId": {"S": self.table_id}}, ConsistentRead=True)["Item"]


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def log_state(uri: str) -> dict[str, bytes]:
    log = Path(uri) / "_delta_log"
    return {str(p.relative_to(log)): p.read_bytes() for p in sorted(log.rglob("*")) if p.is_file()}


@pytest.fixture
def coordinated(dynamodb_endpoint: str, dynamodb_table_name: str, aws_env: dict[str, str], tmp_path: Path,
                frozen_clock: Callable[[int], None], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Coordinated:
    """Versions 0..6 committed 60 days ago, published and checkpointed (so a cleanup has files to
    delete), 7 and 8 ratified now and pending (so a publish has files to write)."""
    client = open_coordinator(f"dynamodb://{dynamodb_table_name}?region=us-east-1&endpoint={dynamodb_endpoint}")
    client.create_dynamodb_table()  # type: ignore[attr-defined]
    uri = str(tmp_path / "t")
    old = int(time.time() * 1000) - 60 * DAY_MS
    frozen_clock(old)
    client.commit(uri, 0, create_actions(ict=True))
    conf = dict(load_snapshot(uri).properties.coordinator_table_conf)
    for v in range(1, 7):
        frozen_clock(old + v * 1000)
        client.commit(uri, v, [add(f"f{v}")], conf)
    assert cli(capsys, "publish", uri, "--coordinator", "auto")[0] == 0
    assert cli(capsys, "checkpoint", uri, "--force", "--coordinator", "auto")[0] == 0
    monkeypatch.setattr(commit_file, "wall_clock_ms", lambda: int(time.time() * 1000))
    for v in (7, 8):
        client.commit(uri, v, [add(f"f{v}")], conf)
    raw = boto3.client("dynamodb", endpoint_url=dynamodb_endpoint, region_name="us-east-1")
    setup = Coordinated(uri, raw, dynamodb_table_name, conf["tableId"], {})
    setup.item = setup.get()
    assert [e["M"]["version"]["N"] for e in setup.item["commits"]["L"]] == ["7", "8"]
    return setup


def _entries(item: Item) -> list[Item]:
    return item["commits"]["L"]


def _set(path: str, value: Any) -> Callable[[Item], None]:
    """Set ``commits.L[i].M.<field>`` (``"7.fsLength"``: the entry of version 7) or a top-level attribute."""
    def apply(item: Item) -> None:
        if "." in path:
            version, name = path.split(".")
            entry = next(e for e in _entries(item) if e["M"]["version"]["N"] == version)
            if value is None:
                del entry["M"][name]
            else:
                entry["M"][name] = value
        elif value is None:
            del item[path]
        else:
            item[path] = value
    return apply


def _commits(fn: Callable[[list[Item]], Any]) -> Callable[[Item], None]:
    def apply(item: Item) -> None:
        item["commits"]["L"] = fn(_entries(item))
    return apply


def _renumbered(entry: Item, version: int) -> Item:
    """``entry`` moved to ``version``, its file name following (so only the gap is wrong)."""
    out = copy.deepcopy(entry)
    out["M"]["version"] = {"N": str(version)}
    out["M"]["fsName"] = {"S": f"{version:020d}" + out["M"]["fsName"]["S"][20:]}
    return out


# (id, change to the valid item, error type, what the one line must name)
SHAPES: list[tuple[str, Callable[[Item], None], str, str]] = [
    ("no-tableVersion", _set("tableVersion", None), "MalformedAnswerError", "tableVersion is missing"),
    ("tableVersion-a-string", _set("tableVersion", {"S": "8"}), "MalformedAnswerError", "tableVersion is '8' of DynamoDB type S"),
    ("tableVersion-a-fraction", _set("tableVersion", {"N": "8.5"}), "MalformedAnswerError", "tableVersion is '8.5', not a whole number"),
    ("no-hasAcceptedCommits", _set("hasAcceptedCommits", None), "MalformedAnswerError", "hasAcceptedCommits is missing"),
    ("hasAcceptedCommits-a-string", _set("hasAcceptedCommits", {"S": "true"}), "MalformedAnswerError", "hasAcceptedCommits is 'true'"),
    ("path-a-number", _set("path", {"N": "1"}), "MalformedAnswerError", "path is '1' of DynamoDB type N"),
    ("no-commits", _set("commits", None), "MalformedAnswerError", "commits is missing"),
    ("commits-a-string", lambda item: item.update(commits={"S": json.dumps(_entries(item))}), "MalformedAnswerError",
     "not a DynamoDB L"),
    ("entry-not-a-map", _commits(lambda es: [{"S": "00000000000000000007.json"}, es[1]]), "MalformedAnswerError",
     "commits[0] is '00000000000000000007.json' of DynamoDB type S, not a DynamoDB map"),
    ("entry-without-version", _set("7.version", None), "MalformedAnswerError", "commits[0].version is missing"),
    ("entry-without-fsName", _set("7.fsName", None), "MalformedAnswerError", "the commit of version 7: fsName is missing"),
    ("entry-without-fsTimestamp", _set("8.fsTimestamp", None), "MalformedAnswerError", "the commit of version 8: fsTimestamp is missing"),
    ("entry-without-timestamp", _set("7.timestamp", None), "MalformedAnswerError", "the commit of version 7: timestamp is missing"),
    ("version-a-string", _set("8.version", {"S": "8"}), "MalformedAnswerError", "commits[1].version is '8' of DynamoDB type S"),
    ("fsLength-1.5", _set("7.fsLength", {"N": "1.5"}), "MalformedAnswerError", "the commit of version 7: fsLength is '1.5', not a whole number"),
    ("fsLength-negative", _set("7.fsLength", {"N": "-1"}), "MalformedAnswerError", "the commit of version 7: fsLength is -1, out of range"),
    ("fsName-a-path", _set("7.fsName", {"S": "../../../etc/00000000000000000007.x.json"}), "MalformedAnswerError",
     "the commit of version 7: fsName is '../../../etc/00000000000000000007.x.json', not a staged commit file name"),
    ("fsName-of-another-version", lambda item: _entries(item)[0]["M"].update(fsName=_entries(item)[1]["M"]["fsName"]),
     "MalformedAnswerError", "the commit of version 7: fsName is '00000000000000000008."),
    ("duplicated-entry", _commits(lambda es: [es[0], es[1], es[1]]), "InconsistentCommitsError", "version 8 is listed twice"),
    ("out-of-order", _commits(lambda es: [es[1], es[0]]), "InconsistentCommitsError", "version 7 is listed after version 8"),
    ("a-gap", lambda item: (_commits(lambda es: [es[0], _renumbered(es[1], 9)])(item), item.update(tableVersion={"N": "9"})),
     "InconsistentCommitsError", "versions 7 and 9 are listed, version 8 is not"),
    ("above-the-head", _set("tableVersion", {"N": "7"}), "InconsistentCommitsError",
     "version 8 is listed above the latest ratified version 7"),
    ("short-of-the-head", _commits(lambda es: es[:1]), "InconsistentCommitsError",
     "the listed commits stop at version 7, but the latest ratified version is 8"),
    ("commits-but-none-accepted", _set("hasAcceptedCommits", {"BOOL": False}), "InconsistentCommitsError",
     "has accepted no commit"),
]


@pytest.mark.parametrize(("change", "error", "named"), [s[1:] for s in SHAPES], ids=[s[0] for s in SHAPES])
def test_a_malformed_item_stops_every_command_with_one_typed_line_and_writes_nothing(
    coordinated: Coordinated, capsys: pytest.CaptureFixture[str], change: Callable[[Item], None], error: str, named: str
) -> None:
    bad = copy.deepcopy(coordinated.item)
    change(bad)
    coordinated.put(bad)
    before = log_state(coordinated.uri)
    for argv in (["publish"], ["versions"], ["cleanup", "--execute"]):
        code, out, err = cli(capsys, argv[0], coordinated.uri, "--coordinator", "auto", *argv[1:])
        assert (code, out) == (4, ""), (argv, code, out, err)
        assert err.count("\n") == 1 and err.startswith(f"delta-maintenance: error: {error}: "), (argv, err)
        assert named in err and coordinated.uri in err, (argv, err)
    assert log_state(coordinated.uri) == before  # nothing published, nothing deleted
    assert coordinated.get() == bad  # nothing reported


def test_the_valid_item_publishes_and_cleans_up(coordinated: Coordinated, capsys: pytest.CaptureFixture[str]) -> None:
    """The control: the same table with its valid item publishes 7 and 8 and cleanup deletes old
    files, so the runs above would have written and deleted had they not stopped."""
    before = log_state(coordinated.uri)
    code, out, err = cli(capsys, "publish", coordinated.uri, "--coordinator", "auto", "--json")
    assert code == 0 and (json.loads(out)["from_version"], json.loads(out)["to_version"], json.loads(out)["count"]) == (7, 8, 2), err
    code, out, err = cli(capsys, "cleanup", coordinated.uri, "--coordinator", "auto", "--execute", "--json")
    assert code == 0, err
    after = log_state(coordinated.uri)
    assert f"{7:020d}.json" in after and f"{8:020d}.json" in after
    assert {f"{v:020d}.json" for v in range(6)} & set(before) - set(after), (sorted(before), sorted(after))
