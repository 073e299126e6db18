"""Several ``dag.test()`` runs of the packaged DAG file in one Airflow process.

Each run is what ``python -m airflow_delta_maintenance.demo.run_dag`` does (the demo's path, proven
by ``make demo`` and tests/integration/test_packaging.py): the DAG file is executed afresh (so a
changed tables.yaml is read again, as the dag-processor would), the DAG runs with ``dag.test()``,
its task states and XComs come back as one JSON line. Starting Airflow once per test instead of once
per run saves its import and start-up (several CPU seconds a run); the test can act between runs.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from airflow_delta_maintenance.demo.run_dag import MARK

from .conftest import EXAMPLE_DAGS, airflow_env

SERVE = r"""
import json, os, sys, time
from airflow_delta_maintenance.demo.run_dag import MARK, load_dag_file, maintenance_dag, run_and_report
n = 0
for line in sys.stdin:
    cmd = json.loads(line)
    os.environ.update(cmd["env"])
    n += 1
    module = load_dag_file(cmd["file"], f"delta_maintenance_dags_{n}")
    def run_one(dag):
        began = time.monotonic()
        return {**run_and_report(dag, cmd["conf"]), "seconds": round(time.monotonic() - began, 2)}
    if cmd["dag_ids"] is not None:
        out = {dag_id: run_one(vars(module)[dag_id]) for dag_id in cmd["dag_ids"]}
    else:
        out = run_one(maintenance_dag(module, cmd["dag_id"]))
    sys.stderr.flush()
    print(MARK + json.dumps(out), flush=True)
"""


class DagRunner:
    """One Airflow process (AIRFLOW_HOME ``home``) serving ``run()`` calls until closed."""

    def __init__(self, home: Path, config: Path, **env: str) -> None:
        self.config = config
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SERVE],
            env=airflow_env(home, EXAMPLE_DAGS, DELTA_MAINTENANCE_CONFIG=str(config), PYTHONUNBUFFERED="1", **env),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def run(self, conf: dict[str, Any] | None = None, dag_id: str | None = None, config: Path | None = None,
            timeout: float = 1500, dag_ids: list[str] | None = None) -> tuple[dict[str, Any], str]:
        """The run's outcome (states, XCom) and what it logged; ``timeout`` is a generous deadline.
        With ``dag_ids``: each of those DAGs runs, the outcome is keyed by DAG id."""
        assert self.proc.stdin is not None
        cmd = {"file": str(EXAMPLE_DAGS / "delta_maintenance.py"), "conf": conf or {}, "dag_id": dag_id, "dag_ids": dag_ids,
               "env": {"DELTA_MAINTENANCE_CONFIG": str(config or self.config)}}
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        logs: list[str] = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(deadline - time.monotonic(), 0.1))
            except queue.Empty:
                raise AssertionError(f"no result in {timeout} s: {''.join(logs)[-3000:]}") from None
            if line is None:
                raise AssertionError(f"the Airflow process exited ({self.proc.wait()}): {''.join(self.seen + logs)[-5000:]}")
            if line.startswith(MARK):
                self.seen += logs
                return json.loads(line[len(MARK):]), "".join(logs)
            logs.append(line)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> DagRunner:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

