"""The ``vacuum:`` section of a table's configuration (VACUUM of unreferenced data files)."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from .base import OptInSection, StringMapping
from .schedule import parse_schedule

__all__ = ["VacuumConfig"]


def _duration(value: str | None) -> str | None:
    if value is not None and not isinstance(parse_schedule(value), timedelta):
        raise ValueError(f"expected a duration such as 12h or 7d, got {value!r}")
    return value


class VacuumConfig(OptInSection):
    """VACUUM of data files no retained version references; off unless the table has a ``vacuum:`` section."""

    enabled: bool = Field(default=False, description="`true` (or any key of the section): a `vacuum` task at the end of the DAG")
    interval: Annotated[str | None, AfterValidator(_duration)] = Field(
        default="7d", description="run at most this often (a duration: weekly by default); null: every DAG run"
    )
    mode: Literal["full", "lite"] = Field(default="full", description="`full` lists the table root; `lite` reads the retained log's removes")
    dry_run: bool = Field(default=True, description="only plan and report; `false` deletes")
    retention_hours: Annotated[float, Field(ge=0)] | None = Field(
        default=None, description="overrides `delta.deletedFileRetentionDuration`; null: the table's (7 days by default)"
    )
    allow_shorter_retention: bool = Field(default=False, description="allow a retention shorter than the table's")
    catalog_permits_vacuum: bool = Field(default=False, description="the catalog allows VACUUM of this catalog-managed table")
    inventory: str | None = Field(default=None, description="an S3 Inventory `manifest.json` or a listing file to read instead of listing the root")
    engine: Literal["local", "spark"] = Field(
        default="local", description="`local` lists and deletes on the worker (threads); `spark`: a PySpark job lists the root and another deletes (the task plans)"
    )
    spark_conn_id: str = Field(default="spark_default", description="the Spark connection (`engine: spark`)")
    spark_conf: StringMapping = Field(default_factory=dict, description="extra Spark conf (`engine: spark`; values become strings)")
    spark_jars: str | None = Field(default=None, description="jars for the job (`engine: spark`; `hadoop-aws` for `s3://`)")
    spark_packages: str | None = Field(default=None, description="Maven packages for the job (`engine: spark`)")
