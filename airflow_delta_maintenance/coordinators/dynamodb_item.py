"""A delta-spark DynamoDB coordinator item, read field by field (``answers``): nothing is assumed.

delta-spark's ``DynamoDBCommitCoordinatorClient`` (and ``DynamoDBTableEntryConstants``) define the
item: ``tableId`` (S, the hash key), ``path`` (S), ``acceptingCommits`` (BOOL), ``tableVersion``
(N), ``tableTimestamp`` (N, absent until the first coordinated commit), ``schemaVersion`` (N),
``hasAcceptedCommits`` (BOOL) and ``commits`` (L of M: ``version``, ``timestamp``, ``fsName``,
``fsLength``, ``fsTimestamp``; N, N, S, N, N). Every one of them is required with its type, and the
commits must be appended in version order, contiguous and ending at ``tableVersion``; attributes
delta-spark does not write are ignored. The schema version is checked where delta-spark checks it
(before a commit), and on every read too: an item of another schema is never interpreted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .answers import Answer, checked_commits, staged_file_name
from .base import RatifiedCommit
from .errors import CoordinatorError

__all__ = ["DynamoItem", "parse_item", "SCHEMA_VERSION"]

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class DynamoItem:
    table_id: str
    path: str
    accepting_commits: bool
    table_version: int  # tableVersion as stored (registerTable's version until a commit is accepted)
    table_timestamp: int | None
    has_accepted_commits: bool
    commits: tuple[RatifiedCommit, ...]  # ascending, checked
    raw_commits: list[Any]  # the stored list, exactly, for conditional updates

    @property
    def latest(self) -> int:
        """The latest ratified version as delta-spark reports it: -1 until a commit is accepted."""
        return self.table_version if self.has_accepted_commits else -1

    def entry(self, version: int) -> RatifiedCommit | None:
        return next((c for c in self.commits if c.version == version), None)


def parse_item(raw: Mapping[str, Any], answer: Answer) -> DynamoItem:
    """The item, checked; ``MalformedAnswerError`` / ``InconsistentCommitsError`` naming the field."""
    table_id = answer.ddb_str(raw, "tableId")
    schema = answer.ddb_int(raw, "schemaVersion")
    if schema != SCHEMA_VERSION:
        raise CoordinatorError(f"{answer.source}: item {table_id} has schema version {schema}; this client reads schema version "
                               f"{SCHEMA_VERSION} only (delta-spark's DynamoDB coordinator client version)")
    path = answer.ddb_str(raw, "path")
    accepting = answer.ddb_bool(raw, "acceptingCommits")
    version = answer.ddb_int(raw, "tableVersion")
    timestamp = answer.ddb_int(raw, "tableTimestamp") if "tableTimestamp" in raw else None
    accepted = answer.ddb_bool(raw, "hasAcceptedCommits")
    listed = answer.ddb_list(raw, "commits")
    commits = [_commit(answer, i, entry) for i, entry in enumerate(listed)]
    latest = version if accepted else -1
    if commits and not accepted:
        raise answer.inconsistent(f"the item lists commits {commits[0].version}.. but has accepted no commit (hasAcceptedCommits "
                                  "is false)", commits[0].version)
    checked = checked_commits(answer, commits, latest, ordered=True, reaches=latest)
    return DynamoItem(table_id, path, accepting, version, timestamp, accepted, checked, listed)


def _commit(answer: Answer, index: int, entry: Any) -> RatifiedCommit:
    m = answer.ddb_map(entry, f"commits[{index}]")
    version = answer.ddb_int(m, "version", label=f"commits[{index}].version")
    name = answer.ddb_str(m, "fsName", version=version)
    return RatifiedCommit(
        version=version,
        commit_timestamp=answer.ddb_int(m, "timestamp", version=version),
        file_name=staged_file_name(answer, name, version, "fsName"),
        file_size=answer.ddb_int(m, "fsLength", version=version),
        file_modification_time=answer.ddb_int(m, "fsTimestamp", version=version),
    )
