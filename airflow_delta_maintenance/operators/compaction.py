"""``DeltaLogCompactionOperator``: aligned log compaction windows over published versions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..maintenance.compaction import run_log_compaction
from ._base import DeltaTableOperator, translate_errors

if TYPE_CHECKING:
    from airflow.providers.common.compat.sdk import Context


class DeltaLogCompactionOperator(DeltaTableOperator):
    """Write ``<x>.<y>.compacted.json`` for every aligned window not yet compacted.

    :param interval: window length; windows end on multiples of it (templated)
    :param max_window_bytes: skip windows whose commits exceed this many bytes (0: no guard)
    """

    template_fields: Sequence[str] = (*DeltaTableOperator.template_fields, "interval")

    def __init__(self, *, interval: int | str = 10, max_window_bytes: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.interval = interval
        self.max_window_bytes = max_window_bytes

    def execute(self, context: Context) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            with self.open_table() as table:
                return run_log_compaction(table, interval=int(self.interval), max_window_bytes=self.max_window_bytes).to_dict()

        result = translate_errors("log compaction", self.table_uri, run)
        self.log.info("wrote %d compaction file(s); skipped %s", len(result["written"]), result["skipped"])
        return result
