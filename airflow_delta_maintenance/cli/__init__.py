"""The ``delta-maintenance`` command: thin argparse front-ends over ``maintenance`` use cases.

Each sub-command lives in its own module with ``register(subparsers)``; handlers return an exit
code. Errors from the library become one line on stderr and exit code 2 (bad input) or 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .. import __version__
from . import init_dags_cmd, inspect_cmd, maintain_cmd, publish_cmd, status_cmd, validate_cmd

__all__ = ["main", "build_parser"]

# Sub-command modules; each exposes register(subparsers) -> None.
COMMANDS = [inspect_cmd, status_cmd, publish_cmd, maintain_cmd, validate_cmd, init_dags_cmd]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="delta-maintenance",
        description="Delta Lake log maintenance: inspect, publish, checkpoint, compact and clean up _delta_log.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.handler(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
