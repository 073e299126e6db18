"""Arrow types of the log's actions, in the column order delta-spark writes them."""

from __future__ import annotations

import pyarrow as pa

__all__ = [
    "STRING_MAP",
    "DV_TYPE",
    "ADD_FIELDS",
    "REMOVE_FIELDS",
    "ADD_TYPE",
    "REMOVE_TYPE",
    "TXN_TYPE",
    "METADATA_TYPE",
    "PROTOCOL_TYPE",
    "DOMAIN_METADATA_TYPE",
    "CHECKPOINT_METADATA_TYPE",
    "SIDECAR_TYPE",
    "MAP_FIELDS",
]

STRING_MAP = pa.map_(pa.string(), pa.string())

DV_TYPE = pa.struct(
    [
        pa.field("storageType", pa.string()),
        pa.field("pathOrInlineDv", pa.string()),
        pa.field("offset", pa.int32()),
        pa.field("sizeInBytes", pa.int32()),
        pa.field("cardinality", pa.int64()),
        pa.field("maxRowIndex", pa.int64()),
    ]
)

ADD_FIELDS = [
    pa.field("path", pa.string()),
    pa.field("partitionValues", STRING_MAP),
    pa.field("size", pa.int64()),
    pa.field("modificationTime", pa.int64()),
    pa.field("dataChange", pa.bool_()),
    pa.field("tags", STRING_MAP),
    pa.field("deletionVector", DV_TYPE),
    pa.field("baseRowId", pa.int64()),
    pa.field("defaultRowCommitVersion", pa.int64()),
    pa.field("clusteringProvider", pa.string()),
    pa.field("stats", pa.string()),
]

REMOVE_FIELDS = [
    pa.field("path", pa.string()),
    pa.field("deletionTimestamp", pa.int64()),
    pa.field("dataChange", pa.bool_()),
    pa.field("extendedFileMetadata", pa.bool_()),
    pa.field("partitionValues", STRING_MAP),
    pa.field("size", pa.int64()),
    pa.field("tags", STRING_MAP),
    pa.field("deletionVector", DV_TYPE),
    pa.field("baseRowId", pa.int64()),
    pa.field("defaultRowCommitVersion", pa.int64()),
    pa.field("stats", pa.string()),
]

ADD_TYPE = pa.struct(ADD_FIELDS)
REMOVE_TYPE = pa.struct(REMOVE_FIELDS)
# Map-typed fields of file actions; JSON readers infer them as structs (pyarrow cannot parse maps).
MAP_FIELDS = ("partitionValues", "tags")

TXN_TYPE = pa.struct([pa.field("appId", pa.string()), pa.field("version", pa.int64()), pa.field("lastUpdated", pa.int64())])
METADATA_TYPE = pa.struct(
    [
        pa.field("id", pa.string()),
        pa.field("name", pa.string()),
        pa.field("description", pa.string()),
        pa.field("format", pa.struct([pa.field("provider", pa.string()), pa.field("options", STRING_MAP)])),
        pa.field("schemaString", pa.string()),
        pa.field("partitionColumns", pa.list_(pa.string())),
        pa.field("configuration", STRING_MAP),
        pa.field("createdTime", pa.int64()),
    ]
)
PROTOCOL_TYPE = pa.struct(
    [
        pa.field("minReaderVersion", pa.int32()),
        pa.field("minWriterVersion", pa.int32()),
        pa.field("readerFeatures", pa.list_(pa.string())),
        pa.field("writerFeatures", pa.list_(pa.string())),
    ]
)
DOMAIN_METADATA_TYPE = pa.struct(
    [pa.field("domain", pa.string()), pa.field("configuration", pa.string()), pa.field("removed", pa.bool_())]
)
CHECKPOINT_METADATA_TYPE = pa.struct([pa.field("version", pa.int64()), pa.field("tags", STRING_MAP)])
SIDECAR_TYPE = pa.struct(
    [
        pa.field("path", pa.string()),
        pa.field("sizeInBytes", pa.int64()),
        pa.field("modificationTime", pa.int64()),
        pa.field("tags", STRING_MAP),
    ]
)
