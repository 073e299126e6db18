"""Options and output helpers shared by the sub-commands."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from ..coordinators.errors import CoordinatorError
from ..deltalog.errors import DeltaLogError

__all__ = [
    "add_storage_options",
    "add_coordinator_option",
    "storage_options",
    "open_cli_table",
    "emit_json",
    "run_guarded",
    "PROBLEMS_EXIT_CODE",
]

# `status --strict` / `versions --strict` when the coordinator is inconsistent with the log.
PROBLEMS_EXIT_CODE = 3

# Errors that mean "bad input or bad table", reported without a traceback.
EXPECTED_ERRORS: tuple[type[BaseException], ...] = (DeltaLogError, CoordinatorError, ValueError, FileNotFoundError, PermissionError)


def add_storage_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--storage-option",
        "-o",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="fsspec storage option (repeatable), e.g. -o endpoint_url=http://127.0.0.1:9000; "
        "credentials come from the environment",
    )


def add_coordinator_option(parser: argparse.ArgumentParser, *, required: bool = False) -> None:
    parser.add_argument(
        "--coordinator",
        required=required,
        default=None,
        metavar="SPEC",
        help="the table's coordinator: local:///path/coordinator.db, dynamodb://..., unity-catalog://..., or auto "
        "(discovered from the table's own properties); the per-table conf always comes from the table",
    )


def open_cli_table(args: argparse.Namespace, *, allow_unsafe_writes: bool = False) -> Any:
    """The table's identity, built once for the command (storage options, coordinator, table conf)."""
    from ..maintenance.table import open_table

    return open_table(
        args.table_uri, storage_options(args), coordinator=getattr(args, "coordinator", None), allow_unsafe_writes=allow_unsafe_writes
    )


def storage_options(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in args.storage_option:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--storage-option expects KEY=VALUE, got {item!r}")
        if key in ("endpoint_url", "region_name"):  # s3fs wants these inside client_kwargs
            out.setdefault("client_kwargs", {})[key] = value
        else:
            out[key] = value
    return out


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, sort_keys=True) + "\n")


def run_guarded(fn: Callable[[], int]) -> int:
    try:
        return fn()
    except EXPECTED_ERRORS as exc:
        print(f"delta-maintenance: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
