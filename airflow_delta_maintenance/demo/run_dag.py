"""Run one generated maintenance DAG with ``dag.test()`` and print its outcome as one JSON line.

    python -m airflow_delta_maintenance.demo.run_dag DAG_FILE [RUN_CONF_JSON] [DAG_ID]

Without DAG_ID the first generated maintenance DAG of the file runs.

Used by ``make demo`` and the DAG integration tests (which call ``load_dag_file``, ``maintenance_dag`` and ``run_and_report``
several times in one process); needs ``AIRFLOW_HOME`` with a migrated DB.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

MARK = "RESULT "


def load_dag_file(path: str, module_name: str = "delta_maintenance_dags") -> ModuleType:
    """Execute the DAG file afresh (a changed tables.yaml is read again, as the dag-processor would)."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load a DAG file from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def maintenance_dag(module: ModuleType, dag_id: str | None = None) -> Any:
    """The file's generated maintenance DAG ``dag_id``, or its first one."""
    return next(v for k, v in vars(module).items() if k.startswith("delta_maintenance__") and (dag_id is None or v.dag_id == dag_id))


def run_and_report(dag: Any, conf: dict[str, Any]) -> dict[str, Any]:
    """``dag.test()`` with ``conf``; its state, task states and return-value XComs."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    run = dag.test(run_conf=conf)
    xcom: dict[str, Any] = {}
    with create_session() as session:
        for row in session.query(XComModel).filter(XComModel.dag_id == dag.dag_id, XComModel.run_id == run.run_id, XComModel.key == "return_value"):
            xcom[row.task_id] = json.loads(row.value) if isinstance(row.value, str) else row.value
    return {"state": str(run.state), "tasks": {ti.task_id: str(ti.state) for ti in run.get_task_instances()}, "xcom": xcom}


def main(argv: Sequence[str]) -> int:
    conf = json.loads(argv[1]) if len(argv) > 1 else {}
    dag = maintenance_dag(load_dag_file(argv[0]), argv[2] if len(argv) > 2 else None)
    print(MARK + json.dumps(run_and_report(dag, conf)), flush=True)
    return 0


if __name__ == "__main__":  # the tasks ran in this process: it ends without teardown, as Airflow's task processes do
    from ..deltalog._runtime.process_end import end_process

    sys.exit(end_process(main(sys.argv[1:])))
