"""``min_interval`` of the tasks due by their own interval (OPTIMIZE, VACUUM): when did *this task*
last do its work?

Airflow's ``prev_start_date_success`` is the previous successful *DAG run*, not this task: in an
hourly DAG every run succeeds, so a task with a one-day interval saw "1 h ago" on every run after
its first and never ran again. Each run that does the work leaves its time in an XCom of its own
key; a skipped run leaves none, so the newest one (this run's and earlier runs') is the last work.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ._params import as_seconds

if TYPE_CHECKING:
    from airflow.providers.common.compat.sdk import Context

__all__ = ["LAST_WORK_KEY", "not_due", "record_work"]

LAST_WORK_KEY = "last_work_at"


def _last_work(context: Context | None, task_id: str) -> datetime | None:
    ti: Any = context.get("ti") if context else None
    if ti is None:
        return None
    value = ti.xcom_pull(task_ids=task_id, key=LAST_WORK_KEY, include_prior_dates=True)
    if isinstance(value, list):  # several runs' values: the newest
        value = max((v for v in value if isinstance(v, str)), default=None)
    if not isinstance(value, str):
        return None
    try:
        last = datetime.fromisoformat(value)
    except ValueError:
        return None
    return last if last.tzinfo else last.replace(tzinfo=timezone.utc)


def not_due(context: Context | None, task_id: str, min_interval: Any, what: str) -> str | None:
    """Why the task is not due (its last work is younger than ``min_interval``), or None."""
    seconds = as_seconds(min_interval, "min_interval")
    if not seconds:
        return None
    last = _last_work(context, task_id)
    if last is None:
        return None
    age = (datetime.now(timezone.utc) - last).total_seconds()
    if age >= seconds:
        return None
    return f"the last {what} ran {age / 3600:.1f} h ago; min_interval is {seconds / 3600:.1f} h"


def record_work(context: Context | None) -> None:
    """This run did the work: the time ``not_due`` of later runs measures from."""
    ti: Any = context.get("ti") if context else None
    if ti is not None:
        ti.xcom_push(key=LAST_WORK_KEY, value=datetime.now(timezone.utc).isoformat())
