"""The ``delta-maintenance`` command: thin argparse front-ends over ``maintenance`` use cases.

Each sub-command lives in its own module with ``register(subparsers)``; handlers return an exit
code. Errors from the library become one line on stderr and exit code 2 (bad input), 3 (the
storage refused: no space, read-only, permission) or 1 (unexpected); see ``common.run_guarded``.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Sequence

from .. import __version__
from . import (
    checksums_cmd,
    common,
    config_schema_cmd,
    create_table_cmd,
    discover_cmd,
    init_dags_cmd,
    inspect_cmd,
    maintain_cmd,
    optimize_cmd,
    output,
    pools_cmd,
    publish_cmd,
    status_cmd,
    vacuum_cmd,
    validate_cmd,
)

__all__ = ["main", "console_main", "console_script", "build_parser"]

# Sub-command modules; each exposes register(subparsers) -> None.
COMMANDS = [inspect_cmd, status_cmd, publish_cmd, maintain_cmd, optimize_cmd, validate_cmd, config_schema_cmd, init_dags_cmd, create_table_cmd,
            discover_cmd, pools_cmd, checksums_cmd, vacuum_cmd]


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
    with output.logs_off_stdout():  # stdout is the result's alone, whatever logging the process has
        return int(args.handler(args))


def console_main() -> int:
    """The installed ``delta-maintenance`` command: ``main`` in a process of its own.

    pyarrow imports pandas, when it is installed, on its first array conversion (about 0.2 s of
    a command's start-up); nothing the command runs uses pandas, so this process blocks it. An
    embedding process (tests, Airflow) calls ``main`` and keeps its modules and GC settings.
    """
    if "pandas" not in sys.modules:
        sys.meta_path.insert(0, common.BlockedImport("pandas", "not loaded by delta-maintenance"))
    common.STANDALONE = True  # this process is the command's own: a handler may narrow its imports
    # A short-lived process that builds one object per log file (a cleanup plan of 20,000 commits)
    # spent 15% of its CPU in young-generation collections at the default threshold of 700.
    gc.set_threshold(50_000, 20, 20)
    # numpy's OpenBLAS starts a thread per core that spins for ~0.1 s of CPU after the import
    # (measured: `import numpy` 0.19 s of CPU, 0.07 s with one thread); no command does BLAS work
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from ..deltalog._runtime.memory import own_process_allocator

    own_process_allocator()  # Arrow's default pool, and glibc's malloc thresholds per operation: this process only
    return main()


def console_script() -> int:
    """The ``delta-maintenance`` entry point: ``console_main``, then the process ends without the
    interpreter's teardown (see ``end_process``): exit handlers and buffered output still run."""
    from ..deltalog._runtime.process_end import end_process

    return end_process(console_main())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(console_script())
