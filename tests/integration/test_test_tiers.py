"""The suite's tiers hold as the issue words them: the log library's tests run where Airflow (and
the accelerators) are not installed, and the fast tier runs on the lowest Airflow the package
claims (requirements/airflow-min.lock: pyproject's ``apache-airflow>=3.0``, with the dev lock's
other pins)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomllib

REPO = Path(__file__).resolve().parents[2]
UV = str(Path(sys.executable).with_name("uv"))
# A venv built per tier and a whole test run in each (about 15 minutes on two cores): outside
# make test's budget, run by make test-tiers.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("DELTA_TEST_TIERS") != "1", reason="make test-tiers runs the tiers (DELTA_TEST_TIERS=1)"),
]


@pytest.fixture(autouse=True, scope="module")
def _prune_uv_cache() -> Iterator[None]:
    """The lowest-Airflow tier installs pyspark, an sdist only: behind a registry that answers every
    revalidation "modified", each install unpacks and builds it into a new revision of the user's uv
    cache and leaves the old one behind (~1.9 GB a run; the Makefile prunes after the dev install)."""
    yield
    run([UV, "cache", "prune", "-q"])


def run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, **kwargs)  # type: ignore[call-overload]
    assert out.returncode == 0, f"{cmd}: {out.stdout[-4000:]}\n{out.stderr[-3000:]}"
    return out


def venv(path: Path) -> str:
    run([UV, "venv", "-q", str(path), "--python", sys.executable])
    return str(path / "bin" / "python")


def env_without(*prefixes: str) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}


def test_the_log_library_tests_run_without_airflow_or_accelerators(tmp_path: Path) -> None:
    """``tests/unit/deltalog`` and ``tests/golden`` in a venv with only the library's own
    dependencies and the test tools: no Airflow, no provider, no accelerators (the pure path, as a
    machine without a C compiler runs it; ``make test`` runs the rest with them)."""
    python = venv(tmp_path / "venv")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    own = [d for d in [*project["dependencies"], *extras["azure"], *extras["gcs"]] if not d.startswith("apache-airflow")]  # the stores' file systems too
    tools = ["pytest", "pytest-asyncio", "pytest-timeout", "hypothesis", "deltalake"]
    run([UV, "pip", "install", "-q", "--python", python, "-c", str(REPO / "requirements" / "dev.lock"), *own, *tools])
    missing = run([python, "-c", "import importlib.util as u; print([m for m in ('airflow', 'airflow_delta_maintenance_accel') if u.find_spec(m)])"], cwd=tmp_path)
    assert missing.stdout.strip() == "[]", missing.stdout
    out = run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit/deltalog", "tests/golden"],
              cwd=REPO, env=env_without("AIRFLOW", "PYTHON", "DELTA_MAINTENANCE_ACCEL", "VIRTUAL_ENV"))
    last = out.stdout.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", last) and "failed" not in last and "error" not in last, out.stdout[-3000:]


def test_the_log_library_tests_run_on_the_lowest_versions_claimed(tmp_path: Path) -> None:
    """``tests/unit/deltalog`` and ``tests/golden`` with every dependency of the library at the
    lowest version pyproject claims (uv's lowest-direct resolution; the test tools at the dev
    lock's pins), without the accelerators. pyarrow's floor is checked to be what was installed:
    a floor nothing tests is a guess (16 was claimed, and 16 to 19.0.0 each fail here)."""
    python = venv(tmp_path / "venv")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    own = [d for d in [*project["dependencies"], *extras["azure"], *extras["gcs"]] if not d.startswith("apache-airflow")]
    pins = {line.split("==")[0]: line for line in (REPO / "requirements" / "dev.lock").read_text().splitlines() if "==" in line}
    tools = [pins[t] for t in ("pytest", "pytest-asyncio", "pytest-timeout", "pytest-xdist", "hypothesis", "deltalake")]
    run([UV, "pip", "install", "-q", "--resolution", "lowest-direct", "--python", python, *own, *tools])
    floor = next(re.match(r"pyarrow>=([\d.]+)", d).group(1) for d in own if d.startswith("pyarrow>="))  # type: ignore[union-attr]
    installed = run([python, "-c", "import pyarrow; print(pyarrow.__version__)"], cwd=tmp_path).stdout.strip()
    assert installed == floor, (installed, floor)
    out = run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "tests/unit/deltalog", "tests/golden"],
              cwd=REPO, env=env_without("AIRFLOW", "PYTHON", "VIRTUAL_ENV") | {"DELTA_MAINTENANCE_ACCEL": "off"})
    last = out.stdout.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", last) and "failed" not in last and "error" not in last, out.stdout[-3000:]


def test_the_fast_tier_runs_on_the_lowest_airflow_claimed(tmp_path: Path) -> None:
    floor = next(d for d in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"] if d.startswith("apache-airflow>="))
    lowest = re.match(r"apache-airflow>=([\d.]+)", floor).group(1)  # type: ignore[union-attr]
    lock = (REPO / "requirements" / "airflow-min.lock").read_text()
    assert f"\napache-airflow=={lowest}.0\n" in lock or f"\napache-airflow=={lowest}\n" in lock, f"airflow-min.lock is not on {floor}"
    python = venv(tmp_path / "venv")
    run([UV, "pip", "install", "-q", "--python", python, "-r", str(REPO / "requirements" / "airflow-min.lock")])
    run([UV, "pip", "install", "-q", "--python", python, "--no-deps", "-e", str(REPO), "-e", str(REPO / "accel")])
    env = env_without("AIRFLOW", "PYTHON", "VIRTUAL_ENV") | {"AIRFLOW_HOME": str(tmp_path / "airflow")}
    version = run([python, "-c", "import airflow; print(airflow.__version__)"], cwd=tmp_path, env=env)
    assert version.stdout.split()[-1].startswith(lowest), version.stdout
    # no arguments: the fast tier; -rfE lists every failure and error by node id
    out = subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE"], cwd=REPO, env=env, capture_output=True, text=True, timeout=3600)
    failed = sorted(set(re.findall(r"^(?:FAILED|ERROR) (\S+)", out.stdout, re.M)))
    assert re.search(r"\d+ passed", out.stdout.strip().splitlines()[-1]), out.stdout[-3000:]
    assert not failed, f"failures on Airflow {lowest} (fix them in version_compat, or raise the floor claimed):\n" + "\n".join(failed)
