"""Writing and verifying the checksums of a range of published versions, one commit at a time.

Both walk the versions in order carrying the state of the previous one: an anchor (a replay, or
an existing checksum that is consistent with itself), then ``apply_commit`` per commit, so the
cost is per commit, not per table. Every existing checksum met on the way is compared with the
carried state — which came from the replay and the commits, not from that file.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import CorruptLogError, LogFileExistsError
from ..log_segment.listing import LogSegmentFiles
from ..model.paths import commit_name, crc_name
from ..replay.snapshot import load_snapshot
from ..replay.table_state import load_table_state
from ..storage import LogStore
from .compute import NeedsReplay, apply_commit, checksum_from_snapshot, commit_actions
from .state import ChecksumError, ChecksumState, parse_checksum, self_inconsistency
from .verify import checksum_mismatches

__all__ = ["ChecksumRun", "ChecksumProblem", "read_checksum", "self_inconsistency", "walk_checksums", "oldest_reconstructable"]


@dataclass(frozen=True)
class ChecksumProblem:
    version: int
    message: str

    def __str__(self) -> str:
        return f"checksum of v{self.version} ({crc_name(self.version)}): {self.message}"


@dataclass
class ChecksumRun:
    """What a walk did: versions written, found already written, verified; how it started."""

    start: int
    end: int
    written: list[int] = field(default_factory=list)
    existed: list[int] = field(default_factory=list)
    verified: list[int] = field(default_factory=list)
    problems: list[ChecksumProblem] = field(default_factory=list)
    replays: int = 0  # versions computed from a full replay (the anchor, or where a commit alone cannot tell)
    anchor: str = ""
    bytes_written: int = 0
    seconds: float = 0.0


def read_checksum(store: LogStore, version: int) -> ChecksumState | None:
    """The parsed ``<v>.crc``, None when there is none; ``ChecksumError`` when it cannot be read."""
    try:
        data = store.read(crc_name(version))
    except FileNotFoundError:
        return None
    return parse_checksum(data, store.display(crc_name(version)), version)


def oldest_reconstructable(files: LogSegmentFiles) -> int:
    """The oldest version a replay can reach: 0 with commit 0, else the oldest complete checkpoint."""
    if files.commits and files.commits[0].version == 0:
        return 0
    complete = files.complete_checkpoints()
    return min(g.version for g in complete) if complete else (files.commits[0].version if files.commits else 0)


def walk_checksums(
    store: LogStore,
    files: LogSegmentFiles,
    start: int,
    end: int,
    *,
    write: bool,
    trust_existing_anchor: bool = True,
    progress: Callable[[str], None] | None = None,
) -> ChecksumRun:
    """Versions ``start..end`` (published) in order: verify every checksum present, and with
    ``write`` create the missing ones (create-if-absent: one written meanwhile counts as existing
    and is verified). Writing starts at the first missing version, from the checksum just below it
    when ``trust_existing_anchor`` and that checksum is consistent with itself (the writer's fast
    path: usually the one the previous run wrote), else from a replay. Verifying starts from a
    replay at ``start``: no checksum is ever the source of what another is checked against."""
    began = time.monotonic()
    run = ChecksumRun(start, end)
    present = {p.version for p in files.crcs}
    state: ChecksumState | None = None
    first = start
    if write:
        missing = [v for v in range(start, end + 1) if v not in present]
        first = missing[0] if missing else end + 1
        if trust_existing_anchor and first - 1 in present and first <= end:
            try:
                anchor = read_checksum(store, first - 1)
            except ChecksumError as exc:
                run.problems.append(ChecksumProblem(first - 1, str(exc).split(": ", 1)[-1]))
                anchor = None
            reason = None if anchor is None else self_inconsistency(anchor) or _disagrees_with_log(store, files, anchor)
            if anchor is not None and reason is None and anchor.txns is not None and anchor.domains is not None:
                state, run.anchor = anchor, f"checksum of v{first - 1}"
            elif anchor is not None and reason is not None:
                run.problems.append(ChecksumProblem(first - 1, reason))
    for version in range(first, end + 1):
        name = commit_name(version)
        if state is None:
            state = _from_replay(store, files, version)
            run.replays += 1
            run.anchor = run.anchor or f"replay at v{version}"
        else:
            actions = commit_actions(store.read(name), store.display(name))
            try:
                state = apply_commit(state, version, actions)
            except NeedsReplay:
                state = _from_replay(store, files, version)
                run.replays += 1
        if version in present:
            _check(store, state, run)
        elif write:
            data = state.to_json()
            try:
                store.put_if_absent(crc_name(version), data)
                run.written.append(version)
                run.bytes_written += len(data)
            except LogFileExistsError:
                _check(store, state, run)  # another writer's, meanwhile: it must agree too
        if progress is not None:
            progress(f"checksums: v{version} of v{end} ({len(run.written)} written, {len(run.verified)} verified)")
    run.seconds = time.monotonic() - began
    return run


def _disagrees_with_log(store: LogStore, files: LogSegmentFiles, anchor: ChecksumState) -> str | None:
    """The anchor's protocol and metadata against the log's at its version (a backwards read of the
    few non-file actions, not a replay): what every later checksum would inherit is checked."""
    state = load_table_state(store, anchor.version, files=files)
    if state.metadata != anchor.metadata:
        return "metadata differs from the log's"
    if state.protocol.to_dict() != anchor.protocol.to_dict():
        return f"protocol is {anchor.protocol.to_dict()}, the log says {state.protocol.to_dict()}"
    return None


def _from_replay(store: LogStore, files: LogSegmentFiles, version: int) -> ChecksumState:
    snapshot = load_snapshot(store, version, files=files)
    name = commit_name(version)
    info = None
    try:
        info = next((a["commitInfo"] for a in commit_actions(store.read(name), store.display(name)) if "commitInfo" in a), None)
    except FileNotFoundError:  # a checkpoint-only version (its commit cleaned up): no txnId to give
        pass
    return checksum_from_snapshot(snapshot, info)


def _check(store: LogStore, expected: ChecksumState, run: ChecksumRun) -> None:
    version = expected.version
    try:
        found = read_checksum(store, version)
    except (ChecksumError, CorruptLogError) as exc:
        run.problems.append(ChecksumProblem(version, str(exc).split(": ", 1)[-1]))
        return
    if found is None:
        return
    mismatches = checksum_mismatches(found, expected)
    if mismatches:
        run.problems.append(ChecksumProblem(version, "; ".join(mismatches)))
    else:
        run.verified.append(version)
        run.existed.append(version)
