"""VACUUM's Spark engine: the listing of the table root and the deletions as ``spark_jobs/vacuum.py``.

The part of a VACUUM whose cost grows with the number of objects runs on the cluster, one Spark
task per top-level directory (listing) or per batch of planned files (deleting); planning,
re-validation and the VACUUM START/END records stay in ``run_vacuum`` whichever engine runs. Each
job gets its tasks as JSON (and the files to delete as Parquet) in a run directory under
``_delta_log/_spark_staging`` whose name carries the run tag (an abandoned one is cleanup's once
its owner is dead); its driver writes ``result.json`` there. A zero exit code alone is not
success: the result and the listing parts it names are read back and checked.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ...deltalog.replay.snapshot import Snapshot
from ...deltalog.vacuum.listing import TableListing, listing_from_arrow
from ...deltalog.vacuum.plan import hidden_names_for
from ..errors import SparkJobError
from .engine_base import SubmittedEngine

__all__ = ["SparkVacuumEngine"]

TASK_FILES = 20_000  # planned files per Spark task of the delete job (a Parquet row group each)


class SparkVacuumEngine(SubmittedEngine):

    def _run(self, tasks: Mapping[str, Any], files: Mapping[str, bytes] | None = None) -> tuple[str, dict[str, Any], Callable[[], None]]:
        run_dir, raw = self.run_job("vacuum", json.dumps(tasks, separators=(",", ":")).encode("utf-8"), files)
        if not isinstance(raw, dict) or raw.get("action") != tasks["action"]:
            self.store.delete_tree(run_dir)
            raise SparkJobError(f"{self.store.display(run_dir + '/result.json')}: not the result of a VACUUM {tasks['action']} job: {str(raw)[:300]}")
        return run_dir, raw, lambda: self.store.delete_tree(run_dir)

    def list(self, table: Any, snapshot: Snapshot) -> TableListing:
        """The table root's listing (the ``lister`` of ``run_vacuum``), every part read back."""
        hidden = hidden_names_for(snapshot)
        tasks = {"action": "list", "partition_columns": list(snapshot.metadata.partition_columns),
                 "iceberg_hidden": hidden("metadata")}  # "metadata" is hidden only under Iceberg UniForm
        run_dir, raw, done = self._run(tasks)
        try:
            parts = raw.get("parts")
            where = self.store.display(f"{run_dir}/result.json")
            if not isinstance(parts, list) or not parts or not all(isinstance(p, str) and p.startswith(f"{run_dir}/listing/") for p in parts):
                raise SparkJobError(f"{where}: expected the listing parts under {run_dir}/listing, got {str(parts)[:300]}")
            tables = [pq.read_table(io.BytesIO(self.store.read(p))) for p in parts]
            listing = listing_from_arrow(pa.concat_tables(tables) if len(tables) > 1 else tables[0])
            if listing.num_files != raw.get("files"):
                raise SparkJobError(f"{where}: the job reported {raw.get('files')} file(s), its parts hold {listing.num_files}")
            return listing
        finally:
            done()

    def delete(self, paths: Sequence[str]) -> int:
        """Delete ``paths`` (relative to the table root) on the cluster; returns how many were deleted."""
        if not paths:
            return 0
        sink = io.BytesIO()
        pq.write_table(pa.table({"path": pa.array(list(paths), pa.string())}), sink, row_group_size=TASK_FILES, compression="zstd")
        groups = (len(paths) + TASK_FILES - 1) // TASK_FILES
        _, raw, done = self._run({"action": "delete", "row_groups": groups}, {"delete.parquet": sink.getvalue()})
        done()
        deleted = raw.get("deleted")
        if not isinstance(deleted, int) or not 0 <= deleted <= len(paths) or raw.get("tasks") != groups:
            raise SparkJobError(f"{self.table_uri}: the VACUUM delete job's result is not one of {len(paths)} file(s) in {groups} batch(es): {str(raw)[:300]}")
        return deleted
