"""The discovery section, the fleet file and the precedence of settings."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from airflow_delta_maintenance.fleet.catalog_discovery import DiscoveryResult, SourceResult, uri_from_hadoop_path, write_fleet_file
from airflow_delta_maintenance.fleet.config import FLEET_FORMAT, DiscoveredTable, load_fleet, parse_discovery, read_fleet_file
from airflow_delta_maintenance.maintenance.config.tables import ConfigError

UC = "unity-catalog://uc.example:8080?api=v1&tls=false"
DDB = "dynamodb://commits?region=eu-west-1"


def uc_table(name: str, **props: str) -> DiscoveredTable:
    return DiscoveredTable("uc", f"main.sales.{name}", f"s3://lake/sales/{name}", f"unity-catalog://uc.example:8080/main.sales.{name}?api=v1&tls=false&table_id=id-{name}", props)


def ddb_table(path: str) -> DiscoveredTable:
    return DiscoveredTable("ddb", path.rsplit("/", 1)[-1] + "_0123abcd", path, f"{DDB}&table_id=0123abcd-{path[-3:]}")


def setup(tmp_path: Path, yaml_text: str, found: list[DiscoveredTable] | None) -> Path:
    config = tmp_path / "tables.yaml"
    config.write_text(yaml_text)
    if found is not None:
        from airflow_delta_maintenance.maintenance.config.tables import read_yaml

        discovery = parse_discovery(read_yaml(config), str(config))
        assert discovery is not None
        result = DiscoveryResult([SourceResult(s.name, s.kind, [t for t in found if t.source == s.name]) for s in discovery.sources], "2026-11-23T00:00:00+00:00")
        write_fleet_file(discovery.fleet_file, result.document(discovery))
    return config


BASE = f"""
defaults:
  schedule: "@hourly"
  coordinator: local:///data/coordinator.db
  cleanup: {{mode: dry-run, retention_days: 30}}
  checkpoint: {{interval: 10, engine: local}}
discovery:
  sources:
    - name: uc
      unity_catalog: "{UC}"
      catalog: main
      schemas: [sales]
      settings: {{schedule: "@daily", cleanup: {{retention_days: 14}}}}
    - name: ddb
      dynamodb: "{DDB}"
      conn_id: aws_commits
"""


def by_name(config: Path) -> dict[str, Any]:
    fleet = load_fleet(config)
    assert fleet.fleet_error is None, fleet.fleet_error
    return {t.name: t for t in fleet.tables}


def test_precedence_defaults_then_source_settings_then_overrides_in_order(tmp_path: Path) -> None:
    config = setup(tmp_path, BASE + """
  overrides:
    - match: {name: "main.sales.orders*"}
      schedule: "*/15 * * * *"
      cleanup: {mode: delete}
    - match: {properties: {tier: gold}}
      cleanup: {retention_days: 3}
    - match: {name: "main.sales.orders_eu"}
      schedule: "@weekly"
""", [uc_table("orders_eu", tier="gold"), uc_table("orders_us"), uc_table("clicks", tier="silver")])
    t = by_name(config)
    # defaults < source settings
    assert t["main.sales.clicks"].schedule == "@daily" and t["main.sales.clicks"].cleanup.retention_days == 14
    assert t["main.sales.clicks"].cleanup.mode == "dry-run" and t["main.sales.clicks"].checkpoint.interval == 10
    # < overrides: nested sections merge key by key; a later match wins
    assert t["main.sales.orders_us"].schedule == "*/15 * * * *"
    assert (t["main.sales.orders_us"].cleanup.mode, t["main.sales.orders_us"].cleanup.retention_days) == ("delete", 14)
    assert t["main.sales.orders_eu"].schedule == "@weekly"
    assert (t["main.sales.orders_eu"].cleanup.mode, t["main.sales.orders_eu"].cleanup.retention_days) == ("delete", 3)


def test_the_discovered_identity_is_never_taken_from_defaults(tmp_path: Path) -> None:
    """``defaults: coordinator`` is for YAML tables: a discovered table keeps its own spec, and only
    its source's connection (never the defaults') supplies credentials."""
    config = setup(tmp_path, BASE.replace("  coordinator: local:///data/coordinator.db\n", "  coordinator_conn_id: some_other\n"),
                   [uc_table("orders"), ddb_table("s3://lake/raw/events")])
    t = by_name(config)
    assert t["main.sales.orders"].coordinator == uc_table("orders").coordinator and t["main.sales.orders"].coordinator_conn_id is None
    assert t["events_0123abcd"].coordinator_conn_id == "aws_commits" and t["events_0123abcd"].coordinator.startswith(DDB)


def test_explicit_yaml_tables_replace_discovered_ones_by_uri_or_name(tmp_path: Path) -> None:
    config = setup(tmp_path, BASE + """
tables:
  - {name: orders, uri: "s3a://lake/sales/orders/", schedule: "@monthly"}
  - {name: main.sales.clicks, uri: s3://elsewhere/clicks}
""", [uc_table("orders"), uc_table("clicks"), uc_table("views")])
    fleet = load_fleet(config)
    names = sorted(t.name for t in fleet.tables)
    assert names == ["main.sales.clicks", "main.sales.views", "orders"]
    assert sorted(fleet.shadowed) == ["main.sales.clicks", "main.sales.orders"]
    assert next(t for t in fleet.tables if t.name == "orders").schedule == "@monthly"
    assert next(t for t in fleet.tables if t.name == "main.sales.clicks").uri == "s3://elsewhere/clicks"


def test_enabled_false_leaves_matching_tables_out_and_globs_match_uri_and_source(tmp_path: Path) -> None:
    config = setup(tmp_path, BASE + """
  overrides:
    - match: {uri: ["s3://lake/scratch/*", "s3://lake/tmp/*"]}
      enabled: false
    - match: {source: ddb, uri: "*/keep*"}
      enabled: true
      retries: 4
""", [ddb_table("s3://lake/scratch/a01"), ddb_table("s3://lake/tmp/b02"), ddb_table("s3://lake/raw/keep3"), uc_table("orders")])
    fleet = load_fleet(config)
    assert sorted(fleet.disabled) == ["a01_0123abcd", "b02_0123abcd"]
    t = {x.name: x for x in fleet.tables}
    assert sorted(t) == ["keep3_0123abcd", "main.sales.orders"] and t["keep3_0123abcd"].retries == 4 and t["main.sales.orders"].retries == 1


def test_a_property_glob_needs_the_property(tmp_path: Path) -> None:
    config = setup(tmp_path, BASE + """
  overrides:
    - match: {properties: {owner: "team-*"}}
      pool: team_pool
""", [uc_table("a", owner="team-x"), uc_table("b", owner="platform"), uc_table("c")])
    t = by_name(config)
    assert [t[f"main.sales.{n}"].pool for n in "abc"] == ["team_pool", None, None]


def test_an_invalid_discovered_table_gets_a_placeholder_and_the_others_load(tmp_path: Path) -> None:
    config = setup(tmp_path, BASE + """
  overrides:
    - match: {name: "*bad*"}
      schedule: "every hour"
""", [uc_table("good"), uc_table("bad"), DiscoveredTable("ddb", "main.sales.good", "s3://x/y", f"{DDB}&table_id=z")])
    fleet = load_fleet(config)
    assert [t.name for t in fleet.tables] == ["main.sales.good"]
    errors = {e.dag_id: str(e.error) for e in fleet.invalid}
    assert "schedule: 'every hour' is not a cron expression" in errors["delta_maintenance__main.sales.bad"]
    assert "duplicate table name" in errors["delta_maintenance__invalid_discovered_2"]


@pytest.mark.parametrize("problem,needle", [
    ("missing", "does not exist yet: run the delta_maintenance__discovery DAG"),
    ("not json", "is not JSON"),
    ("other format", "not a fleet file"),
    ("stale", "written for other discovery sources"),
    ("bad entry", "tables[0]: expected source"),
])
def test_an_unusable_fleet_file_fails_the_discovery_part_only(tmp_path: Path, problem: str, needle: str) -> None:
    config = setup(tmp_path, BASE + "tables:\n  - {name: explicit, uri: /t/explicit}\n", None if problem == "missing" else [uc_table("a")])
    fleet_file = tmp_path / "tables.fleet.json"
    if problem == "not json":
        fleet_file.write_text("{")
    elif problem == "other format":
        fleet_file.write_text(json.dumps({"format": "something/1"}))
    elif problem == "stale":
        config.write_text(config.read_text().replace("schemas: [sales]", "schemas: [sales, finance]"))
    elif problem == "bad entry":
        doc = json.loads(fleet_file.read_text())
        doc["tables"][0]["source"] = "unknown"
        fleet_file.write_text(json.dumps(doc))
    fleet = load_fleet(config)
    assert [t.name for t in fleet.tables] == ["explicit"]
    assert fleet.fleet_error is not None and fleet.fleet_error.dag_id == "delta_maintenance__discovered_fleet"
    assert needle in str(fleet.fleet_error.error) and str(fleet_file) in str(fleet.fleet_error.error)


def test_settings_and_overrides_do_not_make_the_fleet_file_stale(tmp_path: Path) -> None:
    config = setup(tmp_path, BASE, [uc_table("a")])
    config.write_text(config.read_text().replace('schedule: "@daily"', 'schedule: "@weekly"') + "  overrides:\n    - match: {name: '*'}\n      retries: 3\n")
    t = by_name(config)["main.sales.a"]
    assert (t.schedule, t.retries) == ("@weekly", 3)


@pytest.mark.parametrize("section,key", [
    ("sources: []", "discovery.sources"),
    ("sources: [{name: x, unity_catalog: 'unity-catalog://h:1/main.s.t', catalog: main}]", "discovery.sources[0].unity_catalog"),
    ("sources: [{name: x, unity_catalog: 'unity-catalog://h:1', catalog: main, dynamodb: 'dynamodb://t?region=r'}]", "discovery.sources[0]"),
    ("sources: [{name: x, dynamodb: 'dynamodb://t?region=r&table_id=1'}]", "discovery.sources[0].dynamodb"),
    ("sources: [{name: x, dynamodb: 'dynamodb://t?region=r', settings: {coordinator: 'local:///x'}}]", "discovery.sources[0].settings.coordinator"),
    ("sources: [{name: x, dynamodb: 'dynamodb://t?region=r'}, {name: x, dynamodb: 'dynamodb://u?region=r'}]", "discovery.sources"),
    ("sources: [{name: x, dynamodb: 'dynamodb://t?region=r'}]\n  overrides: [{match: {name: a}, uri: /x}]", "discovery.overrides[0].uri"),
    ("sources: [{name: x, dynamodb: 'dynamodb://t?region=r'}]\n  overrides: [{match: {colour: a}, retries: 1}]", "discovery.overrides[0].match.colour"),
    ("sources: [{name: x, dynamodb: 'dynamodb://t?region=r'}]\n  overrides: [{match: {name: a}}]", "discovery.overrides[0]"),
    ("sources: [{name: x, dynamodb: 'dynamodb://t?region=r'}]\n  overrides: [{match: {name: a}, enabled: 'no'}]", "discovery.overrides[0].enabled"),
    ("sources: [{name: x, dynamodb: 'dynamodb://t?region=r'}]\n  schedule: 'every hour'", "discovery.schedule"),
])
def test_discovery_section_mistakes_name_the_key(tmp_path: Path, section: str, key: str) -> None:
    config = tmp_path / "tables.yaml"
    config.write_text(f"discovery:\n  {section}\n")
    with pytest.raises(ConfigError) as err:
        load_fleet(config)
    assert err.value.key == key and str(config) in str(err.value)


def test_without_discovery_the_tables_list_is_still_required(tmp_path: Path) -> None:
    config = tmp_path / "tables.yaml"
    config.write_text("defaults: {}\n")
    with pytest.raises(ConfigError, match="tables: expected a non-empty list"):
        load_fleet(config)


def test_the_fleet_file_is_replaced_atomically(tmp_path: Path) -> None:
    """Readers racing the writer see the old document or the new one, never a torn one; no
    temporary file is left behind."""
    target = tmp_path / "fleet.json"
    docs = [{"format": FLEET_FORMAT, "n": i, "pad": "x" * (200_000 + i)} for i in range(2)]
    write_fleet_file(target, docs[0])
    seen: set[int] = set()
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            seen.add(json.loads(target.read_text())["n"])

    reader = threading.Thread(target=read)
    reader.start()
    for i in range(40):
        write_fleet_file(target, docs[i % 2])
    stop.set()
    reader.join()
    assert seen <= {0, 1} and os.listdir(tmp_path) == ["fleet.json"]


def test_hadoop_paths_become_table_uris() -> None:
    assert uri_from_hadoop_path("file:/data/t") == "/data/t"
    assert uri_from_hadoop_path("file:///data/t/") == "/data/t"
    assert uri_from_hadoop_path("s3a://bucket/t") == "s3://bucket/t"


def test_read_fleet_file_round_trips(tmp_path: Path) -> None:
    found = [uc_table("a", tier="gold"), ddb_table("s3://lake/raw/b")]
    config = setup(tmp_path, BASE, found)
    from airflow_delta_maintenance.maintenance.config.tables import read_yaml

    discovery = parse_discovery(read_yaml(config), str(config))
    assert discovery is not None and discovery.fleet_file == tmp_path / "tables.fleet.json"
    assert read_fleet_file(discovery) == found


@pytest.mark.slow  # command processes (2.1 s CPU): make test runs it, the fast tier does not
def test_validate_config_checks_discovered_tables_and_notes_a_fleet_not_yet_written(tmp_path: Path) -> None:
    import subprocess
    import sys

    cli = str(Path(sys.executable).with_name("delta-maintenance"))
    explicit = "tables:\n  - {name: explicit, uri: /t/explicit}\n"
    config = setup(tmp_path, BASE + explicit, None)

    def validate() -> tuple[int, dict[str, Any]]:
        out = subprocess.run([cli, "validate-config", str(config), "--json"], capture_output=True, text=True, timeout=300)
        return out.returncode, json.loads(out.stdout)

    code, doc = validate()  # CI, before any discovery: a note, not a failure
    assert code == 0 and [r["name"] for r in doc["tables"]] == ["explicit"] and "does not exist yet" in doc["notes"][0]
    setup(tmp_path, BASE + "  overrides:\n    - match: {name: '*bad'}\n      retries: -1\n" + explicit, [uc_table("good"), uc_table("bad")])
    code, doc = validate()
    assert code == 2 and {r["name"]: r["valid"] for r in doc["tables"]} == {"explicit": True, "main.sales.good": True, "main.sales.bad": False}
    config.write_text(config.read_text().replace("schemas: [sales]", "schemas: [finance]"))  # the fleet file is now stale
    code, doc = validate()
    assert code == 2 and any("written for other discovery sources" in p for r in doc["tables"] for p in r["problems"])


@pytest.mark.parametrize("fleet_written", [True, False])
@pytest.mark.parametrize("yaml_table", ["{name: discovery, uri: /t/d}", "{name: discovery, uri: /t/d, schedule: never}"])
def test_the_discovery_dag_id_cannot_be_taken_by_a_table(tmp_path: Path, fleet_written: bool, yaml_table: str) -> None:
    config = setup(tmp_path, BASE + f"tables:\n  - {yaml_table}\n  - {{name: other, uri: /t/o}}\n",
                   [DiscoveredTable("ddb", "discovery", "s3://x/discovery", f"{DDB}&table_id=1")] if fleet_written else None)
    fleet = load_fleet(config)
    assert [t.name for t in fleet.tables] == ["other"]
    expected = ["delta_maintenance__invalid_discovery_name", *(["delta_maintenance__invalid_discovered_0"] if fleet_written else [])]
    assert sorted(e.dag_id for e in fleet.invalid) == sorted(expected)
    assert all("reserved for the discovery DAG" in str(e.error) for e in fleet.invalid)


def test_the_health_view_reports_discovered_tables_and_an_unusable_fleet_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from airflow_delta_maintenance.cli import main
    from airflow_delta_maintenance.fleet.config import fleet_entries

    config = setup(tmp_path, BASE + "tables: []\n", [uc_table("orders"), ddb_table("s3://lake/raw/clicks")])
    tables, invalid = fleet_entries(config)
    assert sorted(t.name for t in tables) == sorted(by_name(config)) and len(tables) == 2 and invalid == []
    (tmp_path / "tables.fleet.json").unlink()
    tables, invalid = fleet_entries(config)
    assert tables == [] and [e.name for e in invalid] == ["discovered fleet"]
    # status --config says so instead of reporting an empty fleet
    assert main(["status", "--config", str(config), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tables"] == [] and [e["name"] for e in out["invalid"]] == ["discovered fleet"]


def test_every_mistake_of_the_discovery_section_is_listed(tmp_path: Path) -> None:
    config = tmp_path / "tables.yaml"
    config.write_text(
        "discovery:\n  colour: 1\n  sources:\n"
        "    - {name: x, unity_catalog: 'unity-catalog://h:1/main.s.t', catalog: main}\n"
        "    - {name: y, dynamodb: 'dynamodb://t?region=r', settings: {uri: /x}}\n"
        "    - {name: z, unity_catalog: 'unity-catalog://h:1'}\n"
        "  overrides:\n    - {match: {colour: a}, retries: 1}\n    - {match: {name: a}, enabled: 'no'}\n"
    )
    with pytest.raises(ConfigError) as err:
        load_fleet(config)
    assert sorted(p.key for p in err.value.problems) == sorted([
        "discovery.colour", "discovery.sources[0].unity_catalog", "discovery.sources[1].settings.uri", "discovery.sources[2].catalog",
        "discovery.overrides[0].match.colour", "discovery.overrides[1].enabled",
    ])
    assert str(err.value).count("\n") == 5 and all(line.startswith(f"{config}: discovery.") for line in str(err.value).splitlines())


def test_overrides_and_source_settings_may_set_every_table_key_but_the_identity(tmp_path: Path) -> None:
    """What ``defaults:`` may set, an override may set for some tables: the keys come from the one
    table model (health thresholds, fleet scheduling and the rate limit were refused before)."""
    config = setup(tmp_path, BASE + """
  overrides:
    - match: {name: "main.sales.orders"}
      health: {max_pending_commits: 50}
      jitter: false
      pool_slots: 4
      rate_limit: {calls_per_second: 5}
""", [uc_table("orders"), uc_table("clicks")])
    t = by_name(config)
    orders, clicks = t["main.sales.orders"], t["main.sales.clicks"]
    assert (orders.health.max_pending_commits, orders.jitter, orders.pool_slots, orders.rate_limit.calls_per_second) == (50, False, 4, 5)
    assert (clicks.health.max_pending_commits, clicks.jitter, clicks.pool_slots, clicks.rate_limit.calls_per_second) == (20, True, 16, None)
