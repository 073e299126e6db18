"""Checks of a table schema (``metaData.schemaString``) and its partition columns, without
recursion (a hostile schema may nest far deeper than Python's recursion limit), and the JSON
parsing of a log line (the strict decoder; orjson's round trip for compact lines). Part of the one
strict validation of ``validation``; ``InvalidValue`` names the offending key inside an action."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ..errors import CorruptLogError

try:
    import orjson as ORJSON
except ImportError:  # a dependency; without it (a platform with no wheel) every line takes the strict decoder
    ORJSON = None  # type: ignore[assignment]

__all__ = [
    "MAX_NESTING",
    "ORJSON",
    "MAX_SCHEMA_NESTING",
    "parse_compact",
    "InvalidValue",
    "describe",
    "parse_schema_string",
    "check_partition_columns",
    "strict_json_loads",
    "STRICT_DECODER",
    "validate_schema_string",
]

MAX_NESTING = 64  # JSON nesting of one action line (a legitimate one nests 4 levels at most)
MAX_SCHEMA_NESTING = 128  # nested types of a table schema (struct of array of map ...)


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"key {key!r} appears twice in one object")
            seen.add(key)
    return out


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number {text} is too large")
    return value


def _no_constant(text: str) -> Any:
    raise ValueError(f"{text} is not a JSON number")


def strict_json_loads(text: str | bytes) -> Any:
    """``json.loads`` that refuses what other readers refuse: duplicate keys, ``NaN``/``Infinity``
    and numbers too large for a double. Deep nesting raises ``RecursionError`` (callers name it)."""
    return json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_float=_finite, parse_constant=_no_constant)


def parse_compact(raw: bytes) -> dict[str, Any] | None:
    """The JSON object ``raw`` holds, parsed by orjson, when ``orjson.dumps`` gives back exactly
    ``raw`` and it has at most ``MAX_NESTING`` brackets; else None (the strict decoder decides).

    That equality proves what the strict decoder's hooks and the tree walk of ``validation`` would check: no
    duplicate key (dumps writes none, so ``raw`` holds none); no NaN/Infinity or number too large
    for a double (orjson refuses them); every number read as ``json`` reads it (one orjson would
    read otherwise — an integer beyond 64 bits, ``-0``, ``1E5`` — does not come back the same, and
    a float that does is the shortest text of its value); valid UTF-8 and no lone surrogate
    (orjson refuses both, and writes no ``\\u`` escape but of a control character); and with the
    bracket count, no nesting deeper than the limit."""
    if ORJSON is None:
        return None
    try:
        action = ORJSON.loads(raw)
    except ValueError:  # orjson.JSONDecodeError
        return None
    if type(action) is dict and ORJSON.dumps(action) == raw and raw.count(b"{") + raw.count(b"[") <= MAX_NESTING:
        return action
    return None


# The same rules for text already decoded (``raw_decode``: no encoding detection, no copy per line).
STRICT_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicate_keys, parse_float=_finite, parse_constant=_no_constant)


class InvalidValue(Exception):
    """A rule broken at ``key`` (a dotted path inside the action)."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}")
        self.key, self.problem = key, problem


def describe(v: Any) -> str:
    """A value's JSON kind, for messages."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int):
        return "an integer"
    if isinstance(v, float):
        return "a number with a fraction or exponent"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "an object"
    return type(v).__name__


_PRIMITIVE = re.compile(r"^[a-z][a-z_0-9]*(\([ -~]*\))?$")  # a name, with parameters for newer types (geometry(OGC:CRS84))
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")


def parse_schema_string(text: str, key: str = "schemaString") -> dict[str, Any]:
    """``schemaString`` parsed and checked as a Delta schema; ``InvalidValue`` naming the field."""
    try:
        schema = strict_json_loads(text)
    except RecursionError:
        raise InvalidValue(key, f"nests deeper than {MAX_SCHEMA_NESTING} levels") from None
    except ValueError as exc:
        raise InvalidValue(key, f"is not valid JSON ({exc})") from None
    _check_schema_type(schema, key, top=True)
    return schema  # type: ignore[no-any-return]


def _check_schema_type(root: Any, key: str, *, top: bool = False) -> None:
    # iterative: a hostile schema may nest far deeper than Python's recursion limit
    stack: list[tuple[Any, str, int]] = [(root, key, 0)]
    while stack:
        t, where, depth = stack.pop()
        if depth > MAX_SCHEMA_NESTING:
            raise InvalidValue(where, f"nests deeper than {MAX_SCHEMA_NESTING} levels")
        if isinstance(t, str):
            m = _DECIMAL.match(t)
            if m:
                precision, scale = int(m.group(1)), int(m.group(2))
                if not 1 <= precision <= 38 or scale > precision:
                    raise InvalidValue(where, f"{t} is not a valid decimal type")
            elif not _PRIMITIVE.match(t):
                raise InvalidValue(where, f"{t!r} is not a type name")
            if top and depth == 0:
                raise InvalidValue(where, "must be a struct type, got a primitive type")
            continue
        if not isinstance(t, dict):
            raise InvalidValue(where, f"a type must be a name or an object, got {describe(t)}")
        kind = t.get("type")
        if top and depth == 0 and kind != "struct":
            raise InvalidValue(where, f"must be a struct type, got {kind!r}")
        if kind == "struct":
            fields = t.get("fields")
            if not isinstance(fields, list):
                raise InvalidValue(f"{where}.fields", f"must be a list, got {describe(fields)}")
            seen: set[str] = set()
            for i, f in enumerate(fields):
                fkey = f"{where}.fields[{i}]"
                if not isinstance(f, dict):
                    raise InvalidValue(fkey, f"must be an object, got {describe(f)}")
                name = f.get("name")
                if not isinstance(name, str):
                    raise InvalidValue(f"{fkey}.name", f"must be a string, got {describe(name)}")
                fkey = f"{where}.fields[{i}] ({name!r})"
                if name in seen:
                    raise InvalidValue(fkey, "repeats a field name")
                seen.add(name)
                if "type" not in f or f["type"] is None:
                    raise InvalidValue(fkey, 'has no "type"')
                if "nullable" in f and not isinstance(f["nullable"], bool):
                    raise InvalidValue(f"{fkey}.nullable", f"must be true or false, got {describe(f['nullable'])}")
                if f.get("metadata") is not None and not isinstance(f["metadata"], dict):
                    raise InvalidValue(f"{fkey}.metadata", f"must be an object, got {describe(f['metadata'])}")
                stack.append((f["type"], f"{fkey}.type", depth + 1))
        elif kind == "array":
            if "elementType" not in t:
                raise InvalidValue(where, 'an array type needs "elementType"')
            stack.append((t["elementType"], f"{where}.elementType", depth + 1))
        elif kind == "map":
            for part in ("keyType", "valueType"):
                if part not in t:
                    raise InvalidValue(where, f'a map type needs "{part}"')
                stack.append((t[part], f"{where}.{part}", depth + 1))
        else:
            raise InvalidValue(where, f"unknown complex type {kind!r}")


def check_partition_columns(schema: Mapping[str, Any] | None, columns: list[str], key: str = "partitionColumns") -> None:
    """Partition columns are distinct top-level fields of the schema (when there is one)."""
    if len(set(columns)) != len(columns):
        raise InvalidValue(key, f"repeats a column: {columns}")
    if schema is None:
        return
    names = {f["name"] for f in schema.get("fields", [])}
    missing = [c for c in columns if c not in names]
    if missing:
        raise InvalidValue(key, f"{missing} are not columns of the schema")


def validate_schema_string(text: Any, where: str) -> dict[str, Any]:
    """``parse_schema_string`` for callers outside an action (typed error naming ``where``)."""
    try:
        if not isinstance(text, str):
            raise InvalidValue("schemaString", f"must be a string, got {describe(text)}")
        return parse_schema_string(text)
    except InvalidValue as exc:
        raise CorruptLogError(f"{where}: metaData.{exc}", path=where) from None
