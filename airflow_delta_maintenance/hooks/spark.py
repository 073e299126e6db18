"""``DeltaSparkSubmitHook``: ``SparkSubmitHook`` that runs ``local[*]`` when ``spark_default`` is absent.

Airflow's hook falls back to ``yarn`` without a connection; our jobs default to local mode (on a
loopback driver, no UI) so that a fresh installation works, and use the connection when it exists.
"""

from __future__ import annotations

from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from ..maintenance.spark_submit import local_spark_conf

__all__ = ["DeltaSparkSubmitHook"]


class DeltaSparkSubmitHook(SparkSubmitHook):
    def _resolve_connection(self) -> dict[str, Any]:
        data = super()._resolve_connection()
        try:
            self.get_connection(self._conn_id)
        except Exception:  # noqa: BLE001 - any lookup failure means "no connection configured"
            data["master"] = "local[*]"
        if str(data.get("master", "")).startswith("local"):
            self._conf = {**local_spark_conf(), **(self._conf or {})}
            self._env_vars = {"SPARK_LOCAL_IP": "127.0.0.1", **(self._env_vars or {})}
        return data
