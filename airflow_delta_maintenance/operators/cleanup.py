"""``DeltaLogCleanupOperator``: retention-gated metadata cleanup, dry run unless told to delete."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..deltalog.cleanup import retention_ms_from_days
from ..maintenance.cleanup import run_metadata_cleanup
from ._base import DeltaTableOperator, translate_errors

if TYPE_CHECKING:
    from airflow.providers.common.compat.sdk import Context


class DeltaLogCleanupOperator(DeltaTableOperator):
    """Plan (and with ``dry_run=False`` execute) the protocol's metadata cleanup.

    The summary has the cutoff, the anchor checkpoint, counts and bytes per kind, the skip reason
    when a gate applies, and whether anything was deleted — never the file list.

    :param dry_run: only plan (default) (templated)
    :param retention_days: override ``delta.logRetentionDuration`` (shorter needs ``allow_shorter_retention``)
    :param catalog_permits_cleanup: the table's catalog allows metadata cleanup (catalog-managed tables)
    """

    template_fields: Sequence[str] = (*DeltaTableOperator.template_fields, "dry_run", "retention_days")

    def __init__(
        self,
        *,
        dry_run: bool | str = True,
        retention_days: float | str | None = None,
        allow_shorter_retention: bool = False,
        catalog_permits_cleanup: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.dry_run = dry_run  # type: ignore[assignment,method-assign]  # shadows BaseOperator.dry_run(), see issue 16
        self.retention_days = retention_days
        self.allow_shorter_retention = allow_shorter_retention
        self.catalog_permits_cleanup = catalog_permits_cleanup

    def execute(self, context: Context) -> dict[str, Any]:
        dry_run = self.dry_run if isinstance(self.dry_run, bool) else str(self.dry_run).strip().lower() not in ("false", "0", "no")
        retention = None if self.retention_days in (None, "", "None") else retention_ms_from_days(self.retention_days, option="retention_days")

        def run() -> dict[str, Any]:
            with self.open_table() as table:
                result = run_metadata_cleanup(
                    table,
                    dry_run=dry_run,
                    retention_ms=retention,
                    allow_shorter_retention=self.allow_shorter_retention,
                    catalog_permits_cleanup=self.catalog_permits_cleanup,
                )
            out = result.to_dict()
            out.pop("delete")  # file lists stay out of XCom; counts and bytes remain
            return out

        summary = translate_errors("metadata cleanup", self.table_uri, run)
        if summary["skipped_reason"]:
            self.log.info("cleanup skipped: %s", summary["skipped_reason"])
        else:
            self.log.info(
                "%s %s file(s) (%s bytes) below checkpoint %s: %s",
                "would delete" if dry_run else "deleted", sum(summary["counts"].values()), summary["delete_bytes"],
                summary["cutoff_checkpoint_version"], summary["counts"],
            )
        return summary
