"""Coordinator answers are input: every field is type-checked before anything relies on it.

The clients read DynamoDB items (``{"N": "5"}``-style attribute values) and Unity Catalog JSON;
both go through the readers here, which raise a one-line ``MalformedAnswerError`` naming the
coordinator, the table, the version (when the field belongs to a commit) and the field, instead
of a ``KeyError``/``ValueError`` or a silently defaulted value. ``checked_commits`` then checks the
ratified commits as a set, as the protocol requires them (ascending, contiguous, at most the latest
ratified version and reaching it): anything else is an ``InconsistentCommitsError``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from .base import RatifiedCommit
from .errors import InconsistentCommitsError, MalformedAnswerError

__all__ = ["Answer", "checked_commits", "staged_file_name"]

_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1  # Delta versions and times are Java longs
_INTEGER = re.compile(r"-?\d{1,19}")
# A staged commit's bare name as delta-spark and these clients write it: <20-digit version>.<uuid>.json
_STAGED_NAME = re.compile(r"(\d{20})\.[0-9A-Za-z][0-9A-Za-z-]*\.json")


@dataclass(frozen=True)
class Answer:
    """Where an answer came from, for messages: the client's description and the table."""

    source: str  # the client's describe()
    table: str  # the table URI (or id) the answer is about

    def malformed(self, field: str, problem: str, version: int | None = None) -> MalformedAnswerError:
        where = f"the commit of version {version}: " if version is not None else ""
        return MalformedAnswerError(f"{self.source}: malformed answer for table {self.table}: {where}{field} {problem}",
                                    version=version, field=field)

    def inconsistent(self, problem: str, version: int | None) -> InconsistentCommitsError:
        return InconsistentCommitsError(f"{self.source}: inconsistent answer for table {self.table}: {problem}; "
                                        "nothing is acted on until the coordinator is repaired", version=version)

    # ---- JSON (Unity Catalog) ------------------------------------------------------------------

    def json_int(self, obj: Mapping[str, Any], key: str, *, minimum: int = 0, version: int | None = None) -> int:
        value = obj.get(key)
        if value is None:
            raise self.malformed(key, "is missing", version)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.malformed(key, f"is {_shown(value)}, not a whole number", version)
        return self._in_range(key, value, minimum, version)

    def json_str(self, obj: Mapping[str, Any], key: str, *, version: int | None = None) -> str:
        value = obj.get(key)
        if value is None:
            raise self.malformed(key, "is missing", version)
        if not isinstance(value, str) or not value:
            raise self.malformed(key, f"is {_shown(value)}, not a non-empty string", version)
        return value

    def json_list(self, obj: Mapping[str, Any], key: str) -> list[Any]:
        """A list that may be absent or null (an empty list then); anything else is malformed."""
        value = obj.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.malformed(key, f"is {_shown(value)}, not a list")
        return value

    def json_strings(self, obj: Mapping[str, Any], key: str) -> list[str]:
        """A list of strings that may be absent or null (empty then)."""
        values = self.json_list(obj, key)
        bad = next((v for v in values if not isinstance(v, str)), None)
        if bad is not None:
            raise self.malformed(key, f"holds {_shown(bad)}, not a string")
        return values

    def json_object(self, value: Any, field: str, version: int | None = None) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.malformed(field, f"is {_shown(value)}, not an object", version)
        return value

    # ---- DynamoDB attribute values ---------------------------------------------------------------

    def _attribute(self, item: Mapping[str, Any], key: str, kind: str, version: int | None, label: str | None = None) -> Any:
        attr = item.get(key)
        if attr is None:
            raise self.malformed(label or key, "is missing", version)
        if not isinstance(attr, Mapping) or len(attr) != 1 or kind not in attr:
            raise self.malformed(label or key, f"is {_ddb_shown(attr)}, not a DynamoDB {kind}", version)
        return attr[kind]

    def ddb_int(self, item: Mapping[str, Any], key: str, *, minimum: int = 0, version: int | None = None, label: str | None = None) -> int:
        text = self._attribute(item, key, "N", version, label)
        if not isinstance(text, str) or not _INTEGER.fullmatch(text):
            raise self.malformed(label or key, f"is {_shown(text)}, not a whole number", version)
        return self._in_range(label or key, int(text), minimum, version)

    def ddb_str(self, item: Mapping[str, Any], key: str, *, version: int | None = None) -> str:
        value = self._attribute(item, key, "S", version)
        if not isinstance(value, str) or not value:
            raise self.malformed(key, f"is {_shown(value)}, not a non-empty string", version)
        return value

    def ddb_bool(self, item: Mapping[str, Any], key: str) -> bool:
        value = self._attribute(item, key, "BOOL", None)
        if not isinstance(value, bool):
            raise self.malformed(key, f"is {_shown(value)}, not a boolean", None)
        return value

    def ddb_list(self, item: Mapping[str, Any], key: str) -> list[Any]:
        value = self._attribute(item, key, "L", None)
        if not isinstance(value, list):
            raise self.malformed(key, f"is {_shown(value)}, not a list", None)
        return value

    def ddb_map(self, attr: Any, field: str) -> Mapping[str, Any]:
        if not isinstance(attr, Mapping) or len(attr) != 1 or not isinstance(attr.get("M"), Mapping):
            raise self.malformed(field, f"is {_ddb_shown(attr)}, not a DynamoDB map")
        return attr["M"]

    def _in_range(self, key: str, value: int, minimum: int, version: int | None) -> int:
        if value < minimum or value > _LONG_MAX or value < _LONG_MIN:
            raise self.malformed(key, f"is {value}, out of range (at least {minimum})", version)
        return value


def staged_file_name(answer: Answer, name: str, version: int, field: str) -> str:
    """``_staged_commits/<name>`` for a bare staged-commit name of ``version``; any other name (a
    path, another version's file, something not a commit) is malformed."""
    m = _STAGED_NAME.fullmatch(name)
    if m is None:
        raise answer.malformed(field, f"is {_shown(name)}, not a staged commit file name (<version>.<uuid>.json)", version)
    if int(m.group(1)) != version:
        raise answer.malformed(field, f"is {_shown(name)}, the staged file of version {int(m.group(1))}", version)
    return f"_staged_commits/{name}"


def checked_commits(answer: Answer, listed: Iterable[RatifiedCommit], latest: int, *, ordered: bool,
                    reaches: int | None) -> tuple[RatifiedCommit, ...]:
    """The ratified commits, ascending, after checking them as a set.

    ``ordered``: the answer keeps commits in ascending order (a DynamoDB item's list is appended
    to in commit order), so an order that is not ascending is itself inconsistent. ``reaches``:
    the version the newest listed commit must be when any is listed (the latest ratified version,
    or the top of the requested window); ``None`` when the answer was cut short.
    """
    commits = list(listed)
    if latest < -1:
        raise answer.malformed("latest ratified version", f"is {latest}, below -1")
    seen: set[int] = set()
    for c in commits:
        if c.version in seen:
            raise answer.inconsistent(f"version {c.version} is listed twice", c.version)
        seen.add(c.version)
    if ordered:
        for before, after in pairwise(commits):
            if after.version < before.version:
                raise answer.inconsistent(f"version {after.version} is listed after version {before.version}", after.version)
    commits.sort(key=lambda c: c.version)
    for before, after in pairwise(commits):
        if after.version != before.version + 1:
            raise answer.inconsistent(f"versions {before.version} and {after.version} are listed, version {before.version + 1} "
                                      "is not", before.version + 1)
    if commits and commits[-1].version > latest:
        above = next(c.version for c in commits if c.version > latest)
        raise answer.inconsistent(f"version {above} is listed above the latest ratified version {latest}", above)
    if commits and reaches is not None and commits[-1].version != reaches:
        raise answer.inconsistent(f"the listed commits stop at version {commits[-1].version}, but the latest ratified version is "
                                  f"{latest}: versions {commits[-1].version + 1}..{reaches} are not listed", commits[-1].version + 1)
    return tuple(commits)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _ddb_shown(attr: Any) -> str:
    if isinstance(attr, Mapping) and len(attr) == 1:
        kind, value = next(iter(attr.items()))
        return f"{_shown(value)} of DynamoDB type {kind}"
    return _shown(attr)
