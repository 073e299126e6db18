"""OpenLineage dataset naming for a table URI, as the Amazon provider and the OpenLineage naming
spec do: object stores are ``<scheme>://<bucket>`` plus the key without a leading slash, with
``s3a://``/``s3n://`` folded into ``s3://`` (one table, one dataset, whichever spelling a DAG uses);
local tables are namespace ``file`` and the absolute path."""

from __future__ import annotations

from ...deltalog.storage import normalize_table_uri

__all__ = ["openlineage_dataset_name", "table_asset_uri", "published_log_asset_uri"]


def openlineage_dataset_name(table_uri: str) -> tuple[str, str]:
    """(namespace, name) of the table's OpenLineage dataset."""
    uri = normalize_table_uri(table_uri)
    scheme, sep, rest = uri.partition("://")
    if not sep:  # normalised local path
        return "file", uri
    authority, _, path = rest.partition("/")
    return f"{scheme}://{authority}", path.strip("/") or "/"


def table_asset_uri(table_uri: str) -> str:
    """The table's Airflow asset URI: the normalised table URI (``s3a://b/t/`` → ``s3://b/t``, as
    the Amazon provider names S3 assets), ``file://`` + the absolute path for a local table. Writer
    DAGs declare it as an outlet; ``schedule: asset`` DAGs and the watcher's events use it."""
    uri = normalize_table_uri(table_uri)
    return uri if "://" in uri else f"file://{uri}"


def published_log_asset_uri(table_uri: str) -> str:
    """The asset the maintenance itself produces: the table's published ``_delta_log``. Distinct
    from the table's asset so that a DAG scheduled on the table never triggers itself."""
    return table_asset_uri(table_uri) + "/_delta_log"
