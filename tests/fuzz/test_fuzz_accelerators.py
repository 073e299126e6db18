"""The C parsers of untrusted bytes (the accelerators' ``_stats_json``, ``_file_keys`` and ``_log_lines``) fuzzed for
a bounded time in the suite: built by clang with AddressSanitizer and libFuzzer's coverage
instrumentation, driven by atheris's libFuzzer (tests/fuzz/accelerators_target.py), every input
compared with the pure path. A crash, a sanitizer report or a difference fails the test and leaves
the input that caused it in the test's directory (reproduce with ``python accelerators_target.py
<crash file>`` under the same LD_PRELOAD)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ACCEL = REPO / "accel" / "airflow_delta_maintenance_accel"
TARGET = Path(__file__).with_name("accelerators_target.py")
SECONDS = int(os.environ.get("DELTA_FUZZ_SECONDS", "20"))  # in make test; the seeds start each of the three parsers, the time is for mutations
pytestmark = [pytest.mark.slow]
atheris = pytest.importorskip("atheris")


def build_instrumented(dest: Path) -> Path:
    """The accelerator package with its extensions compiled for fuzzing, in ``dest``."""
    clang = shutil.which("clang")
    if clang is None:
        pytest.fail("clang is missing (make test installs it: the fuzz target needs libFuzzer's instrumentation)")
    package = dest / ACCEL.name
    package.mkdir(parents=True)
    shutil.copy(ACCEL / "__init__.py", package / "__init__.py")
    include = sysconfig.get_paths()["include"]
    for name in ("_stats_json", "_file_keys", "_log_lines"):
        out = subprocess.run([clang, "-shared", "-fPIC", "-g", "-O1", "-std=c11", "-fno-omit-frame-pointer", "-fsanitize=address,fuzzer-no-link",
                              "-DPy_LIMITED_API=0x030B0000", f"-I{include}", str(ACCEL / f"{name}.c"), "-o", str(package / f"{name}.abi3.so")],
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
    return dest


def seed_corpus(dest: Path) -> Path:
    dest.mkdir()
    seeds = [
        b'\x00{"numRecords":3,"minValues":{"a":1,"b":2.5,"c":1e-45,"d":"x\\u00e9","g":{"h":7,"i":"y"}},"maxValues":{"a":9},"nullCount":{"a":0},"tightBounds":true}',
        b'\x00{"numRecords":1}\x00{"numRecords":2}{"numRecords":3}\x00 \x00{"minValues":{"d":"\xff\xfe"}}',
        b'\x00{"minValues":{"a":9223372036854775808,"b":-0.0,"e":2147483648,"f":-129}}\x00null\x00{"nullCount":{"g":null}}',
        b"\x01a\x00b\x00a\x00-\x00c\x00b\x00-\x00\x00",
        b'\x02{"commitInfo":{"inCommitTimestamp":1}}\x00{"add":{"path":"p\xc3\xa9","partitionValues":{"r":null},"size":1,"modificationTime":-2,'
        b'"dataChange":true,"stats":"{\\"numRecords\\":1}","tags":{},"x":[1,{"y":null}]}}\x00{"remove":{"path":"q","dataChange":false}}\x00 \x0b',
        b'\x02{"add":{"path":"p","partitionValues":{},"size":1,"modificationTime":0,"dataChange":true}}\x00{"remove":{"path":"p","dataChange":true}}',
    ]
    for i, seed in enumerate(seeds):
        (dest / f"seed-{i}").write_bytes(seed)
    return dest


def test_the_c_parsers_survive_fuzzing_and_agree_with_pyarrow(tmp_path: Path) -> None:
    build = build_instrumented(tmp_path / "build")
    corpus = seed_corpus(tmp_path / "corpus")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(
        PYTHONPATH=os.pathsep.join([str(build), str(REPO)]),  # the instrumented build before the installed one
        LD_PRELOAD=str(Path(atheris.path()) / "asan_with_fuzzer.so"),
        ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1",  # CPython's own allocations are not ours to judge
        DELTA_MAINTENANCE_ACCEL="require",
    )
    check = subprocess.run([sys.executable, "-c", "import airflow_delta_maintenance_accel._stats_json as m; print(m.__file__)"],
                           env=env, capture_output=True, text=True, timeout=120)
    assert check.returncode == 0 and check.stdout.startswith(str(build)), check.stderr[-2000:]
    out = subprocess.run([sys.executable, str(TARGET), f"-max_total_time={SECONDS}", "-max_len=4096", "-timeout=30", "-rss_limit_mb=4096",
                          f"-artifact_prefix={tmp_path}/", str(corpus)],
                         env=env, capture_output=True, text=True, timeout=SECONDS + 600, cwd=tmp_path)
    log = out.stderr[-6000:]
    assert out.returncode == 0, f"the fuzzer stopped ({out.returncode}); inputs in {tmp_path}:\n{log}"
    assert "Done " in out.stderr and " runs in " in out.stderr, log
    covered = re.findall(r"DONE +cov: (\d+)", out.stderr)
    assert covered and int(covered[-1]) >= 100, f"the C code's coverage did not guide the fuzzer: {log}"
