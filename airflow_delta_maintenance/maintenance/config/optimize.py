"""The ``optimize:`` section of a table's configuration (data-file compaction).

Off unless the table has the section (``base.OptInSection``): ``optimize: true`` or a mapping of
some of its keys turns it on. Sizes are bytes or byte strings (``128MB``, ``1GiB``) checked here as
the task parses them; the predicate's syntax is checked when the task reads the table (its columns
and types come from the table's schema).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, WithJsonSchema

from ...deltalog.errors import InvalidOptionError
from ...deltalog.optimize.plan import parse_size
from .base import OptInSection, StringMapping
from .schedule import parse_schedule

__all__ = ["OptimizeConfig"]


def _size(value: int | str | None) -> int | str | None:
    if value is not None:
        try:
            parse_size(value, "size")
        except InvalidOptionError as exc:
            raise ValueError(str(exc).removeprefix("size: ")) from None
    return value


def _duration(value: str | None) -> str | None:
    if value is not None:
        try:
            parsed: Any = parse_schedule(value)
        except ValueError:
            parsed = None
        if not isinstance(parsed, timedelta):
            raise ValueError(f"expected a duration such as 12h or 1d, got {value!r}")
    return value


Size = Annotated[
    int | str | None,
    AfterValidator(_size),
    WithJsonSchema({"anyOf": [{"type": "integer", "minimum": 1}, {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*[A-Za-z]*\s*$"}, {"type": "null"}]}),
]
Duration = Annotated[str | None, AfterValidator(_duration), WithJsonSchema({"anyOf": [{"type": "string", "pattern": r"^\s*\d+\s*[smhd]\s*$"}, {"type": "null"}]})]


class OptimizeConfig(OptInSection):
    """Data-file compaction (OPTIMIZE): small files rewritten into larger ones, committed through
    the table's coordinator."""

    enabled: bool = Field(default=False, description="on when the section is given (`optimize: true` or a mapping); `false`: no optimize task")
    interval: Duration = Field(default="1d", description="run at most this often (a duration: `12h`, `1d`); null: on every DAG run")
    engine: Literal["local", "spark"] = Field(default="local", description="`local` rewrites on the worker (pyarrow); `spark`: a PySpark job per commit batch (the task plans and commits)")
    dry_run: bool = Field(default=False, description="plan only: log and return the bins, write nothing")
    min_file_size: Size = Field(
        default=None, description="files below this size are compacted (bytes or `128MB`, `1GiB`); null: `delta.targetFileSize`, else `target_file_size`, else 1 GiB"
    )
    target_file_size: Size = Field(default=None, description="the size bins are packed up to; null: `delta.targetFileSize`, else 1 GiB")
    predicate: str | None = Field(default=None, description="only partitions matching this predicate on partition columns (`date >= '2026-01-01' AND region = 'eu'`)")
    max_bytes: Size = Field(default=None, description="the run's budget of input bytes; null: no limit")
    catalog_permits_optimize: bool = Field(default=False, description="the catalog allows OPTIMIZE of this catalog-managed table")
    spark_conn_id: str = Field(default="spark_default", description="the Spark connection (`engine: spark`)")
    spark_conf: StringMapping = Field(default_factory=dict, description="extra Spark conf (`engine: spark`; values become strings)")
    spark_jars: str | None = Field(default=None, description="jars for the job (`engine: spark`; `hadoop-aws` for `s3://`)")
    spark_packages: str | None = Field(default=None, description="Maven packages for the job (`engine: spark`)")
