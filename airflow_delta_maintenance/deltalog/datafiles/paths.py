"""Data-file paths as delta-spark writes them: naming a new file and spelling its ``add.path``
(the reverse, resolving a logged path inside the table root, is ``model.data_paths``: one resolver).

``add.path`` is a URI reference: delta-spark builds it as Hadoop's ``new Path(dir, name).toUri``,
so characters a URI path may not hold are percent-encoded (space, ``%``, ``#``, …) while non-ASCII
characters stay as they are. The directory names inside it are Hive-escaped partition values
(Spark's ``ExternalCatalogUtils.escapePathName``): ``p=%2F literal`` is the directory of the value
``/ literal``, and its ``add.path`` spells it ``p=%252F%20literal``.

A new file is named as ``DelayedCommitProtocol`` names it: ``part-<split:05d>-<uuid>`` then
``.c000.<codec>.parquet`` in a partition directory or ``-c000.<codec>.parquet`` at the table root;
tables with column mapping get a random two-character directory instead of partition directories
(partition column names may be renamed; directories named after them would lie).
"""

from __future__ import annotations

import random
import string
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone

__all__ = [
    "HIVE_DEFAULT_PARTITION",
    "escape_path_name",
    "partition_directory",
    "encode_add_path",
    "new_data_file_path",
    "spark_partition_string",
]

HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"

# Spark's ExternalCatalogUtils.charToEscape (not on Windows): controls, and " # % ' * / : = ? \ DEL { [ ] ^
_HIVE_ESCAPE = frozenset([chr(c) for c in range(0x01, 0x20)] + list("\"#%'*/:=?\\\x7f{[]^"))
# java.net.URI's legal path characters besides alphanumerics (unreserved, punct, '/', '@');
# every other ASCII character is percent-encoded, non-ASCII characters are kept.
_URI_PATH_SAFE = frozenset(string.ascii_letters + string.digits + "_-!.~'()*" + ",;:$&+=" + "/@")


def escape_path_name(text: str) -> str:
    """Hive-escape a partition column name or value as Spark does (``%XX``, upper-case hex)."""
    if not any(c in _HIVE_ESCAPE for c in text):
        return text
    return "".join(f"%{ord(c):02X}" if c in _HIVE_ESCAPE else c for c in text)


def spark_partition_string(value: str | None, type_name: str | None) -> str | None:
    """The string Spark casts a partition value to for its directory name.

    ``partitionValues`` hold the protocol's serialisation, which equals Spark's cast for every type
    but ``timestamp``: delta-spark writes ISO-8601 UTC with microseconds there
    (``1999-12-31T23:59:59.999000Z``) but names the directory by Spark's cast in the session time
    zone (UTC here) with trailing zeros of the fraction dropped (``1999-12-31 23:59:59.999``).
    """
    if value is None or value == "":
        return None
    if type_name == "timestamp" and ("T" in value or value.endswith("Z") or "+" in value[10:]):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
        if parsed.tzinfo is not None:
            parsed = parsed.astimezone(timezone.utc).replace(tzinfo=None)
        text = parsed.strftime("%Y-%m-%d %H:%M:%S")
        if parsed.microsecond:
            text += ("." + f"{parsed.microsecond:06d}").rstrip("0")
        return text
    return value


def partition_directory(
    partition_columns: Sequence[str], partition_values: Mapping[str, str | None], types: Mapping[str, str] | None = None
) -> str:
    """``col=value/…`` for the partition values (keys are the names the log uses), Hive-escaped;
    a null or empty value is ``__HIVE_DEFAULT_PARTITION__``."""
    parts = []
    for col in partition_columns:
        text = spark_partition_string(partition_values.get(col), (types or {}).get(col))
        parts.append(f"{escape_path_name(col)}={HIVE_DEFAULT_PARTITION if text is None else escape_path_name(text)}")
    return "/".join(parts)


def encode_add_path(relative: str) -> str:
    """The ``add.path`` of a file at ``relative`` (a file-system path below the table root)."""
    out = []
    for c in relative:
        if c in _URI_PATH_SAFE or (ord(c) > 0x7F and not c.isspace() and ord(c) not in range(0x80, 0xA0)):
            out.append(c)
        else:
            out.extend(f"%{b:02X}" for b in c.encode("utf-8"))
    return "".join(out)


def new_data_file_path(
    partition_columns: Sequence[str],
    partition_values: Mapping[str, str | None],
    *,
    codec: str,
    split: int = 0,
    column_mapping: bool = False,
    types: Mapping[str, str] | None = None,
    rng: random.Random | None = None,
) -> str:
    """A new file's path relative to the table root (file-system form, not yet URI-encoded)."""
    ext = f"c000.{codec}.parquet" if codec != "uncompressed" else "c000.parquet"
    name_uuid = uuid.uuid4()
    if column_mapping:
        r = rng or random.SystemRandom()
        prefix = "".join(r.choice(string.ascii_letters + string.digits) for _ in range(2))
        sep = "." if partition_columns else "-"
        return f"{prefix}/part-{split:05d}-{name_uuid}{sep}{ext}"
    if partition_columns:
        return f"{partition_directory(partition_columns, partition_values, types)}/part-{split:05d}-{name_uuid}.{ext}"
    return f"part-{split:05d}-{name_uuid}-{ext}"
