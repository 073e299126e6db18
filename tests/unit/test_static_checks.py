"""ruff and mypy are part of the suite: their configuration is in pyproject.toml, their findings fail here.

mypy keeps its cache in ``.mypy_cache`` (gitignored), so a run after the first only re-checks what
changed (seconds, not the minute a cold check of the Airflow layer takes).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # ruff, mypy and import-linter over the tree: run by make test, or name this file

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing() -> None:
    result = run(str(BIN / "ruff"), "check", "--no-fix", "--output-format", "concise")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_finds_nothing() -> None:
    result = run(str(BIN / "mypy"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues found" in result.stdout, result.stdout


def test_mypy_is_strict_on_the_log_library_and_the_use_cases_only(tmp_path: Path) -> None:
    """The configuration does what it says: an unannotated function is an error in ``deltalog`` and
    ``maintenance``, and checked but allowed elsewhere (``strict = true`` in an override would leak
    to every module; this catches such a regression of the config)."""
    probe = tmp_path / "probe.py"
    probe.write_text("def untyped(x):\n    return x\n")
    targets = {
        "airflow_delta_maintenance/deltalog/__init__.py": True,
        "airflow_delta_maintenance/maintenance/__init__.py": True,
        "airflow_delta_maintenance/coordinators/__init__.py": False,
    }
    shadows = [arg for target in targets for arg in ("--shadow-file", target, str(probe))]
    result = run(str(BIN / "mypy"), "--cache-dir", str(tmp_path / "cache"), *shadows, *targets)
    for target, strict in targets.items():
        flagged = f"{target}:1: error: Function is missing a type annotation" in result.stdout
        assert flagged is strict, (target, result.stdout)
