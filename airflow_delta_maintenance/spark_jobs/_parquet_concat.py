"""One Parquet file from the part files of one Spark write, by copying their row groups.

A classic checkpoint is a single file. Written by one Spark task, its encoding and compression run
on one core after a second shuffle of every row into one partition (10M files: a task of minutes
while the other cores idle). Instead every task of the reconciliation writes its own part, and the
driver's JVM appends the parts' row groups, column chunks byte for byte, into one file behind a
new footer (parquet-mr's ``ParquetFileReader.appendTo``, on Spark's classpath): a sequential copy
through a fixed buffer, nothing decoded, nothing in the Python driver.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from py4j.protocol import Py4JError  # type: ignore[import-untyped]
from pyspark.sql import SparkSession


class ConcatFailed(Exception):
    """The parts could not be joined (a part differs in schema, or the JVM reported an error)."""


def concatenate_parquet(spark: SparkSession, parts: Sequence[str], target: str) -> None:
    """Write ``target`` (a Hadoop URI that must not exist) holding every row group of ``parts`` in
    order. Every part must have the first part's schema; its key-value metadata (Spark's row
    schema) is kept. Any failure is a ``ConcatFailed``; the caller removes what was written."""
    try:
        _concatenate(spark, parts, target)
    except Py4JError as exc:
        raise ConcatFailed(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__) from exc


def _concatenate(spark: SparkSession, parts: Sequence[str], target: str) -> None:
    if not parts:
        raise ConcatFailed("no part files to join")
    jvm = spark._jvm
    assert jvm is not None
    conf = spark._jsc.hadoopConfiguration()
    hadoop = jvm.org.apache.hadoop.fs.Path
    parquet = jvm.org.apache.parquet.hadoop
    writer_class = parquet.ParquetFileWriter

    def open_part(uri: str) -> Any:
        return parquet.ParquetFileReader.open(parquet.util.HadoopInputFile.fromPath(hadoop(uri), conf))

    first = open_part(parts[0])
    try:
        meta = first.getFooter().getFileMetaData()
        schema, key_values = meta.getSchema(), meta.getKeyValueMetaData()
    finally:
        first.close()
    out = parquet.util.HadoopOutputFile.fromPath(hadoop(target), conf)
    # Row-group size and padding only matter for rows the writer encodes itself: it encodes none.
    writer = writer_class(out, schema, writer_class.Mode.CREATE, 128 << 20, 0)
    writer.start()
    try:
        for uri in parts:
            reader = open_part(uri)
            try:
                if not reader.getFooter().getFileMetaData().getSchema().equals(schema):
                    raise ConcatFailed(f"{uri}: its schema differs from {parts[0]}'s")
                reader.appendTo(writer)
            finally:
                reader.close()
    except BaseException:
        try:
            writer.end(key_values)  # closes the stream; the caller removes the staging directory
        except Py4JError:
            pass  # the first failure is the one to report
        raise
    writer.end(key_values)
