"""Run the packaged fleet health DAG once with dag.test() and print its outcome as one JSON line
(``RESULT {...}``). Needs AIRFLOW_HOME with a migrated DB and DELTA_MAINTENANCE_CONFIG/REPORT_DIR."""

from __future__ import annotations

import importlib.util
import json
import sys

spec = importlib.util.spec_from_file_location("delta_fleet_health", sys.argv[1])
assert spec is not None and spec.loader is not None
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
run = module.delta_maintenance_fleet_health.test()

from airflow.models.xcom import XComModel  # noqa: E402
from airflow.utils.session import create_session  # noqa: E402

out = {"state": str(run.state), "xcom": None}
with create_session() as session:
    for row in session.query(XComModel).filter(XComModel.dag_id == run.dag_id, XComModel.run_id == run.run_id, XComModel.key == "return_value"):
        out["xcom"] = json.loads(row.value) if isinstance(row.value, str) else row.value
print("RESULT " + json.dumps(out), flush=True)
