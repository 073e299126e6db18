"""OpenLineage dataset naming for a table URI, as the Amazon provider and the OpenLineage naming
spec do: object stores are ``<scheme>://<bucket>`` plus the key without a leading slash, with
``s3a://``/``s3n://`` folded into ``s3://`` (one table, one dataset, whichever spelling a DAG uses);
local tables are namespace ``file`` and the absolute path."""

from __future__ import annotations

from ..deltalog.storage import normalize_table_uri

__all__ = ["openlineage_dataset_name"]


def openlineage_dataset_name(table_uri: str) -> tuple[str, str]:
    """(namespace, name) of the table's OpenLineage dataset."""
    uri = normalize_table_uri(table_uri)
    scheme, sep, rest = uri.partition("://")
    if not sep:  # normalised local path
        return "file", uri
    authority, _, path = rest.partition("/")
    return f"{scheme}://{authority}", path.strip("/") or "/"
