"""OPTIMIZE's Spark engine: the bins of one commit batch rewritten by ``spark_jobs/optimize.py``.

An ``OptimizeEngine`` like the worker's (``BinTask`` → ``add``), so planning, conflict checks and
the commit stay in ``run_optimize`` whichever engine rewrites. The tasks go to the job as JSON in
a run directory under ``_delta_log/_spark_staging`` (its name carries the run tag, so an abandoned
one is cleanup's to remove once its owner is dead); the job's driver writes the adds its tasks
returned to ``result.json`` there, created if absent. A zero exit code alone is not success: the
result is read back and checked against the tasks before anything is committed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ...deltalog.datafiles.writer import BinTask
from ...deltalog.errors import DeltaLogError
from ...deltalog.model.data_paths import DataPathResolver
from ...deltalog.optimize.tasks import task_to_json
from ..errors import SparkJobError
from .engine_base import SubmittedEngine

__all__ = ["SparkOptimizeEngine"]


class SparkOptimizeEngine(SubmittedEngine):

    def run(self, tasks: Sequence[BinTask]) -> list[Mapping[str, Any] | None]:
        body = json.dumps({"tasks": [task_to_json(t) for t in tasks]}, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        run_dir, raw = self.run_job("optimize", body)
        try:
            return self._checked(raw, tasks, run_dir)
        finally:
            self.store.delete_tree(run_dir)

    def _checked(self, raw: Any, tasks: Sequence[BinTask], run_dir: str) -> list[Mapping[str, Any] | None]:
        """The job's adds, each one the file its task was asked for: a new file below the table,
        in its bin's partition, with statistics and ``dataChange=false``."""
        where = self.store.display(f"{run_dir}/result.json")
        adds = raw.get("adds") if isinstance(raw, dict) else None
        if not isinstance(adds, list) or len(adds) != len(tasks):
            got = len(adds) if isinstance(adds, list) else type(adds).__name__
            raise SparkJobError(f"{where}: expected {len(tasks)} add(s), one per bin, got {got}")
        seen: set[str] = set()
        resolver = DataPathResolver.for_store(self.store)
        for i, (add, task) in enumerate(zip(adds, tasks, strict=True)):
            if add is None:
                continue  # every row of the bin was deleted: the bin is only removed
            ok = (isinstance(add, dict) and isinstance(add.get("path"), str) and isinstance(add.get("size"), int) and add["size"] > 0
                  and add.get("dataChange") is False and isinstance(add.get("stats"), str)
                  and dict(add.get("partitionValues") or {}) == dict(task.partition_values))
            if not ok:
                raise SparkJobError(f"{where}: add #{i} is not the file its bin asked for: {str(add)[:300]}")
            try:
                rel = resolver.resolve(add["path"]).relative
            except DeltaLogError as exc:
                raise SparkJobError(f"{where}: add #{i}: {exc}") from exc
            if rel in seen or any(rel == resolver.resolve(s.path).relative for s in task.sources):
                raise SparkJobError(f"{where}: add #{i} names {add['path']!r} twice or as one of its sources")
            seen.add(rel)
        return adds
