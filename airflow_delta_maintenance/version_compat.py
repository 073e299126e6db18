"""The Airflow names the provider uses, from where each Airflow 3 minor keeps them.

``airflow.providers.common.compat.sdk`` does the same, but recent common-compat releases only
have it; Airflow 3.0.x and 3.1.0 constraint files pin common-compat 1.7.x, which has no ``sdk``
module, and requiring a newer one would make this package uninstallable there. Task-SDK names come from ``airflow.sdk`` (all of Airflow 3);
exceptions and ``conf`` from ``airflow.sdk`` where 3.2+ keeps them, else from core.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import DAG, BaseOperator, BaseSensorOperator, Connection, Context, Param, PokeReturnValue

try:
    from airflow.sdk import BaseHook
except ImportError:  # pragma: no cover - Airflow 3.0 keeps it in core
    from airflow.hooks.base import BaseHook  # type: ignore[no-redef,attr-defined]  # mypy sees 3.3, where it moved

try:  # Airflow ≥ 3.2 moved the task exceptions into the SDK (core's names are deprecated there)
    from airflow.sdk.exceptions import (
        AirflowException,
        AirflowFailException,
        AirflowNotFoundException,
        AirflowSensorTimeout,
        AirflowSkipException,
        TaskDeferred,
    )
except ImportError:  # pragma: no cover - Airflow 3.0 / 3.1
    from airflow.exceptions import (  # type: ignore[no-redef]
        AirflowException,
        AirflowFailException,
        AirflowNotFoundException,
        AirflowSensorTimeout,
        AirflowSkipException,
        TaskDeferred,
    )

try:
    from airflow.sdk import TriggerRule
except ImportError:  # pragma: no cover - Airflow 3.0
    from airflow.utils.trigger_rule import TriggerRule  # type: ignore[no-redef,import-not-found]  # gone in 3.3

try:
    from airflow.sdk.configuration import conf
except ImportError:  # pragma: no cover - Airflow 3.0 / 3.1
    from airflow.configuration import conf
try:
    from airflow.sdk import BaseNotifier
except ImportError:  # pragma: no cover - 3.0.0's airflow.sdk points at a module it lacks (definitions.notifier)
    try:
        from airflow.sdk.bases.notifier import BaseNotifier  # type: ignore[no-redef,import-not-found,unused-ignore]
    except ImportError:
        from airflow.notifications.basenotifier import BaseNotifier  # type: ignore[no-redef,import-not-found,unused-ignore]  # gone in 3.3



def get_hook_lineage_collector() -> Any:
    """Airflow's hook lineage collector (a no-op one unless a lineage reader is enabled), looked up
    at each call as Airflow does. Airflow 3.0 keeps it in core: there hook lineage was not
    reported at all before (the SDK import failed and the hook returned)."""
    try:
        from airflow.sdk.lineage import get_hook_lineage_collector as collector
    except ImportError:  # pragma: no cover - Airflow 3.0
        from airflow.lineage.hook import get_hook_lineage_collector as collector  # type: ignore[no-redef,import-not-found,unused-ignore]
    return collector()


__all__ = [
    "DAG",
    "AirflowException",
    "AirflowFailException",
    "AirflowNotFoundException",
    "AirflowSensorTimeout",
    "AirflowSkipException",
    "BaseHook",
    "BaseNotifier",
    "BaseOperator",
    "BaseSensorOperator",
    "Connection",
    "Context",
    "Param",
    "PokeReturnValue",
    "TaskDeferred",
    "TriggerRule",
    "conf",
    "get_hook_lineage_collector",
]
