"""Parsing the DAG file with discovery reads the fleet file only: no network I/O (sockets and name
resolution blocked), and a fleet file that cannot be used fails the discovery part only."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from airflow_delta_maintenance.fleet.catalog_discovery import DiscoveryResult, SourceResult, write_fleet_file
from airflow_delta_maintenance.fleet.config import DiscoveredTable, parse_discovery
from airflow_delta_maintenance.maintenance.config.tables import read_yaml

from .conftest import EXAMPLE_DAGS, airflow_env

PARSE = r"""
import json, socket, sys, time
def no_network(*a, **k):
    raise AssertionError("network access while parsing")
socket.socket.connect = no_network
socket.socket.connect_ex = no_network
socket.getaddrinfo = no_network
socket.create_connection = no_network
began = time.monotonic()
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
seconds = time.monotonic() - began
print("RESULT " + json.dumps({"dags": sorted(bag.dag_ids), "errors": {k: str(v) for k, v in bag.import_errors.items()}, "seconds": seconds,
                              "meta": {d: {"description": bag.dags[d].description, "tags": sorted(bag.dags[d].tags),
                                           "tasks": sorted(bag.dags[d].task_ids)} for d in bag.dag_ids}}))
"""

YAML = """
defaults:
  checkpoint: {interval: 10, engine: local}
tables:
  - {name: explicit, uri: /t/explicit, coordinator: "local:///data/coordinator.db"}
discovery:
  sources:
    - name: uc
      unity_catalog: "unity-catalog://10.255.255.1:8080?api=v1"
      catalog: main
    - name: ddb
      dynamodb: "dynamodb://commits?region=eu-west-1&endpoint=http://10.255.255.1:8000"
  overrides:
    - match: {properties: {skip: "yes"}}
      enabled: false
"""


def parse(tmp_path: Path, config: Path) -> dict[str, Any]:
    env = airflow_env(tmp_path / "home", EXAMPLE_DAGS, DELTA_MAINTENANCE_CONFIG=str(config))
    out = subprocess.run([sys.executable, "-c", PARSE, str(EXAMPLE_DAGS / "delta_maintenance.py")], env=env, capture_output=True, text=True, timeout=600)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line, out.stdout[-3000:] + out.stderr[-3000:]
    return json.loads(line[len("RESULT "):])


def test_parsing_a_discovered_fleet_does_no_network_io(tmp_path: Path) -> None:
    config = tmp_path / "tables.yaml"
    config.write_text(YAML)
    discovery = parse_discovery(read_yaml(config), str(config))
    assert discovery is not None
    uc = [DiscoveredTable("uc", f"main.s{i % 7}.t{i}", f"s3://lake/uc/t{i}", f"unity-catalog://10.255.255.1:8080/main.s{i % 7}.t{i}?api=v1&table_id=id{i}",
                          {"skip": "yes"} if i % 50 == 0 else {}) for i in range(300)]
    ddb = [DiscoveredTable("ddb", f"e{i}_0000000{i % 10}", f"s3://lake/ddb/e{i}",
                           f"dynamodb://commits?region=eu-west-1&endpoint=http://10.255.255.1:8000&table_id=x{i}") for i in range(100)]
    write_fleet_file(discovery.fleet_file, DiscoveryResult([SourceResult("uc", "unity-catalog", uc), SourceResult("ddb", "dynamodb", ddb)], "t").document(discovery))

    result = parse(tmp_path, config)
    assert result["errors"] == {}
    maintained = [f"delta_maintenance__{t.name}" for t in uc if "skip" not in t.properties] + [f"delta_maintenance__{t.name}" for t in ddb]
    assert sorted(result["dags"]) == sorted(["delta_maintenance__discovery", "delta_maintenance__explicit", *maintained])
    assert result["meta"]["delta_maintenance__discovery"]["tasks"] == ["discover_tables"]
    assert "publish" in result["meta"]["delta_maintenance__main.s1.t1"]["tasks"]
    print(f"\nparsed {len(result['dags'])} DAGs from a fleet file of {len(uc) + len(ddb)} tables in {result['seconds']:.1f} s")


def test_a_missing_fleet_file_fails_the_discovery_part_only(tmp_path: Path) -> None:
    config = tmp_path / "tables.yaml"
    config.write_text(YAML)
    result = parse(tmp_path, config)
    assert result["errors"] == {}, "a missing fleet file must not make the DAG file an import error"
    assert result["dags"] == ["delta_maintenance__discovered_fleet", "delta_maintenance__discovery", "delta_maintenance__explicit"]
    placeholder = result["meta"]["delta_maintenance__discovered_fleet"]
    assert "invalid-config" in placeholder["tags"] and placeholder["tasks"] == ["invalid_configuration"]
    assert "the fleet file does not exist yet: run the delta_maintenance__discovery DAG" in placeholder["description"]
