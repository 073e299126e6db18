"""``DeltaPublishCommitsOperator``: publish (backfill) ratified commits in order, then report."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..maintenance.operations.publish import publish_ratified_commits
from ._base import DeltaTableOperator, translate_errors
from ._params import as_version

if TYPE_CHECKING:
    from airflow.providers.common.compat.sdk import Context


class DeltaPublishCommitsOperator(DeltaTableOperator):
    """Copy every ratified, unpublished commit up to ``up_to_version`` to ``_delta_log/<v>.json``.

    Idempotent: commits already published with identical bytes count as done; a retry after a crash
    converges. Logs one summary line (``publish: published 101-120 (20 commits, 1.2 MiB) in 0.8 s``)
    and returns the common record (docs: operators/results.md): the range published as ``from_version`` /
    ``to_version``, ``count``, ``bytes``, plus ``latest_ratified_version``,
    ``latest_published_version``, ``reported_version`` and the ``already_published`` count.

    :param up_to_version: last version to publish (default latest ratified) (templated)
    :param allow_unsafe_writes: accept storage without atomic create-if-absent
    """

    template_fields: Sequence[str] = (*DeltaTableOperator.template_fields, "up_to_version")

    def __init__(self, *, up_to_version: int | str | None = None, allow_unsafe_writes: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.up_to_version = up_to_version
        self.allow_unsafe_writes = allow_unsafe_writes

    def execute(self, context: Context) -> dict[str, Any]:
        up_to = as_version(self.up_to_version, "up_to_version")

        def run() -> dict[str, Any]:
            with self.open_table(allow_unsafe_writes=self.allow_unsafe_writes) as table:
                return self.finish(publish_ratified_commits(table, up_to=up_to).report())

        result = translate_errors("publishing", self.table_uri, run)
        self.emit_log_event(context, published_version=result["version"], latest_ratified_version=result["latest_ratified_version"],
                            published=result["count"])
        return result
