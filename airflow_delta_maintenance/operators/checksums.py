"""``DeltaChecksumsOperator``: the missing version checksums (``<v>.crc``) of published versions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..maintenance.operations.checksums import ChecksumOutcome, plan_checksums, run_checksums
from ._base import DeltaTableOperator, translate_errors
from ._params import as_version

if TYPE_CHECKING:
    from airflow.providers.common.compat.sdk import Context


class DeltaChecksumsOperator(DeltaTableOperator):
    """Write the missing ``<v>.crc`` of published versions, each from the previous checksum plus
    one commit (docs: checksums.md), on the worker.

    Logs one summary line (``checksums: wrote 12 checksum(s) v108..v119 (51.0 KiB, from checksum
    of v107) in 0.1 s``, or ``checksums: skipped — <reason>``) and returns the common record
    (docs: operators/results.md) with ``written``, ``existed``, ``replays`` and ``anchor``. A
    checksum in the range that disagrees with the log fails the task naming its version (the
    others are written first); it is never rewritten.

    :param from_version: first version (default: the one after the newest checksum, else the newest checkpoint's) (templated)
    :param to_version: last version (default: the latest published) (templated)
    """

    template_fields: Sequence[str] = (*DeltaTableOperator.template_fields, "from_version", "to_version")

    def __init__(self, *, from_version: int | str | None = None, to_version: int | str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.from_version = from_version
        self.to_version = to_version

    def execute(self, context: Context) -> dict[str, Any]:
        start, end = as_version(self.from_version, "from_version"), as_version(self.to_version, "to_version")
        table = translate_errors("checksum planning", self.table_uri, self.open_table)
        with table:
            plan = translate_errors("checksum planning", self.table_uri, lambda: plan_checksums(table, from_version=start, to_version=end))
            outcome: ChecksumOutcome = translate_errors("checksums", self.table_uri, lambda: run_checksums(table, plan, progress=self.progress()))
        return self.finish(outcome.report())
