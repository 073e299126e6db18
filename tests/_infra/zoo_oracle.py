"""What a Delta table's versions read as, in delta-spark and in the ``deltalake`` wheel, canonicalised
so that the two engines (and two runs of one) compare equal row for row.

- ``read_rows(table, version, engine)``: the rows of one version, canonical and sorted.
- ``record(table, version, key)``: count, digest and (when small) the rows, or why it cannot be read.
- ``compare_versions(table, manifest)``: re-reads every version the manifest recorded, in each
  engine that read it, and returns the differences (``assert_versions_unchanged`` raises on any).

Both engines are read through Arrow (delta-spark's ``DataFrame.toArrow()``, the wheel's DataFusion
``QueryBuilder``, which applies deletion vectors), and one function canonicalises an Arrow value by
its type, so the same value always has the same JSON form:

* decimals: ``str`` with the column's scale (``"1.50"``); floats as floats, NaN and infinities as
  the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``;
* ``timestamp`` (with a zone): ISO 8601 in UTC with microseconds and ``Z``; ``timestamp_ntz``: ISO
  8601 without a zone; dates ISO; binary as ``"hex:<hex>"``;
* maps as ``[[key, value], ...]`` sorted; structs as objects; nulls as ``None`` at every level;
* variant (top-level columns): the JSON text of the value re-serialised with sorted keys —
  delta-spark's ``to_json`` on one side, the wheel's ``{metadata, value}`` binaries decoded with
  pyspark's ``VariantVal`` on the other. Variants nested in structs are not supported.

Rows are objects keyed by logical column name (column mapping is the engines' business) and sorted
by their canonical JSON. Nothing here caches: every call re-reads the table as it is now.
"""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Engine = Literal["spark", "wheel"]
Row = dict[str, Any]
ENGINES: tuple[Engine, ...] = ("spark", "wheel")
# delta-spark's hidden per-row metadata, read alongside the data of row-tracking tables
ROW_TRACKING_COLUMNS = ("_metadata.row_id", "_metadata.row_commit_version")


class OracleError(RuntimeError):
    """An engine could not read a version (the message names the table, version and engine)."""


# --- canonical values ---------------------------------------------------------------------------


def _canon_float(value: float) -> Any:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def _canon_timestamp(value: dt.datetime, typ: pa.TimestampType) -> str:
    if typ.tz is None:
        return value.replace(tzinfo=None).isoformat(timespec="microseconds")
    return value.astimezone(dt.timezone.utc).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def canonical_value(value: Any, typ: pa.DataType) -> Any:
    """The JSON-able canonical form of one Arrow value of type ``typ`` (see the module docstring)."""
    if value is None:
        return None
    if pa.types.is_struct(typ):
        return {typ.field(i).name: canonical_value(value.get(typ.field(i).name), typ.field(i).type) for i in range(typ.num_fields)}
    if pa.types.is_map(typ):
        pairs = [[canonical_value(k, typ.key_type), canonical_value(v, typ.item_type)] for k, v in value]
        return sorted(pairs, key=lambda kv: json.dumps(kv, sort_keys=True))
    if pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ) or pa.types.is_list_view(typ) or pa.types.is_large_list_view(typ):
        return [canonical_value(v, typ.value_type) for v in value]
    if pa.types.is_decimal(typ):
        assert isinstance(value, decimal.Decimal)
        return format(value, "f")
    if pa.types.is_floating(typ):
        return _canon_float(float(value))
    if pa.types.is_timestamp(typ):
        return _canon_timestamp(value, typ)
    if pa.types.is_date(typ) or pa.types.is_time(typ):
        return value.isoformat()
    if pa.types.is_binary(typ) or pa.types.is_large_binary(typ) or pa.types.is_fixed_size_binary(typ) or pa.types.is_binary_view(typ):
        return "hex:" + bytes(value).hex()
    if pa.types.is_dictionary(typ):
        return canonical_value(value, typ.value_type)
    return value


def canonical_variant(json_text: str | None) -> str | None:
    """Variant JSON re-serialised with sorted keys and no spaces (both engines' renderings agree then)."""
    if json_text is None:
        return None
    return json.dumps(json.loads(json_text), sort_keys=True, separators=(",", ":"))


def _row_key(row: Row) -> str:
    return json.dumps(row, sort_keys=True, ensure_ascii=False)


def canonical_rows(table: pa.Table, variant_columns: Iterable[str] = ()) -> list[Row]:
    """Every row of ``table`` canonical and sorted; ``variant_columns`` hold variant JSON text already."""
    variants = set(variant_columns)
    columns = []
    for name, column in zip(table.column_names, table.columns, strict=True):
        values = column.to_pylist()
        if name in variants:
            columns.append((name, [canonical_variant(v) for v in values]))
        else:
            columns.append((name, [canonical_value(v, column.type) for v in values]))
    rows = [{name: values[i] for name, values in columns} for i in range(table.num_rows)]
    return sorted(rows, key=_row_key)


# --- reading one version in one engine ----------------------------------------------------------


def _spark_session(spark: SparkSession | None) -> SparkSession:
    if spark is not None:
        return spark
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is None:
        raise OracleError("reading with delta-spark needs a SparkSession (the `spark` fixture or start_local_spark())")
    return active


def _spark_rows(table: str, version: int, spark: SparkSession, row_tracking: bool) -> list[Row]:
    from pyspark.sql import functions as F
    from pyspark.sql.types import VariantType

    previous = spark.conf.get("spark.sql.session.timeZone") or "UTC"
    spark.conf.set("spark.sql.session.timeZone", "UTC")  # variant JSON renders timestamps in it
    try:
        df = spark.read.format("delta").option("versionAsOf", version).load(table)
        variants = [f.name for f in df.schema.fields if isinstance(f.dataType, VariantType)]
        cols = [F.to_json(F.col(f"`{f.name}`")).alias(f.name) if f.name in variants else F.col(f"`{f.name}`") for f in df.schema.fields]
        if row_tracking:
            cols = [F.col("_metadata.row_id").alias("_row_id"), F.col("_metadata.row_commit_version").alias("_row_commit_version"), *cols]
        arrow = df.select(*cols).toArrow()
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous)
    return canonical_rows(arrow, variants)


def _wheel_variant_json(column: pa.ChunkedArray) -> list[str | None]:
    from pyspark.sql.types import VariantVal  # pure Python: decoding needs no JVM

    out: list[str | None] = []
    for item in column.to_pylist():
        out.append(None if item is None else VariantVal(bytes(item["value"]), bytes(item["metadata"])).toJson())
    return out


def _wheel_rows(table: str, version: int) -> list[Row]:
    import deltalake

    dt_ = deltalake.DeltaTable(table, version=version)
    variants = [f.name for f in dt_.schema().fields if getattr(f.type, "type", None) == "variant"]
    # DataFusion applies deletion vectors; to_pyarrow_table refuses tables that have them
    arrow = pa.table(deltalake.QueryBuilder().register("t", dt_).execute("SELECT * FROM t").read_all())
    for name in variants:
        arrow = arrow.set_column(arrow.schema.get_field_index(name), name, pa.array(_wheel_variant_json(arrow.column(name)), pa.string()))
    return canonical_rows(arrow, variants)


def read_rows(table: str | Path, version: int, engine: Engine = "spark", *, spark: SparkSession | None = None, row_tracking: bool = False) -> list[Row]:
    """The rows of ``version`` of ``table`` as ``engine`` reads them, canonical and sorted.

    ``row_tracking`` (delta-spark only) adds ``_row_id`` and ``_row_commit_version`` from the hidden
    ``_metadata`` column. An engine that cannot read the version raises ``OracleError``.
    """
    uri = str(table)
    try:
        if engine == "spark":
            return _spark_rows(uri, version, _spark_session(spark), row_tracking)
        if row_tracking:
            raise OracleError("row_tracking is read with delta-spark only")
        return _wheel_rows(uri, version)
    except OracleError:
        raise
    except Exception as exc:  # the engines raise anything; the message says which
        raise OracleError(f"{uri} version {version}: {engine} cannot read it: {engine_error(exc)}") from exc


def engine_error(exc: BaseException) -> str:
    """One line for an engine's error: for py4j errors the JVM exception, not "An error occurred while calling oNN"."""
    lines = [line.strip().lstrip(": ").strip() for line in str(exc).splitlines()]
    useful = [line for line in lines if line and not line.startswith("An error occurred while calling")]
    return f"{type(exc).__name__}: {(useful[0] if useful else '')[:500]}"


def clear_spark_cache(spark: SparkSession) -> None:
    """Forget delta-spark's cached ``DeltaLog``s, so a table changed or replaced on disk is read afresh."""
    jvm: Any = spark._jvm
    jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()


# --- recording and comparing versions -----------------------------------------------------------

ROWS_INLINE_MAX = 2_000  # above this a recording keeps the count and digest only (manifests stay small)
RECORDED_KEYS = ("spark", "wheel", "row_tracking")  # row_tracking: delta-spark with _row_id, _row_commit_version


def rows_digest(rows: Sequence[Row]) -> str:
    """sha256 (hex, 32 digits) of canonical rows in their sorted order."""
    return hashlib.sha256("\n".join(_row_key(r) for r in rows).encode()).hexdigest()[:32]


def record(table: str | Path, version: int, key: str, *, spark: SparkSession | None = None) -> dict[str, Any]:
    """What ``key`` (an engine, or ``row_tracking``) reads at ``version``: ``{"count", "digest",
    "rows"}`` (``rows`` only up to ``ROWS_INLINE_MAX``) or ``{"error": why it cannot be read}``."""
    engine: Engine = "wheel" if key == "wheel" else "spark"
    try:
        rows = read_rows(table, version, engine, spark=spark, row_tracking=key == "row_tracking")
    except OracleError as exc:
        return {"error": str(exc).split(": ", 1)[-1]}
    out: dict[str, Any] = {"count": len(rows), "digest": rows_digest(rows)}
    if len(rows) <= ROWS_INLINE_MAX:
        out["rows"] = rows
    return out


def compare_versions(
    table: str | Path,
    manifest: Mapping[str, Any] | Any,
    *,
    spark: SparkSession | None = None,
    keys: Iterable[str] = RECORDED_KEYS,
    versions: Iterable[int] | None = None,
) -> list[str]:
    """Re-read every version ``manifest`` recorded (or only ``versions``) with every engine that
    read it then (``keys``: "spark", "wheel", "row_tracking"), and return one line per difference;
    empty when every version still reads as recorded.

    ``manifest`` is a ``table_zoo.Manifest`` or anything with ``versions: {v: {key: recording}}``
    (recordings from ``record``). A version an engine read then and cannot read now is a
    difference; one it could not read then is skipped.
    """
    recorded = manifest.versions if hasattr(manifest, "versions") else manifest["versions"]
    recorded = {int(v): entry for v, entry in recorded.items()}
    wanted = sorted(recorded) if versions is None else sorted(versions)
    keys = tuple(keys)
    problems: list[str] = []
    if any(k != "wheel" and "count" in (recorded[v].get(k) or {}) for v in wanted for k in keys):
        clear_spark_cache(_spark_session(spark))
    for v in wanted:
        for key in keys:
            expected = recorded[v].get(key)
            if not expected or "error" in expected:
                continue
            actual = record(table, v, key, spark=spark)
            if "error" in actual:
                problems.append(f"version {v} ({key}): read as recorded before, now: {actual['error']}")
            elif (actual["count"], actual["digest"]) != (expected["count"], expected["digest"]):
                detail = _diff(expected["rows"], actual["rows"]) if "rows" in expected and "rows" in actual else f"digest {actual['digest']} != {expected['digest']}"
                problems.append(f"version {v} ({key}): {expected['count']} rows recorded, {actual['count']} read; {detail}")
    return problems


def _diff(expected: Sequence[Row], actual: Sequence[Row], limit: int = 3) -> str:
    want = {_row_key(r) for r in expected}
    got = {_row_key(r) for r in actual}
    return f"missing {sorted(want - got)[:limit]}; unexpected {sorted(got - want)[:limit]}"


def assert_versions_unchanged(table: str | Path, manifest: Any, **kwargs: Any) -> None:
    """``compare_versions`` that fails listing every difference."""
    problems = compare_versions(table, manifest, **kwargs)
    assert not problems, f"{table}: {len(problems)} version(s) read differently than recorded:\n" + "\n".join(problems)
