"""Where the fleet health report lives, for every Airflow component that needs it (the fleet
report task, the listener recording task successes, the UI plugin page)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DEFAULT_DIR_NAME", "report_dir"]

DEFAULT_DIR_NAME = "delta-maintenance-report"


def report_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The argument, else ``$DELTA_MAINTENANCE_REPORT_DIR``, else ``[delta_maintenance] report_dir``,
    else ``$AIRFLOW_HOME/delta-maintenance-report`` (a local directory every component can reach
    on a single-machine deployment; set it to shared storage mounted by all of them otherwise)."""
    if explicit:
        return Path(explicit)
    value = os.environ.get("DELTA_MAINTENANCE_REPORT_DIR")
    if not value:
        from ..version_compat import conf

        value = conf.get("delta_maintenance", "report_dir", fallback=None)
    if value:
        return Path(value)
    return Path(os.path.expanduser(os.environ.get("AIRFLOW_HOME", "~/airflow"))) / DEFAULT_DIR_NAME
