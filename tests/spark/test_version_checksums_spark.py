"""Our version checksums against delta-spark 4.4's: on tables delta-spark wrote, the checksum
``delta-maintenance checksums`` writes for each version equals delta-spark's own ``.crc`` field by
field (``allFiles`` where both carry it); delta-spark validates ours with checksum mismatches
fatal (``spark.databricks.delta.checksum.mismatch.fatal``, validation forced on every commit and
``incremental.commit.verify``), commits on top of them, and a tampered one of ours makes it fail —
so the validation is real. Driven through the CLI on copies of zoo tables."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from airflow_delta_maintenance.cli import main
from airflow_delta_maintenance.deltalog.model.paths import crc_name
from tests._infra.delta_reference.checksums import TABLES, probe
from tests._infra.zoo_tier import zoo_tables

pytestmark = [pytest.mark.spark, pytest.mark.interop]

FATAL = {
    "spark__databricks__delta__checksum__mismatch__fatal": "true",
    "spark__databricks__delta__versionChecksum__forcedValidationInterval": "0",
    "spark__databricks__delta__versionChecksum__forcedValidationMinTimeIntevalMinutes": "0",
    "spark__databricks__delta__incremental__commit__verify": "true",
}


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def take_checksums(log: Path) -> dict[int, dict[str, Any]]:
    """Remove every ``<v>.crc`` (and its Hadoop shadow); return delta-spark's, by version."""
    theirs = {}
    for p in sorted(log.glob("*.crc")):
        if not p.name.startswith("."):
            theirs[int(p.name[:20])] = json.loads(p.read_text())
            p.unlink()
            (log / f".{p.name}.crc").unlink(missing_ok=True)
    return theirs


def _files(c: dict[str, Any]) -> list[tuple[Any, ...]]:
    return sorted((a["path"], a["size"], a.get("stats"), json.dumps(a.get("deletionVector"), sort_keys=True)) for a in c["allFiles"])


def _unordered(c: dict[str, Any]) -> dict[str, Any]:
    c = dict(c)
    for k in ("setTransactions", "domainMetadata"):
        if c.get(k) is not None:
            c[k] = sorted(c[k], key=lambda a: json.dumps(a, sort_keys=True))
    for k in ("readerFeatures", "writerFeatures"):
        if k in c["protocol"]:
            c["protocol"] = {**c["protocol"], k: sorted(c["protocol"][k])}
    return c


@pytest.mark.parametrize("name", TABLES)
def test_our_checksums_equal_delta_sparks_own_field_by_field(zoo_copy: Any, name: str) -> None:
    t = zoo_copy(name)
    log = t.path / "_delta_log"
    theirs = take_checksums(log)
    assert len(theirs) >= 3, name
    rc, out, err = run("checksums", str(t.path), "--from", "0", "--json")
    assert rc == 0, err
    assert json.loads(out)["replays"] == 1  # one replay at v0, then commit by commit
    compared_files = 0
    for v, spark_crc in theirs.items():
        ours = json.loads((log / crc_name(v)).read_text())
        if "allFiles" in ours and "allFiles" in spark_crc:
            assert _files(ours) == _files(spark_crc), (name, v)
            compared_files += 1
        ours.pop("allFiles", None)
        spark_crc.pop("allFiles", None)
        assert _unordered(ours) == _unordered(spark_crc), (name, v)
    assert compared_files, name


@pytest.mark.parametrize("name", zoo_tables(["spark_partitioned", "spark_deletion_vectors", "spark_checkpoint_v2", "spark_row_tracking",
                                              "wheel_partitioned", "wheel_many_small_files_partitioned"],
                                             ["spark_deletion_vectors", "spark_checkpoint_v2", "wheel_partitioned"]))  # fmt: skip
def test_delta_spark_validates_our_checksums_with_mismatches_fatal(zoo_copy: Any, spark: Any, name: str) -> None:
    t = zoo_copy(name)
    log = t.path / "_delta_log"
    take_checksums(log)  # the wheel's tables have none to begin with
    rc, _, err = run("checksums", str(t.path), "--from", "0")
    assert rc == 0, err
    latest = max(int(p.name[:20]) for p in log.glob("*.crc") if not p.name.startswith("."))
    assert probe(spark, t, "validateChecksum", FATAL) == "ok (returned True)"
    assert probe(spark, t, "insert", FATAL) == "ok"  # validated before the commit, its checksum derived from ours and verified
    assert (log / crc_name(latest + 1)).exists()
    rc, out, err = run("verify", str(t.path))
    assert rc == 0, (out, err)

    # the control: one of ours tampered, delta-spark refuses
    c = json.loads((log / crc_name(latest + 1)).read_text())
    (log / crc_name(latest + 1)).unlink()
    (log / f".{crc_name(latest + 1)}.crc").unlink(missing_ok=True)
    rc, _, err = run("checksums", str(t.path))
    assert rc == 0, err
    ours = json.loads((log / crc_name(latest + 1)).read_text())
    ours.pop("allFiles", None), c.pop("allFiles", None)
    assert _unordered(ours) == _unordered(c)  # ours for delta-spark's commit equals its own
    ours = json.loads((log / crc_name(latest + 1)).read_text())
    ours["tableSizeBytes"] += 7
    (log / crc_name(latest + 1)).write_text(json.dumps(ours))
    assert not probe(spark, t, "validateChecksum", FATAL).startswith("ok")
