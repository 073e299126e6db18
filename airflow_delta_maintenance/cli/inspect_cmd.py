"""``delta-maintenance inspect TABLE_URI [--version V] [--files] [--json]``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .common import add_coordinator_option, add_storage_options, emit_json, open_cli_table, run_guarded

if TYPE_CHECKING:
    from ..maintenance.operations.inspect import InspectResult

# Use cases are imported inside the handlers: `delta-maintenance X` loads only what X needs.


def register(sub: Any) -> None:
    p = sub.add_parser("inspect", help="show a table's version, protocol, metadata and active files")
    p.add_argument("table_uri", metavar="TABLE_URI", help="path, file://, s3:// (s3a://) or memory:// URI")
    p.add_argument("--version", type=int, default=None, help="version to load (default: latest)")
    p.add_argument("--files", action="store_true", help="list the active files (path, size) sorted by path")
    p.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    add_coordinator_option(p, read_only=True)
    add_storage_options(p)
    p.set_defaults(handler=lambda args: run_guarded(lambda: _run(args)))


def _human(result: InspectResult) -> str:
    d = result.to_dict()
    proto, meta = result.protocol, result.metadata
    lines = [
        f"table:              {result.table_uri}",
        f"version:            {result.version}",
        f"commit timestamp:   {result.commit_timestamp} ({d['commit_time_utc']})",
        f"protocol:           reader {proto['minReaderVersion']}, writer {proto['minWriterVersion']}",
    ]
    if proto.get("readerFeatures") is not None:
        lines.append(f"  reader features:  {', '.join(proto['readerFeatures']) or '-'}")
    if proto.get("writerFeatures") is not None:
        lines.append(f"  writer features:  {', '.join(proto['writerFeatures']) or '-'}")
    lines += [
        f"metadata id:        {meta['id']}",
        f"partition columns:  {', '.join(meta['partitionColumns']) or '-'}",
        "configuration:" + ("" if meta["configuration"] else "      -"),
    ]
    lines += [f"  {k} = {v}" for k, v in sorted(meta["configuration"].items())]
    lines += [
        f"active files:       {result.num_files}",
        f"total bytes:        {result.size_bytes}",
        f"latest checkpoint:  {result.latest_checkpoint_version if result.latest_checkpoint_version >= 0 else 'none'}",
    ]
    if result.files is not None:
        lines.append("files:")
        lines += [f"  {f['size']:>12}  {f['path']}" for f in result.files]
    return "\n".join(lines)


def _run(args: argparse.Namespace) -> int:
    from ..maintenance.operations.inspect import inspect_table

    with open_cli_table(args) as table:
        result = inspect_table(table, args.version, include_files=args.files)
        note = table.published_only_note
    if args.json:
        emit_json({**result.to_dict(), "published_only": note is not None})
    else:
        print(_human(result) + (f"\nnote:               {note}" if note else ""))
    return 0
