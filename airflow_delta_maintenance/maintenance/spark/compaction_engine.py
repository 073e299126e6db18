"""Log compaction's Spark engine: a window writer for ``run_log_compaction`` that runs
``spark_jobs/log_compaction.py`` for each window, then reads the file back from the log (a zero
exit code alone is not success)."""

from __future__ import annotations

from typing import Any

from .engine_base import SubmittedEngine
from .jobs import compaction_job, verify_compaction

__all__ = ["SparkCompactionWriter"]


class SparkCompactionWriter(SubmittedEngine):

    def __call__(self, start: int, end: int) -> dict[str, Any]:
        job = compaction_job(self.table_uri, start, end, self.storage_options, conf=self.conf, jars=self.jars, packages=self.packages)
        reported = self.submit(job) or {}
        self.jobs += 1
        found = verify_compaction(self.store, start, end)
        # whether this job or a concurrent one created it, and its line count, are the job's to say
        # (its result line); the file itself comes from the log
        return {"start": start, "end": end, "file": found.name, "existed": not reported.get("created", True),
                "num_actions": int(reported.get("num_file_actions") or 0), "size_bytes": found.size}
