"""Checkpoint use case: decide whether a checkpoint is due, then write it over published versions only."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..deltalog.checkpoint_writer import CheckpointResult, write_checkpoint
from ..deltalog.errors import UnpublishedVersionError
from ..deltalog.features import check_write_supported
from ..deltalog.listing import LogSegmentFiles
from ..deltalog.snapshot import load_snapshot
from .table import CatalogView, MaintainedTable, ratified_state

__all__ = ["CheckpointDecision", "CheckpointPlan", "decide_checkpoint", "plan_checkpoint", "run_local_checkpoint"]


@dataclass(frozen=True)
class CheckpointDecision:
    version: int  # the version a checkpoint would be written at (latest published), -1 if none
    last_checkpoint_version: int
    commits_since_checkpoint: int
    interval: int
    due: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def decide_checkpoint(
    files: LogSegmentFiles,
    *,
    interval: int,
    published_version: int | None = None,
    version: int | None = None,
    force: bool = False,
) -> CheckpointDecision:
    """Due when at least ``interval`` published commits follow the last complete checkpoint."""
    latest_published = files.latest_commit_version if published_version is None else min(published_version, files.latest_commit_version)
    target = latest_published if version is None else version
    if target > latest_published:
        raise UnpublishedVersionError(f"version {target} is not published (latest published is {latest_published})", version=target)
    complete = [g.version for g in files.complete_checkpoints() if g.version <= target]
    last = complete[-1] if complete else -1
    since = target - last
    if target < 0:
        return CheckpointDecision(target, last, 0, interval, False, "no published version")
    if last == target:
        return CheckpointDecision(target, last, 0, interval, False, f"a checkpoint already exists at {target}")
    if force:
        return CheckpointDecision(target, last, since, interval, True, "forced")
    if since >= interval:
        return CheckpointDecision(target, last, since, interval, True, f"{since} commits since the last checkpoint (interval {interval})")
    return CheckpointDecision(target, last, since, interval, False, f"only {since} commits since the last checkpoint (interval {interval})")


@dataclass(frozen=True)
class CheckpointPlan:
    view: CatalogView
    decision: CheckpointDecision


def plan_checkpoint(
    table: MaintainedTable, *, interval: int | None = None, version: int | None = None, force: bool = False
) -> CheckpointPlan:
    """Is a checkpoint due, over published versions the catalog ratified? The interval default and
    the feature gate come from the latest ratified state."""
    view = table.catalog_view()
    state = ratified_state(table, view)
    check_write_supported(state.protocol, operation=f"checkpoint of {table.uri}", path=table.uri)
    every = state.properties.checkpoint_interval if interval is None else interval
    decision = decide_checkpoint(view.files, interval=every, published_version=view.published_version, version=version, force=force)
    return CheckpointPlan(view, decision)


def run_local_checkpoint(table: MaintainedTable, plan: CheckpointPlan) -> CheckpointResult:
    """Single-node checkpoint of a published version (read from published files only)."""
    files = plan.view.files
    snapshot = load_snapshot(table.store, plan.decision.version, files=files)
    return write_checkpoint(table.store, snapshot, files=files)
