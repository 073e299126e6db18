"""Options and output helpers shared by the sub-commands."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from ..coordinators.errors import CoordinatorError
from ..deltalog.errors import DeltaLogError

__all__ = ["add_storage_options", "storage_options", "emit_json", "run_guarded"]

# Errors that mean "bad input or bad table", reported without a traceback.
EXPECTED_ERRORS: tuple[type[BaseException], ...] = (DeltaLogError, CoordinatorError, ValueError, FileNotFoundError, FileExistsError, PermissionError)


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
