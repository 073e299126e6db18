"""A table's configuration as a typed model (``TableConfig``), the subsets other parts of the
file may set (``TableDefaults`` for ``defaults:``, ``TableSettings`` for a discovery source's
``settings:`` and an override), and the rules between keys.

The models validate the values; the rules between keys (``table_rules``) are kept apart so that a
table's every mistake is reported at once: pydantic checks the rules of a model only once all its
fields are valid, while ``table_rules`` skips just the rules whose keys are themselves wrong.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import AfterValidator, BeforeValidator, Field, ValidationInfo, WithJsonSchema, create_model, model_validator

from ...coordinators.errors import InvalidCoordinatorSpecError
from ...coordinators.registry import AUTO, parse_coordinator_spec
from .base import ConfigModel, Section, StringList
from .optimize import OptimizeConfig
from .schedule import SCHEDULE_ASSET, SCHEDULE_WATCH, parse_schedule
from .sections import CheckpointConfig, ChecksumsConfig, CleanupConfig, CompactionConfig, HealthConfig, RateLimitConfig, SensorConfig
from .vacuum import VacuumConfig

__all__ = [
    "IDENTITY_KEYS",
    "NAME_PATTERN",
    "POOL_AUTO",
    "TableConfig",
    "TableDefaults",
    "TableSettings",
    "settings_fields",
    "table_rules",
]

POOL_AUTO = "auto"  # pool: the table's coordinator endpoint's (config.endpoint)
NAME_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,200}$")
# what discovery finds for a discovered table, never set by its settings
IDENTITY_KEYS = ("name", "uri", "coordinator", "coordinator_conn_id")
# the validation context under which TableConfig leaves its rules to the caller (tables.validate_table)
RULES_APART = {"rules_apart": True}


def _name(value: Any) -> Any:
    if not isinstance(value, str) or not NAME_PATTERN.match(value):
        raise ValueError(f"a name of letters, digits, '_', '.', '-' is required, got {value!r}")
    return value


def _uri(value: Any) -> Any:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"expected a string, got {value!r}")
    if not value:
        raise ValueError("a table URI is required")
    return value


def _coordinator(value: str | None) -> str | None:
    if value is not None and value.strip().lower() != AUTO:
        try:
            parse_coordinator_spec(value)
        except InvalidCoordinatorSpecError as exc:
            raise ValueError(str(exc)) from None
    return value


def _schedule(value: str | None) -> str | None:
    if value is not None and value not in (SCHEDULE_ASSET, SCHEDULE_WATCH):
        parse_schedule(value)  # its ValueError names the accepted forms
    return value


Name = Annotated[str, BeforeValidator(_name), WithJsonSchema({"type": "string", "pattern": NAME_PATTERN.pattern})]
Uri = Annotated[str, BeforeValidator(_uri), WithJsonSchema({"type": "string", "minLength": 1})]
Coordinator = Annotated[str | None, AfterValidator(_coordinator)]
Schedule = Annotated[str | None, AfterValidator(_schedule)]


class TableConfig(ConfigModel):
    """One table of ``tables:`` (or one discovered table), with the defaults merged in."""

    # a key with nothing given gets this message instead of "required"
    missing_messages: ClassVar[dict[str, str]] = {
        "name": "a name of letters, digits, '_', '.', '-' is required, got None",
        "uri": "a table URI is required",
    }

    name: Name = Field(description="letters, digits, `_`, `.`, `-`; the DAG id is `delta_maintenance__<name>`; unique; `discovery` is reserved")
    uri: Uri = Field(description="the table's root: a local path, `file://`, `s3://`/`s3a://`, `az://`/`abfss://`, `gs://`, `memory://`")
    schedule: Schedule = Field(
        default="@hourly",
        description="a cron expression, a preset (`@hourly`, `@daily`, …), a duration (`30m`, `2h`, `1d`), `asset`, `watch`, or null (manual runs only)",
    )
    coordinator: Coordinator = Field(default=None, description="a [coordinator spec](../coordinators.md#coordinator-specs) or `auto`")
    coordinator_conn_id: str | None = Field(
        default=None, description="a `delta_coordinator` connection; not together with `coordinator` (except `coordinator: auto`, which may take a connection for the endpoint)"
    )
    storage_conn_id: str | None = Field(default=None, description="a `delta_storage` connection; null: the environment's credentials")
    publish: bool = Field(default=True, description="publish ratified commits (needs a coordinator; `false` for tables without one)")
    sensor: Section[SensorConfig] = Field(default=SensorConfig(), description="the wait for ratified commits")
    checkpoint: Section[CheckpointConfig] = Field(default=CheckpointConfig(), description="checkpoints")
    compaction: Section[CompactionConfig] = Field(default=CompactionConfig(), description="log compaction")
    cleanup: Section[CleanupConfig] = Field(default=CleanupConfig(), description="metadata cleanup")
    optimize: Section[OptimizeConfig] = Field(default=OptimizeConfig(), description="data-file compaction (OPTIMIZE); off unless given")
    checksums: Section[ChecksumsConfig] = Field(default=ChecksumsConfig(), description="version checksums (`<v>.crc`); off unless given")
    health: Section[HealthConfig] = Field(default=HealthConfig(), description="thresholds of the fleet health view")
    vacuum: Section[VacuumConfig] = Field(default=VacuumConfig(), description="VACUUM of unreferenced data files (off unless given)")
    pool: str | None = Field(default=None, description="the Airflow pool of the table's tasks; `auto`: one pool per coordinator endpoint")
    pool_slots: Annotated[int, Field(ge=1)] = Field(default=16, description="slots of an `auto` pool (tables sharing a pool but not this value get the smallest)")
    rate_limit: Section[RateLimitConfig] = Field(default=RateLimitConfig(), description="the coordinator-call budget of the endpoint")
    jitter: bool = Field(default=True, description="spread a time schedule's start minute per table")
    tags: StringList = Field(default=(), description="DAG tags, besides `delta-maintenance`")
    owner: str = Field(default="airflow", description="the tasks' owner")
    retries: Annotated[int, Field(ge=0)] = Field(default=1, description="the tasks' retries")
    retry_delay_minutes: Annotated[float, Field(ge=0)] = Field(default=5.0, description="the delay between retries")

    @model_validator(mode="after")
    def _rules(self, info: ValidationInfo) -> TableConfig:
        if not (info.context or {}).get("rules_apart"):
            for key, message in table_rules(self.__dict__.get):
                raise ValueError(f"{key}: {message}")
        return self

    @property
    def dag_id(self) -> str:
        return f"delta_maintenance__{self.name}"

    @property
    def has_coordinator(self) -> bool:
        return bool(self.coordinator or self.coordinator_conn_id)

    @property
    def schedule_kind(self) -> str:
        """``none``, ``asset``, ``watch`` or ``time`` (a cron expression, preset or duration)."""
        if self.schedule is None:
            return "none"
        return self.schedule if self.schedule in (SCHEDULE_ASSET, SCHEDULE_WATCH) else "time"

    @property
    def airflow_schedule(self) -> str | timedelta | None:
        """A time-based schedule as ``DAG(schedule=...)`` takes it, before jitter (a duration
        becomes a ``timedelta``); None for manual, asset and watch schedules."""
        return parse_schedule(self.schedule) if self.schedule_kind == "time" and self.schedule is not None else None

    @property
    def coordinator_endpoint(self) -> str:
        from .endpoint import coordinator_endpoint

        return coordinator_endpoint(self.coordinator, self.coordinator_conn_id)

    @property
    def resolved_pool(self) -> str | None:
        """The Airflow pool of the table's tasks: ``pool: auto`` → its coordinator endpoint's."""
        if self.pool != POOL_AUTO:
            return self.pool
        from .endpoint import pool_name_for_endpoint

        return pool_name_for_endpoint(self.coordinator_endpoint)


def table_rules(get: Callable[[str], Any], *, discovered: bool = False, unknown: frozenset[str] = frozenset()) -> Iterator[tuple[str, str]]:
    """(key, message) for each rule between a table's keys it breaks. ``get(key)``: the key's value
    (None when not given); a rule that reads a key in ``unknown`` (a key that is itself wrong) is
    not checked."""

    def known(*keys: str) -> bool:
        return not unknown.intersection(keys)

    coordinator, conn_id = get("coordinator"), get("coordinator_conn_id")
    has_coordinator = bool(coordinator or conn_id)
    auto = isinstance(coordinator, str) and coordinator.strip().lower() == AUTO
    # a discovered table carries its own spec; its source's connection then supplies only credentials
    if known("coordinator", "coordinator_conn_id") and coordinator and conn_id and not auto and not discovered:
        yield "coordinator", "give coordinator or coordinator_conn_id, not both (coordinator: auto may take a connection for the endpoint)"
    if not known("coordinator", "coordinator_conn_id"):
        return  # the rules below all ask whether the table has a coordinator
    if known("schedule") and get("schedule") == SCHEDULE_WATCH and not has_coordinator:
        yield "schedule", "watch polls the table's coordinator: give coordinator or coordinator_conn_id"
    if known("pool") and get("pool") == POOL_AUTO and not has_coordinator:
        yield "pool", "auto names the pool of the coordinator endpoint: the table has no coordinator"
    publish = get("publish")
    if known("publish") and (publish is None or publish is True) and not has_coordinator:
        yield "publish", "publishing needs a coordinator (coordinator or coordinator_conn_id), or set publish: false"


def settings_fields(leave_out: tuple[str, ...] = IDENTITY_KEYS) -> dict[str, Any]:
    """``TableConfig``'s fields but ``leave_out``, for ``pydantic.create_model``: what a part of
    the file other than a table may set. Derived, so a new table key or section is settable
    everywhere (the defaults, a discovery source's settings, an override)."""
    return {key: (info.annotation, info) for key, info in TableConfig.model_fields.items() if key not in leave_out}


ENABLED = (bool, Field(default=True, description="`false` leaves the matching tables out"))

if TYPE_CHECKING:  # models built from TableConfig's fields below; to a type checker, plain models

    class TableDefaults(ConfigModel): ...

    class TableSettings(ConfigModel): ...

else:
    TableDefaults = create_model(
        "TableDefaults", __base__=ConfigModel, __doc__="Every table key but name and uri, applied to every table.", **settings_fields(("name", "uri"))
    )
    TableSettings = create_model(
        "TableSettings",
        __base__=ConfigModel,
        __doc__="What a discovery source's settings give its tables: every table key but their identity.",
        enabled=ENABLED,
        **settings_fields(),
    )


def given(values: Mapping[str, Any]) -> Callable[[str], Any]:
    """``get`` for ``table_rules`` over raw values, with each key's default when it is not given."""
    fields = TableConfig.model_fields

    def get(key: str) -> Any:
        return values[key] if key in values else fields[key].default

    return get
