"""Options and output helpers shared by the sub-commands."""

from __future__ import annotations

import argparse
import errno
import json
import sys
from collections.abc import Callable
from typing import Any

from ..coordinators.errors import CoordinatorAnswerError, CoordinatorError
from ..deltalog.errors import DeltaLogError
from ..maintenance.errors import InconsistentCoordinatorError

__all__ = [
    "add_storage_options",
    "add_coordinator_option",
    "storage_options",
    "open_cli_table",
    "emit_json",
    "cli_progress",
    "run_guarded",
    "EXIT_BAD_INPUT",
    "EXIT_STORAGE",
    "EXIT_PROBLEMS",
]

EXIT_BAD_INPUT = 2  # bad input or a bad table: fix the command or the table
EXIT_STORAGE = 3  # the storage refused: no space, read-only, no permission; retry once it is fixed
EXIT_PROBLEMS = 4  # the coordinator is inconsistent (its answer, or with the log: any command; `status/versions` with --strict)
# Errors that mean "bad input or bad table", reported without a traceback.
EXPECTED_ERRORS: tuple[type[BaseException], ...] = (DeltaLogError, CoordinatorError, ValueError, FileNotFoundError, FileExistsError)
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM})
# True in the installed command's own process (``console_main``), never in an embedding one
# (tests, Airflow): only there may a handler keep modules out of the process.
STANDALONE = False


class BlockedImport:
    """Import finder that makes ``import NAME`` fail with ``reason``, as if NAME were not installed
    (a library that imports it optionally, as pyarrow does numpy, then does without it)."""

    def __init__(self, name: str, reason: str) -> None:
        self.name, self.reason = name, reason

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == self.name or name.startswith(self.name + "."):
            raise ModuleNotFoundError(f"No module named {name!r} ({self.reason})", name=name)
        return None


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


def add_coordinator_option(parser: argparse.ArgumentParser, *, read_only: bool = False) -> None:
    parser.add_argument(
        "--coordinator",
        default=None,
        metavar="SPEC",
        help="the table's coordinator: local:///path/coordinator.db, dynamodb://..., unity-catalog://..., or auto; "
        "default: the one the table declares (a table that declares none is its published log); the per-table conf "
        "always comes from the table",
    )
    if read_only:
        parser.add_argument(
            "--published-only",
            action="store_true",
            help="show the published log alone, without asking the coordinator the table declares (the output says so)",
        )


def open_cli_table(args: argparse.Namespace, *, allow_unsafe_writes: bool = False) -> Any:
    """The table's identity, built once for the command (storage options, coordinator, table conf)."""
    from ..maintenance.table.maintained import open_table

    published_only = bool(getattr(args, "published_only", False))
    if published_only and getattr(args, "coordinator", None):
        raise ValueError("give --coordinator or --published-only, not both")
    return open_table(
        args.table_uri, storage_options(args), coordinator=getattr(args, "coordinator", None), allow_unsafe_writes=allow_unsafe_writes,
        published_only=published_only,
    )


def storage_options(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    uri = str(getattr(args, "table_uri", "") or "")
    s3 = "://" not in uri or uri.split("://", 1)[0].lower() in ("s3", "s3a", "s3n")
    for item in args.storage_option:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--storage-option expects KEY=VALUE, got {item!r}")
        if key in ("endpoint_url", "region_name") and s3:  # s3fs wants these inside client_kwargs (gcsfs takes endpoint_url itself)
            out.setdefault("client_kwargs", {})[key] = value
        else:
            out[key] = value
    return out


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, sort_keys=True) + "\n")


def cli_progress() -> Any:
    """A progress sink for a long step: a line on stderr at most every few seconds (stdout keeps
    the result, one JSON object with --json)."""
    from ..maintenance.operations.summary import Throttled

    return Throttled(lambda message: print(message, file=sys.stderr, flush=True))


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _lines(exc: BaseException) -> list[str]:
    """One line per mistake: a configuration error may list several (``ConfigError.problems``)."""
    problems = getattr(exc, "problems", None)
    return [_one_line(p) for p in problems] if isinstance(problems, tuple) and len(problems) > 1 else [_one_line(exc)]


def run_guarded(fn: Callable[[], int]) -> int:
    """Run a handler; expected errors become one line on stderr (one per mistake of a configuration
    error) and an exit code (documented in docs/cli.md): ``EXIT_PROBLEMS`` when the coordinator's
    answer cannot be trusted (malformed or inconsistent) or contradicts the log, ``EXIT_STORAGE``
    when the storage refused a write or read, else ``EXIT_BAD_INPUT``."""
    try:
        return fn()
    except (CoordinatorAnswerError, InconsistentCoordinatorError) as exc:
        print(f"delta-maintenance: error: {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
        return EXIT_PROBLEMS
    except OSError as exc:
        if isinstance(exc, PermissionError) or exc.errno in STORAGE_ERRNOS:
            print(f"delta-maintenance: storage error: {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
            return EXIT_STORAGE
        if not isinstance(exc, EXPECTED_ERRORS):
            raise
        print(f"delta-maintenance: error: {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except EXPECTED_ERRORS as exc:
        for line in _lines(exc):
            print(f"delta-maintenance: error: {type(exc).__name__}: {line}", file=sys.stderr)
        return EXIT_BAD_INPUT
