"""What the ratified-version sensor asks: one coordinator call per poll, no storage listing; and
whether a failed poll may succeed later (``is_transient``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ...coordinators.errors import CoordinatorError, TableNotFoundError, is_expired_credentials
from ..errors import CoordinatorUnreachableError
from ..table.maintained import MaintainedTable, restore_table

__all__ = ["VersionObservation", "observe_ratified_versions", "observe_for_watch", "poll_ratified_versions", "is_transient"]


@dataclass(frozen=True)
class VersionObservation:
    latest_ratified_version: int
    latest_published_version: int  # derived from the coordinator's unpublished commits
    unpublished: int
    baseline_version: int  # the version "new commits" are counted from
    new_commits: int
    satisfied: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def observe_ratified_versions(
    table: MaintainedTable,
    *,
    target_version: int | None = None,
    min_new_commits: int | None = None,
    baseline_version: int | None = None,
) -> VersionObservation:
    """Is the coordinator's latest ratified version ≥ ``target_version``, or are at least
    ``min_new_commits`` ratified beyond ``baseline_version`` (default: the last published)?

    One ``get_commits`` call: it returns the unpublished ratified commits and the latest version,
    from which the last published version follows without listing storage. Only when the
    coordinator does not know the table (latest -1) is storage asked whether ``_delta_log``
    exists: a table that is in neither place is a wrong URI or coordinator, an error rather than
    something to wait for.
    """
    if target_version is None and min_new_commits is None:
        raise ValueError("give target_version or min_new_commits")
    resp = table.get_commits()
    latest = resp.latest_table_version
    if latest < 0 and not resp.commits:
        store = table.store
        if not store.has_log_dir():
            raise TableNotFoundError(
                f"{table.uri} is unknown to {table.coordinator.describe() if table.coordinator else 'its coordinator'} and has no _delta_log: check the table URI "
                "and the coordinator (a coordinated table's version 0 is committed through its coordinator)"
            )
    commits = sorted(c.version for c in resp.commits)
    published = commits[0] - 1 if commits else latest
    baseline = published if baseline_version is None else baseline_version
    new = max(0, latest - baseline)
    if target_version is not None and latest >= target_version:
        return VersionObservation(latest, published, len(commits), baseline, new, True, f"ratified version {latest} >= {target_version}")
    if min_new_commits is not None and new >= min_new_commits:
        return VersionObservation(latest, published, len(commits), baseline, new, True, f"{new} commits ratified beyond {baseline}")
    wanted = f"version {target_version}" if target_version is not None else f"{min_new_commits} new commits beyond {baseline}"
    return VersionObservation(latest, published, len(commits), baseline, new, False, f"latest ratified {latest}; waiting for {wanted}")


def observe_for_watch(table: MaintainedTable, *, min_new_commits: int, last_seen_version: int | None) -> VersionObservation:
    """What the fleet watcher asks at each poll (one ``get_commits`` call): are at least
    ``min_new_commits`` ratified beyond both the last published version and the last version the
    watcher already fired for? Counting from the published version alone would fire again at
    every poll until the maintenance run has published; counting from the last fired version
    alone would fire early for commits already published (a stale remembered version)."""
    seen = observe_ratified_versions(table, min_new_commits=min_new_commits)
    baseline = max(seen.latest_published_version, -1 if last_seen_version is None else last_seen_version)
    new = max(0, seen.latest_ratified_version - baseline)
    satisfied = new >= min_new_commits
    reason = (
        f"{new} commits ratified beyond {baseline}" if satisfied
        else f"latest ratified {seen.latest_ratified_version}; waiting for {min_new_commits} new commits beyond {baseline}"
    )
    return VersionObservation(seen.latest_ratified_version, seen.latest_published_version, seen.unpublished, baseline, new, satisfied, reason)


def poll_ratified_versions(
    credentials: Mapping[str, Any],
    storage_options: Mapping[str, Any],
    table_uri: str,
    *,
    coordinator_spec: str,
    table_conf: Mapping[str, str],
    target_version: int | None,
    min_new_commits: int | None,
    baseline_version: int | None,
) -> dict[str, Any]:
    """One coordinator call (plus a ``_delta_log`` check for a table the coordinator does not
    know); shared by the sensor's ``poke`` and the trigger (in a thread). ``coordinator_spec`` and
    ``table_conf`` are the identity the sensor resolved once (``MaintainedTable.identity()``); the
    coordinator connection supplies only ``credentials`` here (``DeltaCoordinatorHook.get_credentials()``)."""
    table = restore_table(table_uri, coordinator_spec, table_conf, storage_options, credentials=credentials)
    try:
        return observe_ratified_versions(
            table, target_version=target_version, min_new_commits=min_new_commits, baseline_version=baseline_version
        ).to_dict()
    finally:
        table.close()


def is_transient(exc: BaseException) -> bool:
    """May the same poll succeed later? Coordinator errors say so themselves; a dropped connection
    or a timeout is transient; anything else (a missing table or database, bad credentials, a
    refused permission) is a configuration to fix, which waiting would only hide. Keys that expired
    (a storage ``PermissionError`` from ``ExpiredToken`` included) are transient: the next poll
    signs with refreshed ones."""
    if isinstance(exc, CoordinatorError):
        return exc.retryable
    return isinstance(exc, (ConnectionError, TimeoutError, CoordinatorUnreachableError)) or is_expired_credentials(exc)
