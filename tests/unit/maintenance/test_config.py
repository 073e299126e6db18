"""Each kind of configuration mistake has a test for its error message."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest

from airflow_delta_maintenance.maintenance.config.tables import ConfigError, load_config, parse_config, parse_config_entries

GOOD = {
    "defaults": {"coordinator": "local:///tmp/c.db", "checkpoint": {"interval": 10, "engine": "spark"}, "cleanup": {"mode": "dry-run"}},
    "tables": [{"name": "orders", "uri": "s3://lake/orders", "storage_conn_id": "lake", "cleanup": {"mode": "delete", "retention_days": 30}}],
}


def test_defaults_merge_into_tables() -> None:
    (t,) = parse_config(GOOD, "t.yaml")
    assert t.dag_id == "delta_maintenance__orders" and t.coordinator == "local:///tmp/c.db"
    assert t.checkpoint.interval == 10 and t.cleanup.mode == "delete" and t.cleanup.retention_days == 30 and t.publish


def variant(path: list[str], value: object) -> dict:
    import copy

    data = copy.deepcopy(GOOD)
    node = data
    for key in path[:-1]:
        node = node[int(key)] if isinstance(node, list) else node[key]
    node[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({"tables": []}, "tables: expected a non-empty list"),
        ({**GOOD, "extra": 1}, "extra: unknown top-level key"),
        (variant(["tables", "0", "colour"], "red"), "table 'orders': colour: unknown key"),
        (variant(["tables", "0", "cleanup", "mode"], "wipe"), "table 'orders': cleanup.mode: expected dry-run or delete"),
        (variant(["tables", "0", "cleanup", "retension_days"], 3), "table 'orders': cleanup.retension_days: unknown key"),
        (variant(["tables", "0", "cleanup", "retention_days"], -1), "cleanup.retention_days: must be >= 0"),
        (variant(["tables", "0", "checkpoint"], {"interval": 0}), "checkpoint.interval: must be >= 1"),
        (variant(["tables", "0", "checkpoint"], {"engine": "flink"}), "checkpoint.engine: expected spark, local or auto"),
        (variant(["tables", "0", "compaction"], {"interval": 1}), "compaction.interval: must be >= 2"),
        (variant(["tables", "0", "sensor"], {"mode": "sleep"}), "sensor.mode: expected poke or reschedule"),
        (variant(["tables", "0", "sensor"], {"min_new_commits": True}), "sensor.min_new_commits: expected an integer, got True"),
        (variant(["tables", "0", "retries"], "3"), "retries: expected an integer, got '3'"),
        (variant(["tables", "0", "tags"], "a,b"), "tags: expected a list of strings"),
        (variant(["tables", "0", "uri"], ""), "uri: a table URI is required"),
        (variant(["tables", "0", "name"], "bad name!"), "tables[0].name: a name of letters"),
        (variant(["tables", "0", "coordinator"], "redis://x"), "table 'orders': coordinator: coordinator spec 'redis://x': unknown kind"),
        (variant(["tables", "0", "coordinator_conn_id"], "c"), "give coordinator or coordinator_conn_id, not both"),
        ({"defaults": {}, "tables": [{"name": "x", "uri": "/t"}]}, "table 'x': publish: publishing needs a coordinator"),
        ({"defaults": {"name": "x"}, "tables": [{"name": "x", "uri": "/t"}]}, "defaults: name and uri belong to each table"),
        ({**GOOD, "tables": GOOD["tables"] * 2}, "table 'orders': name: duplicate table name"),
        (variant(["tables", "0", "schedule"], "every hour"), "table 'orders': schedule: 'every hour' is not a cron expression"),
        (variant(["tables", "0", "schedule"], "@sometimes"), "schedule: '@sometimes' is not a cron expression"),
        (variant(["tables", "0", "schedule"], "0 25 * * *"), "schedule: '0 25 * * *' is not a cron expression"),
        (variant(["tables", "0", "schedule"], "0m"), "schedule: '0m': a duration must be positive"),
        (variant(["tables", "0", "coordinator"], "local://tmp/c.db"), "coordinator: coordinator spec 'local://tmp/c.db': the database path must be absolute"),
        (variant(["tables", "0", "sensor"], {"deferrable": "yes"}), "sensor.deferrable: expected true or false, got 'yes'"),
    ],
)
def test_mistakes_name_the_file_table_and_key(data: dict, needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(data, "conf/tables.yaml")
    assert str(err.value).startswith("conf/tables.yaml: ") and needle in str(err.value), str(err.value)


def test_invalid_yaml_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("tables: [\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: <yaml>: not valid YAML"):
        load_config(bad)


def test_shorter_retention_than_the_table_needs_an_override(tmp_path: Path) -> None:
    from airflow_delta_maintenance.demo.sample_table import create_sample_table
    from airflow_delta_maintenance.maintenance.operations.log_cleanup import RetentionTooShortError, run_metadata_cleanup
    from tests.helpers.tables import bind_table

    store = create_sample_table(str(tmp_path / "t"), commits=3)
    with pytest.raises(RetentionTooShortError, match=re.escape("delta.logRetentionDuration")):
        run_metadata_cleanup(bind_table(store), retention_ms=86_400_000)
    assert run_metadata_cleanup(bind_table(store), retention_ms=86_400_000, allow_shorter_retention=True).dry_run


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [("@hourly", "@hourly"), ("@continuous", "@continuous"), ("*/15 * * * *", "*/15 * * * *"), ("30m", timedelta(minutes=30)),
     ("2h", timedelta(hours=2)), ("1d", timedelta(days=1)), (None, None)],
)
def test_schedules_are_validated_and_durations_become_timedeltas(schedule: str | None, expected: object) -> None:
    (t,) = parse_config(variant(["tables", "0", "schedule"], schedule))
    assert t.airflow_schedule == expected


def test_each_table_is_validated_on_its_own() -> None:
    data = {**GOOD, "tables": [*GOOD["tables"], {"name": "b", "uri": "/b", "schedule": "every hour"}, {"name": "c", "uri": "/c"}, "oops"]}
    good, bad = parse_config_entries(data, "t.yaml")
    assert [t.name for t in good] == ["orders", "c"]
    assert [(e.name, e.dag_id) for e in bad] == [("b", "delta_maintenance__b"), ("tables[3]", "delta_maintenance__invalid_3")]
    assert "schedule" in str(bad[0].error) and "tables[3]: expected a mapping" in str(bad[1].error)
    with pytest.raises(ConfigError, match="table 'b': schedule"):
        parse_config(data, "t.yaml")  # the strict form stops at the first


def test_a_section_given_as_true_false_null_or_a_mapping() -> None:
    """``false`` disables, ``true`` enables, null takes the defaults; an opt-in section (the shape
    of optimize:/vacuum:) is on when given as a mapping without ``enabled``, off when absent."""
    from pydantic import create_model

    from airflow_delta_maintenance.maintenance.config.base import ConfigModel, OptInSection, Section

    class Compact(OptInSection):
        target: int = 1

    model = create_model("T", __base__=ConfigModel, optimize=(Section[Compact], Compact()))
    assert not model().optimize.enabled and not model(optimize=None).optimize.enabled  # type: ignore[attr-defined]
    assert model(optimize=True).optimize.enabled and model.model_validate({"optimize": {"target": 5}}).optimize == Compact(enabled=True, target=5)  # type: ignore[attr-defined]
    assert not model.model_validate({"optimize": {"target": 5, "enabled": False}}).optimize.enabled  # type: ignore[attr-defined]
    (t,) = parse_config({**GOOD, "tables": [{**GOOD["tables"][0], "sensor": False, "checkpoint": None, "compaction": True}]})
    assert not t.sensor.enabled and t.checkpoint.interval is None and t.compaction.enabled


def test_every_mistake_of_a_table_is_reported_and_rules_skip_keys_that_are_wrong() -> None:
    """Field mistakes and the rules between keys in one error; a rule that would only repeat a
    wrong key (publish needs a coordinator, when the coordinator itself is wrong) is not added."""
    data = {"tables": [{"name": "t", "uri": "/t", "coordinator": "redis://x", "retries": -1, "sensor": {"mode": "x", "zz": 1}, "pool": "auto"}]}
    with pytest.raises(ConfigError) as err:
        parse_config(data, "t.yaml")
    assert [p.key for p in err.value.problems] == ["coordinator", "sensor.mode", "sensor.zz", "retries"], str(err.value)
    assert len(str(err.value).splitlines()) == 4 and all(line.startswith("t.yaml: table 't': ") for line in str(err.value).splitlines())
    data = {"tables": [{"name": "t", "uri": "/t", "retries": "x", "pool": "auto", "schedule": "watch"}]}
    with pytest.raises(ConfigError) as err:
        parse_config(data, "t.yaml")
    assert [p.key for p in err.value.problems] == ["retries", "schedule", "pool", "publish"], str(err.value)
