"""A table's identity, built once per task or command.

``open_table`` resolves everything a maintenance operation needs about one table exactly once:
the normalised URI, its storage, the coordinator (from the spec or connection, or discovered from
the table with ``auto``) and the per-table coordinator conf read from the table's own metadata.
Every front end (operators, sensor, trigger, CLI, Spark submission) builds one and passes it down.
Its ``catalog_view()`` is what every operation acts on (``catalog_view.py``).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...coordinators.base import CommitCoordinatorClient, CommitsResponse, RatifiedCommit
from ...coordinators.errors import CoordinatorError
from ...deltalog.errors import DeltaLogError, TableNotFoundError
from ...deltalog.log_segment.listing import list_log_files
from ...deltalog.replay.table_state import TableState
from ...deltalog.storage import LogStore, open_table_storage
from ..errors import CoordinatorMismatchError, CoordinatorNotConfiguredError, CoordinatorUnreachableError
from .catalog_view import CatalogView, cap_listing, drop_above_prefix, durable_prefix, read_table_state
from .coordinator_client import open_coordinator
from .coordinator_discovery import AUTO, TableCoordination, configure_hint, read_table_coordination, resolve_coordinator_spec
from .staged_commits import list_staged

__all__ = [
    "MaintainedTable",
    "open_table",
    "restore_table",
]

log = logging.getLogger(__name__)


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
    # The coordinator was not given but taken from the table's own declaration.
    coordinator_from_table: bool = False
    # Asked for explicitly (read-only commands): the published log alone, whatever the table declares.
    published_only: bool = False

    @property
    def table_conf(self) -> dict[str, str]:
        return dict(self.coordination.table_conf)

    def get_commits(self, start_version: int = 0, end_version: int | None = None) -> CommitsResponse:
        assert self.coordinator is not None
        try:
            return self.coordinator.get_commits(self.uri, start_version, end_version, table_conf=self.table_conf)
        except CoordinatorError as exc:
            if not (self.coordinator_from_table and exc.retryable and not exc.conflict):
                raise
            raise CoordinatorUnreachableError(
                f"{self.uri}: the table declares {self.coordination.describe()}, which did not answer "
                f"({type(exc).__name__}: {exc}); {configure_hint(self.coordination)}"
            ) from exc

    @property
    def published_only_note(self) -> str | None:
        """What a read-only result shows when it was asked for the published log alone."""
        if not self.published_only:
            return None
        if self.coordination.kind is None:
            return "published log only (the table declares no coordinator)"
        return (f"published log only: the table declares {self.coordination.describe()}, which was not asked; "
                "ratified commits it has not published are not shown")

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
        answered = resp.commits if resp else ()
        tracked = tuple(sorted((c for c in answered if head is None or c.version <= head), key=lambda c: c.version))
        durable = durable_prefix(capped, tracked, lambda: list_staged(self.store))
        files, unanchored = drop_above_prefix(capped, durable)
        if unanchored:  # a problem `status`/`versions` list; the task log says it too
            log.info(
                "%s: %d checkpoint/compaction file(s) above the published version %d are not used: %s",
                self.uri, len(unanchored), durable, ", ".join(unanchored[:10]) + (" …" if len(unanchored) > 10 else ""),
            )
        if head is None:
            complete = files.complete_checkpoints()
            latest = max(files.latest_commit_version, complete[-1].version if complete else -1)
        else:
            latest = head
        return CatalogView(
            table_uri=self.uri,
            files=files,
            latest_ratified_version=latest,
            tracked=tracked,
            published_version=min(durable, latest),
            ignored_files=ignored,
            coordinated=self.coordinator is not None,
            reported_latest=resp.latest_table_version if resp is not None else -1,
            tracked_above_head=tuple(sorted(c.version for c in (resp.commits if resp else ()) if head is not None and c.version > head)),
            unanchored_files=unanchored,
            answer_problem=_answer_problem(answered, resp.latest_table_version if resp is not None else -1),
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


def _answer_problem(commits: Sequence[RatifiedCommit], latest: int) -> tuple[str, int] | None:
    """A coordinator answer that contradicts itself: commits listed out of order or twice, or
    tracked while no version is ratified."""
    for a, b in itertools.pairwise(commits):
        if b.version == a.version:
            return f"the coordinator lists version {a.version} twice", a.version
        if b.version < a.version:
            return f"the coordinator lists version {b.version} after version {a.version} (out of order)", b.version
    if commits and latest < 0:
        return f"the coordinator tracks commits {commits[0].version}.. but reports no ratified version", commits[0].version
    return None


def _read_coordination(store: LogStore) -> tuple[TableCoordination, TableState]:
    """What the table's newest published metadata declares, and the state it was read from. A
    table without any log is an error."""
    files = list_log_files(store)
    if files.is_empty:
        raise TableNotFoundError(f"{store.uri}: _delta_log holds no commit or checkpoint", path=store.log_dir)
    # The durable prefix: a commit written around the coordinator past a gap is never read here.
    # From the newest version checksum where one is usable: a writer checks the declaration
    # against the log before acting (catalog_view.check_identity_checksum).
    version = max(durable_prefix(files), 0)
    state = read_table_state(store, files, version, from_checksum=True)
    if state.checksum_version is not None:
        try:
            coordination = read_table_coordination(state.protocol, state.metadata.configuration, store.uri)
        except (DeltaLogError, CoordinatorError, ValueError):  # a checksum's word fails nothing: the log decides
            coordination = None
        if coordination is not None and coordination.kind is None:
            return coordination, state
        # No coordinator is opened (nor its conf handed on) on a checksum's word: the log says.
        state = read_table_state(store, files, version)
    return read_table_coordination(state.protocol, state.metadata.configuration, store.uri), state


def restore_table(
    table_uri: str,
    coordinator_spec: str,
    table_conf: Mapping[str, str],
    storage_options: Mapping[str, Any] | None = None,
    *,
    credentials: Mapping[str, Any] | None = None,
) -> MaintainedTable:
    """A table identity rebuilt from what ``MaintainedTable.identity()`` returned (no table I/O):
    for a trigger that polls the coordinator without listing or reading the table."""
    options = dict(storage_options or {})
    store = open_table_storage(table_uri, options)
    client = open_coordinator(coordinator_spec, options, credentials=credentials)
    return MaintainedTable(store.uri, store, client, coordinator_spec, TableCoordination(table_conf=dict(table_conf)), options)


def open_table(
    table_uri: str,
    storage_options: Mapping[str, Any] | None = None,
    *,
    coordinator: str | None = None,
    connection_spec: str | None = None,
    credentials: Mapping[str, Any] | None = None,
    allow_unsafe_writes: bool = False,
    published_only: bool = False,
) -> MaintainedTable:
    """Build the table's identity once.

    Without a coordinator (no spec, no connection) the table's own declaration decides, as with
    ``auto``: a table that declares a coordinator is acted on through it, and one that cannot be
    opened from what the table says is a ``CoordinatorNotConfiguredError`` naming the declaration
    and how to configure it. A table that declares nothing is acted on as its published log.

    :param coordinator: a coordinator spec, ``"auto"`` (discover it from the table) or None (the same)
    :param connection_spec: the spec held by a coordinator connection; with ``auto`` it supplies
        the endpoint (a Unity Catalog server, a DynamoDB region/endpoint)
    :param credentials: ``login``/``password`` of the coordinator connection
    :param published_only: the published log alone, whatever the table declares (read-only
        commands, asked explicitly); excludes ``coordinator`` and ``connection_spec``
    """
    options = dict(storage_options or {})
    store = open_table_storage(table_uri, options, allow_unsafe_writes=allow_unsafe_writes)
    given = bool(coordinator or connection_spec)
    if published_only and given:
        raise ValueError(f"{store.uri}: the published log alone (published_only) or a coordinator, not both")
    coordination, state = _read_coordination(store)
    if published_only:
        return MaintainedTable(store.uri, store, coordination=coordination, storage_options=options, identity_state=state, published_only=True)
    try:
        spec = resolve_coordinator_spec(store.uri, coordinator if given else AUTO, coordination, connection_spec=connection_spec)
    except CoordinatorMismatchError as exc:
        if given:
            raise
        raise _not_configured(store.uri, coordination, exc) from exc
    if spec is None:
        return MaintainedTable(store.uri, store, coordination=coordination, storage_options=options, identity_state=state)
    try:
        client = open_coordinator(spec, options, allow_unsafe_writes=allow_unsafe_writes, credentials=credentials)
    except CoordinatorError as exc:
        if given:
            raise
        raise _not_configured(store.uri, coordination, exc) from exc
    return MaintainedTable(store.uri, store, client, spec, coordination, options, identity_state=state, coordinator_from_table=not given)


def _not_configured(uri: str, coordination: TableCoordination, cause: Exception) -> CoordinatorNotConfiguredError:
    reason = str(cause).removeprefix(f"{uri}: ")
    return CoordinatorNotConfiguredError(
        f"{uri}: the table declares {coordination.describe()}, but no coordinator was given and it cannot be opened from "
        f"what the table says ({reason}); {configure_hint(coordination)}"
    )
