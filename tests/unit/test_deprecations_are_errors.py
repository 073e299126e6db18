"""A deprecation raised from our own code fails the test that triggers it (pyproject's filterwarnings).

A warning belongs to the module it is attributed to (the caller of the deprecated API, for a
``stacklevel=2`` warning such as Airflow's). ``warn_explicit`` attributes one exactly as a call from
that module would.
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from airflow.exceptions import AirflowProviderDeprecationWarning, RemovedInAirflow4Warning

ROOT = Path(__file__).resolve().parents[2]
OURS = "airflow_delta_maintenance.deltalog.model.paths"


def warn_from(module: str, category: type[Warning]) -> None:
    warnings.warn_explicit("this API is deprecated", category, f"{module.replace('.', '/')}.py", 1, module=module)


@pytest.mark.parametrize(
    "category", [DeprecationWarning, PendingDeprecationWarning, RemovedInAirflow4Warning, AirflowProviderDeprecationWarning]
)
@pytest.mark.parametrize("module", [OURS, "airflow_delta_maintenance.operators.checkpoint", "tests.unit.test_deprecations_are_errors"])
def test_a_deprecation_from_our_code_is_raised(module: str, category: type[Warning]) -> None:
    with pytest.raises(category, match="deprecated"):
        warn_from(module, category)


def test_a_third_party_deprecation_is_not_our_failure() -> None:
    with warnings.catch_warnings(record=True) as seen:
        warn_from("somelib.sub", DeprecationWarning)
    assert [w.category for w in seen] == [DeprecationWarning]


@pytest.mark.slow  # a whole pytest run in a process of its own (4.6 s CPU): make test runs it, the fast tier does not
def test_a_deprecation_from_our_code_fails_the_run(tmp_path: Path) -> None:
    """End to end: pytest with this repository's configuration and conftest exits 1 on such tests,
    also in a test that is the first to import Airflow's configuration (whose own "default" filter
    for the regex "airflow" would match our modules; tests/conftest.py defuses it)."""
    probe = tmp_path / "test_probe.py"
    probe.write_text(
        "import warnings\n\n"
        "def test_calls_a_deprecated_api():\n"
        f"    warnings.warn_explicit('old API', DeprecationWarning, 'x.py', 1, module={OURS!r})\n\n"
        "def test_calls_one_after_importing_airflow():\n"
        "    import airflow.configuration\n"
        f"    warnings.warn_explicit('old API', DeprecationWarning, 'x.py', 2, module={OURS!r})\n"
    )
    argv = ["-q", "-p", "no:cacheprovider", "-p", "tests.conftest", "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT), str(probe)]
    result = subprocess.run([sys.executable, "-m", "pytest", *argv], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "2 failed" in result.stdout and "DeprecationWarning: old API" in result.stdout, result.stdout
