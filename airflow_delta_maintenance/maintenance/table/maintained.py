"""A table's identity, built once per task or command, and the catalog's view of it.

``open_table`` resolves everything a maintenance operation needs about one table exactly once:
the normalised URI, its storage, the coordinator (from the spec or connection, or discovered from
the table with ``auto``) and the per-table coordinator conf read from the table's own metadata.
Every front end (operators, sensor, trigger, CLI, Spark submission) builds one and passes it down.

``MaintainedTable.catalog_view()`` is what every operation acts on: one coordinator call, then one
LIST (in that order: a version the coordinator no longer tracks was reported after its file was
durable, so the listing that follows sees it). Log files above the catalog's latest ratified
version are dropped from the view with a warning naming them — nothing above the catalog's head is
ever acted on — and ``published_version`` is the highest version v such that v and every earlier
version are durably published.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...coordinators.base import CommitCoordinatorClient, CommitsResponse, RatifiedCommit
from ...deltalog.errors import DeltaLogError, TableNotFoundError
from ...deltalog.log_segment.listing import LogSegmentFiles, list_log_files
from ...deltalog.log_segment.segment import CatalogCommit, build_log_segment
from ...deltalog.replay.table_state import TableState, load_table_state
from ...deltalog.storage import LogStore, open_table_storage
from ..errors import CoordinatorMismatchError, InconsistentCoordinatorError
from .coordinator_client import open_coordinator
from .coordinator_discovery import TableCoordination, read_table_coordination, resolve_coordinator_spec
from .staged_commits import list_staged, read_ratified_commit

if TYPE_CHECKING:
    from ...deltalog.replay.snapshot import Snapshot

__all__ = [
    "MaintainedTable",
    "CatalogView",
    "open_table",
    "opened_table",
    "bind_table",
    "durable_prefix",
    "cap_listing",
    "read_table_state",
    "ratified_state",
    "restore_table",
    "load_ratified_snapshot",
]

log = logging.getLogger(__name__)


def read_table_state(
    store: LogStore,
    files: LogSegmentFiles,
    version: int | None = None,
    *,
    catalog_commits: tuple[Any, ...] = (),
    latest_ratified_version: int | None = None,
    now_ms: int | None = None,
) -> TableState:
    """Protocol, metadata and properties of ``version`` without replaying file actions (the one
    place identity and gates read them): the worker's cost does not grow with the table."""
    return load_table_state(
        store, version, files=files, catalog_commits=catalog_commits, latest_ratified_version=latest_ratified_version, now_ms=now_ms
    )


def cap_listing(files: LogSegmentFiles, head: int | None) -> tuple[LogSegmentFiles, tuple[str, ...]]:
    """The listing without files above ``head`` (None: no cap), and the names dropped."""
    if head is None:
        return files, ()
    above = [f.name for f in (*files.commits, *files.checkpoints, *files.crcs) if f.version > head]
    above += [c.name for c in files.compactions if c.end_version > head]
    if not above:
        return files, ()
    capped = LogSegmentFiles(
        commits=tuple(c for c in files.commits if c.version <= head),
        checkpoints=tuple(c for c in files.checkpoints if c.version <= head),
        compactions=tuple(c for c in files.compactions if c.end_version <= head),
        crcs=tuple(c for c in files.crcs if c.version <= head),
        last_checkpoint=files.last_checkpoint,
        hidden=files.hidden,
    )
    return capped, tuple(sorted(above))


def durable_prefix(files: LogSegmentFiles) -> int:
    """Highest v such that v and every earlier version are durably published: the newest complete
    checkpoint covers everything up to it, then consecutive commit files extend it."""
    complete = files.complete_checkpoints()
    v = complete[-1].version if complete else -1
    versions = {c.version for c in files.commits}
    while v + 1 in versions:
        v += 1
    return v


@dataclass(frozen=True)
class CatalogView:
    """The table as its catalog sees it, at one moment (see the module docstring)."""

    table_uri: str
    files: LogSegmentFiles  # the listing, without files above the catalog's head
    latest_ratified_version: int  # the catalog's head (the published log's when nothing is coordinated)
    tracked: tuple[RatifiedCommit, ...]  # commits the coordinator still tracks, ≤ the head, ascending
    published_version: int  # v and every earlier version durably published, ≤ the head
    ignored_files: tuple[str, ...] = ()  # log files above the head: never acted on
    coordinated: bool = False
    reported_latest: int = -1  # the coordinator's raw latest_table_version (-1: nothing ratified)
    tracked_above_head: tuple[int, ...] = ()  # commits the coordinator tracks above its own head (inconsistent)

    @property
    def pending(self) -> tuple[RatifiedCommit, ...]:
        """Ratified commits not yet durably published."""
        return tuple(c for c in self.tracked if c.version > self.published_version)

    @property
    def released_version(self) -> int:
        """Published, and no longer tracked by the coordinator: staged files at or below it are
        needed by no reader (a tracked commit is still read from its staged file by some clients)."""
        return min(self.published_version, self.tracked[0].version - 1) if self.tracked else self.published_version

    @property
    def head(self) -> int | None:
        """The cap on versions: the catalog's latest ratified version, None when nothing is ratified."""
        return self.reported_latest if self.reported_latest >= 0 else None

    def recap(self, files: LogSegmentFiles) -> LogSegmentFiles:
        """A fresh listing under the same cap (re-validation right before deleting)."""
        return cap_listing(files, self.head)[0]


@dataclass
class MaintainedTable:
    """One table's identity: URI, storage, coordinator and its per-table conf (from the table)."""

    uri: str
    store: LogStore
    coordinator: CommitCoordinatorClient | None = None
    coordinator_spec: str | None = None  # specs never hold secrets
    coordination: TableCoordination = field(default_factory=TableCoordination)
    storage_options: Mapping[str, Any] = field(default_factory=dict, repr=False)
    # The protocol/metadata read that built ``coordination``: ``ratified_state`` reuses it when the
    # catalog's view reads the very same files (no pending commit), instead of reading them again.
    identity_state: TableState | None = field(default=None, repr=False, compare=False)

    @property
    def table_conf(self) -> dict[str, str]:
        return dict(self.coordination.table_conf)

    def get_commits(self, start_version: int = 0, end_version: int | None = None) -> CommitsResponse:
        assert self.coordinator is not None
        return self.coordinator.get_commits(self.uri, start_version, end_version, table_conf=self.table_conf)

    def report_published(self, version: int) -> None:
        assert self.coordinator is not None
        self.coordinator.report_published(self.uri, version, table_conf=self.table_conf)

    def latest_ratified_version(self) -> int:
        assert self.coordinator is not None
        return self.coordinator.latest_ratified_version(self.uri, table_conf=self.table_conf)

    def commit(self, version: int, actions: Sequence[Mapping[str, Any]]) -> RatifiedCommit:
        """Ratify ``actions`` as ``version`` through the table's coordinator (writers, tests, the demo)."""
        assert self.coordinator is not None
        return self.coordinator.commit(self.uri, version, actions, table_conf=self.table_conf)

    def catalog_view(self, response: CommitsResponse | None = None) -> CatalogView:
        """One coordinator call (unless ``response`` is given), then one LIST."""
        resp = response if response is not None or self.coordinator is None else self.get_commits()
        files = list_log_files(self.store)
        head = resp.latest_table_version if resp is not None and resp.latest_table_version >= 0 else None
        capped, ignored = cap_listing(files, head)
        if ignored:
            log.warning(
                "%s: ignoring %d log file(s) above the catalog's latest ratified version %d: %s",
                self.uri, len(ignored), head, ", ".join(ignored[:10]) + (" …" if len(ignored) > 10 else ""),
            )
        durable = durable_prefix(capped)
        if head is None:
            complete = capped.complete_checkpoints()
            latest = max(capped.latest_commit_version, complete[-1].version if complete else -1)
        else:
            latest = head
        tracked = tuple(sorted((c for c in (resp.commits if resp else ()) if head is None or c.version <= head), key=lambda c: c.version))
        return CatalogView(
            table_uri=self.uri,
            files=capped,
            latest_ratified_version=latest,
            tracked=tracked,
            published_version=min(durable, latest),
            ignored_files=ignored,
            coordinated=self.coordinator is not None,
            reported_latest=resp.latest_table_version if resp is not None else -1,
            tracked_above_head=tuple(sorted(c.version for c in (resp.commits if resp else ()) if head is not None and c.version > head)),
        )

    def identity(self) -> dict[str, Any]:
        """JSON primitives that rebuild the coordinator side of this identity (``restore_table``)."""
        return {"table_uri": self.uri, "coordinator_spec": self.coordinator_spec, "table_conf": self.table_conf}

    def close(self) -> None:
        if self.coordinator is not None:
            self.coordinator.close()

    def __enter__(self) -> MaintainedTable:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _read_coordination(store: LogStore) -> tuple[TableCoordination, TableState]:
    """What the table's newest published metadata declares, and the state it was read from. A
    table without any log is an error."""
    files = list_log_files(store)
    if files.is_empty:
        raise TableNotFoundError(f"{store.uri}: _delta_log holds no commit or checkpoint", path=store.log_dir)
    # The durable prefix: a commit written around the coordinator past a gap is never read here.
    state = read_table_state(store, files, max(durable_prefix(files), 0))
    return read_table_coordination(state.protocol, state.metadata.configuration, store.uri), state


def restore_table(
    table_uri: str,
    coordinator_spec: str,
    table_conf: Mapping[str, str],
    storage_options: Mapping[str, Any] | None = None,
    *,
    credentials: Mapping[str, str | None] | None = None,
) -> MaintainedTable:
    """A table identity rebuilt from what ``MaintainedTable.identity()`` returned (no table I/O):
    for a trigger that polls the coordinator without listing or reading the table."""
    options = dict(storage_options or {})
    store = open_table_storage(table_uri, options)
    client = open_coordinator(coordinator_spec, options, credentials=credentials)
    return MaintainedTable(store.uri, store, client, coordinator_spec, TableCoordination(table_conf=dict(table_conf)), options)


def bind_table(
    store: LogStore,
    coordinator: CommitCoordinatorClient | None = None,
    *,
    coordinator_spec: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> MaintainedTable:
    """A table over an already opened client (the table's conf is still read from the table)."""
    coordination, state = _read_coordination(store) if coordinator is not None else (TableCoordination(), None)
    return MaintainedTable(store.uri, store, coordinator, coordinator_spec, coordination, dict(storage_options or {}), identity_state=state)


def open_table(
    table_uri: str,
    storage_options: Mapping[str, Any] | None = None,
    *,
    coordinator: str | None = None,
    connection_spec: str | None = None,
    credentials: Mapping[str, str | None] | None = None,
    allow_unsafe_writes: bool = False,
) -> MaintainedTable:
    """Build the table's identity once.

    :param coordinator: a coordinator spec, ``"auto"`` (discover it from the table) or None
    :param connection_spec: the spec held by a coordinator connection; with ``auto`` it supplies
        the endpoint (a Unity Catalog server, a DynamoDB region/endpoint)
    :param credentials: ``login``/``password`` of the coordinator connection
    """
    options = dict(storage_options or {})
    store = open_table_storage(table_uri, options, allow_unsafe_writes=allow_unsafe_writes)
    if not (coordinator or connection_spec):
        return MaintainedTable(store.uri, store, storage_options=options)
    coordination, state = _read_coordination(store)
    spec = resolve_coordinator_spec(store.uri, coordinator, coordination, connection_spec=connection_spec)
    if spec is None:
        return MaintainedTable(store.uri, store, coordination=coordination, storage_options=options, identity_state=state)
    client = open_coordinator(spec, options, allow_unsafe_writes=allow_unsafe_writes, credentials=credentials)
    return MaintainedTable(store.uri, store, client, spec, coordination, options, identity_state=state)


@contextmanager
def opened_table(table_uri: str, storage_options: Mapping[str, Any] | None = None, **kwargs: Any) -> Iterator[MaintainedTable]:
    table = open_table(table_uri, storage_options, **kwargs)
    try:
        yield table
    finally:
        table.close()


def check_view_coordination(table: MaintainedTable, view: CatalogView, state: TableState) -> None:
    """Files above the head were read when the identity was built: the ratified state must declare
    the same coordinator, or the identity came from a rogue file."""
    if not view.ignored_files or table.coordinator is None:
        return
    again = read_table_coordination(state.protocol, state.metadata.configuration, table.uri)
    if again != table.coordination:
        raise CoordinatorMismatchError(
            f"{table.uri}: log files above the catalog's latest ratified version ({', '.join(view.ignored_files[:3])}) "
            f"declare {table.coordination.describe()}, but the ratified table declares {again.describe()}"
        )


def _verified_tail(table: MaintainedTable, view: CatalogView) -> tuple[CatalogCommit, ...]:
    """The pending commits, each verified (``read_ratified_commit``) and carried inline."""
    pending = view.pending
    reachable = max(view.published_version, pending[-1].version if pending else -1)
    if view.coordinated and pending and any(c.version != view.published_version + 1 + i for i, c in enumerate(pending)):
        raise InconsistentCoordinatorError(
            f"{table.uri}: the coordinator's unpublished commits {[c.version for c in pending][:10]} do not follow the "
            f"published version {view.published_version} contiguously",
            version=view.published_version + 1,
        )
    if view.coordinated and reachable < view.latest_ratified_version:
        raise InconsistentCoordinatorError(
            f"{table.uri}: the catalog's latest ratified version is {view.latest_ratified_version}, but only versions up to "
            f"{reachable} are published or pending; nothing is acted on until the coordinator is consistent",
            version=reachable + 1,
        )
    listing = list_staged(table.store) if any(c.inline_content is None for c in pending) else None
    return tuple(
        CatalogCommit(
            version=c.version,
            file_name=c.file_name,
            inline_content=read_ratified_commit(table.store, c, listing),
            timestamp=c.commit_timestamp,
            size=c.file_size,
            modification_time=c.file_modification_time,
        )
        for c in pending
    )


def ratified_state(table: MaintainedTable, view: CatalogView, *, now_ms: int | None = None) -> TableState:
    """The table's latest *ratified* state (published files plus the verified pending commits):
    gates, retention and protocol come from here, never from a stale published snapshot."""
    tail = _verified_tail(table, view)
    state = _identity_state_if_same(table, view, tail, now_ms) or read_table_state(
        table.store, view.files, view.latest_ratified_version, catalog_commits=tail,
        latest_ratified_version=view.head, now_ms=now_ms,
    )
    check_view_coordination(table, view, state)
    return state


def _identity_state_if_same(
    table: MaintainedTable, view: CatalogView, tail: Sequence[CatalogCommit], now_ms: int | None
) -> TableState | None:
    """The identity's protocol/metadata read, when the view's state is read from exactly the same
    files: no pending commit, the same version, and the same checkpoint and commits by name, size
    and modification time (log files are never rewritten in place; a changed one is read again)."""
    cached = table.identity_state
    if cached is None or tail or cached.version != view.latest_ratified_version:
        return None
    try:
        segment = build_log_segment(view.files, view.latest_ratified_version, latest_ratified_version=view.head, table=table.store.uri)
    except DeltaLogError:
        return None  # the full read raises it, with its own message
    if segment.checkpoint != cached.segment.checkpoint or segment.deltas != cached.segment.deltas:
        return None
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return dataclasses.replace(cached, segment=segment, now_ms=now)


def load_ratified_snapshot(table: MaintainedTable, version: int | None = None) -> Snapshot:
    """The table at ``version`` (default: the latest ratified) as its catalog sees it, with its files."""
    from ...deltalog.replay.snapshot import load_snapshot  # the replay machinery: only callers that need files pay for it

    view = table.catalog_view()
    return load_snapshot(
        table.store, view.latest_ratified_version if version is None else version, files=view.files,
        catalog_commits=_verified_tail(table, view), latest_ratified_version=view.head,
    )
