"""What every submitted Spark engine (OPTIMIZE, VACUUM) holds: the table, its job's storage
options and the submit function (the hook's or the CLI's), with the job's Spark settings."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ...deltalog.storage import LogStore
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
