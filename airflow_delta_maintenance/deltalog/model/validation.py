"""The one strict validation of log actions: types, required fields, ranges, nesting, schemas.

Every reader of log lines goes through it — the NDJSON reader (its vectorised path checks the same
rules on Arrow columns and comes here to name the offending line), the light protocol/metadata
reader, Parquet checkpoint rows, the checkpoint writer and log compaction — so nothing that one of
them refuses is ever written by another, and no value is coerced into a different one (a string
``partitionColumns`` is an error, never a list of its characters).

Rules (PROTOCOL "Actions", "Delta Log Entries"):

- a line is one JSON object holding one action, nested at most ``MAX_NESTING`` deep, without
  duplicate keys, whose strings encode as UTF-8;
- each known action's fields have their protocol type: strings, booleans (never a number),
  integers (never a float or a boolean) within the field's range, maps of string to string-or-null,
  lists of strings, structs; required fields are present and not null;
- ``metaData.schemaString`` is a JSON Delta schema (structs, arrays, maps, primitive and decimal
  types; every field named and typed) and every partition column is one of its top-level fields;
- within one commit (``CommitRules``): at most one ``metaData``, one ``protocol``, one ``txn`` per
  ``appId``, one ``domainMetadata`` per domain, one ``add`` and one ``remove`` per path, and never
  an ``add`` and a ``remove`` of the same logical file (path and deletion vector).

Unknown actions and unknown fields of known actions are accepted (newer writers add them; table
features gate what readers must understand), but are depth-checked like everything else. Absent
optional parts that older writers omitted (``metaData.schemaString``, ``format``, ``configuration``)
keep being accepted, as delta-spark's reader accepts them. Pure Python, no numpy: the cleanup
command validates a table's newest commits in a process that never loads numpy.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from itertools import chain, repeat
from typing import Any

from ..errors import CorruptLogError
from .schema_validation import MAX_NESTING, InvalidValue as _Invalid, check_partition_columns, describe as _kind, parse_compact, parse_schema_string, strict_json_loads

__all__ = [
    "MAX_NESTING",
    "INT32",
    "INT64",
    "CommitRules",
    "loads_action",
    "validate_action",
    "is_plain_add",
    "plain_adds_ok",
    "shallow_text",
    "dv_unique_id_of",
    "require_commit_content",
    "parquet_action",
    "canonical_path",
]

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
_NON_NEGATIVE64 = (0, 2**63 - 1)
_NON_NEGATIVE32 = (0, 2**31 - 1)
_POSITIVE32 = (1, 2**31 - 1)


# ---- primitive checks ------------------------------------------------------------------------------


def _string(v: Any, key: str) -> str:
    if not isinstance(v, str):
        raise _Invalid(key, f"must be a string, got {_kind(v)}")
    return v


def _bool(v: Any, key: str) -> bool:
    if not isinstance(v, bool):
        raise _Invalid(key, f"must be true or false, got {_kind(v)}")
    return v


def _int(v: Any, key: str, bounds: tuple[int, int] = INT64) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise _Invalid(key, f"must be an integer, got {_kind(v)}")
    if not bounds[0] <= v <= bounds[1]:
        raise _Invalid(key, f"{v} is out of range [{bounds[0]}, {bounds[1]}]")
    return v


def _string_map(v: Any, key: str, *, null_values: bool = True) -> None:
    if not isinstance(v, dict):
        raise _Invalid(key, f"must be an object of strings, got {_kind(v)}")
    for k, item in v.items():
        if item is None and null_values:
            continue
        if not isinstance(item, str):
            raise _Invalid(f"{key}.{k}", f"must be a string, got {_kind(item)}")


def _string_list(v: Any, key: str) -> list[str]:
    if not isinstance(v, list):
        raise _Invalid(key, f"must be a list of strings, got {_kind(v)}")
    for i, item in enumerate(v):
        if not isinstance(item, str):
            raise _Invalid(f"{key}[{i}]", f"must be a string, got {_kind(item)}")
    return v


# ---- field specs -------------------------------------------------------------------------------------

Check = Callable[[Any, str], Any]
Spec = dict[str, tuple[Check, bool]]  # field -> (check, required)


def _in(bounds: tuple[int, int]) -> Check:
    return lambda v, key: _int(v, key, bounds)


def _struct(fields: Mapping[str, tuple[Check, bool]]) -> Check:
    def check(v: Any, key: str) -> None:
        if not isinstance(v, dict):
            raise _Invalid(key, f"must be an object, got {_kind(v)}")
        _fields(v, key, fields)

    return check


def _fields(body: Mapping[str, Any], prefix: str, fields: Mapping[str, tuple[Check, bool]]) -> None:
    for name, (check, required) in fields.items():
        value = body.get(name)
        key = f"{prefix}.{name}"
        if value is None:
            if required:
                problem = "is required" if name not in body else "must not be null"
                raise _Invalid(key, problem + (" (a file action without a path)" if name == "path" else ""))
            continue
        check(value, key)


def _storage_type(v: Any, key: str) -> None:
    if _string(v, key) not in ("u", "i", "p"):
        raise _Invalid(key, f"must be 'u', 'i' or 'p', got {v!r}")


_DV = _struct(
    {
        "storageType": (_storage_type, True),
        "pathOrInlineDv": (_string, True),
        "offset": (_in(_NON_NEGATIVE32), False),
        "sizeInBytes": (_in(_NON_NEGATIVE32), True),
        "cardinality": (_in(_NON_NEGATIVE64), True),
        "maxRowIndex": (_in(_NON_NEGATIVE64), False),
    }
)


def _path(v: Any, key: str) -> None:
    if not _string(v, key):
        raise _Invalid(key, "must not be empty")


_ADD: Spec = {
    "path": (_path, True),
    "partitionValues": (_string_map, True),
    "size": (_in(_NON_NEGATIVE64), True),
    "modificationTime": (_int, True),
    "dataChange": (_bool, True),
    "stats": (_string, False),
    "tags": (_string_map, False),
    "deletionVector": (_DV, False),
    "baseRowId": (_in(_NON_NEGATIVE64), False),
    "defaultRowCommitVersion": (_in(_NON_NEGATIVE64), False),
    "clusteringProvider": (_string, False),
}
_REMOVE: Spec = {
    "path": (_path, True),
    "deletionTimestamp": (_int, False),
    "dataChange": (_bool, True),
    "extendedFileMetadata": (_bool, False),
    "partitionValues": (_string_map, False),
    "size": (_in(_NON_NEGATIVE64), False),
    "stats": (_string, False),
    "tags": (_string_map, False),
    "deletionVector": (_DV, False),
    "baseRowId": (_in(_NON_NEGATIVE64), False),
    "defaultRowCommitVersion": (_in(_NON_NEGATIVE64), False),
}
_CDC: Spec = {
    "path": (_path, True),
    "partitionValues": (_string_map, True),
    "size": (_in(_NON_NEGATIVE64), True),
    "dataChange": (_bool, True),
    "tags": (_string_map, False),
}
_PROTOCOL: Spec = {
    "minReaderVersion": (_in(_POSITIVE32), True),
    "minWriterVersion": (_in(_POSITIVE32), True),
    "readerFeatures": (_string_list, False),
    "writerFeatures": (_string_list, False),
}
_FORMAT = _struct({"provider": (_string, True), "options": (_string_map, False)})
_TXN: Spec = {"appId": (_string, True), "version": (_int, True), "lastUpdated": (_int, False)}
_DOMAIN: Spec = {"domain": (_string, True), "configuration": (_string, True), "removed": (_bool, True)}
_CHECKPOINT_METADATA: Spec = {"version": (_in(_NON_NEGATIVE64), True), "tags": (_string_map, False)}
_SIDECAR: Spec = {
    "path": (_path, True),
    "sizeInBytes": (_in(_NON_NEGATIVE64), True),
    "modificationTime": (_int, True),
    "tags": (_string_map, False),
}


def _metadata(body: Mapping[str, Any], key: str) -> None:
    _fields(
        body,
        key,
        {
            "id": (_string, True),
            "name": (_string, False),
            "description": (_string, False),
            "format": (_FORMAT, False),
            "schemaString": (_string, False),
            "partitionColumns": (_string_list, False),
            "configuration": (_string_map, False),
            "createdTime": (_int, False),
        },
    )
    schema = parse_schema_string(body["schemaString"], f"{key}.schemaString") if body.get("schemaString") is not None else None
    columns = body.get("partitionColumns") or []
    check_partition_columns(schema, columns, f"{key}.partitionColumns")


def _commit_info(body: Mapping[str, Any], key: str) -> None:
    if body.get("inCommitTimestamp") is not None:
        _int(body["inCommitTimestamp"], f"{key}.inCommitTimestamp")


_PLAIN_ADD = frozenset(("path", "partitionValues", "size", "modificationTime", "dataChange", "stats"))
_STRING_OR_NULL = frozenset((str, type(None)))


def is_plain_add(body: Any) -> bool:
    """Is ``body`` the plain ``add`` most writers write (no fields but the plain ones), valid by
    the rules? Decided in a few type checks; False says nothing: such a body goes the general way."""
    if type(body) is not dict or not body.keys() <= _PLAIN_ADD:
        return False
    get = body.get
    path, values, size, mtime, stats = get("path"), get("partitionValues"), get("size"), get("modificationTime"), get("stats")
    return (
        type(path) is str and path != "" and type(values) is dict and type(size) is int and 0 <= size <= _NON_NEGATIVE64[1]
        and type(mtime) is int and INT64[0] <= mtime <= INT64[1] and type(get("dataChange")) is bool
        and (stats is None or type(stats) is str) and (not values or {*map(type, values.values())} <= _STRING_OR_NULL)
    )


_PLAIN_ADD_FIELDS = operator.itemgetter("path", "partitionValues", "size", "modificationTime", "dataChange")


def plain_adds_ok(bodies: list[Any]) -> list[str] | None:
    """``is_plain_add`` of every body, a check at a time over all of them; their paths when all
    are plain and valid, else None (which says nothing: ask ``is_plain_add`` of each)."""
    if not bodies or {*map(type, bodies)} != {dict} or not {*chain.from_iterable(bodies)} <= _PLAIN_ADD:
        return None
    try:
        paths, values, sizes, mtimes, changes = zip(*map(_PLAIN_ADD_FIELDS, bodies), strict=True)
    except KeyError:
        return None
    if (
        {*map(type, paths)} == {str} and "" not in paths and {*map(type, values)} == {dict}
        and {*map(type, sizes)} == {int} and min(sizes) >= 0 and max(sizes) <= _NON_NEGATIVE64[1]
        and {*map(type, mtimes)} == {int} and min(mtimes) >= INT64[0] and max(mtimes) <= INT64[1]
        and {*map(type, changes)} == {bool} and {*map(type, map(dict.get, bodies, repeat("stats")))} <= _STRING_OR_NULL
        and {*map(type, chain.from_iterable(map(dict.values, values)))} <= _STRING_OR_NULL
    ):
        return list(paths)
    return None


def _add(body: Mapping[str, Any], key: str) -> None:
    """``_fields(body, key, _ADD)``, with the plain add accepted in a few checks (``is_plain_add``);
    anything else (and every error) goes the general way."""
    if not is_plain_add(body):
        _fields(body, key, _ADD)


_ACTIONS: dict[str, Callable[[Mapping[str, Any], str], None]] = {
    "add": _add,
    "remove": lambda b, k: _fields(b, k, _REMOVE),
    "cdc": lambda b, k: _fields(b, k, _CDC),
    "metaData": _metadata,
    "protocol": lambda b, k: _fields(b, k, _PROTOCOL),
    "txn": lambda b, k: _fields(b, k, _TXN),
    "domainMetadata": lambda b, k: _fields(b, k, _DOMAIN),
    "commitInfo": _commit_info,
    "checkpointMetadata": lambda b, k: _fields(b, k, _CHECKPOINT_METADATA),
    "sidecar": lambda b, k: _fields(b, k, _SIDECAR),
}


# ---- lines and actions -------------------------------------------------------------------------------


def require_commit_content(name: str, data: bytes | memoryview) -> None:
    """A commit holds at least one action: an empty (or blank) commit file is what a torn,
    non-atomic write leaves, and every writer records at least its ``commitInfo``."""
    if not bytes(data[:4096]).strip() and not bytes(data).strip():
        raise CorruptLogError(f"{name}: the commit is empty ({len(data)} bytes); a commit holds at least one action", path=name)


def parquet_action(kind: str, value: Mapping[str, Any]) -> dict[str, Any]:
    """A checkpoint row's action (maps read from Parquet are lists of pairs) in JSON form."""
    body = dict(value)
    for key in ("configuration", "tags", "partitionValues"):
        if isinstance(body.get(key), list):
            body[key] = dict(body[key])
    if isinstance(body.get("format"), Mapping):
        fmt = dict(body["format"])
        if isinstance(fmt.get("options"), list):
            fmt["options"] = dict(fmt["options"])
        body["format"] = fmt
    return {kind: body}


def _where(name: str, line: int | None) -> str:
    return f"{name}: line {line}" if line else name


def loads_action(raw: bytes | str, name: str, line: int | None) -> dict[str, Any]:
    """One log line as a validated action (``validate_action``), as ``{kind: body}`` (null keys
    beside it dropped); ``CorruptLogError`` naming the file and line when it is not JSON, not one
    object, nested too deep, or breaks a rule.

    Bytes in the compact form writers write are parsed by orjson and taken as parsed when
    ``orjson.dumps`` gives back exactly those bytes (``parse_compact``); every other line, and
    every line orjson refuses, goes through the strict decoder, which decides and words the error."""
    action = parse_compact(raw) if type(raw) is bytes else None
    if action is not None:
        kind = validate_action(action, name, line, shallow=True)
        return action if len(action) == 1 else {kind: action[kind]}
    try:
        action = strict_json_loads(raw)
    except RecursionError:
        raise CorruptLogError(f"{_where(name, line)}: nests deeper than {MAX_NESTING} levels", path=name, line=line) from None
    except UnicodeDecodeError as exc:
        raise CorruptLogError(f"{_where(name, line)} is not valid UTF-8 ({exc.reason} at byte {exc.start})", path=name, line=line) from None
    except ValueError as exc:
        raise CorruptLogError(f"{_where(name, line)} is not valid JSON ({exc})", path=name, line=line) from None
    if not isinstance(action, dict):
        raise CorruptLogError(f"{_where(name, line)} is not a JSON object", path=name, line=line)
    kind = validate_action(action, name, line)
    return action if len(action) == 1 else {kind: action[kind]}


def _check_tree(value: Any, where: str) -> None:
    """Nesting at most ``MAX_NESTING`` and strings that encode as UTF-8 (a lone surrogate escape
    decodes but could never be written back), without recursion."""
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, dict):
            if depth > MAX_NESTING:
                raise _Invalid(where, f"nests deeper than {MAX_NESTING} levels")
            for k, item in v.items():
                _utf8(k, where)
                if isinstance(item, (dict, list)):
                    stack.append((item, depth + 1))
                elif isinstance(item, str):
                    _utf8(item, where)
        elif isinstance(v, list):
            if depth > MAX_NESTING:
                raise _Invalid(where, f"nests deeper than {MAX_NESTING} levels")
            for item in v:
                if isinstance(item, (dict, list)):
                    stack.append((item, depth + 1))
                elif isinstance(item, str):
                    _utf8(item, where)


def _utf8(s: str, where: str) -> None:
    if not s.isascii():
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:
            raise _Invalid(where, f"holds a string that is not valid Unicode ({s[:40]!r})") from None


def shallow_text(text: str) -> bool:
    """Can the JSON ``text`` parse into nothing ``_check_tree`` refuses? True when it has at most
    ``MAX_NESTING`` opening brackets (strings' own included) and no ``\\u`` escape (the only way to
    a lone surrogate in text that is already decoded): then the tree walk may be skipped."""
    return "\\u" not in text and text.count("{") + text.count("[") <= MAX_NESTING


def validate_action(action: Mapping[str, Any], name: str, line: int | None = None, *, shallow: bool = False) -> str:
    """Check one parsed action against the rules; returns its kind. A line holds exactly one
    action: one top-level key whose value is not null (a ``"remove": null`` beside an ``add`` is
    no action, as every reader takes it). ``CorruptLogError`` names the file, the line and the key.
    ``shallow``: the caller knows the text it was parsed from is ``shallow_text``."""
    present = [k for k, v in action.items() if v is not None]
    if len(present) != 1:
        keys = ", ".join(sorted(map(str, action))) or "no key"
        what = "no action" if not present else "more than one action"
        raise CorruptLogError(f"{_where(name, line)} holds {what} ({keys}); one action per line", path=name, line=line)
    kind = present[0]
    body = action[kind]
    try:
        if not shallow:
            _check_tree(action, kind)
        check = _ACTIONS.get(kind)
        if check is not None:
            if not isinstance(body, dict):
                raise _Invalid(kind, f"must be an object, got {_kind(body)}")
            check(body, kind)
    except _Invalid as exc:
        raise CorruptLogError(f"{_where(name, line)}: malformed {kind} action: {exc}", path=name, line=line) from None
    return kind


# ---- rules within one commit -------------------------------------------------------------------------


def dv_unique_id_of(dv: Mapping[str, Any] | None) -> str | None:
    """``<storageType><pathOrInlineDv>[@<offset>]`` of a validated deletion vector, None without one."""
    if not dv:
        return None
    uid = f"{dv['storageType']}{dv['pathOrInlineDv']}"
    return uid if dv.get("offset") is None else f"{uid}@{dv['offset']}"


def canonical_path(path: str) -> str:
    """The key form readers reconcile a file path by: ``file:/x`` and ``file:///x`` are ``/x``."""
    for prefix in ("file:///", "file:/"):
        if path.startswith(prefix):
            return "/" + path[len(prefix) :]
    return path


class CommitRules:
    """The rules of one log entry (PROTOCOL "Delta Log Entries"), fed its validated actions in order.

    ``canonical`` maps a path to the key readers reconcile it by (``file:/x`` is ``/x``)."""

    def __init__(self, name: str, canonical: Callable[[str], str] = lambda p: p) -> None:
        self.name = name
        self._canonical = canonical
        self._once_keys: set[tuple[str, str]] = set()
        self._paths: dict[tuple[str, str], int | None] = {}
        self._files: dict[tuple[str, str, str | None], int | None] = {}

    def feed(self, kind: str, body: Mapping[str, Any], line: int | None) -> None:
        if kind in ("metaData", "protocol"):
            self._once(kind, (kind, ""), line)
        elif kind == "txn":
            self._once(f"txn action for appId {body['appId']!r}", ("txn", body["appId"]), line)
        elif kind == "domainMetadata":
            self._once(f"domainMetadata action for domain {body['domain']!r}", ("domainMetadata", body["domain"]), line)
        elif kind in ("add", "remove"):
            self.feed_file(kind, self._canonical(body["path"]), line, dv_unique_id_of(body.get("deletionVector")), body["path"])

    def feed_adds(self, paths: list[str], lines: range) -> bool:
        """``feed_file("add", path, line)`` of each path (canonical, no deletion vector) and line,
        all at once when none breaks a rule; False, with nothing recorded, when one does: the
        caller then feeds them one by one to find and word it."""
        added = dict(zip(zip(repeat("add"), paths), lines, strict=True))
        if len(added) != len(paths) or not self._paths.keys().isdisjoint(added):
            return False
        if not self._files.keys().isdisjoint(zip(repeat("remove"), paths, repeat(None))):
            return False
        self._paths.update(added)
        self._files.update(zip(zip(repeat("add"), paths, repeat(None)), lines, strict=True))
        return True

    def feed_file(self, kind: str, path: str, line: int | None, dv: str | None = None, shown: str | None = None) -> None:
        """An ``add`` or ``remove`` of ``path`` (already in canonical form; ``shown``: as written,
        when it differs) with deletion vector ``dv``."""
        first = self._paths.setdefault((kind, path), line)
        shown = path if shown is None else shown
        if first != line:
            raise self._error(f"{kind}s path {shown!r} twice (also line {first}); a commit holds one {kind} per path", line)
        other = "remove" if kind == "add" else "add"
        if (other, path, dv) in self._files:
            raise self._error(
                f"adds and removes the same file {shown!r}" + (f" (deletion vector {dv})" if dv else "") + f" (also line {self._files[(other, path, dv)]}); one commit cannot do both",
                line,
            )
        self._files[(kind, path, dv)] = line

    def _once(self, label: str, key: tuple[str, str], line: int | None) -> None:
        if key in self._once_keys:
            raise self._error(f"holds more than one {label}; a commit holds at most one", line)
        self._once_keys.add(key)

    def _error(self, message: str, line: int | None) -> CorruptLogError:
        return CorruptLogError(f"{_where(self.name, line)}: {message}", path=self.name, line=line)
