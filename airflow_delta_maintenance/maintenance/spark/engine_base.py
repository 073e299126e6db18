"""What every submitted Spark engine (OPTIMIZE, VACUUM) holds: the table, its job's storage
options and the submit function (the hook's or the CLI's), with the job's Spark settings; and
how one of its jobs runs: its tasks in a run directory under ``_delta_log/_spark_staging`` (the
name carries the run tag, so an abandoned one is cleanup's once its owner is dead), the job
submitted, and the ``result.json`` its driver wrote there read back — a zero exit code alone is
not success."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Literal

from ...deltalog.storage import LogStore
from ...deltalog.storage.run_identity import STAGING_DIR, new_run
from ..errors import SparkJobError
from .jobs import run_dir_job
from .submit import SparkJobSpec

__all__ = ["SubmittedEngine"]


class SubmittedEngine:
    name = "spark"

    def __init__(
        self,
        store: LogStore,
        table_uri: str,
        storage_options: Mapping[str, Any] | None,
        submit: Callable[[SparkJobSpec], Mapping[str, Any] | None],
        *,
        conf: Mapping[str, Any] | None = None,
        jars: str | None = None,
        packages: str | None = None,
    ) -> None:
        self.store = store
        self.table_uri = table_uri
        self.storage_options = storage_options
        self.submit = submit
        self.conf = conf
        self.jars = jars
        self.packages = packages
        self.jobs = 0  # jobs submitted so far

    def run_job(self, kind: Literal["optimize", "vacuum"], tasks: bytes, files: Mapping[str, bytes] | None = None) -> tuple[str, Any]:
        """Submit a ``kind`` job over ``tasks`` (and ``files``) in a new run directory; returns
        the directory and the job's parsed ``result.json``. The caller removes the directory
        (``store.delete_tree``) when done with it; on failure it is removed here."""
        run_dir = f"{STAGING_DIR}/{kind}-{new_run().tag}"
        try:
            for name, body in {**(files or {}), "tasks.json": tasks}.items():
                self.store.put_if_absent(f"{run_dir}/{name}", body)
            self.submit(run_dir_job(kind, self.table_uri, run_dir, self.storage_options, conf=self.conf, jars=self.jars, packages=self.packages))
            self.jobs += 1
            try:
                return run_dir, json.loads(self.store.read(f"{run_dir}/result.json"))
            except (OSError, ValueError) as exc:
                raise SparkJobError(f"{self.store.display(run_dir)}: the {kind.upper()} Spark job finished without a readable result.json ({exc})") from exc
        except BaseException:
            self.store.delete_tree(run_dir)
            raise
