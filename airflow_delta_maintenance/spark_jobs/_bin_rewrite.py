"""What an executor of the OPTIMIZE job runs for its bins (a module of its own so that Spark pickles
the function by reference, not the job's ``__main__`` by value)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from functools import lru_cache
from typing import Any

from airflow_delta_maintenance.deltalog._runtime.memory import log_operation_memory
from airflow_delta_maintenance.deltalog.datafiles.files import DataFiles
from airflow_delta_maintenance.deltalog.datafiles.writer import write_bin
from airflow_delta_maintenance.deltalog.optimize.tasks import task_from_json
from airflow_delta_maintenance.deltalog.storage import open_table_storage

__all__ = ["rewrite_bins"]


@lru_cache(maxsize=4)
def _files(table_uri: str, options_json: str) -> DataFiles:
    """One store per executor process and table (its filesystem is reused by every task)."""
    return DataFiles(open_table_storage(table_uri, json.loads(options_json)))


def rewrite_bins(table_uri: str, options_json: str, items: Iterable[tuple[int, Mapping[str, Any]]]) -> Iterator[tuple[int, dict[str, Any] | None]]:
    """Each (index, task) of a Spark partition rewritten: (index, its ``add``, or None when every
    row of the bin was deleted)."""
    files = _files(table_uri, options_json)
    for index, raw in items:
        with log_operation_memory():  # the system pool, as the worker engine's bins (optimize/worker.py)
            add = write_bin(files, task_from_json(raw))
        yield index, add
