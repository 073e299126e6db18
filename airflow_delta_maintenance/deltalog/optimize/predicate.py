"""Partition predicates for OPTIMIZE: a small SQL subset over partition columns, typed.

Grammar: ``expr := or``; ``or := and (OR and)*``; ``and := not (AND not)*``; ``not := NOT not |
atom``; ``atom := ( expr ) | col op literal | col [NOT] IN (literal, …) | col IS [NOT] NULL``;
``op`` is one of ``= == != <> < <= > >=``; literals are ``'strings'`` (``''`` escapes a quote),
numbers, ``true``/``false``/``null``; column names may be ``backquoted``. Partition values are
compared as their column's type (``year >= 2021`` is numeric, dates and timestamps by value);
a comparison with a null partition value is false, as in SQL. Columns other than partition
columns are refused by name: OPTIMIZE selects whole files, only partition values decide.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidOptionError

__all__ = ["PartitionPredicate", "parse_partition_predicate"]

_TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)|(?P<op><=|>=|<>|!=|==|=|<|>)|(?P<p>[(),])|(?P<bq>`(?:[^`]|``)+`)|(?P<word>[A-Za-z_][A-Za-z0-9_]*))")


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise InvalidOptionError(f"partition predicate {text!r}: cannot parse at {text[pos:pos + 20]!r}", option="predicate")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def _typed(value: str | None, type_name: str) -> Any:
    if value is None:
        return None
    if type_name in ("byte", "short", "integer", "long"):
        return int(value)
    if type_name in ("float", "double"):
        return float(value)
    if type_name.startswith("decimal"):
        return decimal.Decimal(value)
    if type_name == "boolean":
        return value.strip().lower() == "true"
    if type_name == "date":
        return dt.date.fromisoformat(value)
    if type_name in ("timestamp", "timestamp_ntz"):
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        if parsed.tzinfo is not None:
            parsed = parsed.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return parsed
    return value


Row = Mapping[str, str | None]


@dataclass(frozen=True)
class PartitionPredicate:
    """A parsed predicate; ``matches(partition_values)``; ``text`` as given (for commitInfo)."""

    text: str
    columns: tuple[str, ...]
    _eval: Callable[[Row], bool | None]

    def matches(self, partition_values: Row) -> bool:
        return self._eval(partition_values) is True


def parse_partition_predicate(text: str, partition_types: Mapping[str, str]) -> PartitionPredicate:
    """Parse ``text`` against the partition columns (logical name → Delta type name)."""
    toks = _tokens(text)
    lower = {c.lower(): c for c in partition_types}
    used: list[str] = []
    pos = 0

    def peek(k: int = 0) -> tuple[str, str] | None:
        return toks[pos + k] if pos + k < len(toks) else None

    def word(w: str, k: int = 0) -> bool:
        t = peek(k)
        return t is not None and t[0] == "word" and t[1].upper() == w

    def take() -> tuple[str, str]:
        nonlocal pos
        if pos >= len(toks):
            raise InvalidOptionError(f"partition predicate {text!r}: unexpected end", option="predicate")
        pos += 1
        return toks[pos - 1]

    def expect(value: str) -> None:
        t = take()
        if t[1] != value:
            raise InvalidOptionError(f"partition predicate {text!r}: expected {value!r}, got {t[1]!r}", option="predicate")

    def column() -> str:
        kind, val = take()
        name = val[1:-1].replace("``", "`") if kind == "bq" else val
        if kind not in ("bq", "word") or name.lower() not in lower:
            raise InvalidOptionError(
                f"partition predicate {text!r}: {name!r} is not a partition column (partition columns: {', '.join(partition_types) or 'none'})",
                option="predicate",
            )
        col = lower[name.lower()]
        used.append(col)
        return col

    def literal(col: str) -> Any:
        kind, val = take()
        if kind == "str":
            raw: str | None = val[1:-1].replace("''", "'")
        elif kind == "num":
            raw = val
        elif kind == "word" and val.upper() in ("TRUE", "FALSE"):
            raw = val.lower()
        elif kind == "word" and val.upper() == "NULL":
            raw = None
        else:
            raise InvalidOptionError(f"partition predicate {text!r}: expected a literal, got {val!r}", option="predicate")
        try:
            return _typed(raw, partition_types[col])
        except (ValueError, decimal.InvalidOperation):
            raise InvalidOptionError(f"partition predicate {text!r}: {raw!r} is not a {partition_types[col]} value for {col}", option="predicate") from None

    def value_of(row: Row, col: str) -> Any:
        raw = row.get(col)
        return _typed(None if raw in (None, "") else raw, partition_types[col])

    ops: dict[str, Callable[[Any, Any], bool]] = {
        "=": lambda a, b: a == b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<>": lambda a, b: a != b,
        "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
    }

    def atom() -> Callable[[Row], bool | None]:
        t = peek()
        if t is not None and t[1] == "(":
            take()
            inner = disjunction()
            expect(")")
            return inner
        col = column()
        if word("IS"):
            take()
            negate = word("NOT")
            if negate:
                take()
            if not word("NULL"):
                raise InvalidOptionError(f"partition predicate {text!r}: expected NULL after IS", option="predicate")
            take()
            return lambda row: (value_of(row, col) is None) != negate
        negate = word("NOT")
        if negate:
            take()
        if word("IN"):
            take()
            expect("(")
            values = [literal(col)]
            while peek() is not None and peek()[1] == ",":  # type: ignore[index]
                take()
                values.append(literal(col))
            expect(")")

            def member(row: Row) -> bool | None:
                v = value_of(row, col)
                if v is None:
                    return None
                return (v in values) != negate

            return member
        if negate:
            raise InvalidOptionError(f"partition predicate {text!r}: expected IN after NOT", option="predicate")
        kind, op = take()
        if kind != "op":
            raise InvalidOptionError(f"partition predicate {text!r}: expected a comparison after {col}, got {op!r}", option="predicate")
        lit = literal(col)
        fn = ops[op]

        def compare(row: Row) -> bool | None:
            v = value_of(row, col)
            return None if v is None or lit is None else fn(v, lit)

        return compare

    def negation() -> Callable[[Row], bool | None]:
        if word("NOT"):
            take()
            inner = negation()
            return lambda row: None if (r := inner(row)) is None else not r
        return atom()

    def conjunction() -> Callable[[Row], bool | None]:
        parts = [negation()]
        while word("AND"):
            take()
            parts.append(negation())
        if len(parts) == 1:
            return parts[0]

        def all_of(row: Row) -> bool | None:
            results = [p(row) for p in parts]
            return False if False in results else (None if None in results else True)

        return all_of

    def disjunction() -> Callable[[Row], bool | None]:
        parts = [conjunction()]
        while word("OR"):
            take()
            parts.append(conjunction())
        if len(parts) == 1:
            return parts[0]

        def any_of(row: Row) -> bool | None:
            results = [p(row) for p in parts]
            return True if True in results else (None if None in results else False)

        return any_of

    if not toks:
        raise InvalidOptionError("partition predicate is empty", option="predicate")
    fn = disjunction()
    if pos != len(toks):
        raise InvalidOptionError(f"partition predicate {text!r}: unexpected {toks[pos][1]!r}", option="predicate")
    return PartitionPredicate(text.strip(), tuple(dict.fromkeys(used)), fn)


def predicate_types(schema: Mapping[str, Any], partition_columns: Sequence[str]) -> dict[str, str]:
    by_name = {f["name"]: f for f in schema.get("fields", [])}
    return {c: str(by_name[c]["type"]) if c in by_name else "string" for c in partition_columns}
