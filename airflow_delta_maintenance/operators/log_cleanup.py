"""``DeltaLogCleanupOperator``: retention-gated metadata cleanup, dry run unless told to delete."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ..deltalog.cleanup.plan import retention_ms_from_days
from ..maintenance.operations.log_cleanup import cleanup_report, run_metadata_cleanup
from ._base import DeltaTableOperator, translate_errors
from ._params import as_bool, as_days

if TYPE_CHECKING:
    from airflow.providers.common.compat.sdk import Context


class DeltaLogCleanupOperator(DeltaTableOperator):
    """Plan (and with ``dry_run=False`` execute) the protocol's metadata cleanup.

    Logs one summary line (``cleanup: deleted 340 files (12.1 MiB) below v100 in 1.2 s``, or the
    skip with its reason) and returns the common record (docs: operators/results.md): ``version`` is the
    anchor checkpoint, ``count``/``bytes`` the files (to be) deleted, ``counts`` per kind, the
    ``cutoff`` as ISO-8601 UTC, ``dry_run`` and ``executed`` — never the file list.

    :param dry_run: only plan (default) (templated)
    :param retention_days: override ``delta.logRetentionDuration``, in days or a duration such as
        ``"12h"`` (shorter needs ``allow_shorter_retention``) (templated)
    :param catalog_permits_cleanup: the table's catalog allows metadata cleanup (catalog-managed tables)
    """

    template_fields: Sequence[str] = (*DeltaTableOperator.template_fields, "dry_run", "retention_days")

    def __init__(
        self,
        *,
        dry_run: bool | str = True,
        retention_days: float | timedelta | str | None = None,
        allow_shorter_retention: bool = False,
        catalog_permits_cleanup: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.dry_run = dry_run  # type: ignore[assignment,method-assign]  # shadows BaseOperator.dry_run(); the argument name is public
        self.retention_days = retention_days
        self.allow_shorter_retention = allow_shorter_retention
        self.catalog_permits_cleanup = catalog_permits_cleanup

    def execute(self, context: Context) -> dict[str, Any]:
        dry_run = as_bool(self.dry_run, "dry_run", True)
        days = as_days(self.retention_days, "retention_days")
        retention = None if days is None else translate_errors(
            "metadata cleanup", self.table_uri, lambda: retention_ms_from_days(days, option="retention_days"))
        allow_shorter = as_bool(self.allow_shorter_retention, "allow_shorter_retention", False)
        permits = as_bool(self.catalog_permits_cleanup, "catalog_permits_cleanup", False)

        def run() -> dict[str, Any]:
            with self.open_table() as table:
                result = run_metadata_cleanup(
                    table,
                    dry_run=dry_run,
                    retention_ms=retention,
                    allow_shorter_retention=allow_shorter,
                    catalog_permits_cleanup=permits,
                    progress=self.progress(),
                )
            return self.finish(cleanup_report(result))

        return translate_errors("metadata cleanup", self.table_uri, run)
