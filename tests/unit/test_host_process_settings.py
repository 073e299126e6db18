"""No process-wide setting is changed by parsing the DAG file or running an operator in a host
process (an Airflow DAG processor, worker or triggerer); our own processes keep their tuning.

Each case runs in a fresh interpreter, as Airflow's processes are:

- **the garbage collector**: every call to ``gc.disable``/``gc.enable``/``gc.set_threshold``/
  ``gc.freeze`` made while Airflow's ``DagBag`` parses the DAG file (200 tables) is recorded with
  ``sys.setprofile``, and the state before and after is compared;
- **glibc's malloc**: ``mallopt(M_MMAP_THRESHOLD)`` turns glibc's dynamic mmap threshold off for
  the rest of the process. A probe shows it: with the dynamic threshold a freed 1 MiB mmapped
  block raises the threshold, so a second 1 MiB ``malloc`` comes from the heap; with a fixed
  threshold both are mmapped (``mallinfo2().hblks`` counts mmapped blocks). The probe runs before
  and after a checkpoint operator runs in-process, and after the ``delta-maintenance`` command's
  own process ran the same operation, where the tuning is wanted;
- **Arrow's default pool**: unchanged by an operator run in-process; the system allocator in the
  command's own process unless the user chose one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBE = r'''
import ctypes
class _M(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
_libc = ctypes.CDLL("libc.so.6")
_libc.mallinfo2.restype = _M
_libc.malloc.restype, _libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
_libc.free.argtypes = [ctypes.c_void_p]

def dynamic_mmap_threshold():
    """True when glibc still adapts its mmap threshold (the second 1 MiB block is not mmapped)."""
    size = 1 << 20
    h0 = _libc.mallinfo2().hblks
    p = _libc.malloc(size); _libc.free(p)
    q = _libc.malloc(size)
    second = _libc.mallinfo2().hblks > h0
    _libc.free(q)
    return not second
'''

OPERATOR = PROBE + r'''
import json, sys
from airflow_delta_maintenance.demo.sample_table import create_sample_table
from airflow_delta_maintenance.operators.checkpoint import DeltaCheckpointOperator
import pyarrow as pa
create_sample_table(sys.argv[1], commits=12)
before = {"dynamic": dynamic_mmap_threshold(), "pool": pa.default_memory_pool().backend_name}
result = DeltaCheckpointOperator(task_id="checkpoint", table_uri=sys.argv[1], interval=1).execute({})
after = {"dynamic": dynamic_mmap_threshold(), "pool": pa.default_memory_pool().backend_name}
print(json.dumps({"before": before, "after": after, "version": result["version"]}))
'''

CLI = PROBE + r'''
import json, sys
from airflow_delta_maintenance.demo.sample_table import create_sample_table
from airflow_delta_maintenance import cli
create_sample_table(sys.argv[1], commits=12)
before = dynamic_mmap_threshold()
sys.argv = ["delta-maintenance", "checkpoint", sys.argv[1], "--force", "--json"]
code = cli.console_main()
print(json.dumps({"before": before, "after": dynamic_mmap_threshold(), "code": code}))
'''

CLI_POOL = r'''
import json, subprocess, sys
from airflow_delta_maintenance import cli
assert "pyarrow" not in sys.modules
sys.argv = ["delta-maintenance", "checkpoint", sys.argv[1], "--force", "--json"]
code = cli.console_main()
import pyarrow as pa
probe = "import pyarrow as pa; print(pa.default_memory_pool().backend_name)"
child = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
print(json.dumps({"code": code, "pool": pa.default_memory_pool().backend_name, "child_pool": child}))
'''

PARSE = r'''
import gc, json, sys
calls = []
watched = {gc.disable, gc.enable, gc.set_threshold, gc.freeze, gc.unfreeze}
def profile(frame, event, arg):
    if event == "c_call" and arg in watched:
        calls.append(arg.__name__)
before = (gc.isenabled(), gc.get_threshold(), gc.get_freeze_count())
try:
    from airflow.dag_processing.dagbag import DagBag
except ImportError:  # Airflow before 3.2
    from airflow.models.dagbag import DagBag
sys.setprofile(profile)
bag = DagBag(dag_folder=sys.argv[1])
sys.setprofile(None)
after = (gc.isenabled(), gc.get_threshold(), gc.get_freeze_count())
print(json.dumps({"dags": len(bag.dag_ids), "errors": {k: str(v)[:300] for k, v in bag.import_errors.items()}, "calls": calls,
                  "before": before, "after": after}))
'''


def run(code: str, *args: str, env: dict[str, str] | None = None) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture
def glibc() -> None:
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").mallinfo2  # noqa: B018
    except (OSError, AttributeError):
        pytest.skip("glibc ≥ 2.33 only (mallopt and mallinfo2)")
    for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"):
        if name in os.environ:
            pytest.skip(f"{name} is set: glibc's thresholds are the user's here")


@pytest.mark.slow  # minutes on a busy machine: make test runs it, the fast tier does not
def test_an_operator_run_in_process_leaves_mallocs_dynamic_threshold_and_the_arrow_pool(glibc: None, tmp_path: Path) -> None:
    got = run(OPERATOR, str(tmp_path / "table"))
    assert got["version"] == 11
    assert got["before"]["dynamic"], "the probe must see glibc's dynamic threshold in a fresh process"
    assert got["after"] == got["before"], got


@pytest.mark.slow  # 0.9 CPU s: make test runs it; the fast tier (plain pytest) stays under two minutes
def test_the_cli_process_keeps_its_allocator_tuning(glibc: None, tmp_path: Path) -> None:
    """The command's process is its own: there the operation fixes glibc's thresholds (the
    measured benefit of benchmarks/RESULTS.md), which the probe sees afterwards."""
    got = run(CLI, str(tmp_path / "table"))
    assert got["code"] == 0 and got["before"] and not got["after"], got


@pytest.mark.slow  # two fresh interpreters (1.2 CPU s): make test runs it, the fast tier does not
@pytest.mark.parametrize("users_pool", [None, "mimalloc"])
def test_the_cli_process_allocates_arrow_buffers_from_the_system_allocator(tmp_path: Path, users_pool: str | None) -> None:
    """Arrow's default pool is read once from the environment; the command sets it before pyarrow
    is imported (buffers pyarrow's pool never reaches, such as the Parquet reader's decompressed
    pages, come from it), unless the user chose one. A process the command starts (spark-submit
    and its driver) inherits the choice."""
    from airflow_delta_maintenance.demo.sample_table import create_sample_table

    create_sample_table(str(tmp_path / "table"), commits=3)
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if users_pool:
        env["ARROW_DEFAULT_MEMORY_POOL"] = users_pool
    got = run(CLI_POOL, str(tmp_path / "table"), env=env)
    assert got["code"] == 0, got
    assert got["pool"] == (users_pool or "system"), got
    assert got["child_pool"] == got["pool"], got


@pytest.mark.slow  # Airflow's DagBag in a process of its own (5.2 s CPU): make test runs it, the fast tier does not
def test_parsing_the_dag_file_changes_no_garbage_collector_setting(tmp_path: Path) -> None:
    config = tmp_path / "tables.yaml"
    lines = ["defaults:", "  coordinator: dynamodb://commits?region=eu-west-1", "  schedule: '@hourly'", "tables:"]
    config.write_text("\n".join(lines + [f"  - {{name: t{i:03d}, uri: 's3://lake/db/t{i:03d}'}}" for i in range(20)]) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(AIRFLOW_HOME=str(tmp_path / "home"), AIRFLOW__CORE__LOAD_EXAMPLES="false", DELTA_MAINTENANCE_CONFIG=str(config))
    got = run(PARSE, str(ROOT / "dags" / "delta_maintenance.py"), env=env)
    assert got["dags"] == 20 and not got["errors"], got
    assert got["calls"] == [] and got["after"] == got["before"], got
