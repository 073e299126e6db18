"""Zoo tables written by delta-spark 4.4 (``local[2]``), each through the SQL a user would run.

Every builder runs with the session time zone UTC and restores whatever session settings it
changes. Small data: the point is the shape of the log and of the files, not volume.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from .zoo_registry import zoo_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Partition values that need escaping in a path, plus null and "" (which Delta stores as null)
SPECIAL_PARTITION_VALUES = (
    "a b", "100%", "k=v", "a/b", "ünïcødé ✓", "日本語", " lead and trail ", "%2F literal", "x#y?z&w", "12:30", "", None,
)  # fmt: skip


@contextmanager
def session_conf(spark: SparkSession, **settings: str) -> Iterator[None]:
    """Set Spark SQL settings (dots spelled ``__``) for the block, then restore the previous values."""
    keys = {k.replace("__", "."): v for k, v in settings.items()}
    previous: dict[str, str | None] = {k: spark.conf.get(k, None) for k in keys}
    for k, v in keys.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, old in previous.items():
            if old is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, old)


def run(spark: SparkSession, path: str, *statements: str) -> None:
    """Each statement with ``{t}`` replaced by the table, in UTC; one statement is one commit."""
    with session_conf(spark, spark__sql__session__timeZone="UTC"):
        for statement in statements:
            spark.sql(statement.replace("{t}", f"delta.`{path}`"))


def sql_literal(value: str | None) -> str:
    return "NULL" if value is None else "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def wide_rows(lo: int, hi: int, files: int = 2) -> str:
    """A SELECT of rows ``lo``..``hi`` with many types, nulls, NaN and long strings (stats truncation)."""
    return f"""SELECT /*+ REPARTITION({files}) */ id,
      CASE WHEN id % 11 = 3 THEN NULL WHEN id % 3 = 0 THEN concat(repeat('ü', 34), id) ELSE concat('name-', id, repeat('x', id % 40)) END AS name,
      CASE WHEN id % 17 = 7 THEN CAST('NaN' AS DOUBLE) WHEN id % 19 = 1 THEN CAST('-0.0' AS DOUBLE) ELSE id * 1.25 END AS amount,
      id % 2 = 0 AS flag, date_add(DATE'2020-01-01', CAST(id AS INT)) AS day,
      timestamp_micros(1600000000000000 + id * 3601000001) AS ts,
      CASE WHEN id % 4 = 0 THEN NULL ELSE array(concat('t', id), CAST(NULL AS STRING)) END AS tags,
      map('k', CAST(id AS INT), 'z', CAST(NULL AS INT)) AS attrs,
      named_struct('a', CAST(id AS INT), 'b', CASE WHEN id % 5 = 0 THEN NULL ELSE concat('b', id) END) AS info,
      unhex(lpad(hex(id), 4, '0')) AS raw, CAST(id % 100 AS TINYINT) AS small, CAST(id / 7 AS FLOAT) AS f
    FROM range({lo}, {hi})"""


WIDE_COLUMNS = (
    "id BIGINT, name STRING, amount DOUBLE, flag BOOLEAN, day DATE, ts TIMESTAMP, tags ARRAY<STRING>, attrs MAP<STRING, INT>, "
    "info STRUCT<a: INT, b: STRING>, raw BINARY, small TINYINT, f FLOAT"
)


@zoo_table("spark_unpartitioned", "spark", {"unpartitioned", "checkpoint", "deletes", "updates", "overwrites", "nested"})
def spark_unpartitioned(path: str, spark: SparkSession) -> None:
    """Unpartitioned, many types (nested, binary, NaN, -0.0, long unicode strings); appends, a
    copy-on-write DELETE and UPDATE, INSERT OVERWRITE; a classic checkpoint at 4."""
    run(spark, path,
        f"CREATE TABLE {{t}} ({WIDE_COLUMNS}) USING delta TBLPROPERTIES ('delta.checkpointInterval' = '4', 'delta.enableDeletionVectors' = 'false')",
        f"INSERT INTO {{t}} {wide_rows(0, 40)}",
        f"INSERT INTO {{t}} {wide_rows(40, 80)}",
        f"INSERT INTO {{t}} {wide_rows(80, 120)}",
        "DELETE FROM {t} WHERE id % 5 = 0",
        "UPDATE {t} SET amount = amount * 2, name = upper(name) WHERE id < 30",
        f"INSERT OVERWRITE {{t}} {wide_rows(200, 260)}",
        f"INSERT INTO {{t}} {wide_rows(300, 320, 1)}")  # fmt: skip


@zoo_table("spark_partitioned", "spark", {"partitioned", "checkpoint", "deletes", "updates", "overwrites"})
def spark_partitioned(path: str, spark: SparkSession) -> None:
    """Partitioned by (region, year); whole-partition and copy-on-write deletes, UPDATE, REPLACE
    WHERE overwrite of one partition; a classic checkpoint at 5."""
    rows = ("SELECT /*+ REPARTITION(2) */ id, element_at(array('us', 'eu', 'apac'), CAST(id % 3 + 1 AS INT)) AS region, CAST(2020 + id % 2 AS INT) AS year, "
            "id * 0.5 AS value, concat('n', id) AS note FROM range({lo}, {hi})")
    run(spark, path,
        "CREATE TABLE {t} (id BIGINT, region STRING, year INT, value DOUBLE, note STRING) USING delta PARTITIONED BY (region, year) "
        "TBLPROPERTIES ('delta.checkpointInterval' = '5', 'delta.enableDeletionVectors' = 'false')",
        "INSERT INTO {t} " + rows.format(lo=0, hi=60),
        "INSERT INTO {t} " + rows.format(lo=60, hi=90),
        "DELETE FROM {t} WHERE region = 'eu'",
        "DELETE FROM {t} WHERE id % 7 = 0",
        "UPDATE {t} SET value = -value WHERE region = 'us' AND year = 2021",
        "INSERT INTO {t} REPLACE WHERE region = 'apac' " + rows.format(lo=1000, hi=1030).replace("CAST(id % 3 + 1 AS INT)", "3"),
        "INSERT INTO {t} " + rows.format(lo=90, hi=120))  # fmt: skip


@zoo_table("spark_special_partitions", "spark", {"partitioned", "special_partitions", "deletes", "updates", "overwrites"})
def spark_special_partitions(path: str, spark: SparkSession) -> None:
    """Partitioned by (p STRING, q INT): values with spaces, %, =, /, unicode, ':', '#?&', a
    literal '%2F', '' and nulls; partition delete, delete inside the null partition, UPDATE, REPLACE WHERE."""
    values = ", ".join(f"({i}, {sql_literal(v)})" for i, v in enumerate(SPECIAL_PARTITION_VALUES))
    rows = f"SELECT /*+ REPARTITION(1) */ CAST(k * 100 + r.id AS INT) AS id, p, CASE WHEN r.id % 2 = 0 THEN 1 ELSE NULL END AS q FROM VALUES {values} AS v(k, p) CROSS JOIN range({{lo}}, {{hi}}) AS r"
    run(spark, path,
        "CREATE TABLE {t} (id INT, p STRING, q INT) USING delta PARTITIONED BY (p, q) TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')",
        "INSERT INTO {t} " + rows.format(lo=0, hi=4),
        "INSERT INTO {t} " + rows.format(lo=4, hi=6),
        "DELETE FROM {t} WHERE p = 'k=v'",
        "DELETE FROM {t} WHERE p IS NULL AND id % 2 = 0",
        "UPDATE {t} SET id = id + 10000 WHERE p = 'a/b'",
        "INSERT INTO {t} REPLACE WHERE p = '100%' SELECT 5000 + id, '100%', CAST(NULL AS INT) FROM range(3)")  # fmt: skip


@zoo_table("spark_column_mapping_name", "spark", {"partitioned", "column_mapping", "deletes", "updates", "nested"})
def spark_column_mapping_name(path: str, spark: SparkSession) -> None:
    """Column mapping by name, partitioned by a column whose name has a space; names Parquet
    forbids; RENAME COLUMN, DROP COLUMN, copy-on-write DELETE and UPDATE."""
    rows = ("SELECT /*+ REPARTITION(1) */ id, concat('g', id), CAST(id * 3 AS INT), element_at(array('x', 'y z'), CAST(id % 2 + 1 AS INT)), "
            "named_struct('x y', CAST(id AS INT), 'z', concat('z', id)) FROM range({lo}, {hi})")
    run(spark, path,
        "CREATE TABLE {t} (id BIGINT, `first name` STRING, `a,b;c{d}=e` INT, `part col` STRING, nested STRUCT<`x y`: INT, z: STRING>) USING delta "
        "PARTITIONED BY (`part col`) TBLPROPERTIES ('delta.columnMapping.mode' = 'name', 'delta.enableDeletionVectors' = 'false', 'delta.checkpointInterval' = '4')",
        "INSERT INTO {t} " + rows.format(lo=0, hi=20),
        "INSERT INTO {t} " + rows.format(lo=20, hi=40),
        "ALTER TABLE {t} RENAME COLUMN `first name` TO `given name`",
        "INSERT INTO {t} " + rows.format(lo=40, hi=50),
        "ALTER TABLE {t} DROP COLUMN `a,b;c{d}=e`",
        "DELETE FROM {t} WHERE id % 4 = 0",
        "UPDATE {t} SET `given name` = upper(`given name`) WHERE `part col` = 'y z'",
        "INSERT INTO {t} SELECT id, concat('h', id), 'x', named_struct('x y', CAST(-id AS INT), 'z', 'late') FROM range(50, 55)")  # fmt: skip


@zoo_table("spark_column_mapping_id", "spark", {"unpartitioned", "column_mapping", "deletes", "nested"})
def spark_column_mapping_id(path: str, spark: SparkSession) -> None:
    """Column mapping by id, unpartitioned, nested structs/arrays/maps; a nested RENAME, ADD
    COLUMNS, a copy-on-write DELETE."""
    rows = (
        "SELECT /*+ REPARTITION(1) */ id, named_struct('a', CAST(id AS INT), 'b', concat('b', id)), "
        "array(named_struct('k', 'k1', 'v', id * 1.5D)), map('m', named_struct('q', CAST(id AS INT))) FROM range({lo}, {hi})"
    )
    run(spark, path,
        "CREATE TABLE {t} (id BIGINT, s STRUCT<a: INT, b: STRING>, arr ARRAY<STRUCT<k: STRING, v: DOUBLE>>, m MAP<STRING, STRUCT<q: INT>>) USING delta "
        "TBLPROPERTIES ('delta.columnMapping.mode' = 'id', 'delta.enableDeletionVectors' = 'false')",
        "INSERT INTO {t} " + rows.format(lo=0, hi=20),
        "ALTER TABLE {t} RENAME COLUMN s.a TO alpha",
        "INSERT INTO {t} " + rows.format(lo=20, hi=30),
        "ALTER TABLE {t} ADD COLUMNS (extra STRING)",
        "INSERT INTO {t} " + rows.format(lo=30, hi=35).replace(" FROM range", ", concat('e', id) FROM range"),
        "DELETE FROM {t} WHERE id % 3 = 0")  # fmt: skip


@zoo_table("spark_deletion_vectors", "spark", {"partitioned", "deletion_vectors", "deletes", "updates", "checkpoint", "in_commit_timestamps"})
def spark_deletion_vectors(path: str, spark: SparkSession) -> None:
    """Deletion vectors and in-commit timestamps, partitioned by p: DELETEs and an UPDATE that
    write DVs, a second DV replacing a first on the same file, a whole-partition delete; checkpoint at 5."""
    rows = "SELECT /*+ REPARTITION(1) */ id, element_at(array('a', 'b', 'c'), CAST(id % 3 + 1 AS INT)) AS p, concat('v', id) AS v, CAST(id % 10 AS INT) AS n FROM range({lo}, {hi})"
    run(spark, path,
        "CREATE TABLE {t} (id BIGINT, p STRING, v STRING, n INT) USING delta PARTITIONED BY (p) TBLPROPERTIES "
        "('delta.enableDeletionVectors' = 'true', 'delta.enableInCommitTimestamps' = 'true', 'delta.checkpointInterval' = '5')",
        "INSERT INTO {t} " + rows.format(lo=0, hi=300),
        "INSERT INTO {t} " + rows.format(lo=300, hi=400),
        "DELETE FROM {t} WHERE n = 1",
        "UPDATE {t} SET v = concat(v, '!') WHERE n = 2",
        "DELETE FROM {t} WHERE n = 3",
        "DELETE FROM {t} WHERE p = 'c'",
        "DELETE FROM {t} WHERE id < 50")  # fmt: skip


@zoo_table("spark_type_widening", "spark", {"partitioned", "type_widening", "deletes"})
def spark_type_widening(path: str, spark: SparkSession) -> None:
    """Type widening: byte->short, short->int, int->long, float->double, decimal(5,2)->decimal(10,4),
    date->timestamp_ntz and the partition column short->int, then wider values and a DELETE."""
    run(spark, path,
        "CREATE TABLE {t} (id INT, b TINYINT, s SMALLINT, i INT, f FLOAT, dec DECIMAL(5, 2), d DATE, pi SMALLINT) USING delta PARTITIONED BY (pi) "
        "TBLPROPERTIES ('delta.enableTypeWidening' = 'true', 'delta.feature.timestampNtz' = 'supported', 'delta.enableDeletionVectors' = 'false')",
        "INSERT INTO {t} SELECT /*+ REPARTITION(1) */ CAST(id AS INT), CAST(id - 5 AS TINYINT), CAST(id * 100 AS SMALLINT), CAST(id * 1000 AS INT), "
        "CAST(id / 3 AS FLOAT), CAST(id * 1.25 AS DECIMAL(5, 2)), date_add(DATE'2021-06-01', CAST(id AS INT)), CAST(id % 2 AS SMALLINT) FROM range(0, 10)",
        "ALTER TABLE {t} ALTER COLUMN b TYPE SMALLINT",
        "ALTER TABLE {t} ALTER COLUMN s TYPE INT",
        "ALTER TABLE {t} ALTER COLUMN i TYPE BIGINT",
        "ALTER TABLE {t} ALTER COLUMN f TYPE DOUBLE",
        "ALTER TABLE {t} ALTER COLUMN dec TYPE DECIMAL(10, 4)",
        "ALTER TABLE {t} ALTER COLUMN d TYPE TIMESTAMP_NTZ",
        "ALTER TABLE {t} ALTER COLUMN pi TYPE INT",
        "INSERT INTO {t} VALUES (100, 30000, 2000000000, 9000000000000, 1.0E300, 123456.7891, TIMESTAMP_NTZ'2022-01-01 12:00:00.5', 100000)",
        "DELETE FROM {t} WHERE id % 3 = 0")  # fmt: skip


@zoo_table("spark_timestamp_ntz", "spark", {"partitioned", "timestamp_ntz", "deletes", "updates"})
def spark_timestamp_ntz(path: str, spark: SparkSession) -> None:
    """timestamp_ntz and timestamp columns and partition columns; microseconds, before 1970, year 1
    and 9999, nulls; DELETE and UPDATE."""
    stamps = ["1969-12-31 23:59:59.999999", "2024-02-29 12:34:56.123456", "9999-12-31 23:59:59.999999", "0001-01-01 00:00:00", None]
    values = ", ".join(
        f"({i}, TIMESTAMP_NTZ{sql_literal(s)}, TIMESTAMP{sql_literal(s + 'Z')})" if s else f"({i}, NULL, NULL)" for i, s in enumerate(stamps)
    )
    rows = (
        f"SELECT /*+ REPARTITION(1) */ CAST(k * 10 + r.id AS INT), ntz, ts, element_at(array(TIMESTAMP_NTZ'2024-01-01 00:00:00', TIMESTAMP_NTZ'2024-01-01 10:30:00.25', NULL), "
        f"CAST(k % 3 + 1 AS INT)), element_at(array(TIMESTAMP'2024-01-01 00:00:00Z', TIMESTAMP'1999-12-31 23:59:59.999Z'), CAST(r.id % 2 + 1 AS INT)) "
        f"FROM VALUES {values} AS v(k, ntz, ts) CROSS JOIN range({{lo}}, {{hi}}) AS r"
    )
    run(spark, path,
        "CREATE TABLE {t} (id INT, ntz TIMESTAMP_NTZ, ts TIMESTAMP, pntz TIMESTAMP_NTZ, pts TIMESTAMP) USING delta PARTITIONED BY (pntz, pts) "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')",
        "INSERT INTO {t} " + rows.format(lo=0, hi=3),
        "INSERT INTO {t} " + rows.format(lo=3, hi=5),
        "DELETE FROM {t} WHERE id % 10 = 4",
        "UPDATE {t} SET ntz = ntz + INTERVAL 1 SECOND WHERE id < 20")  # fmt: skip


@zoo_table("spark_variant", "spark", {"unpartitioned", "variant", "deletes", "updates"})
def spark_variant(path: str, spark: SparkSession) -> None:
    """A variant column (objects, arrays, numbers, decimals, unicode, JSON null, SQL NULL); DELETE, UPDATE."""
    docs = ['{"a": 1, "b": [true, false, null], "c": {"d": "ü✓"}}', "[1, 2.5, -3, 1e20]", '"just a string"', "null", "12345678901234567890.123",
            '{"nested": {"deep": {"deeper": [1, {"x": "y"}]}}}', "true", "{}"]  # fmt: skip
    values = ", ".join(f"({i}, {sql_literal(d)})" for i, d in enumerate(docs))
    rows = f"SELECT /*+ REPARTITION(1) */ CAST(k + OFFSET AS INT), parse_json(j), concat('tag', k) FROM VALUES {values} AS v(k, j)"
    run(spark, path,
        "CREATE TABLE {t} (id INT, v VARIANT, tag STRING) USING delta TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')",
        "INSERT INTO {t} " + rows.replace("OFFSET", "0"),
        "INSERT INTO {t} " + rows.replace("OFFSET", "100") + " UNION ALL SELECT 999, CAST(NULL AS VARIANT), 'sqlnull'",
        "DELETE FROM {t} WHERE id % 3 = 0",
        "UPDATE {t} SET v = parse_json('{\"updated\": true}') WHERE id = 1")  # fmt: skip


@zoo_table("spark_decimals", "spark", {"partitioned", "decimals", "deletes", "updates"})
def spark_decimals(path: str, spark: SparkSession) -> None:
    """Decimals of precision 38/18 (extremes), 18/9, 10/2, 5/0, partitioned by decimal(6,2) with a null."""
    run(spark, path,
        "CREATE TABLE {t} (id INT, d38 DECIMAL(38, 18), d18 DECIMAL(18, 9), d10 DECIMAL(10, 2), d5 DECIMAL(5, 0), pd DECIMAL(6, 2)) USING delta "
        "PARTITIONED BY (pd) TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')",
        "INSERT INTO {t} VALUES (1, 99999999999999999999.999999999999999999, 999999999.999999999, 99999999.99, 99999, 1.50), "
        "(2, -99999999999999999999.999999999999999999, -0.000000001, -0.01, -99999, 1.50), (3, 0.000000000000000001, 0, 0, 0, -0.25), "
        "(4, NULL, NULL, NULL, NULL, NULL), (5, 1, 1, 1, 1, 0.00)",
        "INSERT INTO {t} SELECT /*+ REPARTITION(1) */ CAST(id AS INT), CAST(id AS DECIMAL(38, 18)) / 7, CAST(id AS DECIMAL(18, 9)) / 3, id * 1.01, id, "
        "CAST(id % 3 AS DECIMAL(6, 2)) - 0.5 FROM range(10, 30)",
        "DELETE FROM {t} WHERE id % 4 = 0",
        "UPDATE {t} SET d10 = d10 - 0.01 WHERE pd = 1.50")  # fmt: skip


@zoo_table("spark_cdf", "spark", {"partitioned", "cdf", "deletes", "updates"})
def spark_cdf(path: str, spark: SparkSession) -> None:
    """Change data feed, partitioned by a column named `_c` (partition directories `_c=...`): UPDATE,
    DELETE and MERGE write `_change_data/` files."""
    rows = "SELECT /*+ REPARTITION(1) */ id, element_at(array('a', 'b'), CAST(id % 2 + 1 AS INT)) AS `_c`, CAST(id AS INT) AS v, concat('n', id) AS name FROM range({lo}, {hi})"
    run(spark, path,
        "CREATE TABLE {t} (id BIGINT, `_c` STRING, v INT, name STRING) USING delta PARTITIONED BY (`_c`) "
        "TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true', 'delta.enableDeletionVectors' = 'false')",
        "INSERT INTO {t} " + rows.format(lo=0, hi=40),
        "UPDATE {t} SET v = v + 1000 WHERE id % 4 = 1",
        "DELETE FROM {t} WHERE id % 5 = 0",
        "MERGE INTO {t} AS t USING (SELECT id, element_at(array('a', 'b'), CAST(id % 2 + 1 AS INT)) AS `_c`, CAST(-id AS INT) AS v FROM range(30, 50)) AS s "
        "ON t.id = s.id AND t.`_c` = s.`_c` WHEN MATCHED AND s.id % 3 = 0 THEN DELETE WHEN MATCHED THEN UPDATE SET v = s.v "
        "WHEN NOT MATCHED THEN INSERT (id, `_c`, v, name) VALUES (s.id, s.`_c`, s.v, 'merged')",
        "INSERT INTO {t} " + rows.format(lo=100, hi=110))  # fmt: skip
