"""Zoo tables written by delta-spark 4.4 whose point is the layout of the log or of the files:
v2 checkpoints with sidecars, log compaction files, row tracking, liquid clustering, many small files.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from .zoo_registry import zoo_table
from .zoo_spark_tables import run, session_conf

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DAY_MS = 86_400_000


def kernel_log_compaction(spark: SparkSession, path: str, start: int, end: int) -> None:
    """``<start>.<end>.compacted.json`` written by delta-kernel 4.4's own LogCompactionWriter (delta-spark
    4.4 reads compaction files but never writes them), tombstones kept for the default 7 days."""
    jvm: Any = spark._jvm
    jsc: Any = spark._jsc
    engine = jvm.io.delta.kernel.defaults.engine.DefaultEngine.create(jsc.hadoopConfiguration())
    kpath = jvm.io.delta.kernel.internal.fs.Path
    uri = "file:" + path if path.startswith("/") else path  # kernel compares qualified paths
    writer = jvm.io.delta.kernel.internal.compaction.LogCompactionWriter(kpath(uri), kpath(uri + "/_delta_log"), start, end, int(time.time() * 1000) - 7 * DAY_MS)
    writer.writeLogCompactionFile(engine)


@zoo_table("spark_checkpoint_v2", "spark", {"partitioned", "checkpoint", "checkpoint_v2", "deletion_vectors", "deletes", "in_commit_timestamps"})
def spark_checkpoint_v2(path: str, spark: SparkSession) -> None:
    """checkpointPolicy v2 with sidecars (4 actions a part): a JSON top-level checkpoint at 3, a
    Parquet one at 6; deletion vectors and in-commit timestamps."""
    rows = "SELECT /*+ REPARTITION(2) */ id, element_at(array('a', 'b', 'c'), CAST(id % 3 + 1 AS INT)) AS p, concat('v', id) AS v FROM range({lo}, {hi})"
    create = ("CREATE TABLE {t} (id BIGINT, p STRING, v STRING) USING delta PARTITIONED BY (p) TBLPROPERTIES ('delta.checkpointPolicy' = 'v2', "
              "'delta.checkpointInterval' = '3', 'delta.enableDeletionVectors' = 'true', 'delta.enableInCommitTimestamps' = 'true')")  # fmt: skip
    with session_conf(spark, spark__databricks__delta__checkpoint__partSize="4", spark__databricks__delta__checkpointV2__topLevelFileFormat="json"):
        run(spark, path, create, "INSERT INTO {t} " + rows.format(lo=0, hi=30), "INSERT INTO {t} " + rows.format(lo=30, hi=60), "DELETE FROM {t} WHERE id % 4 = 0")
    with session_conf(spark, spark__databricks__delta__checkpoint__partSize="4", spark__databricks__delta__checkpointV2__topLevelFileFormat="parquet"):
        run(spark, path, "INSERT INTO {t} " + rows.format(lo=60, hi=90), "DELETE FROM {t} WHERE p = 'b'", "INSERT INTO {t} " + rows.format(lo=90, hi=100),
            "UPDATE {t} SET v = upper(v) WHERE id % 5 = 1")  # fmt: skip


@zoo_table("spark_log_compaction", "spark", {"unpartitioned", "log_compaction", "deletes", "updates"})
def spark_log_compaction(path: str, spark: SparkSession) -> None:
    """Log compaction files 1..4 and 5..8 (written by delta-kernel), then one more commit; appends,
    a copy-on-write DELETE and UPDATE, no checkpoint."""
    rows = "SELECT /*+ REPARTITION(1) */ id, concat('s', id) AS s FROM range({lo}, {hi})"
    run(spark, path,
        "CREATE TABLE {t} (id BIGINT, s STRING) USING delta TBLPROPERTIES ('delta.enableDeletionVectors' = 'false', 'delta.checkpointInterval' = '100')",
        *("INSERT INTO {t} " + rows.format(lo=i * 10, hi=i * 10 + 10) for i in range(5)),
        "DELETE FROM {t} WHERE id % 10 = 3",
        "UPDATE {t} SET s = upper(s) WHERE id < 15",
        "INSERT INTO {t} " + rows.format(lo=100, hi=110))  # fmt: skip
    kernel_log_compaction(spark, path, 1, 4)
    kernel_log_compaction(spark, path, 5, 8)
    run(spark, path, "DELETE FROM {t} WHERE id = 100")


@zoo_table("spark_row_tracking", "spark", {"partitioned", "row_tracking", "deletion_vectors", "deletes", "updates"}, row_tracking=True)
def spark_row_tracking(path: str, spark: SparkSession) -> None:
    """Row tracking with deletion vectors, partitioned: appends, an UPDATE (row ids kept through
    materialised columns), a DELETE; the manifest records row ids and row commit versions."""
    rows = "SELECT /*+ REPARTITION(2) */ id, concat('v', id) AS v, element_at(array('a', 'b'), CAST(id % 2 + 1 AS INT)) AS p FROM range({lo}, {hi})"
    run(spark, path,
        "CREATE TABLE {t} (id BIGINT, v STRING, p STRING) USING delta PARTITIONED BY (p) "
        "TBLPROPERTIES ('delta.enableRowTracking' = 'true', 'delta.enableDeletionVectors' = 'true')",
        "INSERT INTO {t} " + rows.format(lo=0, hi=50),
        "INSERT INTO {t} " + rows.format(lo=50, hi=80),
        "UPDATE {t} SET v = concat(v, '+') WHERE id % 4 = 0",
        "DELETE FROM {t} WHERE id % 5 = 0",
        "INSERT INTO {t} " + rows.format(lo=80, hi=90))  # fmt: skip


@zoo_table("spark_clustered", "spark", {"unpartitioned", "clustered", "deletes", "in_commit_timestamps"})
def spark_clustered(path: str, spark: SparkSession) -> None:
    """Liquid clustering CLUSTER BY (k, day) with in-commit timestamps: four appends of three files,
    a DELETE, an append; never OPTIMIZEd (no clusteringProvider yet)."""
    rows = ("SELECT /*+ REPARTITION(3) */ id, element_at(array('k1', 'k2', 'k3', 'k4'), CAST(id % 4 + 1 AS INT)) AS k, "
            "date_add(DATE'2024-01-01', CAST(id % 9 AS INT)) AS day, id / 3.0D AS v FROM range({lo}, {hi})")
    run(spark, path,
        "CREATE TABLE {t} (id BIGINT, k STRING, day DATE, v DOUBLE) USING delta CLUSTER BY (k, day) TBLPROPERTIES ('delta.enableInCommitTimestamps' = 'true')",
        *("INSERT INTO {t} " + rows.format(lo=i * 60, hi=i * 60 + 60) for i in range(4)),
        "DELETE FROM {t} WHERE id % 6 = 0",
        "INSERT INTO {t} " + rows.format(lo=1000, hi=1030))  # fmt: skip


@zoo_table("spark_many_small_files", "spark", {"unpartitioned", "many_small_files", "deletes"})
def spark_many_small_files(path: str, spark: SparkSession) -> None:
    """200 small files (~2 KB) in one append, a DELETE rewriting 20 of them, 20 more files."""
    rows = "SELECT /*+ REPARTITION({n}) */ id, concat('payload-', id) AS s, id % 13 AS g FROM range({lo}, {hi})"
    run(spark, path,
        "CREATE TABLE {t} (id BIGINT, s STRING, g BIGINT) USING delta TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')",
        "INSERT INTO {t} " + rows.format(n=200, lo=0, hi=20000),
        "DELETE FROM {t} WHERE id % 1000 = 0",
        "INSERT INTO {t} " + rows.format(n=20, lo=20000, hi=22000))  # fmt: skip


@zoo_table("spark_many_small_files_partitioned", "spark", {"partitioned", "many_small_files", "deletion_vectors", "deletes"})
def spark_many_small_files_partitioned(path: str, spark: SparkSession) -> None:
    """4 partitions of 50 small files each with deletion vectors, then a DELETE writing DVs on some."""
    rows = "SELECT /*+ REPARTITION(50) */ id, concat('payload-', id) AS s, concat('p', id % 4) AS p FROM range({lo}, {hi})"
    run(spark, path,
        "CREATE TABLE {t} (id BIGINT, s STRING, p STRING) USING delta PARTITIONED BY (p) TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')",
        "INSERT INTO {t} " + rows.format(lo=0, hi=20000),
        "DELETE FROM {t} WHERE id % 97 = 0")  # fmt: skip
