"""``DeltaLogCompactionOperator``: aligned log compaction windows over published versions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._coerce import as_int
from ..maintenance.compaction import run_log_compaction
from ._base import DeltaTableOperator, translate_errors

if TYPE_CHECKING:
    from airflow.providers.common.compat.sdk import Context


class DeltaLogCompactionOperator(DeltaTableOperator):
    """Write ``<x>.<y>.compacted.json`` for every aligned window not yet compacted.

    Logs one summary line (``compaction: wrote 2 window(s) over 1-20 (3.1 KiB) in 0.2 s``, or the
    skip with its reason) and returns the common record (README, "XCom"): ``from_version`` /
    ``to_version`` span the windows written, ``count`` is their number; ``skipped_windows`` counts
    the skipped ones by reason.

    :param interval: window length; windows end on multiples of it (templated)
    :param max_window_bytes: skip windows whose commits exceed this many bytes (0: no guard)
    """

    template_fields: Sequence[str] = (*DeltaTableOperator.template_fields, "interval")

    def __init__(self, *, interval: int | str = 10, max_window_bytes: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.interval = interval
        self.max_window_bytes = max_window_bytes

    def execute(self, context: Context) -> dict[str, Any]:
        interval = as_int(self.interval, "interval", 10, minimum=2) or 10
        max_bytes = as_int(self.max_window_bytes, "max_window_bytes", 0, minimum=0) or 0

        def run() -> dict[str, Any]:
            with self.open_table() as table:
                return self.finish(run_log_compaction(table, interval=interval, max_window_bytes=max_bytes).report())

        return translate_errors("log compaction", self.table_uri, run)
