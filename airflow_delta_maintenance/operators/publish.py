"""``DeltaPublishCommitsOperator``: publish (backfill) ratified commits in order, then report."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..maintenance.publish import publish_ratified_commits
from ._base import DeltaTableOperator, translate_errors

if TYPE_CHECKING:
    from airflow.providers.common.compat.sdk import Context


class DeltaPublishCommitsOperator(DeltaTableOperator):
    """Copy every ratified, unpublished commit up to ``up_to_version`` to ``_delta_log/<v>.json``.

    Idempotent: commits already published with identical bytes count as done; a retry after a crash
    converges. Returns ``published``, ``already_published``, ``latest_ratified_version``,
    ``latest_published_version`` and ``seconds``.

    :param up_to_version: last version to publish (default latest ratified) (templated)
    :param allow_unsafe_writes: accept storage without atomic create-if-absent
    """

    template_fields: Sequence[str] = (*DeltaTableOperator.template_fields, "up_to_version")

    def __init__(self, *, up_to_version: int | str | None = None, allow_unsafe_writes: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.up_to_version = up_to_version
        self.allow_unsafe_writes = allow_unsafe_writes

    def execute(self, context: Context) -> dict[str, Any]:
        up_to = None if self.up_to_version in (None, "", "None") else int(self.up_to_version)  # type: ignore[arg-type]

        def run() -> dict[str, Any]:
            with self.open_table(allow_unsafe_writes=self.allow_unsafe_writes) as table:
                return publish_ratified_commits(table, up_to=up_to).to_dict()

        result = translate_errors("publishing", self.table_uri, run)
        self.emit_log_event(context, published_version=result["latest_published_version"], latest_ratified_version=result["latest_ratified_version"],
                            published=len(result["published"]))
        self.log.info(
            "published %d commit(s), %d already published; latest ratified %s, latest published %s",
            len(result["published"]), len(result["already_published"]), result["latest_ratified_version"], result["latest_published_version"],
        )
        return result
