"""Damage one file of a Delta log, then run every maintenance command over it: the harness of the
corruption property test and fuzz run (``tests/unit/cli/test_corrupt_log_fuzz.py``).

``build_table`` writes a small, realistic table (partitioned, statistics, tags, a txn, a deletion
vector, removes; a checkpoint at 5 and commits 0..4 old enough to clean up). ``MUTATIONS`` damage
one log file in one of the ways a crashed writer, a buggy engine or a hostile user would: truncation,
emptying, flipped bytes, wrong types, missing or unknown fields, duplicated or conflicting actions,
deep nesting, invalid UTF-8, a directory in its place. ``run_commands`` drives the use cases of
``status``, ``inspect``, ``checkpoint``, ``compact-log`` and ``cleanup --execute`` in-process as the
CLI wires them; ``CLI_COMMANDS`` are the same as a user types them.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fsspec

from airflow_delta_maintenance.coordinators.errors import CoordinatorError
from airflow_delta_maintenance.deltalog.checkpoint.writer import write_checkpoint
from airflow_delta_maintenance.deltalog.errors import DeltaLogError
from airflow_delta_maintenance.deltalog.log_segment.last_checkpoint import LastCheckpointHint
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from airflow_delta_maintenance.maintenance.operations.checkpoint import plan_checkpoint, run_local_checkpoint
from airflow_delta_maintenance.maintenance.operations.inspect import inspect_table
from airflow_delta_maintenance.maintenance.operations.log_cleanup import run_metadata_cleanup
from airflow_delta_maintenance.maintenance.operations.log_compaction import run_log_compaction
from airflow_delta_maintenance.maintenance.operations.status import table_status
from airflow_delta_maintenance.maintenance.table.maintained import open_table
from tests.unit.deltalog.logbuilder import LogBuilder

__all__ = ["build_table", "MUTATIONS", "mutate", "run_commands", "Outcome", "TYPED", "CLI_COMMANDS", "log_listing", "LATEST"]

DAY = 86_400_000
LATEST = 8
TYPED = (DeltaLogError, CoordinatorError)  # what a command may end with: one typed line on the CLI
SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "region", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
)


def _add(v: int, i: int, **extra: Any) -> dict[str, Any]:
    stats = json.dumps({"numRecords": 10 + i, "minValues": {"id": i}, "maxValues": {"id": 100 + i}, "nullCount": {"id": 0}})
    body = {"path": f"region=r{i % 2}/part-{v:03d}-{i}.parquet", "partitionValues": {"region": f"r{i % 2}"}, "size": 1000 + 10 * v + i,
            "modificationTime": 1_700_000_000_000 + v, "dataChange": True, "stats": stats}
    body.update(extra)
    return {"add": body}


def build_table(root: Path, now_ms: int, *, v2_json: bool = False) -> None:
    """Commits 0..8 (0..5 forty days old, the rest recent) and a checkpoint at 5: a classic one
    written by us, or (``v2_json``) a UUID-named JSON V2 checkpoint on a table with the
    ``v2Checkpoint`` feature — read without Parquet, so a fuzz run reads more commits per second."""
    log = LogBuilder(fsspec.filesystem("file"), str(root))
    conf = {"delta.logRetentionDuration": "interval 7 days", **({"delta.checkpointPolicy": "v2"} if v2_json else {})}
    proto: dict[str, Any] = {"minReaderVersion": 1, "minWriterVersion": 2}
    if v2_json:
        proto = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["v2Checkpoint"], "writerFeatures": ["v2Checkpoint"]}
    for v in range(LATEST + 1):
        actions: list[dict[str, Any]] = [{"commitInfo": {"timestamp": now_ms, "operation": "WRITE", "operationParameters": {"mode": "Append"}}}]
        if v == 0:
            actions += [
                {"protocol": proto},
                {"metaData": {"id": "fuzz-table", "format": {"provider": "parquet", "options": {}}, "schemaString": SCHEMA,
                              "partitionColumns": ["region"], "configuration": conf, "createdTime": 1}},
            ]
        actions += [_add(v, 0), _add(v, 1, tags={"INSERTION_TIME": str(v)})]
        if v >= 2:
            actions.append({"remove": {"path": f"region=r0/part-{v - 2:03d}-0.parquet", "deletionTimestamp": now_ms - DAY, "dataChange": True,
                                       "partitionValues": {"region": "r0"}, "size": 1000 + 10 * (v - 2), "extendedFileMetadata": True}})
        if v == 3:
            actions.append({"txn": {"appId": "app", "version": 3, "lastUpdated": now_ms}})
        if v == 7:
            dv = {"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^", "offset": 1, "sizeInBytes": 36, "cardinality": 2}
            actions.append(_add(v, 2, deletionVector=dv))
        age = 40 * DAY if v <= 5 else (LATEST - v + 1) * 60_000
        log.commit(v, actions, mtime_ms=now_ms - age)
    store = open_table_storage(str(root))
    if not v2_json:
        write_checkpoint(store, load_snapshot(store, 5))
        return
    snap = load_snapshot(store, 5)
    files = [{"add": {**a, "dataChange": False}} for a in snap.add_actions().to_pylist()]
    for f in files:
        body = f["add"]
        body["partitionValues"] = dict(body["partitionValues"])
        body["tags"] = dict(body["tags"]) if body["tags"] is not None else None
        for k in [k for k, v in body.items() if v is None]:
            del body[k]
    head = [{"checkpointMetadata": {"version": 5}}, {"protocol": snap.protocol.to_dict()}, {"metaData": snap.metadata.to_dict()},
            *({"txn": t.to_dict()} for t in snap.txns.values())]
    log.checkpoint(5, [*head, *files], uuid="3a0d65cd-4056-49b8-937b-95f9e3ee90e5", fmt="json", mtime_ms=now_ms - 40 * DAY)
    log.write("_last_checkpoint", LastCheckpointHint(version=5, size=len(head) + len(files)).to_json_bytes())


def log_listing(root: Path) -> dict[str, int]:
    """Every entry under the log: a file's size, -1 for a directory (scandir: the fuzz run lists the
    log ten times a mutation, and pathlib's rglob cost a seventh of its CPU)."""
    out: dict[str, int] = {}
    pending = [("", os.path.join(root, "_delta_log"))]
    while pending:
        prefix, directory = pending.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                name = prefix + entry.name
                if entry.is_file():
                    out[name] = entry.stat().st_size
                else:
                    out[name] = -1
                    if entry.is_dir(follow_symlinks=False):
                        pending.append((name + "/", entry.path))
    return out


# ---- mutations -----------------------------------------------------------------------------------

_VALUES: list[Any] = ["x", "", 7, -1, 1.5, True, False, None, [], ["a"], {}, {"a": 1}, 2**64, "1e400", {"k": {"k": ["v"]}}]


def _lines(data: bytes) -> list[bytes]:
    return [line for line in data.split(b"\n") if line.strip()]


def _join(lines: list[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


def _json_edit(data: bytes, rng: random.Random, edit: Callable[[dict[str, Any], random.Random], None]) -> bytes:
    lines = _lines(data)
    if not lines:
        return data
    i = rng.randrange(len(lines))
    try:
        action = json.loads(lines[i])
    except ValueError:
        return data
    edit(action, rng)
    text = json.dumps(action)
    lines[i] = text.replace('"1e400"', "1e400").encode()  # a number too large for a double, as a number
    return _join(lines)


def _wrong_type(action: dict[str, Any], rng: random.Random) -> None:
    kind, body = next(iter(action.items()))
    if not isinstance(body, dict) or not body:
        action[kind] = rng.choice(_VALUES)
        return
    key = rng.choice(sorted(body))
    target = body
    if isinstance(body[key], dict) and body[key] and rng.random() < 0.5:  # one level down: partitionValues, tags, format ...
        target = body[key]
        key = rng.choice(sorted(target))
    target[key] = rng.choice([v for v in _VALUES if type(v) is not type(target[key])])


def _drop_field(action: dict[str, Any], rng: random.Random) -> None:
    body = next(iter(action.values()))
    if isinstance(body, dict) and body:
        del body[rng.choice(sorted(body))]


def _unknown_field(action: dict[str, Any], rng: random.Random) -> None:
    body = next(iter(action.values()))
    if isinstance(body, dict):
        body[f"zz{rng.randrange(9)}"] = rng.choice(_VALUES)


def _deep(action: dict[str, Any], rng: random.Random) -> None:
    body = next(iter(action.values()))
    if isinstance(body, dict):
        body["deep"] = json.loads("[" * 60 + "]" * 60)  # below Python's limit; the line's nesting is not
    action.setdefault("commitInfo", None)


def _metadata_edit(action: dict[str, Any], rng: random.Random) -> None:
    if "metaData" not in action:
        return
    m = action["metaData"]
    choice = rng.randrange(6)
    if choice == 0:
        m["partitionColumns"] = "region"
    elif choice == 1:
        m["schemaString"] = json.dumps({"type": "struct", "fields": [{"name": "id", "nullable": True}]})
    elif choice == 2:
        m["schemaString"] = "{not json"
    elif choice == 3:
        m["schemaString"] = json.dumps({"type": "struct", "fields": [{"name": "region", "type": "string", "nullable": True}] * 2})
    elif choice == 4:
        m["partitionColumns"] = ["nope"]
    else:
        m["configuration"] = {"delta.logRetentionDuration": 7}


MUTATIONS: dict[str, Callable[[bytes, random.Random], bytes]] = {
    "truncate": lambda d, r: d[: r.randrange(max(len(d), 1))],
    "empty": lambda d, r: b"",
    "blank": lambda d, r: b"\n  \n",
    "flip-bytes": lambda d, r: bytes(b ^ (1 << r.randrange(8)) if r.random() < 3 / max(len(d), 1) else b for b in d) if d else d,
    "overwrite-bytes": lambda d, r: _overwrite(d, r),
    "invalid-utf8": lambda d, r: _insert(d, r, r.choice([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\\ud800"])),
    "wrong-type": lambda d, r: _json_edit(d, r, _wrong_type),
    "drop-field": lambda d, r: _json_edit(d, r, _drop_field),
    "unknown-field": lambda d, r: _json_edit(d, r, _unknown_field),
    "deep-nesting": lambda d, r: _json_edit(d, r, _deep),
    "very-deep-line": lambda d, r: _join([*_lines(d), b'{"commitInfo":{"x":' + b"[" * 100_000 + b"]" * 100_000 + b"}}"]),
    "duplicate-line": lambda d, r: _duplicate(d, r),
    "conflicting-remove": lambda d, r: _conflict(d, r),
    "two-actions-on-a-line": lambda d, r: _two_on_a_line(d, r),
    "metadata": lambda d, r: _json_edit(d, r, _metadata_edit) if b'"metaData"' in d else _join([*_lines(d), _bad_metadata(r)]),
    "shuffle-lines": lambda d, r: _join(r.sample(_lines(d), len(_lines(d)))),
}


def _overwrite(d: bytes, r: random.Random) -> bytes:
    if not d:
        return d
    at = r.randrange(len(d))
    return d[:at] + bytes(r.randrange(256) for _ in range(r.randint(1, 8))) + d[at + 8 :]


def _insert(d: bytes, r: random.Random, piece: bytes) -> bytes:
    at = r.randrange(len(d) + 1)
    return d[:at] + piece + d[at:]


def _duplicate(d: bytes, r: random.Random) -> bytes:
    lines = _lines(d)
    if not lines:
        return d
    i = r.randrange(len(lines))
    lines.insert(r.randrange(len(lines) + 1), lines[i])
    return _join(lines)


def _conflict(d: bytes, r: random.Random) -> bytes:
    lines = _lines(d)
    adds = [json.loads(x)["add"] for x in lines if x.startswith(b'{"add"')]
    if not adds:
        return d
    a = r.choice(adds)
    return _join([*lines, json.dumps({"remove": {"path": a["path"], "dataChange": True, "deletionVector": a.get("deletionVector")}}).encode()])


def _two_on_a_line(d: bytes, r: random.Random) -> bytes:
    lines = _lines(d)
    if len(lines) < 2:
        return d
    i = r.randrange(len(lines) - 1)
    merged = {**json.loads(lines[i]), **json.loads(lines[i + 1])}
    return _join([*lines[:i], json.dumps(merged).encode(), *lines[i + 2 :]])


def _bad_metadata(r: random.Random) -> bytes:
    m = {"id": "fuzz-table", "format": {"provider": "parquet", "options": {}}, "schemaString": SCHEMA, "partitionColumns": ["region"], "configuration": {}}
    action = {"metaData": m}
    _metadata_edit(action, r)
    return json.dumps(action).encode()


@dataclass
class Damage:
    target: str  # the log file damaged, relative to _delta_log
    how: str

    def __str__(self) -> str:
        return f"{self.how} of {self.target}"


def mutate(root: Path, rng: random.Random, *, targets: list[str] | None = None) -> Damage:
    """Damage one file of ``root``'s log (a commit most often; also the checkpoint, ``_last_checkpoint``)."""
    log = root / "_delta_log"
    checkpoint = next(p.name for p in log.iterdir() if ".checkpoint." in p.name)
    names = targets or [f"{LATEST:020d}.json"] * 6 + [f"{v:020d}.json" for v in (6, 7, 2)] + [checkpoint, "_last_checkpoint"]
    target = rng.choice(names)
    path = log / target
    if rng.random() < 0.04:
        path.unlink()
        path.mkdir()
        return Damage(target, "directory")
    data = path.read_bytes()
    if target.endswith(".parquet") or target == "_last_checkpoint":
        how = rng.choice(["truncate", "empty", "flip-bytes", "overwrite-bytes", "last-checkpoint"] if target == "_last_checkpoint" else ["truncate", "empty", "flip-bytes", "overwrite-bytes"])
        if how == "last-checkpoint":
            body = json.loads(data)
            body[rng.choice(["version", "size", "parts", "sizeInBytes"])] = rng.choice([1e400, "3", True, -1, 2**64, 1.5, None, [1]])
            new = json.dumps(body).encode().replace(b"Infinity", b"1e400")
        else:
            new = MUTATIONS[how](data, rng)
    else:
        how = rng.choice(sorted(MUTATIONS))
        new = MUTATIONS[how](data, rng)
    path.write_bytes(new)
    return Damage(target, how)


# ---- commands ------------------------------------------------------------------------------------


@dataclass
class Outcome:
    command: str
    error: BaseException | None = None
    result: Any = None
    changed: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)  # log files written or deleted

    @property
    def ok(self) -> bool:
        return self.error is None


def _diff(before: dict[str, int], after: dict[str, int]) -> dict[str, tuple[int | None, int | None]]:
    return {k: (before.get(k), after.get(k)) for k in before.keys() | after.keys() if before.get(k) != after.get(k)}


def _status(uri: str, now_ms: int) -> Any:
    with open_table(uri) as t:
        return table_status(t, now_ms=now_ms)


def _inspect(uri: str, now_ms: int) -> Any:
    with open_table(uri) as t:
        return inspect_table(t, include_files=True)


def _checkpoint(uri: str, now_ms: int) -> Any:
    with open_table(uri) as t:
        plan = plan_checkpoint(t, interval=1, force=True)
        return run_local_checkpoint(t, plan) if plan.decision.due else plan.decision


def _compact(uri: str, now_ms: int) -> Any:
    with open_table(uri) as t:
        return run_log_compaction(t, interval=2)


def _cleanup(uri: str, now_ms: int) -> Any:
    with open_table(uri) as t:
        return run_metadata_cleanup(t, dry_run=False, now_ms=now_ms)


COMMANDS: dict[str, Callable[[str, int], Any]] = {  # in the order a run applies them
    "status": _status,
    "inspect": _inspect,
    "compact-log": _compact,
    "cleanup": _cleanup,
    "checkpoint": _checkpoint,
}
# The same commands as a user types them (the table URI goes after the name).
CLI_COMMANDS: dict[str, list[str]] = {
    "status": ["status", "{uri}", "--json"],
    "inspect": ["inspect", "{uri}", "--json"],
    "checkpoint": ["checkpoint", "{uri}", "--force", "--json"],
    "compact-log": ["compact-log", "{uri}", "--interval", "2", "--json"],
    "cleanup": ["cleanup", "{uri}", "--execute", "--json"],
}


def run_commands(root: Path, now_ms: int, commands: list[str] | None = None) -> list[Outcome]:
    """Each command in turn on the table (writers change it for the next, as a DAG's tasks do).
    A typed error is an outcome; anything else propagates (a traceback fails the caller)."""
    out = []
    before = log_listing(root)
    for name in commands or list(COMMANDS):
        try:
            outcome = Outcome(name, result=COMMANDS[name](str(root), now_ms))
        except TYPED as exc:
            outcome = Outcome(name, error=exc)
        after = log_listing(root)
        outcome.changed = _diff(before, after)
        out.append(outcome)
        before = after  # the next command starts from what this one left
    return out


def fresh_copy(pristine: Path, work: Path) -> Path:
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(pristine, work, copy_function=shutil.copy2)
    return work


class PristineLog:
    """A table's files (bytes and mtimes) held in memory, to put a worked-on copy back as it was:
    only what a mutation or a command changed is rewritten (a fresh ``copytree`` of the whole table,
    and the ``rmtree`` of the last, per mutation cost more than some commands)."""

    def __init__(self, root: Path) -> None:
        self.files: dict[str, tuple[bytes, int]] = {}
        self.dirs: set[str] = set()
        for directory, _dirnames, filenames in os.walk(root):
            rel = os.path.relpath(directory, root)
            if rel != ".":
                self.dirs.add(rel)
            for name in filenames:
                path = os.path.join(directory, name)
                self.files[os.path.normpath(os.path.join(rel, name))] = (Path(path).read_bytes(), os.stat(path).st_mtime_ns)

    def restore(self, work: Path, touched: str) -> Path:
        """``work`` as the pristine table: anything new removed, anything whose size or mtime
        changed (and ``touched``, the file a mutation rewrote in place) rewritten with its mtime."""
        work.mkdir(parents=True, exist_ok=True)
        seen: set[str] = set()
        for directory, dirnames, filenames in os.walk(work):
            rel = os.path.relpath(directory, work)
            for name in list(dirnames):
                sub = os.path.normpath(os.path.join(rel, name))
                if sub not in self.dirs:
                    dirnames.remove(name)
                    full = os.path.join(directory, name)
                    if os.path.islink(full):
                        os.unlink(full)
                    else:
                        shutil.rmtree(full)
            for name in filenames:
                sub = os.path.normpath(os.path.join(rel, name))
                full = os.path.join(directory, name)
                kept = self.files.get(sub)
                if kept is None:
                    os.unlink(full)
                    continue
                seen.add(sub)
                st = os.lstat(full)
                if sub == touched or st.st_size != len(kept[0]) or st.st_mtime_ns != kept[1]:
                    self._write(work, sub)
        for sub in self.dirs:
            os.makedirs(work / sub, exist_ok=True)
        for sub in self.files.keys() - seen:
            self._write(work, sub)
        return work

    def _write(self, work: Path, sub: str) -> None:
        path = work / sub
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        data, mtime_ns = self.files[sub]
        path.write_bytes(data)
        os.utime(path, ns=(mtime_ns, mtime_ns))


def now_ms() -> int:
    return int(time.time() * 1000)


# ---- the fuzz run's worker (a separate process: see the test's docstring) --------------------------


def _validators_agree(data: bytes, name: str) -> str | None:
    """Every form of the one validation — line by line, the columnar reader, and the streamed one
    publish runs (with and without the compiled scanner, which must also word a refusal alike) —
    accepts or refuses the same commit; a description of the disagreement otherwise."""
    from airflow_delta_maintenance.deltalog.model.validation import CommitRules, canonical_path, loads_action, require_commit_content
    from airflow_delta_maintenance.deltalog.replay.ndjson import parse_ndjson

    def by_line() -> None:
        require_commit_content(name, data)
        rules = CommitRules(name, canonical_path)
        for number, raw in enumerate(data.split(b"\n"), start=1):
            if raw.strip():
                action = loads_action(raw, name, number)
                kind = next(iter(action))
                rules.feed(kind, action[kind], number)

    def columnar() -> None:
        require_commit_content(name, data)
        parse_ndjson([(name, data)], keep_lines=False, partition_columns=["region"])

    def streamed(accelerated: bool) -> Callable[[], None]:
        def check() -> None:  # as publish validates a commit it copies (with the compiled line scanner, and without)
            validator = CommitStreamValidator(name, accelerated=accelerated)
            cut = data.find(b"\n", len(data) // 2)
            for block in (data[:cut], data[cut + 1 :]) if cut >= 0 else (data,):
                validator.feed(block)
            validator.finish()

        return check

    from airflow_delta_maintenance.deltalog.replay.commit_stream import CommitStreamValidator

    verdicts = []
    for check in (by_line, columnar, streamed(True), streamed(False)):
        try:
            check()
            verdicts.append("accepted")
        except DeltaLogError as exc:
            verdicts.append(f"refused ({exc})")
    if len({v.startswith("accepted") for v in verdicts}) != 1 or verdicts[2] != verdicts[3]:
        return f"line by line {verdicts[0]}; columnar {verdicts[1]}; streamed {verdicts[2]}; streamed without the scanner {verdicts[3]}"
    return None


def fuzz_worker(job: tuple[str, int, int, int, bool]) -> dict[str, Any]:
    """Mutations (seeds ``first_seed``, ``first_seed + 1``, ...) of a table built under ``work``
    until ``commits_wanted`` of them damaged a commit; returns the outcome counts, the numbers of
    mutations and mutated commits, and every failure with the seed that makes it."""
    work, first_seed, commits_wanted, now, v2_json = job
    base = Path(work)
    build_table(base / "pristine", now, v2_json=v2_json)
    pristine = PristineLog(base / "pristine")
    touched = ""
    counts: dict[str, int] = {}
    failures: list[str] = []
    commits = mutations = 0
    seed = first_seed - 1
    while commits < commits_wanted:
        seed += 1
        mutations += 1
        rng = random.Random(seed)
        table = pristine.restore(base / "w", touched)
        if mutations % 1000 == 2:  # the restore is the copy it replaces: same files, bytes and mtimes
            again = PristineLog(table)
            if (again.files, again.dirs) != (pristine.files, pristine.dirs):
                failures.append(f"seed {seed}: the table put back after {touched} differs from the pristine one")
        damage = mutate(table, rng)
        touched = os.path.join("_delta_log", damage.target)
        path = table / "_delta_log" / damage.target
        if damage.target.endswith(".json") and ".checkpoint." not in damage.target and path.is_file():
            commits += 1
            disagreement = _validators_agree(path.read_bytes(), damage.target)
            if disagreement:
                failures.append(f"seed {seed}, {damage}: the validators disagree: {disagreement}")
        try:
            outcomes = run_commands(table, now)
        except Exception as exc:  # noqa: BLE001  (a traceback: the failure this run looks for)
            import traceback

            failures.append(f"seed {seed}, {damage}: {type(exc).__name__}: {exc}\n{traceback.format_exc(limit=-6)}")
            continue
        for o in outcomes:
            key = f"{o.command} {'ok' if o.ok else type(o.error).__name__}"
            counts[key] = counts.get(key, 0) + 1
            if not o.ok and o.changed:
                failures.append(f"seed {seed}, {damage}: {o.command} failed ({o.error}) after changing the log: {o.changed}")
    return {"counts": counts, "failures": failures, "commits": commits, "mutations": mutations}
