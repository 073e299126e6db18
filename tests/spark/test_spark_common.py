"""Column helpers shared by the Spark jobs."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_delta_maintenance.spark_jobs._common import version_from_file

pytestmark = pytest.mark.spark


def test_a_log_file_name_gives_its_version_and_a_compaction_its_end_version(spark: Any) -> None:
    from pyspark.sql import functions as F

    names = [f"{7:020d}.json", f"{12345678901:020d}.json", f"{3:020d}.{19:020d}.compacted.json", f"{0:020d}.json"]
    rows = spark.createDataFrame([(n,) for n in names], "name string").select(version_from_file(F.col("name")).alias("v")).collect()
    assert [r["v"] for r in rows] == [7, 12345678901, 19, 0]


def test_file_key_path_canonicalises_file_uris_and_refuses_a_missing_path(spark: Any) -> None:
    from pyspark.sql import functions as F

    from airflow_delta_maintenance.spark_jobs._common import file_key_path

    paths = ["file:/x/a.parquet", "file:///x/a.parquet", "/x/a.parquet", "s3://b/a.parquet", "p=1/part-0.parquet", "file-name.parquet"]
    frame = spark.createDataFrame([(p, None, 3) for p in paths], "add string, remove string, v long")
    keys = [r["k"] for r in frame.select(file_key_path(F.col("add"), F.col("remove"), F.col("v")).alias("k")).collect()]
    assert keys == ["/x/a.parquet", "/x/a.parquet", "/x/a.parquet", "s3://b/a.parquet", "p=1/part-0.parquet", "file-name.parquet"]
    removed = spark.createDataFrame([(None, "file:///y.parquet", 4)], "add string, remove string, v long")
    assert removed.select(file_key_path(F.col("add"), F.col("remove"), F.col("v")).alias("k")).collect()[0]["k"] == "/y.parquet"
    nameless = spark.createDataFrame([(None, None, 5)], "add string, remove string, v long")
    with pytest.raises(Exception, match="a file action without a path in version 5"):
        nameless.select(file_key_path(F.col("add"), F.col("remove"), F.col("v"))).collect()


def test_a_java_failure_is_named_by_its_exception_and_its_root_cause(spark: Any) -> None:
    """py4j's own text is "An error occurred while calling oN.x." with the trace on later lines,
    which the launcher drops: the job's one failure line names the Java exception and its cause."""
    from py4j.protocol import Py4JJavaError

    from airflow_delta_maintenance.spark_jobs._common import describe_failure

    jvm = spark._jvm
    conf = jvm.org.apache.hadoop.conf.Configuration(spark._jsc.hadoopConfiguration())
    conf.set("fs.nosuch.impl", "no.such.FileSystem")  # as Hadoop 3.5's gs:// default without hadoop-gcp
    with pytest.raises(Py4JJavaError) as err:
        jvm.org.apache.hadoop.fs.Path("nosuch://bucket/t").getFileSystem(conf)
    line = describe_failure(err.value)
    assert "\n" not in line and "An error occurred while calling" not in line, line
    assert line.startswith("Py4JJavaError: java.lang.RuntimeException: "), line
    assert line.endswith("<- caused by java.lang.ClassNotFoundException: Class no.such.FileSystem not found"), line
