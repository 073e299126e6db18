"""Parsing the DAG file reads only the configuration: no table, coordinator or network I/O."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from .conftest import REPO, airflow_env

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
print("RESULT " + json.dumps({"dags": sorted(bag.dag_ids), "errors": {k: str(v) for k, v in bag.import_errors.items()}, "opened": opened}))
"""


def test_dag_file_parses_without_touching_tables_or_coordinators(tmp_path: Path) -> None:
    config = tmp_path / "tables.yaml"
    config.write_text(
        "defaults:\n  coordinator: local:///nonexistent/dir/coordinator.db\n"
        "tables:\n  - name: a\n    uri: s3://no-such-bucket/a\n  - name: b\n    uri: /nonexistent/table\n"
        "    coordinator: dynamodb://ddb?region=us-east-1&endpoint=http://10.255.255.1:8000\n"
    )
    env = airflow_env(tmp_path / "home", REPO / "dags", DELTA_MAINTENANCE_CONFIG=str(config))
    out = subprocess.run([sys.executable, "-c", PARSE, str(REPO / "dags" / "delta_maintenance.py")], env=env, capture_output=True, text=True, timeout=300)
    line = next(l for l in out.stdout.splitlines() if l.startswith("RESULT "))
    result = json.loads(line[len("RESULT "):])
    assert result["errors"] == {} and result["dags"] == ["delta_maintenance__a", "delta_maintenance__b"]
    touched = [p for p in result["opened"] if "nonexistent" in p or "coordinator.db" in p]
    assert touched == [] and not Path("/nonexistent").exists()
