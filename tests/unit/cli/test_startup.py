"""The command's start-up: building the parser loads no log library, and the installed command
(``console_main``) runs a sub-command without importing pandas (pyarrow would otherwise pull it in
on its first array conversion). Each check runs in a fresh interpreter: imports are per process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from airflow_delta_maintenance.demo.sample_table import create_sample_table

HEAVY = ("pyarrow", "fsspec", "numpy", "pandas", "pydantic", "yaml", "airflow_delta_maintenance.deltalog.replay.snapshot", "airflow_delta_maintenance.maintenance.spark.submit")


def _fresh(code: str) -> dict:
    # faulthandler: a child that dies of a signal names where, in the stderr this failure shows
    out = subprocess.run([sys.executable, "-X", "faulthandler", "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, (out.returncode, out.stdout[-2000:], out.stderr[-4000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_parsing_the_command_line_imports_no_heavy_module() -> None:
    loaded = _fresh(
        f"""
        import json, sys
        from airflow_delta_maintenance.cli import build_parser
        build_parser().parse_args(["checkpoint", "/t", "--json"])
        print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))
        """
    )
    assert loaded == []


@pytest.mark.slow  # 0.7 CPU s: make test runs it; the fast tier (plain pytest) stays under two minutes
def test_the_installed_command_runs_without_pandas(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    create_sample_table(root, commits=3)
    result = _command_in_own_process(["checkpoint", root, "--force", "--json"], tmp_path)
    assert result["rc"] == 0 and not result["out"]["skipped"] and result["out"]["version"] == 2
    assert "pandas" not in result["loaded"]


def test_cleanup_of_a_local_classic_table_imports_neither_fsspec_nor_numpy(tmp_path: Path) -> None:
    """A local table is served through ``os``: fsspec (with asyncio and ssl) is not imported."""
    import deltalake

    root = str(tmp_path / "t")
    create_sample_table(root, commits=3)
    deltalake.DeltaTable(root).create_checkpoint()
    old = time.time() - 60 * 86400
    for f in (tmp_path / "t" / "_delta_log").iterdir():
        os.utime(f, (old, old))
    result = _command_in_own_process(["cleanup", root, "--json", "--execute"], tmp_path)
    assert result["rc"] == 0 and result["out"]["executed"] is True and result["out"]["deleted"] == 2
    assert "fsspec" not in result["loaded"]
    assert "numpy" not in result["loaded"]  # no UUID-named checkpoint: no compatibility checkpoint to write


def _command_in_own_process(argv: list[str], tmp_path: Path, *, block_numpy: bool = False) -> dict:
    """``delta-maintenance ARGV`` through the installed entry point (``console_script``), in a
    process of its own; an exit handler reports which of numpy, pandas and fsspec it loaded."""
    report = tmp_path / "loaded.json"
    code = textwrap.dedent(
        f"""
        import atexit, json, sys
        from airflow_delta_maintenance.cli import common, console_script
        if {block_numpy!r}:  # as decided at start when the UUID-named anchor was not there yet
            sys.meta_path.insert(0, common.BlockedImport("numpy", "not loaded by this cleanup"))
        atexit.register(lambda: open({str(report)!r}, "w").write(json.dumps([m for m in ("numpy", "pandas", "fsspec") if m in sys.modules])))
        sys.argv = ["delta-maintenance", *{argv!r}]
        sys.exit(console_script())
        """
    )
    # faulthandler: a child that dies of a signal names where, in the stderr this failure shows
    done = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 1), (done.returncode, done.stdout[-2000:], done.stderr[-4000:])
    return {"rc": done.returncode, "out": json.loads(done.stdout or "null"), "err": done.stderr, "loaded": json.loads(report.read_text())}


def _uuid_anchored_table(tmp_path: Path) -> Path:
    """A v2Checkpoint table whose cleanup anchor is a UUID-named checkpoint (at 15; one at 5)."""
    from ..deltalog.test_cleanup_hostile import V2, V2_CONF, build, checkpoint

    root = tmp_path / "t"
    build(root, proto=V2, conf=V2_CONF)
    checkpoint(root, 5)
    checkpoint(root, 15)
    return root


@pytest.mark.slow  # 1.0 CPU s: make test runs it; the fast tier (plain pytest) stays under two minutes
def test_cleanup_with_a_uuid_named_anchor_loads_numpy_and_writes_the_compatibility_checkpoint(tmp_path: Path) -> None:
    from ..deltalog.test_cleanup_hostile import log_names

    root = _uuid_anchored_table(tmp_path)
    result = _command_in_own_process(["cleanup", str(root), "--json", "--execute"], tmp_path)
    assert result["rc"] == 0 and result["out"]["needs_compat_checkpoint"] is True, result
    assert "numpy" in result["loaded"] and f"{15:020d}.checkpoint.parquet" in log_names(root)


def test_a_uuid_named_anchor_that_appears_after_the_start_stops_cleanup_before_any_deletion(tmp_path: Path) -> None:
    from ..deltalog.test_cleanup_hostile import log_names

    root = _uuid_anchored_table(tmp_path)
    before = log_names(root)
    result = _command_in_own_process(["cleanup", str(root), "--json", "--execute"], tmp_path, block_numpy=True)
    assert result["rc"] == 1 and result["out"] is None and result["err"].count("\n") == 1 and "numpy" in result["err"], result
    assert log_names(root) == before
