"""A fleet without stampedes: per-table schedule jitter, one pool per coordinator endpoint.

Everything here is a pure function of the configuration, computed at DAG-parse time without I/O,
and stable across parses and processes (``hashlib``, never Python's salted ``hash``): a table keeps
its minute for as long as its URI does not change.

- **Jitter.** ``@hourly`` for 1,000 tables must not mean 1,000 runs at :00 against one DynamoDB
  table or UC endpoint. A table's offset is ``sha256(normalised URI) mod 60`` minutes; it is added
  to the minute of a preset or of a cron expression whose minute field is one number (``0 * * * *``
  → ``37 * * * *``), or to the start of a ``*/n`` step field. A duration that divides an hour or a
  day becomes the equivalent cron expression at the table's offset (``30m`` → ``7-59/30 * * * *``):
  Airflow runs a duration schedule relative to when the DAG was first seen, so 1,000 tables
  deployed together would otherwise run together forever. Other durations are left as they are.
- **Pools.** ``pool: auto`` puts every task of a table in the pool of its coordinator endpoint
  (``delta_coordinator__<endpoint>``, ``maintenance.config.endpoint``), so the tables sharing a
  DynamoDB table or a UC server share its concurrency budget; ``delta-maintenance pools
  tables.yaml`` prints or creates them (``pools_for``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from datetime import timedelta

from ..deltalog.storage import normalize_table_uri

__all__ = [
    "minute_offset",
    "jitter_cron",
    "jitter_start_offset",
    "jitter_duration",
    "pools_for",
]

# Airflow's cron presets, spelled out so that their minute can move.
_PRESET_CRON = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@quarterly": "0 0 1 */3 *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
_STEP = re.compile(r"^\*/(\d+)$")


def _digest(table_uri: str) -> int:
    return int.from_bytes(hashlib.sha256(normalize_table_uri(table_uri).encode()).digest()[:8], "big")


def minute_offset(table_uri: str) -> int:
    """The table's minute in the hour, 0–59: uniform over tables, the same in every process."""
    return _digest(table_uri) % 60


def jitter_cron(schedule: str, table_uri: str) -> str:
    """``schedule`` (a preset or a five-field cron expression) with the table's minute offset
    applied; an expression whose minute cannot move safely (a list, a range) is returned as is."""
    cron = _PRESET_CRON.get(schedule.strip(), schedule.strip())
    fields = cron.split()
    if len(fields) != 5:  # @once, @continuous, or a form we do not rewrite
        return schedule
    offset = minute_offset(table_uri)
    minute = fields[0]
    if minute.isdigit() and int(minute) < 60:
        fields[0] = str((int(minute) + offset) % 60)
    elif minute == "*":
        return schedule  # every minute: nothing to spread
    elif (step := _STEP.match(minute)) and 0 < int(step.group(1)) <= 60 and 60 % int(step.group(1)) == 0:
        n = int(step.group(1))
        fields[0] = f"{offset % n}-59/{n}"
    else:
        return schedule
    return " ".join(fields)


def jitter_duration(interval: timedelta, table_uri: str) -> str | None:
    """The cron expression running every ``interval`` at the table's offset, when the interval
    divides an hour (``30m``) or a day (``2h``, ``1d``); None otherwise."""
    seconds = int(interval.total_seconds())
    if seconds % 60 or seconds < 120:
        return None
    minutes, offset = seconds // 60, minute_offset(table_uri)
    if minutes < 60:
        return f"{offset % minutes}-59/{minutes} * * * *" if 60 % minutes == 0 else None
    if minutes % 60:
        return None
    hours = minutes // 60
    if hours == 1:
        return f"{offset} * * * *"
    if hours < 24 and 24 % hours == 0:
        return f"{offset} {(_digest(table_uri) // 60) % hours}-23/{hours} * * *"
    return f"{offset} 0 * * *" if hours == 24 else None


def jitter_start_offset(interval: timedelta, table_uri: str) -> timedelta:
    """A per-table offset within ``interval`` (seconds resolution): where a watcher's first poll
    falls within its poll interval."""
    seconds = int(interval.total_seconds())
    if seconds <= 1:
        return timedelta(0)
    return timedelta(seconds=(_digest(table_uri) % 3600) % seconds)


def pools_for(entries: Iterable[tuple[str, int]]) -> dict[str, int]:
    """Pool name → slots from (pool, slots) pairs of the tables using them; tables that disagree
    on the size of a shared pool get the smallest (the budget protects the endpoint)."""
    pools: dict[str, int] = {}
    for name, slots in entries:
        pools[name] = min(slots, pools.get(name, slots))
    return pools
