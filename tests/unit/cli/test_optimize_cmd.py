"""``delta-maintenance optimize`` as a user runs it: no flags runs (like delta-spark/delta-rs),
``--dry-run`` plans, ``--where`` selects partitions, bad input is one line and exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(Path(sys.executable).with_name("delta-maintenance")), *args], capture_output=True, text=True, timeout=300)


def table(tmp_path: Path) -> str:
    path = str(tmp_path / "t")
    for i in range(3):
        for region in ("us", "eu"):
            deltalake.write_deltalake(path, pa.table({"id": [i], "region": [region]}), mode="append", partition_by=["region"])
    return path


def test_without_flags_it_compacts(tmp_path: Path) -> None:
    path = table(tmp_path)
    out = cli("optimize", path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("optimize: compacted 6 file(s)") and "files 6 → 2" in out.stdout
    assert len(deltalake.DeltaTable(path).file_uris()) == 2 and deltalake.DeltaTable(path).version() == 6


@pytest.mark.slow  # 0.8 CPU s: make test runs it; the fast tier (plain pytest) stays under two minutes
def test_dry_run_and_where_plan_only(tmp_path: Path) -> None:
    path = table(tmp_path)
    out = cli("optimize", path, "--dry-run", "--where", "region = 'us'", "--json", "--show-bins")
    record = json.loads(out.stdout)
    assert record["dry_run"] and record["bins"] == 1 and record["bin_list"][0]["partition"] == {"region": "us"}
    assert record["plan"]["files_in"] == 3 and deltalake.DeltaTable(path).version() == 5


@pytest.mark.slow  # 1.2 CPU s: make test runs it; the fast tier (plain pytest) stays under two minutes
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    path = table(tmp_path)
    out = cli("optimize", path, "--where", "id > 3")
    assert out.returncode == 2 and "'id' is not a partition column" in out.stderr and len(out.stderr.splitlines()) == 1
    out = cli("optimize", path, "--target-file-size", "big")
    assert out.returncode == 2 and "--target-file-size" in out.stderr
    out = cli("optimize", path, "--engine", "flink")
    assert out.returncode == 2 and "invalid choice: 'flink'" in out.stderr


def _relog(path: str, rewrite) -> str:
    """Rewrite the first ``add.path`` of the log (as another writer could have spelled it)."""
    for commit in sorted(Path(path, "_delta_log").glob("*.json")):
        lines = commit.read_text().splitlines()
        for i, line in enumerate(lines):
            action = json.loads(line)
            if "add" in action:
                old = action["add"]["path"]
                action["add"]["path"] = rewrite(old)
                lines[i] = json.dumps(action)
                commit.write_text("\n".join(lines) + "\n")
                return old
    raise AssertionError("no add action")


@pytest.mark.slow  # 1.3 CPU s: make test runs it; the fast tier (plain pytest) stays under two minutes
def test_logged_paths_are_resolved_as_readers_resolve_them_and_never_on_another_store(tmp_path: Path) -> None:
    """OPTIMIZE and VACUUM resolve a logged path with one resolver: an empty segment is read as the
    ``deltalake`` wheel and delta-spark read it; a path of another store (``hdfs:///<root>/…`` on a
    local table) is refused by name, never read as the local file it resembles."""
    path = table(tmp_path / "a")
    _relog(path, lambda p: p.replace("/", "//", 1))
    out = cli("optimize", path)
    assert out.returncode == 0 and "files 6 → 2" in out.stdout, out.stderr
    assert sorted(deltalake.DeltaTable(path).to_pyarrow_table().column("id").to_pylist()) == [0, 0, 1, 1, 2, 2]
    path = table(tmp_path / "b")
    old = _relog(path, lambda p: f"hdfs://{path}/{p}")
    out = cli("optimize", path)
    assert out.returncode != 0 and f"hdfs://{path}/{old}" in out.stderr and "another store" in out.stderr and len(out.stderr.splitlines()) == 1, out.stderr
    assert deltalake.DeltaTable(path).version() == 5


def test_stats_that_are_not_an_object_do_not_stop_it(tmp_path: Path) -> None:
    """An ``add`` whose ``stats`` is JSON but no object (another writer's) has no known row count:
    the file is compacted all the same (was an ``AttributeError`` traceback from the task builder)."""
    path = table(tmp_path)
    commit = sorted(Path(path, "_delta_log").glob("*.json"))[1]
    actions = [json.loads(line) for line in commit.read_text().splitlines()]
    for action in actions:
        if "add" in action:
            action["add"]["stats"] = "[1]"
    commit.write_text("".join(json.dumps(a) + "\n" for a in actions))
    out = cli("optimize", path)
    assert out.returncode == 0 and "files 6 → 2" in out.stdout, out.stderr
    assert sorted(deltalake.DeltaTable(path).to_pyarrow_table().column("id").to_pylist()) == [0, 0, 1, 1, 2, 2]


def test_a_string_over_parquets_statistics_limit_still_gets_its_bounds(tmp_path: Path) -> None:
    """The compacted file's string bounds come from the Parquet writer's statistics, which keep
    none for a column chunk whose largest value is over their size limit: the command, run with no
    flags, reads that column back and writes the bounds delta-spark would."""
    import pyarrow.parquet as pq

    path = str(tmp_path / "t")
    for i, name in enumerate(["m-middle", "a-first", "z" * 5000]):
        deltalake.write_deltalake(path, pa.table({"id": pa.array([i], pa.int64()), "name": [name]}), mode="append")
    out = cli("optimize", path)
    assert out.returncode == 0, out.stderr
    commit = [json.loads(line) for line in (Path(path) / "_delta_log" / f"{3:020d}.json").read_text().splitlines()]
    (add,) = [a["add"] for a in commit if "add" in a]
    meta = pq.ParquetFile(Path(path) / add["path"]).metadata
    assert not meta.row_group(0).column(meta.schema.names.index("name")).statistics.has_min_max  # nothing from Parquet
    stats = json.loads(add["stats"])
    assert stats["minValues"] == {"id": 0, "name": "a-first"} and stats["maxValues"] == {"id": 2, "name": "z" * 32 + "\x7f"}
