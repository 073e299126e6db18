"""``delta-maintenance config-schema [--markdown] [--output FILE]``: the JSON schema of a
``tables.yaml``, generated from the configuration's models — for an editor that checks the file
while it is typed (``# yaml-language-server: $schema=tables.schema.json``) — or, with
``--markdown``, the key reference the docs show."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .common import run_guarded


def register(sub: Any) -> None:
    p = sub.add_parser("config-schema", help="print the JSON schema of tables.yaml (for editors), or with --markdown its key reference")
    p.add_argument("--markdown", action="store_true", help="the reference of every key (Markdown) instead of the JSON schema")
    p.add_argument("--output", metavar="FILE", help="write it to FILE instead of stdout")
    p.set_defaults(handler=lambda a: run_guarded(lambda: _run(a)))


def _run(args: argparse.Namespace) -> int:
    from ..fleet.config_schema import json_schema, markdown_reference

    text = markdown_reference() if args.markdown else json.dumps(json_schema(), indent=2, ensure_ascii=False)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    else:
        sys.stdout.write(text + "\n")
    return 0
