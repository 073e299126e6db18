"""Checkpoint use case: decide whether a checkpoint is due, then write it over published versions only."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ...deltalog.checkpoint.check import verify_checkpoint
from ...deltalog.checkpoint.writer import CheckpointResult, write_checkpoint
from ...deltalog.errors import UnpublishedVersionError, UnsupportedFeatureError
from ...deltalog.log_segment.listing import CheckpointGroup, LogSegmentFiles
from ...deltalog.log_segment.segment import build_log_segment
from ...deltalog.model.features import check_write_supported
from ...deltalog.model.paths import LogFileType
from ...deltalog.replay.snapshot import load_snapshot
from ...deltalog.replay.table_state import TableState
from ..table.catalog_view import CatalogView, check_identity_checksum, ratified_state, validate_ratified_tail
from ..table.maintained import MaintainedTable
from .summary import JSONValue, Progress, TaskReport, human_bytes

__all__ = [
    "CheckpointDecision",
    "CheckpointPlan",
    "CheckpointOutcome",
    "decide_checkpoint",
    "plan_checkpoint",
    "run_local_checkpoint",
    "checkpoint_kind",
]


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
    state: TableState  # the latest ratified state the gates came from

    def check_tail(self, table: MaintainedTable, *, base_checkpoint: bool = False) -> None:
        """Every commit up to the catalog's head reads and validates in full (before a Spark job
        is submitted; the local engine checks what its own replay did not read). ``base_checkpoint``
        (a Spark job, which copies the adds of the checkpoint it starts from without judging
        them): that checkpoint opens and its adds' partition-value keys are the table's
        (``verify_checkpoint``), or nothing is submitted."""
        validate_ratified_tail(table, self.state)
        if base_checkpoint:
            base = build_log_segment(self.view.files, self.decision.version, use_compactions=False, table=table.uri).checkpoint
            if base is not None:
                verify_checkpoint(table.store, base)


def plan_checkpoint(
    table: MaintainedTable, *, interval: int | None = None, version: int | None = None, force: bool = False
) -> CheckpointPlan:
    """Is a checkpoint due, over published versions the catalog ratified? The interval default and
    the feature gate come from the latest ratified state."""
    view = table.catalog_view()
    # A version checksum may say "not due" (a skip, nothing written); a checkpoint is written only
    # on the log's own protocol and metadata (gates and interval decided again from them).
    state = ratified_state(table, view, from_checksum=True)
    if state.checksum_version is not None:
        try:
            check_write_supported(state.protocol, operation=f"checkpoint of {table.uri}", path=table.uri)
        except UnsupportedFeatureError:
            pass  # a checksum's word fails nothing: the log decides below
        else:
            decision = _decide(view, state, interval, version, force)
            if not decision.due:
                return CheckpointPlan(view, decision, state)
        state = ratified_state(table, view)
    else:
        check_identity_checksum(table, view, state)
    check_write_supported(state.protocol, operation=f"checkpoint of {table.uri}", path=table.uri)
    return CheckpointPlan(view, _decide(view, state, interval, version, force), state)


def _decide(view: CatalogView, state: TableState, interval: int | None, version: int | None, force: bool) -> CheckpointDecision:
    every = state.properties.checkpoint_interval if interval is None else interval
    return decide_checkpoint(view.files, interval=every, published_version=view.published_version, version=version, force=force)


def run_local_checkpoint(table: MaintainedTable, plan: CheckpointPlan, *, progress: Progress | None = None) -> CheckpointResult:
    """Single-node checkpoint of a published version (read from published files only), written
    only once every commit up to the catalog's head has been read and validated."""
    files = plan.view.files
    snapshot = load_snapshot(table.store, plan.decision.version, files=files)
    plan.check_tail(table)  # what the replay above did not read: commits above the version, pending ones
    return write_checkpoint(table.store, snapshot, files=files, progress=progress)


def checkpoint_kind(group: CheckpointGroup) -> str:
    """``classic``, ``multi-part`` or ``uuid-v2``: the naming of a checkpoint found in the log."""
    first = group.files[0].type
    if first is LogFileType.CHECKPOINT_UUID:
        return "uuid-v2"
    return "multi-part" if first is LogFileType.CHECKPOINT_MULTIPART else "classic"


@dataclass(frozen=True)
class CheckpointOutcome:
    """A checkpoint task's outcome, whichever engine wrote it (or why nothing was written)."""

    table_uri: str
    decision: CheckpointDecision
    engine: str
    written: bool = False  # a new checkpoint is visible because of this run
    existed: bool = False  # the engine found the checkpoint already there
    kind: str | None = None
    files: int = 0
    num_actions: int = 0
    size_bytes: int = 0
    seconds: float = 0.0

    @classmethod
    def local(cls, table_uri: str, decision: CheckpointDecision, result: CheckpointResult) -> CheckpointOutcome:
        return cls(table_uri, decision, "local", not result.existed, result.existed, result.kind, len(result.files),
                   result.num_actions, result.size_in_bytes, result.seconds)

    @classmethod
    def spark(cls, table_uri: str, decision: CheckpointDecision, group: CheckpointGroup, *, existed: bool,
              num_actions: int, seconds: float) -> CheckpointOutcome:
        return cls(table_uri, decision, "spark", not existed, existed, checkpoint_kind(group), len(group.files),
                   num_actions, group.size_in_bytes, seconds)

    def report(self) -> TaskReport:
        d = self.decision
        details: dict[str, JSONValue] = {"engine": self.engine, "kind": self.kind, "files": self.files, "existed": self.existed,
                   "last_checkpoint_version": d.last_checkpoint_version, "commits_since_checkpoint": d.commits_since_checkpoint,
                   "interval": d.interval}
        if not self.written:
            reason = d.reason if not d.due else f"a checkpoint already exists at v{d.version}"
            return TaskReport(self.table_uri, "checkpoint", skipped=True, reason=reason, version=d.version,
                              bytes=self.size_bytes, duration_s=self.seconds, details=details)
        parts = f"{self.files} part" + ("" if self.files == 1 else "s")
        what = f"wrote v{d.version} ({self.kind}, {parts}, {self.num_actions:,} actions, {human_bytes(self.size_bytes)})"
        return TaskReport(self.table_uri, "checkpoint", what=what, reason=d.reason, version=d.version, count=self.num_actions,
                          bytes=self.size_bytes, duration_s=self.seconds, details=details)
