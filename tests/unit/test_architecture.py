"""The layout is a contract: the layer direction (import-linter), modules small enough to read, and a
package root that holds no concern of its own (each concern has its folder)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_linter_contracts_hold() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 7 kept, 0 broken" in result.stdout, result.stdout


def test_package_root_imports_nothing_from_airflow() -> None:
    code = "import sys, airflow_delta_maintenance, airflow_delta_maintenance.deltalog.replay.snapshot; print('airflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"


PACKAGE = ROOT / "airflow_delta_maintenance"
MAX_LINES = 500
ROOT_FILES = {"__init__.py", "get_provider_info.py", "version_compat.py", "provider.yaml"}


def test_no_module_is_over_500_lines() -> None:
    sources = [p for p in PACKAGE.rglob("*") if p.suffix in (".py", ".c") and "__pycache__" not in p.parts]
    assert len(sources) > 100  # the package, not an empty directory
    long = {str(p.relative_to(ROOT)): n for p in sources if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"split these modules (at most {MAX_LINES} lines each): {long}"


def test_the_package_root_holds_only_the_package_files() -> None:
    """Every concern lives in a folder; at the root only the version, the provider info (and its
    declaration, provider.yaml) and the Airflow version compatibility module."""
    files = {p.name for p in PACKAGE.iterdir() if p.is_file() and p.suffix != ".so"}
    assert files == ROOT_FILES, sorted(files - ROOT_FILES)
    assert all((p / "__init__.py").is_file() for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"), "every folder is a package"

