"""Version checksum use cases: write the missing ``<v>.crc`` of published versions, and verify the
present ones against the replay. A checksum that disagrees with the log is a typed failure naming
the version — never rewritten (a ``.crc`` is create-if-absent) and never silently skipped."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...deltalog.checksum.chain import ChecksumProblem, ChecksumRun, oldest_reconstructable, walk_checksums
from ...deltalog.errors import UnpublishedVersionError
from ...deltalog.log_segment.listing import LogSegmentFiles
from ...deltalog.model.features import check_read_supported
from ...deltalog.model.paths import crc_name
from ..errors import ChecksumMismatchError, MaintenanceError
from ..table.catalog_view import CatalogView, ratified_state, validate_ratified_tail
from ..table.maintained import MaintainedTable
from .summary import JSONValue, TaskReport, human_bytes

__all__ = ["ChecksumMismatchError", "ChecksumPlan", "ChecksumOutcome", "plan_checksums", "run_checksums", "verify_checksums", "checksum_problems"]


@dataclass(frozen=True)
class ChecksumPlan:
    view: CatalogView
    start: int
    end: int  # the latest published version (checksums are written for published versions only)
    missing: int  # versions in start..end without a checksum

    @property
    def due(self) -> bool:
        return self.missing > 0


def _default_start(files: LogSegmentFiles, end: int) -> int:
    """Right after the newest checksum (the chain goes on without a gap, from it), else from the
    newest complete checkpoint at or below ``end`` (what readers start from)."""
    oldest = oldest_reconstructable(files)
    chained = [p.version for p in files.crcs if oldest <= p.version <= end]
    if chained:
        return min(chained[-1] + 1, end)
    complete = [g.version for g in files.complete_checkpoints() if g.version <= end]
    return max(complete[-1] if complete else 0, oldest)


def _bounds(view: CatalogView, from_version: int | None, to_version: int | None, table_uri: str) -> tuple[int, int]:
    published = view.published_version
    end = published if to_version is None else to_version
    if end > published:
        raise UnpublishedVersionError(f"{table_uri}: version {end} is not published (latest published is {published})", version=end)
    oldest = oldest_reconstructable(view.files)
    start = _default_start(view.files, end) if from_version is None else from_version
    if start < oldest:
        raise MaintenanceError(f"{table_uri}: version {start} cannot be reconstructed (the oldest readable version is {oldest})", version=start)
    return start, end


def plan_checksums(table: MaintainedTable, *, from_version: int | None = None, to_version: int | None = None) -> ChecksumPlan:
    """Which published versions lack a checksum (default: after the newest checksum, else from the newest checkpoint, to the latest
    published version); the gates come from the latest ratified state."""
    view = table.catalog_view()
    state = ratified_state(table, view)
    check_read_supported(state.protocol, path=table.uri)
    start, end = _bounds(view, from_version, to_version, table.uri)
    present = {p.version for p in view.files.crcs}
    missing = sum(1 for v in range(start, end + 1) if v not in present)
    validate_ratified_tail(table, state)  # nothing is acted on that cannot be read up to the head
    return ChecksumPlan(view, start, end, missing)


def _raise_problems(table_uri: str, problems: list[ChecksumProblem]) -> None:
    if problems:
        first = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ChecksumMismatchError(f"{table_uri}: {first}{more}", version=first.version, path=crc_name(first.version))


@dataclass(frozen=True)
class ChecksumOutcome:
    table_uri: str
    plan: ChecksumPlan
    run: ChecksumRun | None

    def report(self) -> TaskReport:
        p = self.plan
        if self.run is None or not self.run.written:
            reason = "every published version has its checksum" if not p.due else "other writers wrote them meanwhile"
            return TaskReport(self.table_uri, "checksums", skipped=True, reason=reason, version=p.end, from_version=p.start, to_version=p.end)
        r = self.run
        span = f"v{r.written[0]}" if len(r.written) == 1 else f"v{r.written[0]}..v{r.written[-1]}"
        what = f"wrote {len(r.written)} checksum(s) {span} ({human_bytes(r.bytes_written)}, from {r.anchor})"
        details: dict[str, JSONValue] = {"written": len(r.written), "existed": len(r.existed), "replays": r.replays, "anchor": r.anchor}
        return TaskReport(self.table_uri, "checksums", what=what, version=r.written[-1], from_version=r.written[0], to_version=r.written[-1],
                          count=len(r.written), bytes=r.bytes_written, duration_s=r.seconds, details=details)  # fmt: skip


def run_checksums(table: MaintainedTable, plan: ChecksumPlan, *, progress: Callable[[str], None] | None = None) -> ChecksumOutcome:
    """Write the missing checksums of ``plan``'s range; every present one met is verified. A
    checksum that disagrees with the log fails the run (after the others were written)."""
    if not plan.due:
        return ChecksumOutcome(table.uri, plan, None)
    run = walk_checksums(table.store, plan.view.files, plan.start, plan.end, write=True, progress=progress)
    _raise_problems(table.uri, run.problems)
    return ChecksumOutcome(table.uri, plan, run)


def verify_checksums(table: MaintainedTable, *, from_version: int | None = None, to_version: int | None = None, progress: Callable[[str], None] | None = None) -> ChecksumRun:
    """Compare every checksum in ``from..to`` (default: all the log still has a replay for) with
    the replay; ``ChecksumRun.problems`` names each version that disagrees."""
    view = table.catalog_view()
    files = view.files
    oldest = oldest_reconstructable(files)
    if from_version is None:
        with_crc = [p.version for p in files.crcs if p.version >= oldest]
        from_version = with_crc[0] if with_crc else view.published_version
    start, end = _bounds(view, from_version, to_version, table.uri)
    if end < start or not any(start <= p.version <= end for p in files.crcs):
        return ChecksumRun(start, end)
    last = max(p.version for p in files.crcs if p.version <= end)
    return walk_checksums(table.store, files, start, last, write=False, progress=progress)


def checksum_problems(table: MaintainedTable, view: CatalogView) -> list[str]:
    """For status: the newest checksum of a published version against the replay at its version."""
    newest = [p.version for p in view.files.crcs if p.version <= view.published_version]
    if not newest or newest[-1] < oldest_reconstructable(view.files):
        return []
    run = walk_checksums(table.store, view.files, newest[-1], newest[-1], write=False)
    return [str(p) for p in run.problems]
