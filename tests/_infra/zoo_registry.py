"""The table zoo's registry: each builder is a function that writes one Delta table at a path,
registered with its name, writer and tags (``table_zoo`` builds, caches and reads them).

A builder must be deterministic in what it writes (values, versions, operations); file names,
UUIDs and timestamps may differ between builds. Its cache key is a fingerprint of its own source
and of every module-level helper and constant it uses (``code_fingerprint``), so editing a builder
rebuilds that table only.
"""

from __future__ import annotations

import hashlib
import inspect
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

Writer = Literal["spark", "wheel"]

# Tags the tests select tables by (``table_zoo.names(tag=...)``)
TAGS = frozenset(
    {
        "partitioned", "unpartitioned", "special_partitions", "column_mapping", "deletion_vectors", "type_widening",
        "timestamp_ntz", "variant", "decimals", "cdf", "checkpoint", "checkpoint_v2", "log_compaction", "deletes",
        "updates", "overwrites", "row_tracking", "clustered", "many_small_files", "in_commit_timestamps", "nested",
    }
)  # fmt: skip


@dataclass(frozen=True)
class ZooSpec:
    name: str
    writer: Writer
    build: Callable[..., None]  # build(path) for the wheel, build(path, spark) for delta-spark
    tags: frozenset[str]
    doc: str
    row_tracking: bool = False  # record delta-spark's row ids and row commit versions per version
    params: dict[str, Any] = field(default_factory=dict)


ZOO: dict[str, ZooSpec] = {}


def zoo_table(name: str, writer: Writer, tags: set[str] | frozenset[str], *, row_tracking: bool = False, **params: Any) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register a builder under ``name`` (its docstring is the table's description)."""
    unknown = set(tags) - TAGS
    if unknown:
        raise ValueError(f"zoo table {name!r}: unknown tags {sorted(unknown)}")

    def register(fn: Callable[..., None]) -> Callable[..., None]:
        if name in ZOO:
            raise ValueError(f"zoo table {name!r} is registered twice")
        doc = inspect.cleandoc(fn.__doc__ or "").splitlines()
        ZOO[name] = ZooSpec(name, writer, fn, frozenset(tags), doc[0] if doc else name, row_tracking, dict(params))
        return fn

    return register


def _names(code: types.CodeType) -> Iterator[str]:
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _names(const)


def code_fingerprint(fn: Callable[..., Any]) -> str:
    """sha256 over ``fn``'s source and, transitively, every global function of a ``tests._infra``
    module it names and every plain constant it names."""
    parts: list[str] = []
    seen: set[int] = set()

    def visit(obj: Any) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        if inspect.isfunction(obj):
            if not obj.__module__.startswith("tests._infra"):
                return
            parts.append(inspect.getsource(obj))
            for name in _names(obj.__code__):
                if name in obj.__globals__:
                    value = obj.__globals__[name]
                    if inspect.isfunction(value):
                        visit(value)
                    elif isinstance(value, (str, int, float, bool, tuple, list, dict, frozenset)):
                        parts.append(f"{name}={value!r}")

    visit(fn)
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()
