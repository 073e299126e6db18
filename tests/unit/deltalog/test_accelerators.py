"""The optional accelerators (accel/, the ``airflow-delta-maintenance-accel`` distribution): loaded
as ``DELTA_MAINTENANCE_ACCEL`` says, never a mismatched build, and versioned with the package."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

import airflow_delta_maintenance
from airflow_delta_maintenance.deltalog._runtime import accelerators
from airflow_delta_maintenance.deltalog.replay import commit_stream, file_keys
from airflow_delta_maintenance.deltalog.stats import fast_stats

REPO = Path(__file__).resolve().parents[3]
PROBE = ("from airflow_delta_maintenance.deltalog.stats import fast_stats; from airflow_delta_maintenance.deltalog.replay import commit_stream, file_keys; "
         "print(fast_stats.AVAILABLE, file_keys.AVAILABLE, commit_stream.AVAILABLE)")


def probe(cwd: Path, mode: str | None, fake: str | None = None) -> subprocess.CompletedProcess[str]:
    """A fresh interpreter importing the library under ``mode``; ``fake`` is the ``__init__.py`` of an
    accelerator package put in front of the real one, whose extension modules fail to import."""
    env = {k: v for k, v in os.environ.items() if k != accelerators.ENV}
    if mode is not None:
        env[accelerators.ENV] = mode
    env["PYTHONPATH"] = str(REPO)  # the checkout's package, installed or not (the log library's no-Airflow run)
    if fake is not None:
        (cwd / "fake" / accelerators.PACKAGE).mkdir(parents=True, exist_ok=True)
        (cwd / "fake" / accelerators.PACKAGE / "__init__.py").write_text(fake)
        for module in ("_stats_json", "_file_keys", "_log_lines"):  # found before an editable install's own
            (cwd / "fake" / accelerators.PACKAGE / f"{module}.py").write_text("raise ImportError('not built')\n")
        env["PYTHONPATH"] = os.pathsep.join([str(cwd / "fake"), str(REPO)])
    return subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300, cwd=cwd)


def test_the_accelerators_are_used_as_configured() -> None:
    installed = importlib.util.find_spec(accelerators.PACKAGE) is not None
    expected = {"off": False, "require": True, "auto": installed}[accelerators.MODE]
    assert (expected, expected, expected) == (fast_stats.AVAILABLE, file_keys.AVAILABLE, commit_stream.AVAILABLE), (accelerators.MODE, installed)


def test_off_goes_without_them_even_where_installed(tmp_path: Path) -> None:
    out = probe(tmp_path, "off")
    assert out.returncode == 0 and out.stdout.split() == ["False", "False", "False"], out.stderr[-2000:]


@pytest.mark.slow  # 1.1 CPU s: make test runs it; the fast tier (plain pytest) stays under two minutes
@pytest.mark.skipif(importlib.util.find_spec(accelerators.PACKAGE) is None, reason="the accelerators are not installed here")
def test_auto_and_require_use_them_where_installed(tmp_path: Path) -> None:
    for mode in (None, "auto", "REQUIRE"):
        out = probe(tmp_path, mode)
        assert out.returncode == 0 and out.stdout.split() == ["True", "True", "True"], (mode, out.stderr[-2000:])


def test_a_build_of_another_interface_is_not_used(tmp_path: Path) -> None:
    """Upgraded apart from the package, the accelerators may take other arguments: auto warns and
    goes without them, require refuses to start."""
    fake = f"__version__ = '9.9.9'\nINTERFACE = {accelerators.INTERFACE + 1}\n"
    out = probe(tmp_path, None, fake)
    assert out.returncode == 0 and out.stdout.split() == ["False", "False", "False"], out.stderr[-2000:]
    assert "has interface 2, this package needs 1" in out.stderr
    refused = probe(tmp_path, "require", fake)
    assert refused.returncode != 0 and "has interface 2" in refused.stderr.splitlines()[-1], refused.stderr[-2000:]


@pytest.mark.slow  # 0.7 CPU s: make test runs it; the fast tier (plain pytest) stays under two minutes
def test_require_without_them_names_the_extra(tmp_path: Path) -> None:
    out = probe(tmp_path, "require", f"INTERFACE = {accelerators.INTERFACE}\n")  # a package without its extensions
    last = out.stderr.strip().splitlines()[-1]
    assert out.returncode != 0 and "DELTA_MAINTENANCE_ACCEL=require" in last and "airflow-delta-maintenance[accel]" in last, last
    quiet = probe(tmp_path, "auto", f"INTERFACE = {accelerators.INTERFACE}\n")
    assert quiet.returncode == 0 and quiet.stdout.split() == ["False", "False", "False"] and not quiet.stderr, quiet.stderr[-2000:]


def test_an_unknown_mode_is_an_error(tmp_path: Path) -> None:
    out = probe(tmp_path, "fast")
    assert out.returncode != 0 and "DELTA_MAINTENANCE_ACCEL='fast': expected one of auto, off, require" in out.stderr, out.stderr[-2000:]


def test_the_accelerators_are_released_with_the_package() -> None:
    """One version for both distributions, and the ``[accel]`` extra pins it."""
    init = (REPO / "accel" / accelerators.PACKAGE / "__init__.py").read_text()
    version = re.search(r'^__version__ = "(.+)"$', init, re.M)
    interface = re.search(r"^INTERFACE = (\d+)$", init, re.M)
    assert version and version.group(1) == airflow_delta_maintenance.__version__
    assert interface and int(interface.group(1)) == accelerators.INTERFACE
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["accel"] == [f"airflow-delta-maintenance-accel=={airflow_delta_maintenance.__version__}"]
