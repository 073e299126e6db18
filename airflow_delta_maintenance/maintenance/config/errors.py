"""Configuration mistakes: each one a line naming the file, the table and the key path."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ConfigError", "TableConfigError"]


class ConfigError(ValueError):
    """A configuration mistake; the message names the file, the table and the key.

    One error may carry several mistakes (``problems``, one line each in the message): validation
    collects every mistake of a table, or of the file, so that one round of fixes is enough.
    ``path``, ``table``, ``key`` and ``detail`` are the first mistake's."""

    def __init__(self, path: str, table: str | None, key: str, message: str) -> None:
        super().__init__(_where(path, table, key) + message)
        self.path, self.table, self.key, self.detail = path, table, key, message
        self.problems: tuple[ConfigError, ...] = (self,)

    @classmethod
    def several(cls, problems: Sequence[ConfigError]) -> ConfigError:
        """One error for ``problems`` (at least one): the first itself when it is alone."""
        if len(problems) == 1:
            return problems[0]
        first = problems[0]
        error = cls(first.path, first.table, first.key, first.detail)
        error.problems = tuple(p for problem in problems for p in problem.problems)
        error.args = ("\n".join(str(p) for p in error.problems),)
        return error

    @property
    def lines(self) -> list[str]:
        """``key: detail`` of each mistake (the file and the table are said elsewhere)."""
        return [f"{p.key}: {p.detail}" for p in self.problems]


def _where(path: str, table: str | None, key: str) -> str:
    return f"{path}: " + (f"table {table!r}: " if table else "") + f"{key}: "


@dataclass(frozen=True)
class TableConfigError:
    """A table that failed validation: its name (``tables[<i>]`` when the name itself is bad),
    the DAG id it would have had, and the error (every mistake of the table)."""

    name: str
    dag_id: str
    error: ConfigError
    owner: str | None = None  # the table's (or the defaults') owner and tags, when well formed:
    tags: tuple[str, ...] = ()  # its placeholder DAG is found where the table's DAG would be
