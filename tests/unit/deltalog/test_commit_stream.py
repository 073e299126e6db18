"""The one-parse strict validation of a streamed commit (``deltalog/replay/commit_stream.py``) gives
exactly the outcome of the two passes it replaced — the caller's plain line rules over the whole
block, then ``loads_action`` and ``CommitRules`` over every line — with and without the compiled
scanner (``_log_lines``), with and without orjson's round-trip path, on valid commits and on
thousands of mutated ones, short and long (runs of plain adds checked together); and the scanner
vouches only for lines the pure path accepts with the same path."""

from __future__ import annotations

import json
import random

import pytest

from airflow_delta_maintenance.deltalog.errors import CorruptLogError
from airflow_delta_maintenance.deltalog.model import schema_validation
from airflow_delta_maintenance.deltalog.model.partition_keys import check_partition_keys, partition_value_keys
from airflow_delta_maintenance.deltalog.model.validation import CommitRules, canonical_path, loads_action
from airflow_delta_maintenance.deltalog.replay import commit_stream
from airflow_delta_maintenance.deltalog.replay.commit_stream import CommitStreamValidator, PartitionKeys, RescanCommit

from .logbuilder import metadata

needs_scanner = pytest.mark.skipif(not commit_stream.AVAILABLE, reason="the accelerators are not installed (or DELTA_MAINTENANCE_ACCEL=off)")

STATS = json.dumps({"numRecords": 3, "minValues": {"id": 1}, "maxValues": {"id": 9}, "nullCount": {"id": 0}})
LINES = [
    {"commitInfo": {"timestamp": 1700000000000, "operation": "WRITE", "inCommitTimestamp": 1700000000000}},
    {"add": {"path": "region=x/part-0001.parquet", "partitionValues": {"region": "x"}, "size": 4000, "modificationTime": 1700000000000,
             "dataChange": True, "stats": STATS}},
    {"add": {"path": "part-0002.parquet", "partitionValues": {}, "size": 0, "modificationTime": -1, "dataChange": False, "stats": None,
             "tags": {"a": "b", "c": None}, "baseRowId": 4, "defaultRowCommitVersion": 2, "clusteringProvider": "liquid", "future": [1, {"x": None}]}},
    {"add": {"path": "part-é\u00ff.parquet", "partitionValues": {"d": None}, "size": 1, "modificationTime": 0, "dataChange": True, "deletionVector": None}},
    {"add": {"path": "dv.parquet", "partitionValues": {}, "size": 1, "modificationTime": 0, "dataChange": True,
             "deletionVector": {"storageType": "u", "pathOrInlineDv": "ab", "offset": 1, "sizeInBytes": 3, "cardinality": 1}}},
    {"add": {"path": "file:/tmp/t/part-3.parquet", "partitionValues": {}, "size": 1, "modificationTime": 0, "dataChange": True}},
    {"remove": {"path": "part-0003.parquet", "deletionTimestamp": 1700000000000, "dataChange": True, "extendedFileMetadata": True,
                "partitionValues": {"region": "y"}, "size": 12}},
    {"remove": {"path": "part-0004.parquet", "dataChange": False}},
    {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
    {"txn": {"appId": "app", "version": 3}},
]
NOISE = [b'"', b"\\", b"{", b"}", b"[", b"]", b",", b":", b"\x00", b"\xff", b"\xed\xa0\x80", b" ", b"\t", b"\x0b", b"1", b".", b"e", b"-",
         b"null", b"true", b"NaN", b"1e400", b"\\ud800", b"\\u00e9", b"99999999999999999999", b'"path":"x",', b'"size":1,',
         b"[" * 66 + b"]" * 66, b'"x":' + b"[" * 63 + b"]" * 63 + b","]


@pytest.fixture(autouse=True)
def strict_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """``loads_action``, the reference below, takes the strict decoder alone (its orjson shortcut
    is among what is compared); the validators under test keep theirs (bound at their import)."""
    monkeypatch.setattr(schema_validation, "ORJSON", None)


def compact(action: dict) -> bytes:
    return json.dumps(action, separators=(",", ":"), ensure_ascii=False).encode()


def mutate(rng: random.Random, line: bytes) -> bytes:
    b = bytearray(line)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        at = rng.randrange(len(b) + 1)
        op = rng.randrange(5)
        if op == 0 and b:
            del b[min(at, len(b) - 1)]
        elif op == 1:
            b[at:at] = rng.choice(NOISE)
        elif op == 2 and b:
            b[min(at, len(b) - 1)] = rng.randrange(256)
        elif op == 3:  # a key and value repeated (duplicate keys, two actions, twice the same field)
            cut = line.find(b",", at)
            b[at:at] = line[at:cut + 1] if cut > 0 else b""
        else:
            b = b[: rng.randrange(len(b) + 1)]
    return bytes(b)


def plain_rules(raw: bytes) -> None:
    """Publish's own line rules (staged_commits._CommitLines): one JSON object holding one key."""
    if raw.strip():
        action = json.loads(raw)
        if not isinstance(action, dict) or len(action) != 1:
            raise ValueError("not one action")


def two_passes(blocks: list[bytes]) -> object:
    """The outcome of the old code: the plain rules over the block, then the strict ones."""
    rules = CommitRules("c", canonical_path)
    number = 0
    try:
        for block in blocks:
            for i, raw in enumerate(block.split(b"\n"), start=number + 1):
                try:
                    plain_rules(raw)
                except (ValueError, RecursionError):
                    return ("plain", i)
            for raw in block.split(b"\n"):
                number += 1
                if raw.strip():
                    action = loads_action(raw, "c", number)
                    kind = next(iter(action))
                    rules.feed(kind, action[kind], number)
    except CorruptLogError as exc:
        return ("strict", str(exc))
    return ("ok", rules._paths, rules._files, rules._once_keys)


def one_pass(blocks: list[bytes], accelerated: bool, fast: bool = False) -> object:
    validator = CommitStreamValidator("c", accelerated=accelerated, fast=fast)
    failed: list[int] = []

    def plain(number: int, raw: bytes) -> None:
        try:
            plain_rules(raw)
        except (ValueError, RecursionError):
            failed.append(number)
            raise

    try:
        for block in blocks:
            validator.feed(block, plain)
    except (ValueError, RecursionError):
        return ("plain", failed[-1])
    except CorruptLogError as exc:
        return ("strict", str(exc))
    return ("ok", validator.rules._paths, validator.rules._files, validator.rules._once_keys)


def commits(seed: int, count: int) -> list[list[bytes]]:
    rng = random.Random(seed)
    valid = [compact(a) for a in LINES]
    out = []
    for _ in range(count):
        lines = [valid[0]] + [rng.choice(valid[1:]) if rng.random() < 0.6 else mutate(rng, rng.choice(valid)) for _ in range(rng.randrange(1, 7))]
        data = b"\n".join(lines) + rng.choice((b"", b"\n", b"\n\n", b"\n \t"))
        cuts = sorted(rng.sample(range(len(lines)), rng.randrange(len(lines))))
        out.append(blocks_of_lines(data, cuts))
    return out


def blocks_of_lines(data: bytes, cuts: list[int]) -> list[bytes]:
    """``data`` cut before the given line numbers: blocks of whole lines, as a stream is fed."""
    parts = data.split(b"\n")
    blocks, prev = [], 0
    for cut in [*cuts, len(parts)]:
        if cut > prev:
            blocks.append(b"\n".join(parts[prev:cut]))
            prev = cut
    return blocks


PATHS = ["file:/tmp/t/part-3.parquet", "part-0003.parquet", "part-0004.parquet"]


def long_commits(seed: int, count: int) -> list[list[bytes]]:
    """Commits of up to 200 lines, mostly plain adds of distinct paths (long runs), some of them
    repeating a path, adding a path a remove removed, mutated, or not in compact form."""
    rng = random.Random(seed)
    valid = [compact(a) for a in LINES]
    out = []
    for c in range(count):
        lines = [valid[0]]
        for i in range(rng.randrange(1, 200)):
            r = rng.random()
            add = {"add": {"path": f"p={c % 3}/part-{i:05d}.parquet", "partitionValues": {"p": str(c % 3)}, "size": i,
                           "modificationTime": 1700000000000 + i, "dataChange": True, "stats": STATS}}
            if r < 0.006:
                add["add"]["path"] = rng.choice([*PATHS, f"p={c % 3}/part-{max(i - 3, 0):05d}.parquet"])  # an earlier add's, a remove's
            elif r < 0.012:
                lines.append(mutate(rng, compact(add)))
                continue
            elif r < 0.016:
                lines.append(json.dumps(add).encode())  # valid, not compact
                continue
            elif r < 0.03:
                lines.append(rng.choice(valid))
                continue
            lines.append(compact(add))
        data = b"\n".join(lines) + rng.choice((b"", b"\n"))
        parts = data.split(b"\n")
        cuts = sorted(rng.sample(range(len(parts)), rng.randrange(min(len(parts), 4))))
        out.append(blocks_of_lines(data, cuts))
    return out


@pytest.mark.parametrize(
    ("accelerated", "fast"),
    [(False, False), (False, True), pytest.param(True, False, marks=needs_scanner)],
    ids=["pure", "orjson", "compiled"],
)
def test_one_parse_per_line_gives_the_two_passes_outcome(accelerated: bool, fast: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(commit_stream, "_BATCH", 7)  # batches end inside runs and commits
    outcomes: dict[str, int] = {}
    for blocks in commits(seed=28, count=3000) + long_commits(seed=29, count=400):
        expected = two_passes(blocks)
        got = one_pass(blocks, accelerated, fast)
        assert got == expected, blocks
        outcomes[str(expected[0])] = outcomes.get(str(expected[0]), 0) + 1
    assert min(outcomes.get(k, 0) for k in ("ok", "plain", "strict")) > 300, outcomes  # all three outcomes exercised


def test_the_orjson_path_is_used_and_takes_only_what_the_strict_decoder_takes() -> None:
    """Lines orjson parses but the strict decoder refuses or reads otherwise — a duplicate key, an
    integer beyond 64 bits, ``-0``, whitespace, escapes — are refused (or decided) as the strict
    way decides them, with the same one-line error naming the file and line."""
    assert commit_stream.CommitStreamValidator("c")._fast  # orjson is a dependency: the default install runs this path
    add = compact(LINES[1])
    body = add[len(b'{"add":{'):-2]
    for line in (
        b'{"add":{' + body + b',"size":5}}',  # the same key twice
        b'{"add":{"path":"a","path":"b",' + body[body.index(b'"partitionValues"'):] + b"}}",
        add.replace(b'"size":4000', b'"size":99999999999999999999999'),
        add.replace(b'"size":4000', b'"size":18446744073709551615'),
        add.replace(b'"size":4000', b'"size":-0'),
        add.replace(b'"size":4000', b'"size":4E3'),
        add.replace(b'"size":4000', b'"size" :4000'),
        add.replace(b'"size":4000', b'"size":4000,"size":4000'),
        add.replace(b'"region":"x"', b'"region":"x","region":"y"'),
        add.replace(b"part-0001", b"part-\\\\ud800"),  # an escaped backslash: no escape at all
        add.replace(b"part-0001", b"part-\\ud800"),  # a lone surrogate
        add.replace(b"part-0001", b"part-\\u00e9"),
        b'{"commitInfo":{"a":1e400}}', b'{"commitInfo":{"a":NaN}}', b'{"commitInfo":{"a":1,"a":2}}',
        b'{"commitInfo":{"x":' + b"[" * 65 + b"]" * 65 + b"}}",
        b'{"protocol":{"minReaderVersion":1,"minWriterVersion":2,"minWriterVersion":3}}',
        add + b" ", b" " + add, add + b"\r", add[:-1],
    ):
        data = b"\n".join([add.replace(b"part-0001", b"part-first"), line, add.replace(b"part-0001", b"part-last")])
        assert one_pass([data], False, True) == two_passes([data]), line


def test_loads_action_decides_with_orjson_as_with_the_strict_decoder_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """``loads_action`` (every reader's line-by-line path) gives the same action, or the same
    error, whether orjson's round trip takes the line or the strict decoder does."""
    import orjson  # a dependency; the fixture took it away from loads_action

    def outcome(raw: bytes) -> object:
        try:
            return loads_action(raw, "c", 1)
        except CorruptLogError as exc:
            return str(exc)

    rng = random.Random(34)
    valid = [compact(a) for a in LINES]
    lines = valid + [mutate(rng, rng.choice(valid)) for _ in range(20000)] + [b'{"commitInfo":{"a":0.1,"b":1e-7,"c":12345.678,"d":-0.0}}']
    strict = [outcome(raw) for raw in lines]
    monkeypatch.setattr(schema_validation, "ORJSON", orjson)
    taken = sum(schema_validation.parse_compact(raw) is not None for raw in lines)
    assert [outcome(raw) for raw in lines] == strict
    assert taken > 3000, taken  # the shortcut was taken, not only the strict decoder


def test_long_runs_of_plain_adds_are_checked_together() -> None:
    """A commit of thousands of plain adds: its runs go through ``plain_adds_ok`` and
    ``CommitRules.feed_adds``, not a line at a time — and record what the line-by-line rules do."""
    lines = [compact(LINES[0])] + [compact({"add": {"path": f"part-{i:05d}.parquet", "partitionValues": {}, "size": i, "modificationTime": i,
                                                    "dataChange": True, "stats": STATS}}) for i in range(5000)]
    data = b"\n".join(lines) + b"\n"
    validator = CommitStreamValidator("c", accelerated=False, fast=True)
    calls: list[int] = []
    feed_adds = validator.rules.feed_adds

    def counted(paths: list[str], lines: range) -> bool:
        calls.append(len(paths))
        return feed_adds(paths, lines)

    validator.rules.feed_adds = counted  # type: ignore[method-assign]
    validator.feed(data)
    validator.finish()
    assert sum(calls) == 5000 and len(calls) <= 5001 // commit_stream._BATCH + 2, calls
    assert one_pass([data], False, True) == two_passes([data])
    assert validator.number == 5002 and validator.actions == 5001 and validator.first == json.loads(lines[0])


@needs_scanner
def test_the_scanner_vouches_only_for_lines_the_pure_path_accepts_with_the_same_path() -> None:
    rng = random.Random(33)
    valid = [compact(a) for a in LINES]
    vouched = 0
    lines = valid + [mutate(rng, rng.choice(valid)) for _ in range(20000)]
    lines += [b"  " + valid[1] + b" \r", valid[1].replace(b"4000", b"-0"), b'{"add":' + valid[1][7:-1] + b',"remove":null}', b"\x0b\x0c \t", b""]
    block = b"\n".join(lines)
    lines = block.split(b"\n")  # a mutation may have made a newline
    codes, paths = commit_stream._log_lines.scan(block)  # type: ignore[union-attr]
    assert len(codes) == len(lines)
    path = iter(paths)
    for code, raw in zip(codes, lines, strict=True):
        if code == 0:
            assert not raw.strip(), raw
        elif code in (1, 2):
            action = loads_action(raw, "c", 1)  # the pure path accepts it ...
            plain_rules(raw)  # ... and so do publish's own rules
            kind = next(iter(action))
            assert (kind, action[kind]["path"]) == (("add", "remove")[code - 1], next(path)), raw
            assert canonical_path(action[kind]["path"]) == action[kind]["path"] and not action[kind].get("deletionVector")
            vouched += 1
    assert next(path, None) is None
    assert vouched > 1000  # mutations that left a plain line plain: taken by the scanner, not left to Python
    assert codes[: len(valid)] == b"\x03\x01\x01\x01\x03\x03\x02\x02\x03\x03"  # DV and file: paths are the pure path's
    assert codes[-5:] == b"\x01\x01\x03\x00\x00"


def test_the_plain_add_shortcut_decides_as_the_general_field_rules() -> None:
    """``validation._add`` accepts a plain add in a few checks: on any add body, it accepts and
    refuses exactly what the general field rules do, with the same message."""
    from airflow_delta_maintenance.deltalog.model import validation

    def outcome(check: object, body: dict) -> str:
        try:
            check(body, "add")  # type: ignore[operator]
        except validation._Invalid as exc:
            return str(exc)
        return "ok"

    rng = random.Random(31)
    adds = [compact(a) for a in LINES if "add" in a]
    tried = accepted = 0
    for _ in range(20000):
        try:
            action = json.loads(mutate(rng, rng.choice(adds)))
        except (ValueError, RecursionError):
            continue
        if not isinstance(action, dict) or not isinstance(action.get("add"), dict):
            continue
        body = action["add"]
        expected = outcome(lambda b, k: validation._fields(b, k, validation._ADD), body)
        assert outcome(validation._add, body) == expected, body
        tried += 1
        accepted += expected == "ok"
    for body in ({"path": "p", "partitionValues": {}, "size": 2**63, "modificationTime": 0, "dataChange": True},
                 {"path": "p", "partitionValues": {}, "size": 1, "modificationTime": -(2**63) - 1, "dataChange": True},
                 {"path": "p", "partitionValues": {"a": 1}, "size": 1, "modificationTime": 0, "dataChange": 1},
                 {"path": "", "partitionValues": {}, "size": True, "modificationTime": 0, "dataChange": True}):
        assert outcome(validation._add, body) == outcome(lambda b, k: validation._fields(b, k, validation._ADD), body) != "ok"
    assert tried > 2000 and accepted > 500, (tried, accepted)


def with_keys_two_passes(blocks: list[bytes], allowed: frozenset[str]) -> object:
    """The two passes, then replay's partition-value keys rule (``tail_check._line_by_line``): the
    commit's own metaData's keys, else ``allowed``, for every add, the first offender in order."""
    out = two_passes(blocks)
    if out[0] != "ok":
        return out
    lines = b"\n".join(blocks).split(b"\n")
    actions = [(n, loads_action(raw, "c", n)) for n, raw in enumerate(lines, start=1) if raw.strip()]
    metas = [a["metaData"] for _, a in actions if "metaData" in a]
    keys = partition_value_keys(metas[0]) if metas else allowed
    try:
        for n, a in actions:
            if "add" in a and keys is not None:
                check_partition_keys(a["add"], keys, "c", n)
    except CorruptLogError as exc:
        return ("strict", str(exc))
    return (*out, keys)


def with_keys_one_pass(blocks: list[bytes], allowed: frozenset[str], accelerated: bool, fast: bool) -> object:
    """As publish runs it: fed block by block, finished, fed again when a metaData asks for it."""
    commit_keys = None
    for _ in range(2):
        keys = PartitionKeys(allowed)
        validator = CommitStreamValidator("c", accelerated=accelerated, fast=fast, keys=keys, commit_keys=commit_keys)
        try:
            for block in blocks:
                validator.feed(block, lambda number, raw: plain_rules(raw))
            validator.finish()
        except RescanCommit as again:
            assert commit_keys is None, "asked twice"
            commit_keys = again.keys
            continue
        except (ValueError, RecursionError):
            return ("plain",)
        except CorruptLogError as exc:
            return ("strict", str(exc))
        return ("ok", validator.rules._paths, validator.rules._files, validator.rules._once_keys, keys.allowed)
    raise AssertionError("unreachable")


@pytest.mark.parametrize(
    ("accelerated", "fast"),
    [(False, False), (False, True), pytest.param(True, False, marks=needs_scanner)],
    ids=["pure", "orjson", "compiled"],
)
def test_partition_value_keys_decide_alike_on_every_path(accelerated: bool, fast: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The keys rule in the streamed validator (cached frozenset, the scanner's C check, a metaData
    anywhere in the commit) gives replay's outcome on mutated commits: the table's keys ``p`` and
    ``region``, LINES' ``{"d": None}`` refused, a metaData (first, in the middle, last) that keeps
    only ``p`` or adds ``d``."""
    if accelerated and not commit_stream._SCAN_KEYS:
        pytest.skip("the installed scanner does not check partition-value keys (an older build)")
    monkeypatch.setattr(commit_stream, "_BATCH", 7)
    metas = [compact(metadata(partition_columns=cols)) for cols in (["p"], ["p", "d", "region"])]
    rng = random.Random(30)
    outcomes: dict[str, int] = {}
    for blocks in commits(seed=31, count=1200) + long_commits(seed=32, count=300):
        if rng.random() < 0.3:  # a metaData somewhere in the commit (never line 1: the commitInfo)
            parts = b"\n".join(blocks).split(b"\n")
            parts.insert(rng.randrange(1, len(parts) + 1), rng.choice(metas))
            blocks = blocks_of_lines(b"\n".join(parts), sorted(rng.sample(range(len(parts)), rng.randrange(min(len(parts), 4)))))
        expected = with_keys_two_passes(blocks, frozenset({"p", "region"}))
        got = with_keys_one_pass(blocks, frozenset({"p", "region"}), accelerated, fast)
        assert (got[0], *got[1:]) == ((expected[0],) if expected[0] == "plain" else expected), blocks
        key = str(expected[0]) + ("-keys" if expected[0] == "strict" and "not a partition column" in str(expected[1]) else "")
        outcomes[key] = outcomes.get(key, 0) + 1
    assert outcomes.get("strict-keys", 0) > 50 and outcomes.get("ok", 0) > 200, outcomes
