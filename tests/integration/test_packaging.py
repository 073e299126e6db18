"""The package as a user gets it: a wheel built from the repository, installed into a fresh venv
(dependencies from uv's cache, pinned by the dev lock), with nothing of the repository on the
path. The DAG file and the demo ship in it; the [spark] extra adds no pyspark."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
UV = str(Path(sys.executable).with_name("uv"))
pytestmark = [pytest.mark.integration, pytest.mark.slow]


def run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kwargs)  # type: ignore[call-overload]
    assert out.returncode == 0, f"{cmd}: {out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A throwaway venv with the wheel installed; returns its bin directory."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"  # a clean copy: the build must not write into the worktree
    files = run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO).stdout.split()
    for name in files:
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    run([UV, "build", "--wheel", "-q", "-o", str(root / "dist"), str(source)])
    (wheel,) = (root / "dist").glob("airflow_delta_maintenance-*.whl")
    venv = root / "venv"
    run([UV, "venv", "-q", str(venv), "--python", sys.executable])
    run([UV, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), "--offline", "-c", str(REPO / "requirements" / "dev.lock"), f"{wheel}[spark]"])
    return venv / "bin"


def clean_env(bin_dir: Path, home: Path) -> dict[str, str]:
    """No repository, no dev venv, no Spark distribution on any path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PYTHON", "SPARK", "DELTA_"))}
    env.update(PATH=f"{bin_dir}{os.pathsep}/usr/bin:/bin", HOME=str(home), SPARK_LOCAL_IP="127.0.0.1")
    return env


def test_the_spark_extra_installs_no_pyspark_next_to_pyspark_client(installed: Path) -> None:
    listed = run([UV, "pip", "list", "--python", str(installed / "python"), "--format", "freeze"]).stdout
    names = {line.split("==")[0].lower() for line in listed.splitlines()}
    assert "pyspark-client" in names and "pyspark" not in names, sorted(n for n in names if "spark" in n)


def test_init_dags_and_validate_config_from_the_wheel(installed: Path, tmp_path: Path) -> None:
    env = clean_env(installed, tmp_path)
    out = run([str(installed / "delta-maintenance"), "init-dags", str(tmp_path / "dags")], env=env, cwd=tmp_path)
    assert sorted(p.name for p in (tmp_path / "dags").iterdir()) == ["delta_maintenance.py", "tables.yaml"], out.stdout
    run([str(installed / "delta-maintenance"), "validate-config", str(tmp_path / "dags" / "tables.yaml")], env=env, cwd=tmp_path)
    again = subprocess.run([str(installed / "delta-maintenance"), "init-dags", str(tmp_path / "dags")], env=env, capture_output=True, text=True)
    assert again.returncode == 2 and "already exist" in again.stderr, "never overwrites without --force"


def test_the_demo_runs_from_a_pip_install(installed: Path, tmp_path: Path) -> None:
    env = clean_env(installed, tmp_path)
    env["DELTA_DEMO_DIR"] = str(tmp_path / "demo")
    out = run([str(installed / "python"), "-m", "airflow_delta_maintenance.demo"], env=env, cwd=tmp_path)
    assert "no spark-submit found" in out.stdout, out.stdout[-3000:]
    assert "run success" in out.stdout or "run DagRunState.SUCCESS" in out.stdout, out.stdout[-3000:]
    assert "published versions 1..36" in out.stdout, out.stdout[-3000:]
