"""VACUUM as delta-spark 4.4 and the ``deltalake`` wheel do it, on copies of zoo tables with stray
files planted (hidden, partition-like, young, old, empty directories, a symlink out of the table):
dry-run file sets in FULL and LITE mode under several retentions, the retention check, the VACUUM
START/END commits and ``_last_vacuum_info`` of a real run, and LITE after early commits are gone."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from ..table_zoo import Zoo, ZooTable
from ..zoo_oracle import compare_versions
from ..zoo_spark_tables import session_conf
from .common import LOG, commit, error_line, files_under, latest, write_json

DAY = 86_400
# each VACUUM is several Spark jobs (listing, joins): a minute on a busy 2-core box, so few tables
TABLES = ["spark_deletion_vectors", "spark_cdf", "spark_column_mapping_name", "spark_special_partitions", "spark_partitioned", "wheel_partitioned"]
REAL_RUNS = {"spark_deletion_vectors", "spark_cdf", "spark_special_partitions"}
CHECK_OFF = {"spark__databricks__delta__retentionDurationCheck__enabled": "false"}


def plant_strays(t: ZooTable, outside: Path) -> dict[str, str]:
    """Untracked files and directories a VACUUM must classify; returns each one's purpose."""
    first_data = next(p for p in files_under(t.path) if p.endswith(".parquet") and not p.startswith(("_delta_log", "_change_data")))
    partition_dir = os.path.dirname(first_data)
    strays = {
        "stray-root.parquet": "untracked file at the root",
        ".hidden-file": "hidden file at the root",
        "_underscore-file": "underscore file at the root",
        "_tmp_dir/x.parquet": "file in an underscore directory",
        ".hidden_dir/x.parquet": "file in a dot directory",
        "_delta_index/x.idx": "file in _delta_index (delta-spark treats it as data)",
        "_change_data/stray.parquet": "untracked file in _change_data",
        "deep/a/b/c.parquet": "file three directories deep, not a partition",
        "metadata/v1.metadata.json": "the Iceberg metadata directory name (hidden only under UniForm)",
        "young-stray.parquet": "untracked file written just now (mtime now)",
        "stray-5-days.parquet": "untracked file 5 days old (between 100 and 168 hours)",
    }
    if partition_dir:
        strays[f"{partition_dir}/stray-in-partition.parquet"] = "untracked file inside a live partition directory"
        first = partition_dir.split("/")[0]
        if "=" in first:
            strays[f"{first.split('=')[0]}=zzz-only-strays/stray.parquet"] = "a partition-like directory holding only a stray"
    for rel in strays:
        p = t.path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"not parquet")
    (t.path / "empty_dir").mkdir()
    strays["empty_dir/"] = "an empty directory"
    outside.mkdir(parents=True, exist_ok=True)
    (outside / "outside.parquet").write_bytes(b"outside the table")
    os.symlink(outside, t.path / "link_out")
    strays["link_out/outside.parquet"] = "a file reached through a symlinked directory pointing outside the table"
    return strays


def age_everything(t: ZooTable, days: float) -> None:
    """Every data file and directory (not the log, not the young strays) ``days`` old by mtime."""
    old = time.time() - days * DAY
    for dirpath, dirs, names in os.walk(t.path):
        if dirpath.startswith(str(t.path / LOG)):
            continue
        for n in names + dirs:
            p = Path(dirpath) / n
            if not p.is_symlink():
                os.utime(p, (old, old))
    five = time.time() - 5 * DAY
    os.utime(t.path / "stray-5-days.parquet", (five, five))
    now = time.time()
    os.utime(t.path / "young-stray.parquet", (now, now))


def relative(t: ZooTable, paths: list[str], *, decode: bool = True) -> list[str]:
    """Paths relative to the table root. ``decode=False`` for delta-spark's and the wheel's VACUUM
    output: both give the name on disk (a partition directory ``p=100%25`` is literal)."""
    root = str(t.path).rstrip("/") + "/"
    out = []
    for p in paths:
        p = p.removeprefix("file://").removeprefix("file:")
        p = p[len(root) :] if p.startswith(root) else p
        out.append(unquote(p) if decode else p)
    return sorted(out)


def spark_vacuum(spark: Any, t: ZooTable, sql_tail: str, conf: dict[str, str] | None = None) -> dict[str, Any]:
    statement = f"VACUUM delta.`{t.path}` {sql_tail}"
    try:
        with session_conf(spark, **(conf or {})):
            rows = spark.sql(statement).collect()
        return {"sql": statement.replace(str(t.path), "<table>"), "conf": conf or {}, "paths": relative(t, [r[0] for r in rows], decode=False)}
    except Exception as exc:  # noqa: BLE001 - a refusal is a reference fact: recorded, not raised
        return {"sql": statement.replace(str(t.path), "<table>"), "conf": conf or {}, "error": error_line(exc)}


def wheel_vacuum(t: ZooTable, **kwargs: Any) -> dict[str, Any]:
    import deltalake

    call = f"vacuum({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"
    try:
        paths = deltalake.DeltaTable(str(t.path)).vacuum(**kwargs)
        return {"call": call, "raw_sample": sorted(paths)[:3], "paths": relative(t, list(paths), decode=False)}
    except Exception as exc:  # noqa: BLE001 - a refusal is a reference fact: recorded, not raised
        return {"call": call, "error": error_line(exc)}


def capture_table(spark: Any, zoo: Zoo, name: str, work: Path, out: Path) -> None:
    t = zoo.copy(name, work / f"vacuum-{name}")
    strays = plant_strays(t, work / f"outside-{name}")
    age_everything(t, 10)
    result: dict[str, Any] = {"zoo_table": name, "strays": strays, "files_before": files_under(t.path)}
    dry = {
        "full_default_retention": spark_vacuum(spark, t, "DRY RUN"),
        "full_retain_0_check_on": spark_vacuum(spark, t, "RETAIN 0 HOURS DRY RUN"),
        "full_retain_0": spark_vacuum(spark, t, "RETAIN 0 HOURS DRY RUN", CHECK_OFF),
        "full_retain_100_check_on": spark_vacuum(spark, t, "RETAIN 100 HOURS DRY RUN"),
        "full_retain_100_window_honoured": spark_vacuum(spark, t, "RETAIN 100 HOURS DRY RUN", {**CHECK_OFF, "spark__databricks__delta__vacuum__retentionWindowIgnore__enabled": "false"}),
        "lite_default_retention": spark_vacuum(spark, t, "LITE DRY RUN"),
        "lite_retain_0": spark_vacuum(spark, t, "LITE RETAIN 0 HOURS DRY RUN", CHECK_OFF),
    }
    wheel = {
        "default": wheel_vacuum(t, dry_run=True),
        "retain_0_lite": wheel_vacuum(t, retention_hours=0, dry_run=True, enforce_retention_duration=False, full=False),
        "retain_0_full": wheel_vacuum(t, retention_hours=0, dry_run=True, enforce_retention_duration=False, full=True),
        "retain_0_enforced": wheel_vacuum(t, retention_hours=0, dry_run=True),
        "retain_100_lite": wheel_vacuum(t, retention_hours=100, dry_run=True, enforce_retention_duration=False),
        "retain_100_full": wheel_vacuum(t, retention_hours=100, dry_run=True, enforce_retention_duration=False, full=True),
    }
    result["spark_dry_runs"], result["wheel_dry_runs"] = dry, wheel
    a, b = set(dry["full_retain_0"].get("paths", [])), set(wheel["retain_0_full"].get("paths", []))
    result["full_retain_0_only_spark"], result["full_retain_0_only_wheel"] = sorted(a - b), sorted(b - a)
    a, b = set(dry["lite_retain_0"].get("paths", [])), set(wheel["retain_0_lite"].get("paths", []))
    result["lite_retain_0_only_spark"], result["lite_retain_0_only_wheel"] = sorted(a - b), sorted(b - a)

    if name in REAL_RUNS:
        result["real_runs"] = real_runs(spark, t)
    write_json(out / "vacuum" / f"{name}.json", result)
    counts = {k: len(r.get("paths", [])) for k, r in (("full0", dry["full_retain_0"]), ("lite0", dry["lite_retain_0"]), ("wheel_full0", wheel["retain_0_full"]))}
    print(f"vacuum {name}: {counts}", flush=True)


def real_runs(spark: Any, t: ZooTable) -> dict[str, Any]:
    """A real FULL run with VACUUM logging, then a LITE one (the symlink removed first: never delete through it)."""
    os.unlink(t.path / "link_out")
    before = latest(t.path)
    logging_on = {**CHECK_OFF, "spark__databricks__delta__vacuum__logging__enabled": "true"}
    real: dict[str, Any] = {"full": spark_vacuum(spark, t, "RETAIN 0 HOURS", logging_on)}
    real["commits"] = {v: commit(t.path, v) for v in range(before + 1, latest(t.path) + 1)}
    info = t.path / LOG / "_last_vacuum_info"
    real["last_vacuum_info_after_full"] = info.read_text() if info.exists() else None
    real["files_after_full"] = files_under(t.path)
    before = latest(t.path)
    real["lite"] = spark_vacuum(spark, t, "LITE RETAIN 0 HOURS", logging_on)
    real["lite_commits"] = {v: commit(t.path, v) for v in range(before + 1, latest(t.path) + 1)}
    real["last_vacuum_info_after_lite"] = info.read_text() if info.exists() else None
    real["versions_that_no_longer_read_as_recorded"] = compare_versions(t.path, t.manifest, spark=spark)
    return real


def capture_lite_without_early_commits(spark: Any, zoo: Zoo, work: Path, out: Path) -> None:
    """spark_partitioned has a checkpoint at 5: drop commits 0..4 as metadata cleanup would, then LITE."""
    t = zoo.copy("spark_partitioned", work / "vacuum-lite-no-early-commits")
    for v in range(5):
        for ext in ("json", "crc"):
            (t.path / LOG / f"{v:020d}.{ext}").unlink(missing_ok=True)
    result = {
        "setup": "spark_partitioned with commits 0..4 (and their .crc) deleted; checkpoint 5 kept",
        "lite": spark_vacuum(spark, t, "LITE DRY RUN"),
        "lite_retain_0": spark_vacuum(spark, t, "LITE RETAIN 0 HOURS DRY RUN", CHECK_OFF),
        "full_retain_0": spark_vacuum(spark, t, "RETAIN 0 HOURS DRY RUN", CHECK_OFF),
    }
    (t.path / LOG / "_last_vacuum_info").write_text('{"latestCommitVersionOutsideOfRetentionWindow":4}')
    result["lite_retain_0_with_last_vacuum_info_4"] = spark_vacuum(spark, t, "LITE RETAIN 0 HOURS DRY RUN", CHECK_OFF)
    write_json(out / "vacuum" / "lite-without-early-commits.json", result)
    shutil.rmtree(t.path)


def run(spark: Any, zoo: Zoo, work: Path, out: Path, only: set[str] | None = None) -> None:
    for name in TABLES:
        if not only or name in only:
            capture_table(spark, zoo, name, work, out)
    if not only or "lite-without-early-commits" in only:
        capture_lite_without_early_commits(spark, zoo, work, out)
