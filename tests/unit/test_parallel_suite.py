"""The suite runs on two workers (tests/_infra/xdist_groups.py): what the workers share is safe."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from typing import Any, cast

import pytest

from tests._infra import table_zoo
from tests._infra.zoo_registry import ZOO


def test_two_workers_wanting_one_missing_zoo_table_build_it_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A clean clone has no zoo: both workers ask for the same table at once. One builds it, the
    other waits and takes it (before the lock: both built it, each for minutes of Spark)."""
    name = "wheel_unpartitioned"
    builds: list[str] = []

    def slow_build(path: str) -> None:
        builds.append(path)
        time.sleep(0.5)  # long enough that the second asker arrives while the first builds
        Path(path, "_delta_log").mkdir(parents=True)

    def manifest(spec: Any, key: str, table: Path, spark: Any) -> table_zoo.Manifest:
        return table_zoo.Manifest(spec.name, spec.writer, key, 0, {0: {"operation": "WRITE"}})

    monkeypatch.setitem(ZOO, name, dataclasses.replace(ZOO[name], build=slow_build))
    monkeypatch.setattr(table_zoo, "record_manifest", manifest)
    monkeypatch.setattr(table_zoo, "clear_spark_cache", lambda spark: None)
    zoos = [table_zoo.Zoo(lambda: cast(Any, None), cache=tmp_path) for _ in range(2)]  # no Spark: nothing here asks for it
    for zoo in zoos:
        monkeypatch.setattr(zoo, "key", lambda _name: "k1")
    got: list[table_zoo.ZooTable] = []
    askers = [threading.Thread(target=lambda z=zoo: got.append(z.get(name))) for zoo in zoos]
    for t in askers:
        t.start()
    for t in askers:
        t.join(timeout=60)
    assert len(got) == 2 and got[0].path == got[1].path == tmp_path / name / "k1" / "table"
    assert len(builds) == 1, builds
    assert sum(len(z.built) for z in zoos) == 1


PROJECT_CONFTEST = '''
import os
import pytest


def started(what):
    with open(os.environ["STARTS"], "a") as out:
        out.write(f"{what} {os.environ.get('PYTEST_XDIST_WORKER', 'main')}\\n")


@pytest.fixture(scope="session")
def spark():
    started("spark")


@pytest.fixture(scope="session")
def airflow_home():
    started("airflow_home")


@pytest.fixture(scope="module")
def wheel(request):
    started(f"wheel:{request.module.__name__}")
'''


def test_each_expensive_session_fixture_and_module_fixture_starts_once_on_two_workers(tmp_path: Path) -> None:
    """``make test``'s options on a small project: the tests of two files that share the Spark
    session run on one worker (one JVM), likewise the Airflow home's, and a file's module fixture is
    set up once although its tests would fill both workers."""
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    (tmp_path / "conftest.py").write_text(PROJECT_CONFTEST)
    for name, fixture in (("spark_a", "spark"), ("spark_b", "spark"), ("dags_a", "airflow_home"), ("dags_b", "airflow_home"), ("wheel", "wheel")):
        tests = "".join(f"def test_{i}({fixture}):\n    pass\n\n\n" for i in range(6))
        (tmp_path / f"test_{name}.py").write_text(tests)
    starts = tmp_path / "starts.txt"
    env = {**os.environ, "STARTS": str(starts), "PYTHONPATH": str(repo)}
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests._infra.xdist_groups", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup",
                          "-q", "--rootdir", str(tmp_path), str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "30 passed" in out.stdout, out.stdout[-2000:]
    lines = starts.read_text().split()
    started = sorted(lines[0::2])
    assert started == ["airflow_home", "spark", "wheel:test_wheel"], starts.read_text()
    assert "xdist balance" in out.stdout and "gw0: busy" in out.stdout and "gw1: busy" in out.stdout, out.stdout[-2000:]
