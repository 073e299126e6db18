"""The sections of a table's configuration, one model each: ``sensor:``, ``checkpoint:``,
``compaction:``, ``cleanup:``, ``health:``, ``rate_limit:``.

A new section (``optimize:``, ``vacuum:``, ``checksums:``) is one more model here (or in a module
of its own) and one field of ``TableConfig``: the defaults, a discovery source's ``settings:``,
an override, the JSON schema and the docs' reference all follow from the model. A section given
as ``false`` is ``enabled: false``, ``true`` is ``enabled: true``, null takes its defaults
(``base.Section``); a section that is off unless asked for derives from ``base.OptInSection``.
Each field's ``description`` is its line in the reference.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from .base import ConfigModel, OptInSection, StringMapping

__all__ = ["ChecksumsConfig", "CheckpointConfig", "CleanupConfig", "CompactionConfig", "HealthConfig", "RateLimitConfig", "SensorConfig"]

PositiveInt = Annotated[int, Field(ge=1)]


class SensorConfig(ConfigModel):
    """The wait for ratified commits."""

    enabled: bool = Field(default=True, description="`false`: no sensor task")
    min_new_commits: PositiveInt = Field(default=1, description="new ratified commits beyond the last published version that start the run (and fire a watcher)")
    timeout_minutes: Annotated[float, Field(ge=0)] = Field(default=60.0, description="how long the sensor waits before skipping the run")
    poke_interval_seconds: Annotated[float, Field(ge=1)] = Field(default=30.0, description="seconds between coordinator calls (of the sensor and of a `watch` watcher)")
    mode: Literal["poke", "reschedule"] = Field(default="reschedule", description="the sensor's mode")
    deferrable: bool | None = Field(default=None, description="defer to the triggerer; null: Airflow's `[operators] default_deferrable`")


class CheckpointConfig(ConfigModel):
    """Checkpoints."""

    enabled: bool = Field(default=True, description="`false`: no checkpoint task")
    interval: PositiveInt | None = Field(default=None, description="commits between checkpoints; null: the table's `delta.checkpointInterval`")
    engine: Literal["spark", "local", "auto"] = Field(
        default="auto",
        description="where the checkpoint is written: `auto` (default): the worker unless the log the checkpoint replays exceeds 512 MiB "
        "(about 1.2M live files; benchmarks/RESULTS.md), then Spark; `local` (always the worker) or `spark` (always a Spark job)",
    )
    spark_conn_id: str = Field(default="spark_default", description="the Spark connection")
    spark_conf: StringMapping = Field(default_factory=dict, description="extra Spark conf (values become strings)")
    spark_jars: str | None = Field(default=None, description="jars for the job")
    spark_packages: str | None = Field(default=None, description="Maven packages for the job")


class ChecksumsConfig(OptInSection):
    """Version checksums (``<v>.crc``) of published versions; off unless given (``checksums: true``)."""

    enabled: bool = Field(default=False, description="`true`: a checksums task writes the missing `<v>.crc` after the other writers")


class CompactionConfig(ConfigModel):
    """Log compaction (``<x>.<y>.compacted.json`` files)."""

    enabled: bool = Field(default=True, description="`false`: no compaction task")
    interval: Annotated[int, Field(ge=2)] = Field(default=10, description="window length; windows end on multiples of it")
    max_window_bytes: Annotated[int, Field(ge=0)] = Field(default=0, description="skip windows whose commits exceed this many bytes; 0: no limit")


class CleanupConfig(ConfigModel):
    """Metadata (log) cleanup."""

    enabled: bool = Field(default=True, description="`false`: no cleanup task")
    mode: Literal["dry-run", "delete"] = Field(default="dry-run", description="`delete` deletes; the run's `dry_run` Param defaults to it")
    retention_days: Annotated[float, Field(ge=0)] | None = Field(default=None, description="overrides `delta.logRetentionDuration`; null: the table's")
    allow_shorter_retention: bool = Field(default=False, description="allow a retention shorter than the table's")
    catalog_permits_cleanup: bool = Field(default=False, description="the catalog allows metadata cleanup of this catalog-managed table")


class HealthConfig(ConfigModel):
    """Thresholds of the fleet health view (status --config, the fleet report, alerts): a table
    lags when a figure exceeds its threshold (``value / threshold`` is its lag score)."""

    enabled: bool = Field(default=True, description="`false`: never alert for this table")
    max_pending_commits: PositiveInt = Field(default=20, description="ratified commits not yet published before the table lags")
    max_commits_since_checkpoint: PositiveInt = Field(default=100, description="published commits after the newest complete checkpoint before the table lags")
    max_small_files: PositiveInt | None = Field(
        default=None, description="live data files below OPTIMIZE's minimum size before the table lags; null: shown when `optimize:` is on, never alerted"
    )


class RateLimitConfig(ConfigModel):
    """Coordinator calls per second (and the burst) of the pollers of one endpoint; None: no cap."""

    enabled: bool = Field(default=True, description="`false`: no budget")
    calls_per_second: Annotated[float, Field(gt=0)] | None = Field(
        default=None, description="coordinator calls per second of the pollers of one endpoint in one process; null: no cap"
    )
    burst: PositiveInt | None = Field(default=None, description="calls saved up at most; null: `calls_per_second`")
