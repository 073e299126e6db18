"""Helpers shared by the reference captures: reading a table's log as JSON, Parquet facts, writing samples."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

LOG = "_delta_log"
COMMIT = re.compile(r"^(\d{20})\.json$")


def latest(table: Path) -> int:
    return max(int(m.group(1)) for n in os.listdir(table / LOG) if (m := COMMIT.match(n)))


def commit(table: Path, version: int) -> list[dict[str, Any]]:
    """The actions of ``<version>.json``; each add/remove stats string is also given parsed as ``stats_parsed``."""
    actions = []
    for line in (table / LOG / f"{version:020d}.json").read_text().splitlines():
        action = json.loads(line)
        for kind in ("add", "remove"):
            if kind in action and isinstance(action[kind].get("stats"), str):
                action[kind]["stats_parsed"] = json.loads(action[kind]["stats"])
        actions.append(action)
    return actions


def commit_raw(table: Path, version: int) -> list[str]:
    return (table / LOG / f"{version:020d}.json").read_text().splitlines()


def crc(table: Path, version: int) -> dict[str, Any] | None:
    path = table / LOG / f"{version:020d}.crc"
    return json.loads(path.read_text()) if path.exists() else None


def files_under(table: Path) -> list[str]:
    """Every file below the table root, relative, sorted (what a FULL listing sees)."""
    out = []
    for dirpath, _dirs, names in os.walk(table):
        for n in names:
            out.append(os.path.relpath(os.path.join(dirpath, n), table))
    return sorted(out)


def parquet_facts(path: Path) -> dict[str, Any]:
    import pyarrow.parquet as pq

    f = pq.ParquetFile(path)
    md = f.metadata
    kv = {k.decode(): (v.decode()[:300] + ("..." if len(v) > 300 else "")) for k, v in (md.metadata or {}).items()}
    cols = [md.row_group(0).column(i) for i in range(md.num_columns)] if md.num_row_groups else []
    return {
        "created_by": md.created_by,
        "num_rows": md.num_rows,
        "num_row_groups": md.num_row_groups,
        "format_version": md.format_version,
        "physical_schema": str(f.schema).splitlines(),
        "compression": sorted({c.compression for c in cols}),
        "key_value_metadata": kv,
    }


def data_path(table: Path, add_path: str) -> Path:
    return table / unquote(add_path)


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False, sort_keys=False, default=str) + "\n")


def rows_as_dicts(rows: list[Any]) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in rows]


def error_line(exc: BaseException) -> str:
    """The engine's error in one line, without the JVM stack (for the notes)."""
    from ..zoo_oracle import engine_error

    return engine_error(exc)[:600]
