"""A small fleet on the embedded coordinator, built through the public use cases (commit, publish,
checkpoint): one table lags (many ratified commits unpublished, far from any checkpoint)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_delta_maintenance.demo.sample_table import create_actions
from airflow_delta_maintenance.maintenance.operations.checkpoint import (
    plan_checkpoint,
    run_local_checkpoint,
)
from airflow_delta_maintenance.maintenance.operations.publish import publish_ratified_commits
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator
from airflow_delta_maintenance.maintenance.table.maintained import open_table

# Thresholds the fleet's YAML sets for every table.
MAX_PENDING, MAX_SINCE_CHECKPOINT = 10, 20


def add(v: int) -> dict[str, Any]:
    return {"add": {"path": f"part-{v:05d}.parquet", "partitionValues": {}, "size": 100 + v, "modificationTime": 1, "dataChange": True}}


@dataclass(frozen=True)
class Fleet:
    root: Path
    spec: str
    config: Path
    uris: dict[str, str]


def build_table(spec: str, uri: str, *, ratified: int, published: int, checkpoint_at: int | None = None) -> None:
    """Versions 0..ratified ratified; 0..published published; a checkpoint at ``checkpoint_at``."""
    client = open_coordinator(spec)
    client.commit(uri, 0, create_actions(ict=True))
    for v in range(1, published + 1):
        client.commit(uri, v, [add(v)])
    with open_table(uri, coordinator=spec) as table:
        publish_ratified_commits(table, up_to=published)
        if checkpoint_at is not None:
            run_local_checkpoint(table, plan_checkpoint(table, version=checkpoint_at, force=True))
    for v in range(published + 1, ratified + 1):
        client.commit(uri, v, [add(v)])
    client.close()


def build_fleet(root: Path) -> Fleet:
    spec = f"local://{root}/coordinator.db"
    open_coordinator(spec + "?create=true").close()
    uris = {name: str(root / "tables" / name) for name in ("orders", "customers", "events", "missing")}
    # orders lags: 70 ratified, 40 published, no checkpoint → 30 pending, 40 since the checkpoint
    build_table(spec, uris["orders"], ratified=70, published=40)
    build_table(spec, uris["customers"], ratified=12, published=12, checkpoint_at=10)  # 0 pending, 2 since
    build_table(spec, uris["events"], ratified=8, published=6)  # 2 pending, 6 since
    # "missing" has no table at all: its error is reported for it alone
    lines = [
        "defaults:",
        f"  coordinator: {spec}",
        "  schedule: null",
        f"  health: {{max_pending_commits: {MAX_PENDING}, max_commits_since_checkpoint: {MAX_SINCE_CHECKPOINT}}}",
        "tables:",
    ]
    for name, uri in uris.items():
        lines += [f"  - name: {name}", f"    uri: {uri}"]
    config = root / "tables.yaml"
    config.write_text("\n".join(lines) + "\n")
    return Fleet(root, spec, config, uris)


def log_dir_size(uri: str) -> tuple[int, int]:
    """Files and bytes under _delta_log, counted with the OS (independently of the library)."""
    files = [p for p in Path(uri, "_delta_log").rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)
