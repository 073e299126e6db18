"""Version checksums as delta-spark 4.4 writes them (every ``<v>.crc`` of several zoo tables, the
``allFiles`` threshold, set transactions), what it does with a missing one, and when it notices a
tampered one: which reads, writes and checkpoints fail, under which settings."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..table_zoo import Zoo, ZooTable
from ..zoo_oracle import clear_spark_cache
from ..zoo_spark_tables import run as run_sql, session_conf
from .common import LOG, crc, error_line, latest, write_json

TABLES = [
    "spark_unpartitioned", "spark_partitioned", "spark_deletion_vectors", "spark_many_small_files", "spark_many_small_files_partitioned",
    "spark_clustered", "spark_row_tracking", "spark_checkpoint_v2", "spark_cdf", "spark_column_mapping_name", "spark_type_widening", "spark_log_compaction",
]  # fmt: skip
NO_INCREMENTAL = {"spark__databricks__delta__incremental__commit__enabled": "false"}
FORCED_VALIDATION = {"spark__databricks__delta__versionChecksum__forcedValidationInterval": "0", "spark__databricks__delta__versionChecksum__forcedValidationMinTimeIntevalMinutes": "0"}
VERIFY = {"spark__databricks__delta__incremental__commit__verify": "true"}


def dump_tables(zoo: Zoo, out: Path) -> None:
    for name in TABLES:
        t = zoo.get(name)
        crcs = {v: crc(t.path, v) for v in range(latest(t.path) + 1)}
        summary = {
            v: {"fields": sorted(c), "numFiles": c["numFiles"], "allFiles": None if c.get("allFiles") is None else len(c["allFiles"])} if c else None
            for v, c in crcs.items()
        }
        write_json(out / "crc" / f"{name}.json", {"zoo_table": name, "summary": summary, "crc": crcs})


def probe(spark: Any, t: ZooTable, what: str, conf: dict[str, str] | None = None) -> str:
    """Run one operation on ``t`` with a cold DeltaLog cache; 'ok' or the error's first line."""
    clear_spark_cache(spark)
    jvm = spark._jvm
    try:
        with session_conf(spark, **(conf or {})):
            if what == "select":
                n = spark.read.format("delta").load(str(t.path)).count()
                return f"ok ({n} rows)"
            if what == "insert":
                run_sql(spark, str(t.path), "INSERT INTO {t} SELECT * FROM {t} LIMIT 1")
                return "ok"
            if what == "validateChecksum":
                log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, str(t.path))
                snap = log.update(False, jvm.scala.Option.empty(), jvm.scala.Option.empty())
                empty = jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(jvm.java.util.HashMap())
                return f"ok (returned {snap.validateChecksum(empty)})"
            if what == "checkpoint":
                jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, str(t.path)).checkpoint()
                return "ok"
            if what == "describe_detail":
                row = spark.sql(f"DESCRIBE DETAIL delta.`{t.path}`").collect()[0].asDict()
                return f"ok (numFiles={row['numFiles']}, sizeInBytes={row['sizeInBytes']}, properties={row['properties']})"
            if what == "schema":
                return "ok " + spark.read.format("delta").load(str(t.path)).schema.simpleString()
    except Exception as exc:  # noqa: BLE001 - a refusal is a reference fact: recorded, not raised
        return error_line(exc)
    raise ValueError(what)


PROBES: list[tuple[str, str, dict[str, str]]] = [
    ("select", "select", {}),
    ("describe_detail", "describe_detail", {}),
    ("schema", "schema", {}),
    ("insert (defaults)", "insert", {}),
    ("insert, incremental.commit.enabled=false", "insert", NO_INCREMENTAL),
    ("insert, incremental.commit.verify=true", "insert", VERIFY),
    ("insert, forcedValidationInterval=0 and MinTimeInteval=0", "insert", FORCED_VALIDATION),
    ("insert, incremental off and checksum.mismatch.fatal=false", "insert", {**NO_INCREMENTAL, "spark__databricks__delta__checksum__mismatch__fatal": "false"}),
    ("DeltaLog.checkpoint() (defaults)", "checkpoint", {}),
    ("Snapshot.validateChecksum(Map())", "validateChecksum", {}),
]


def _tamper(field: str) -> Callable[[dict[str, Any]], None]:
    def numfiles(c: dict[str, Any]) -> None:
        c["numFiles"] += 1

    def size(c: dict[str, Any]) -> None:
        c["tableSizeBytes"] += 7

    def metadata(c: dict[str, Any]) -> None:
        c["metadata"]["configuration"]["tampered.key"] = "yes"

    def schema(c: dict[str, Any]) -> None:
        c["metadata"]["schemaString"] = c["metadata"]["schemaString"].replace('"name":"note"', '"name":"tampered_note"')

    def histogram(c: dict[str, Any]) -> None:
        c["fileSizeHistogram"]["fileCounts"][0] += 1

    return {"numFiles": numfiles, "tableSizeBytes": size, "metadata.configuration": metadata, "metadata.schema": schema, "fileSizeHistogram": histogram}[field]


def tamper_runs(spark: Any, zoo: Zoo, work: Path, out: Path) -> None:
    results: dict[str, Any] = {}
    for field in ("numFiles", "tableSizeBytes", "metadata.configuration", "metadata.schema", "fileSizeHistogram"):
        results[field] = {}
        for label, what, conf in PROBES:
            t = zoo.copy("spark_partitioned", work / f"crc-tamper-{field}-{what}-{len(results[field])}")
            path = t.path / LOG / f"{latest(t.path):020d}.crc"
            c = json.loads(path.read_text())
            _tamper(field)(c)
            path.write_text(json.dumps(c) + "\n")
            results[field][label] = probe(spark, t, what, conf)
            shutil.rmtree(t.path)
        print(f"crc tamper {field}: {results[field]}", flush=True)
    control = zoo.copy("spark_partitioned", work / "crc-control")
    results["untampered control"] = {label: probe(spark, control, what, conf) for label, what, conf in PROBES if what != "insert"}
    write_json(out / "crc" / "tamper.json", {"table": "spark_partitioned (latest version's .crc edited)", "results": results})


def behaviour_runs(spark: Any, zoo: Zoo, work: Path, out: Path) -> None:
    res: dict[str, Any] = {}
    # a missing .crc for the latest version: does the next commit still write one, and is it complete?
    t = zoo.copy("spark_partitioned", work / "crc-missing")
    v = latest(t.path)
    (t.path / LOG / f"{v:020d}.crc").unlink()
    clear_spark_cache(spark)
    run_sql(spark, str(t.path), "INSERT INTO {t} SELECT * FROM {t} LIMIT 1")
    res["after_missing_crc_next_commit_crc"] = crc(t.path, v + 1)
    # a wheel-written table (no .crc at all): delta-spark's first commit on it
    t = zoo.copy("wheel_partitioned", work / "crc-wheel")
    v = latest(t.path)
    clear_spark_cache(spark)
    run_sql(spark, str(t.path), "INSERT INTO {t} SELECT * FROM {t} LIMIT 1")
    res["wheel_table_first_spark_commit_crc"] = crc(t.path, v + 1)
    # set transactions (txnAppId / txnVersion): in the .crc
    t = zoo.copy("spark_partitioned", work / "crc-txn")
    v = latest(t.path)
    df = spark.read.format("delta").load(str(t.path)).limit(2)
    df.write.format("delta").mode("append").option("txnAppId", "app-1").option("txnVersion", 3).save(str(t.path))
    res["set_transaction_crc"] = crc(t.path, v + 1)
    # allFiles threshold: 49, 50, 51 files
    path = work / "crc-allfiles"
    run_sql(spark, str(path), "CREATE TABLE {t} (id BIGINT) USING delta", "INSERT INTO {t} SELECT /*+ REPARTITION(49) */ id FROM range(0, 49)",
            "INSERT INTO {t} SELECT /*+ REPARTITION(1) */ id FROM range(49, 50)", "INSERT INTO {t} SELECT /*+ REPARTITION(1) */ id FROM range(50, 51)")  # fmt: skip
    res["allFiles_by_numFiles"] = {str(c["numFiles"]): c.get("allFiles") is not None for v in range(latest(path) + 1) if (c := crc(path, v))}
    write_json(out / "crc" / "behaviour.json", res)
    print("crc behaviour:", res["allFiles_by_numFiles"])
