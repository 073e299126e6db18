"""The layout is a contract: the layer direction (import-linter), modules small enough to read, and a
package root that holds no concern of its own (each concern has its folder)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]


def test_import_linter_contracts_hold() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 7 kept, 0 broken" in result.stdout, result.stdout


# What each Airflow-free contract's sources may import of the package (everything else must be
# forbidden by name): a new folder is then forbidden to them until someone decides otherwise.
MAY_IMPORT = {
    ("deltalog",): set(),
    ("coordinators",): set(),
    ("maintenance", "cli"): {"deltalog", "coordinators", "spark_jobs", "fleet", "demo"},  # cli: fleet, demo's sample table
    ("fleet",): {"deltalog", "coordinators", "maintenance", "spark_jobs"},
    ("spark_jobs",): {"deltalog"},
}


def _contracts() -> list[dict]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def _names(folder: Path) -> set[str]:
    return {p.stem for p in folder.iterdir() if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()}


def test_the_contracts_cover_every_subpackage() -> None:
    """A folder added to the package or to ``deltalog`` is placed in the contracts, not left out of
    them (import-linter checks only what a contract names)."""
    pkg = "airflow_delta_maintenance."
    (layered,) = [c for c in _contracts() if c["type"] == "layers" and c["containers"] == [pkg + "deltalog"]]
    in_layers = {name.strip() for layer in layered["layers"] for name in layer.split("|")}
    assert _names(PACKAGE / "deltalog") - in_layers == set(), "place these deltalog subpackages in the layers contract"
    top = _names(PACKAGE) - {"get_provider_info"}
    free = {tuple(m.removeprefix(pkg) for m in c["source_modules"]): c for c in _contracts() if "airflow" in c.get("forbidden_modules", ())}
    assert set(free) == set(MAY_IMPORT), sorted(free)
    for sources, contract in free.items():
        forbidden = {m.removeprefix(pkg) for m in contract["forbidden_modules"] if m.startswith(pkg)}
        unplaced = top - set(sources) - forbidden - MAY_IMPORT[sources]
        assert not unplaced, f"{contract['name']!r}: forbid {sorted(unplaced)} or allow them here"


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

