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

from airflow_delta_maintenance.demo.sample_table import create_sample_table

HEAVY = ("pyarrow", "fsspec", "numpy", "pandas", "airflow_delta_maintenance.deltalog.snapshot", "airflow_delta_maintenance.maintenance.spark_submit")


def _fresh(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=True, timeout=120)
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


def test_the_installed_command_runs_without_pandas(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    create_sample_table(root, commits=3)
    result = _fresh(
        f"""
        import contextlib, io, json, sys
        sys.argv = ["delta-maintenance", "checkpoint", {root!r}, "--json"]
        from airflow_delta_maintenance.cli import console_main
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = console_main()
        print(json.dumps({{"rc": rc, "out": json.loads(out.getvalue()), "pandas": "pandas" in sys.modules}}))
        """
    )
    assert result["rc"] == 0 and result["out"]["written"] and result["out"]["checkpoint_version"] == 2
    assert result["pandas"] is False


def test_cleanup_of_a_local_table_never_imports_fsspec(tmp_path: Path) -> None:
    """A local table is served through ``os``: fsspec (with asyncio and ssl) is not imported."""
    import deltalake

    root = str(tmp_path / "t")
    create_sample_table(root, commits=3)
    deltalake.DeltaTable(root).create_checkpoint()
    old = time.time() - 60 * 86400
    for f in (tmp_path / "t" / "_delta_log").iterdir():
        os.utime(f, (old, old))
    result = _fresh(
        f"""
        import contextlib, io, json, sys
        sys.argv = ["delta-maintenance", "cleanup", {root!r}, "--json", "--execute"]
        from airflow_delta_maintenance.cli import console_main
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = console_main()
        print(json.dumps({{"rc": rc, "out": json.loads(out.getvalue()), "fsspec": "fsspec" in sys.modules}}))
        """
    )
    assert result["rc"] == 0 and result["out"]["executed"] is True and result["out"]["deleted"] == 2
    assert result["fsspec"] is False
