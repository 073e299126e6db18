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
