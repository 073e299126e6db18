"""OPTIMIZE as delta-spark 4.4 and the ``deltalake`` wheel do it, on copies of zoo tables: the
commits they write (every action in full), their output files, and a check that every earlier
version still reads as recorded and the new version reads as the one before it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ..table_zoo import Zoo, ZooTable
from ..zoo_oracle import compare_versions, record
from ..zoo_spark_tables import session_conf
from .common import commit, crc, data_path, error_line, latest, parquet_facts, rows_as_dicts, write_json

# (label, zoo table, Spark settings, extra SQL after OPTIMIZE's table name)
SPARK_RUNS: list[tuple[str, str, dict[str, str], str]] = [
    ("partitioned", "spark_partitioned", {}, ""),
    ("partitioned_where", "spark_partitioned", {}, "WHERE region = 'us'"),
    ("unpartitioned_wide_types", "spark_unpartitioned", {}, ""),
    ("deletion_vectors", "spark_deletion_vectors", {}, ""),
    ("column_mapping_name", "spark_column_mapping_name", {}, ""),
    ("column_mapping_id", "spark_column_mapping_id", {}, ""),
    ("row_tracking", "spark_row_tracking", {}, ""),
    ("clustered", "spark_clustered", {}, ""),
    ("special_partitions", "spark_special_partitions", {}, ""),
    ("type_widening", "spark_type_widening", {}, ""),
    ("timestamp_ntz", "spark_timestamp_ntz", {}, ""),
    ("variant", "spark_variant", {}, ""),
    ("cdf", "spark_cdf", {}, ""),
    ("checkpoint_v2_ict", "spark_checkpoint_v2", {}, ""),
    ("many_small_files_max64k", "spark_many_small_files", {"spark__databricks__delta__optimize__maxFileSize": str(64 * 1024)}, ""),
    ("many_small_files_min2200", "spark_many_small_files", {"spark__databricks__delta__optimize__minFileSize": "2200"}, ""),
    ("partitioned_batches_60k", "spark_many_small_files_partitioned", {"spark__databricks__delta__optimize__batchSize": str(60 * 1024)}, ""),
    ("wheel_written_partitioned", "wheel_partitioned", {}, ""),
]

WHEEL_RUNS: list[tuple[str, str, dict[str, Any]]] = [
    ("partitioned", "wheel_partitioned", {}),
    ("many_small_files_target64k", "wheel_many_small_files", {"target_size": 64 * 1024}),
    ("spark_partitioned", "spark_partitioned", {}),
    ("spark_unpartitioned_wide_types", "spark_unpartitioned", {}),
    ("spark_special_partitions", "spark_special_partitions", {}),
    ("spark_deletion_vectors", "spark_deletion_vectors", {}),
    ("spark_column_mapping_name", "spark_column_mapping_name", {}),
    ("spark_row_tracking", "spark_row_tracking", {}),
    ("spark_clustered", "spark_clustered", {}),
    ("spark_timestamp_ntz", "spark_timestamp_ntz", {}),
]


def check_rows(t: ZooTable, before: int, spark: Any) -> dict[str, Any]:
    """Every recorded version unchanged; each new version reads as ``before`` did, in both engines
    (and with the same row ids and row commit versions on row-tracking tables)."""
    problems = compare_versions(t.path, t.manifest, spark=spark)
    for v in range(before + 1, latest(t.path) + 1):
        for engine in ("spark", "wheel", "row_tracking") if "row_tracking" in t.manifest.versions[before] else ("spark", "wheel"):
            old, new = t.manifest.versions[before][engine], record(t.path, v, engine, spark=spark)
            if "error" in old or "error" in new:
                if "error" not in old or "error" not in new:
                    problems.append(f"v{v} {engine}: {old.get('error')} / {new.get('error')}")
            elif (old["count"], old["digest"]) != (new["count"], new["digest"]):
                problems.append(f"v{v} {engine}: {new['count']} rows, {old['count']} before OPTIMIZE")
    return {"every_version_reads_as_recorded_and_new_equals_previous": not problems, "problems": problems}


def _outputs(t: ZooTable, before: int) -> dict[str, Any]:
    after = latest(t.path)
    commits = {v: commit(t.path, v) for v in range(before + 1, after + 1)}
    adds = [a["add"] for acts in commits.values() for a in acts if "add" in a]
    return {
        "versions_written": list(commits),
        "commits": commits,
        "output_files": [a["path"] for a in adds],
        "output_parquet": parquet_facts(data_path(t.path, adds[0]["path"])) if adds else None,
        "crc_after": crc(t.path, after),
    }


def spark_runs(spark: Any, zoo: Zoo, work: Path, out: Path, only: set[str] | None = None) -> None:
    for label, name, conf, extra in SPARK_RUNS:
        if only and label not in only:
            continue
        t = zoo.copy(name, work / f"spark-optimize-{label}")
        before = latest(t.path)
        statement = f"OPTIMIZE delta.`{t.path}` {extra}".strip()
        started = time.monotonic()
        result: dict[str, Any] = {"zoo_table": name, "sql": statement.replace(str(t.path), "<table>"), "session_conf": {k.replace("__", "."): v for k, v in conf.items()}}
        try:
            with session_conf(spark, **conf):
                result["result_rows"] = rows_as_dicts(spark.sql(statement).collect())
        except Exception as exc:  # noqa: BLE001 - a refusal is a reference fact: recorded, not raised
            result["error"] = error_line(exc)
        result["seconds"] = round(time.monotonic() - started, 1)
        result.update(_outputs(t, before))
        if "error" not in result:
            result["check"] = check_rows(t, before, spark)
            second = latest(t.path)
            with session_conf(spark, **conf):
                spark.sql(statement).collect()
            result["second_optimize_writes_a_commit"] = latest(t.path) != second
        write_json(out / "optimize" / f"spark-{label}.json", result)
        print(f"optimize spark {label}: {result.get('error') or result['versions_written']} {result['seconds']}s", flush=True)


def wheel_runs(spark: Any, zoo: Zoo, work: Path, out: Path, only: set[str] | None = None) -> None:
    import deltalake

    for label, name, kwargs in WHEEL_RUNS:
        if only and label not in only:
            continue
        t = zoo.copy(name, work / f"wheel-optimize-{label}")
        before = latest(t.path)
        result: dict[str, Any] = {"zoo_table": name, "call": f"DeltaTable(path).optimize.compact({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"}
        started = time.monotonic()
        try:
            result["returned_metrics"] = deltalake.DeltaTable(str(t.path)).optimize.compact(**kwargs)
        except Exception as exc:  # noqa: BLE001 - a refusal is a reference fact: recorded, not raised
            result["error"] = error_line(exc)
        result["seconds"] = round(time.monotonic() - started, 1)
        result.update(_outputs(t, before))
        if "error" not in result:
            result["check"] = check_rows(t, before, spark)
        write_json(out / "optimize" / f"wheel-{label}.json", result)
        print(f"optimize wheel {label}: {result.get('error') or result['versions_written']} {result['seconds']}s", flush=True)
