"""The benchmarks' harness measures what it says it measures.

``--baseline-root`` compares this checkout's command with another checkout's package in one run;
the "before" process must import that package, not this one (the working directory it runs in).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import _harness  # noqa: E402

PROBE = "import json, airflow_delta_maintenance as p; print(json.dumps({'package': p.__file__}))"


def test_a_baseline_process_imports_the_baseline_checkouts_package(tmp_path: Path) -> None:
    baseline = tmp_path / "old-checkout"
    (baseline / "airflow_delta_maintenance").mkdir(parents=True)
    (baseline / "airflow_delta_maintenance" / "__init__.py").write_text("")
    _, _, reported = _harness.run_measured([_harness.PYTHON, "-c", PROBE], env=_harness.baseline_env(str(baseline)))
    assert Path(reported["package"]).resolve() == (baseline / "airflow_delta_maintenance" / "__init__.py").resolve()


def test_without_a_baseline_the_process_imports_this_checkouts_package() -> None:
    _, _, reported = _harness.run_measured([_harness.PYTHON, "-c", PROBE])
    assert Path(reported["package"]).resolve() == ROOT / "airflow_delta_maintenance" / "__init__.py"
