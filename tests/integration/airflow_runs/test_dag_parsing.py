"""Parsing the DAG file reads only the configuration: no table, coordinator or network I/O."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import EXAMPLE_DAGS, airflow_env

PARSE = r"""
import json, socket, sys, builtins
from airflow.dag_processing.dagbag import DagBag
opened = []
real_open = builtins.open
def watch(file, *a, **k):
    opened.append(str(file)); return real_open(file, *a, **k)
builtins.open = watch
def no_network(*a, **k):
    raise AssertionError("network access while parsing")
socket.socket.connect = no_network
bag = DagBag(dag_folder=sys.argv[1], include_examples=False) if "include_examples" in DagBag.__init__.__code__.co_varnames else DagBag(dag_folder=sys.argv[1])
print("RESULT " + json.dumps({"dags": sorted(bag.dag_ids), "errors": {k: str(v) for k, v in bag.import_errors.items()}, "opened": opened,
                              "meta": {d: {"description": bag.dags[d].description, "tags": sorted(bag.dags[d].tags), "tasks": sorted(bag.dags[d].task_ids),
                                           "schedule": str(getattr(bag.dags[d].timetable, "description", "")),
                                           "owner": bag.dags[d].owner, "doc": bag.dags[d].doc_md or "",
                                           "task_docs": [t.doc_md or "" for t in bag.dags[d].tasks]} for d in bag.dag_ids}}))
"""


def test_dag_file_parses_without_touching_tables_or_coordinators(tmp_path: Path) -> None:
    config = tmp_path / "tables.yaml"
    config.write_text(
        "defaults:\n  coordinator: local:///nonexistent/dir/coordinator.db\n"
        "tables:\n  - name: a\n    uri: s3://no-such-bucket/a\n  - name: b\n    uri: /nonexistent/table\n"
        "    coordinator: dynamodb://ddb?region=us-east-1&endpoint=http://10.255.255.1:8000\n"
    )
    env = airflow_env(tmp_path / "home", EXAMPLE_DAGS, DELTA_MAINTENANCE_CONFIG=str(config))
    out = subprocess.run([sys.executable, "-c", PARSE, str(EXAMPLE_DAGS / "delta_maintenance.py")], env=env, capture_output=True, text=True, timeout=600)
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("RESULT "))
    result = json.loads(line[len("RESULT "):])
    assert result["errors"] == {} and result["dags"] == ["delta_maintenance__a", "delta_maintenance__b"]
    touched = [p for p in result["opened"] if "nonexistent" in p or "coordinator.db" in p]
    assert touched == [] and not Path("/nonexistent").exists()


def parse(tmp_path: Path, config_text: str) -> dict:
    config = tmp_path / "tables.yaml"
    config.write_text(config_text)
    env = airflow_env(tmp_path / "home", EXAMPLE_DAGS, DELTA_MAINTENANCE_CONFIG=str(config))
    out = subprocess.run([sys.executable, "-c", PARSE, str(EXAMPLE_DAGS / "delta_maintenance.py")], env=env, capture_output=True, text=True, timeout=600)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line, out.stdout[-3000:] + out.stderr[-3000:]
    return json.loads(line[len("RESULT "):])


def test_an_invalid_table_gets_a_failing_placeholder_and_the_others_still_load(tmp_path: Path) -> None:
    result = parse(
        tmp_path,
        "defaults:\n  coordinator: local:///data/coordinator.db\n"
        "tables:\n"
        "  - {name: good, uri: /t/good, schedule: '30m'}\n"
        "  - {name: every_hour, uri: /t/b, schedule: every hour}\n"
        "  - {name: relative, uri: /t/c, coordinator: 'local://tmp/coordinator.db'}\n"
        "  - {name: 'bad name!', uri: /t/d}\n"
        "  - {name: good, uri: /t/duplicate}\n"
        "  - {name: cron, uri: /t/e, schedule: '15 */2 * * *'}\n",
    )
    assert result["errors"] == {}, "one bad table must not make the whole file an import error"
    meta = result["meta"]
    assert sorted(meta) == ["delta_maintenance__cron", "delta_maintenance__every_hour", "delta_maintenance__good",
                            "delta_maintenance__invalid_3", "delta_maintenance__invalid_4", "delta_maintenance__relative"]
    assert "invalid-config" not in meta["delta_maintenance__good"]["tags"] and "publish" in meta["delta_maintenance__good"]["tasks"]
    assert meta["delta_maintenance__good"]["description"] == "Delta log maintenance of good (/t/good)"
    for dag_id, needle in (("every_hour", "schedule: 'every hour' is not a cron expression"), ("relative", "must be absolute"),
                           ("invalid_3", "tables[3].name"), ("invalid_4", "duplicate table name")):
        entry = meta[f"delta_maintenance__{dag_id}"]
        assert "invalid-config" in entry["tags"] and entry["tasks"] == ["invalid_configuration"], entry
        assert entry["description"].startswith("INVALID CONFIGURATION: ") and needle in entry["description"], entry


def test_the_placeholder_task_fails_with_the_error(tmp_path: Path) -> None:
    from airflow.providers.common.compat.sdk import AirflowFailException

    from airflow_delta_maintenance.dag_builders.maintenance_dag import build_dags

    config = tmp_path / "tables.yaml"
    config.write_text("defaults: {publish: false}\ntables:\n  - {name: x, uri: /t/x, schedule: every hour}\n")
    dag = build_dags(config)["delta_maintenance__x"]
    task = dag.get_task("invalid_configuration")
    assert task.retries == 0
    with pytest.raises(AirflowFailException, match="table 'x': schedule: 'every hour' is not a cron expression"):
        task.execute({})


def test_a_placeholder_shows_every_mistake_of_its_table(tmp_path: Path) -> None:
    from airflow.providers.common.compat.sdk import AirflowFailException

    from airflow_delta_maintenance.dag_builders.maintenance_dag import build_dags

    config = tmp_path / "tables.yaml"
    config.write_text("defaults: {publish: false}\ntables:\n  - {name: x, uri: /t/x, schedule: every hour, retries: -1, sensor: {mode: sleep}}\n")
    dag = build_dags(config)["delta_maintenance__x"]
    assert dag.description.startswith("INVALID CONFIGURATION: schedule: ") and dag.description.endswith(" (+2 more)"), dag.description
    for needle in ("schedule: 'every hour'", "sensor.mode: expected poke or reschedule, got 'sleep'", "retries: must be >= 0, got -1"):
        assert needle in dag.doc_md, dag.doc_md
    with pytest.raises(AirflowFailException, match=r"sensor\.mode: expected poke or reschedule"):
        dag.get_task("invalid_configuration").execute({})


FLEET = r"""
import json, socket, sys, time
def no_network(*a, **k):
    raise AssertionError("network access while parsing")
socket.socket.connect = no_network
from airflow.dag_processing.dagbag import DagBag
cpu = time.process_time()
bag = DagBag(dag_folder=sys.argv[1])
cpu = time.process_time() - cpu
print("RESULT " + json.dumps({"cpu": cpu, "dags": len(bag.dag_ids), "errors": {k: str(v)[-2000:] for k, v in bag.import_errors.items()},
                              "cron": {d: bag.dags[d].timetable.expression for d in bag.dag_ids}}))
"""


def test_a_fleet_of_1000_tables_parses_quickly_with_start_minutes_spread_across_the_hour(tmp_path: Path) -> None:
    """Through Airflow's DagBag, as the dag-processor parses the file. The assertion on CPU seconds
    is generous (a regression guard, not a benchmark: ``benchmarks/fleet_parse.py`` has the figures);
    before the fleet work 1,000 tables cost 4–6 s of CPU here, 10,000 about 50 s."""
    lines = ["defaults:", "  coordinator: dynamodb://commits?region=eu-west-1", "  schedule: '@hourly'", "tables:"]
    lines += [f"  - {{name: t{i:04d}, uri: 's3://lake/db/t{i:04d}'}}" for i in range(1000)]
    config = tmp_path / "tables.yaml"
    config.write_text("\n".join(lines) + "\n")
    env = airflow_env(tmp_path / "home", EXAMPLE_DAGS, DELTA_MAINTENANCE_CONFIG=str(config), AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT="600")
    out = subprocess.run([sys.executable, "-c", FLEET, str(EXAMPLE_DAGS / "delta_maintenance.py")], env=env, capture_output=True, text=True, timeout=900)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line, out.stdout[-3000:] + out.stderr[-3000:]
    result = json.loads(line[len("RESULT "):])
    assert result["errors"] == {} and result["dags"] == 1000
    assert result["cpu"] < 15, f"parsing 1,000 tables took {result['cpu']:.1f} s of CPU"
    minutes = [int(expr.split()[0]) for expr in result["cron"].values()]
    assert all(expr.split()[1:] == ["*", "*", "*", "*"] for expr in result["cron"].values())
    per_minute = [minutes.count(m) for m in range(60)]
    assert min(per_minute) >= 1 and max(per_minute) <= 50, per_minute  # 1,000/60 ≈ 17 a minute, none at :00 together


def test_init_dags_output_parses_into_the_maintenance_and_fleet_health_dags(tmp_path: Path) -> None:
    """`delta-maintenance init-dags DIR` as a new user runs it: the folder, as is, holds the fleet
    health DAG too (behind the UI's "Delta fleet health" page), over the same tables.yaml."""
    dags = tmp_path / "dags"
    cli = subprocess.run([str(Path(sys.executable).with_name("delta-maintenance")), "init-dags", str(dags)], capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0, cli.stderr
    assert "delta_fleet_health.py" in cli.stdout and "Delta fleet health" in cli.stdout, cli.stdout
    env = airflow_env(tmp_path / "home", dags)  # no DELTA_MAINTENANCE_CONFIG: the copied tables.yaml
    out = subprocess.run([sys.executable, "-c", PARSE, str(dags)], env=env, capture_output=True, text=True, timeout=600)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line, out.stdout[-3000:] + out.stderr[-3000:]
    result = json.loads(line[len("RESULT "):])
    assert result["errors"] == {} and result["dags"] == ["delta_maintenance__example_orders", "delta_maintenance_fleet_health"], result["dags"]
    # the copied tables.yaml lets the log size choose (the worker for a trial table: seconds, no JVM)
    from airflow_delta_maintenance.fleet.config import load_fleet

    assert [t.checkpoint.engine for t in load_fleet(dags / "tables.yaml").tables] == ["auto"]  # never spark: seconds on the worker


def test_a_placeholder_dag_keeps_the_owner_and_tags_and_shows_its_mistakes_on_its_task(tmp_path: Path) -> None:
    result = parse(
        tmp_path,
        "defaults:\n  coordinator: local:///data/coordinator.db\n  owner: data-platform\n  tags: [sales]\n"
        "tables:\n  - {name: good, uri: /t/good}\n  - {name: bad, uri: /t/bad, schedule: every hour, tags: [sales, orders]}\n",
    )
    good, bad = result["meta"]["delta_maintenance__good"], result["meta"]["delta_maintenance__bad"]
    assert good["owner"] == bad["owner"] == "data-platform", (good, bad)
    assert {"sales", "orders", "invalid-config"} <= set(bad["tags"]), bad
    assert "every hour" in bad["task_docs"][0], bad  # the task's own doc: the graph's task panel shows the mistakes
    # the DAG's doc lists the steps in the order its tasks run: compaction, then the checkpoint
    assert good["doc"].index("**compact**") < good["doc"].index("**checkpoint**"), good["doc"]
