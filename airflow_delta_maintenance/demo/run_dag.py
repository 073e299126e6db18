"""Run one generated maintenance DAG with ``dag.test()`` and print its outcome as one JSON line.

    python -m airflow_delta_maintenance.demo.run_dag DAG_FILE [RUN_CONF_JSON] [DAG_ID]

Without DAG_ID the first generated maintenance DAG of the file runs.

Used by ``make demo`` and the DAG integration tests; needs ``AIRFLOW_HOME`` with a migrated DB.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from typing import Any

conf = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
spec = importlib.util.spec_from_file_location("delta_maintenance_dags", sys.argv[1])
if spec is None or spec.loader is None:
    raise SystemExit(f"cannot load a DAG file from {sys.argv[1]}")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
wanted = sys.argv[3] if len(sys.argv) > 3 else None
dag = next(v for k, v in vars(module).items() if k.startswith("delta_maintenance__") and (wanted is None or v.dag_id == wanted))
run = dag.test(run_conf=conf)

from airflow.models.xcom import XComModel  # noqa: E402
from airflow.utils.session import create_session  # noqa: E402

xcom: dict[str, Any] = {}
out = {"state": str(run.state), "tasks": {ti.task_id: str(ti.state) for ti in run.get_task_instances()}, "xcom": xcom}
with create_session() as session:
    for row in session.query(XComModel).filter(XComModel.dag_id == dag.dag_id, XComModel.run_id == run.run_id, XComModel.key == "return_value"):
        xcom[row.task_id] = json.loads(row.value) if isinstance(row.value, str) else row.value
print("RESULT " + json.dumps(out), flush=True)
