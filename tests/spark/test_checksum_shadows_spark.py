"""delta-spark reads a local table after our checkpoint and cleanup without a checksum failure.

delta-spark (Hadoop's checksummed LocalFileSystem) writes ``.<name>.crc`` next to every log file
and verifies it on each read. Our checkpoint rewrote ``_last_checkpoint`` and left the old shadow:
the read failed its checksum and delta-spark retried three times, a second apart, then gave up on
the hint and listed the log ("_last_checkpoint is corrupted. Will search the checkpoint files
directly"). Cleanup left the shadows of every file it deleted. Driven through the CLI.
"""

from __future__ import annotations

import contextlib
import io
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from airflow_delta_maintenance.cli import main

pytestmark = [pytest.mark.spark, pytest.mark.interop]


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def read_through_hadoop(spark: Any, path: Path) -> bytes:
    """The file's bytes as delta-spark's LogStore reads them: through Hadoop's checksummed local
    file system, which verifies ``.<name>.crc`` when there is one (ChecksumException otherwise)."""
    jvm = spark._jvm
    hpath = jvm.org.apache.hadoop.fs.Path(path.as_uri())
    fs = hpath.getFileSystem(spark._jsparkSession.sessionState().newHadoopConf())
    stream = fs.open(hpath)
    try:
        return bytes(jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
    finally:
        stream.close()


def test_delta_spark_reads_the_table_after_our_checkpoint_and_cleanup_without_a_checksum_fallback(tmp_path: Path, spark: Any) -> None:
    uri = str(tmp_path / "t")
    for i in range(12):  # delta-spark's own checkpoints at 5 and 10, each log file with its .crc shadow
        spark.range(i * 10, i * 10 + 10).write.format("delta").mode("append").option("delta.checkpointInterval", "5").save(uri)
    log = Path(uri) / "_delta_log"
    assert (log / "._last_checkpoint.crc").exists() and (log / f".{3:020d}.json.crc").exists()

    rc, _, err = run("checkpoint", uri, "--force")
    assert rc == 0, err
    later = (datetime.now(timezone.utc) + timedelta(days=60)).isoformat()  # every commit past the 30-day retention
    rc, out, err = run("cleanup", uri, "--execute", "--now", later, "--allow-future-now")
    assert rc == 0 and "deleted" in out, (out, err)
    assert not (log / f"{3:020d}.json").exists()

    # every file left verifies against its shadow, as delta-spark reads it; no shadow outlives its file
    for p in sorted(log.rglob("*")):
        if p.is_file() and not p.name.startswith("."):
            read_through_hadoop(spark, p)
    orphans = [p.name for p in log.rglob(".*.crc") if not p.with_name(p.name[1:-4]).exists()]
    assert not orphans, orphans

    jvm = spark._jvm
    delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, uri)
    started = time.monotonic()
    hint = delta_log.readLastCheckpointFile()
    seconds = time.monotonic() - started
    # a checksum failure is retried three times, a second apart, before the fallback to listing
    assert hint.isDefined() and hint.get().version() == 11 and seconds < 1.0, (hint, seconds)
    snapshot = delta_log.update(False, jvm.scala.Option.empty(), jvm.scala.Option.empty())
    assert snapshot.version() == 11 and snapshot.logSegment().checkpointProvider().version() == 11
    assert spark.read.format("delta").load(uri).count() == 120
