"""Schedules as the configuration writes them: a cron expression, a preset (``@hourly``), a
duration (``30m``, ``2h``, ``1d``), ``asset`` or ``watch`` — checked here, not when Airflow first
schedules, and without importing Airflow."""

from __future__ import annotations

import functools
import re
from datetime import timedelta

__all__ = ["PRESETS", "SCHEDULE_ASSET", "SCHEDULE_WATCH", "parse_schedule"]

SCHEDULE_ASSET = "asset"  # run when a task emits the table's asset (a writer DAG's outlet)
SCHEDULE_WATCH = "watch"  # run when the AssetWatcher over the ratified-version trigger fires
# Airflow's schedule presets (airflow.utils.dates / timetables)
PRESETS = frozenset({"@once", "@continuous", "@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@quarterly", "@yearly", "@annually"})
_DURATION = re.compile(r"^\s*(\d+)\s*(s|m|h|d)\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


@functools.lru_cache(maxsize=256)  # a fleet repeats a handful of schedules: check each once
def parse_schedule(value: str) -> str | timedelta:
    """A cron expression or preset (returned as is), or a duration ``<n>s|m|h|d`` (a ``timedelta``);
    ``ValueError`` naming the accepted forms otherwise."""
    text = value.strip()
    if text in PRESETS:
        return text
    match = _DURATION.match(text)
    if match:
        if int(match.group(1)) <= 0:
            raise ValueError(f"{value!r}: a duration must be positive")
        return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    from croniter import croniter  # an Airflow dependency; imported only for cron strings

    if text.startswith("@") or not croniter.is_valid(text):
        raise ValueError(
            f"{value!r} is not a cron expression (e.g. '0 * * * *'), a preset "
            f"({', '.join(sorted(PRESETS))}) or a duration (e.g. 30m, 2h, 1d)"
        )
    return text
