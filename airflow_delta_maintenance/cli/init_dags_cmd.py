"""``delta-maintenance init-dags DIR [--force]``: copy the example DAG files (the tables' maintenance
DAGs and the fleet health DAG behind the UI's "Delta fleet health" page) and tables.yaml out of the
installed package into a DAGs folder (so a pip install is enough to start)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .common import run_guarded

__all__ = ["EXAMPLE_FILES", "register", "copy_example_dags"]

EXAMPLE_FILES = ("delta_maintenance.py", "delta_fleet_health.py", "tables.yaml")


def register(sub: Any) -> None:
    p = sub.add_parser("init-dags", help="copy the example DAG files (maintenance, fleet health) and tables.yaml into a DAGs folder")
    p.add_argument("directory", metavar="DIR")
    p.add_argument("--force", action="store_true", help="overwrite files that exist")
    p.set_defaults(handler=lambda a: run_guarded(lambda: _run(a)))


def copy_example_dags(directory: str | Path, *, force: bool = False) -> list[Path]:
    target = Path(directory)
    existing = [target / name for name in EXAMPLE_FILES if (target / name).exists()]
    if existing and not force:
        raise FileExistsError(f"{', '.join(map(str, existing))} already exist(s); pass --force to overwrite")
    target.mkdir(parents=True, exist_ok=True)
    from importlib.resources import files  # here: every other command would pay ~10 ms for it

    source = files("airflow_delta_maintenance.example_dags")
    written = []
    for name in EXAMPLE_FILES:
        (target / name).write_bytes(source.joinpath(name).read_bytes())
        written.append(target / name)
    return written


def _run(args: argparse.Namespace) -> int:
    for path in copy_example_dags(args.directory, force=args.force):
        print(f"wrote {path}")
    print(f"edit {Path(args.directory) / 'tables.yaml'} (or point DELTA_MAINTENANCE_CONFIG at your own), then check it with "
          f"`delta-maintenance validate-config`")
    print("the fleet health DAG (delta_fleet_health.py) writes the report of the UI's \"Delta fleet health\" page; "
          "trigger it once or wait for its schedule (every 15 minutes)")
    return 0
