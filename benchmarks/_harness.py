"""Shared measuring rules of the benchmarks, so that every figure is honest in the same way.

- **Fresh processes, own memory.** Every measured run is a new process started through
  ``/usr/bin/time`` (a small C program): its peak RSS is the measured process's own. A process
  started directly by a big Python parent would report the parent's size as its own peak (Linux
  carries the pre-``exec`` RSS into ``ru_maxrss``), which is how an earlier script reported 1.00×.
  Tables are built in separate processes too, so the parent stays small anyway.
- **Interleaved repeats.** Engines alternate run by run (A B B A A B …), so a burst of load from
  the other agents on this shared machine falls on both engines, not on one of them.
- **Bytecode compiled, as installed.** ``pip install`` of a wheel compiles the package's ``.pyc``
  files; an editable checkout run with ``PYTHONDONTWRITEBYTECODE`` (this machine's environment)
  would compile every module from source in every measured process (13% of a 200k checkpoint
  run). ``compile_package`` writes them once (``__pycache__`` is git-ignored) before measuring.
- **Every figure with its spread and the load.** Median of ``n`` runs, min–max, and the 1-minute
  load average (``os.getloadavg``) sampled before each run (mean and max). The machine has 2
  cores shared with other agents: a load above 2 means the runs competed for CPU. Wall time
  then favours the engine with more threads (it gets more of the contended cores), so the CPU
  time (user + system, from ``/usr/bin/time``) is recorded beside it.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TIME = shutil.which("time", path="/usr/bin:/bin") or "/usr/bin/time"
PYTHON = sys.executable
CLI = os.path.join(os.path.dirname(PYTHON), "delta-maintenance")


@dataclass
class Runs:
    """Measurements of one engine on one case."""

    seconds: list[float] = field(default_factory=list)
    peak_mib: list[float] = field(default_factory=list)
    cpu_seconds: list[float] = field(default_factory=list)  # user + system
    load: list[float] = field(default_factory=list)
    reported: list[dict[str, Any]] = field(default_factory=list)  # what the process printed (JSON)

    def add(self, seconds: float, peak_mib: float, load: float, reported: dict[str, Any]) -> None:
        self.cpu_seconds.append(float(reported.pop("_cpu_seconds", "nan")))
        self.seconds.append(seconds)
        self.peak_mib.append(peak_mib)
        self.load.append(load)
        self.reported.append(reported)

    def values(self, key: str) -> list[float]:
        return [float(r[key]) for r in self.reported] if key not in ("seconds", "peak_mib", "cpu_seconds") else getattr(self, key)

    def summary(self, key: str = "seconds") -> dict[str, float]:
        v = self.values(key)
        return {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)}

    def to_dict(self) -> dict[str, Any]:
        return {
            "seconds": self.summary("seconds"),
            "peak_mib": self.summary("peak_mib"),
            "cpu_seconds": self.summary("cpu_seconds"),
            "load_mean": round(statistics.mean(self.load), 2),
            "load_max": round(max(self.load), 2),
            "raw_seconds": [round(s, 3) for s in self.seconds],
            "raw_peak_mib": [round(m, 1) for m in self.peak_mib],
        }


def compile_package(root: str = ROOT) -> None:
    """Compile ``airflow_delta_maintenance`` to ``__pycache__`` as a wheel install does."""
    import compileall

    compileall.compile_dir(os.path.join(root, "airflow_delta_maintenance"), quiet=1)


# The installed command's entry point, run from another checkout's package (``--baseline-root``):
# the same ``console_script`` the ``delta-maintenance`` script calls.
BASELINE_CLI = "import sys; sys.argv[0] = 'delta-maintenance'; from airflow_delta_maintenance.cli import console_script; sys.exit(console_script())"


def baseline_env(root: str) -> dict[str, str]:
    """The environment of a process that imports the package of checkout ``root`` (an earlier
    commit, for a before/after comparison in one run) instead of this one."""
    if not os.path.isdir(os.path.join(root, "airflow_delta_maintenance")):
        raise SystemExit(f"--baseline-root {root}: no airflow_delta_maintenance package there")
    # PYTHONSAFEPATH: ``python -c`` puts its working directory (``ROOT``, this checkout) before
    # PYTHONPATH on sys.path, so without it "before" imported this checkout's package.
    return {**os.environ, "PYTHONPATH": os.path.abspath(root), "PYTHONSAFEPATH": "1"}


def load1() -> float:
    return os.getloadavg()[0]


def run_measured(cmd: Sequence[str], env: dict[str, str] | None = None, timeout: float = 3600) -> tuple[float, float, dict[str, Any]]:
    """Run ``cmd`` as a fresh process under ``/usr/bin/time``: (wall seconds, peak RSS MiB, the
    last JSON line it printed on stdout, or {}, with its CPU seconds under ``_cpu_seconds``)."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as t:
        started = time.perf_counter()
        p = subprocess.run([TIME, "-o", t.name, "-f", "%M %U %S", *cmd], capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT)
        wall = time.perf_counter() - started
        lines = [x.split() for x in t.read().strip().splitlines() if x.split() and x.split()[0].isdigit()]
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])}… failed ({p.returncode}): {p.stderr[-1500:]}")
    reported: dict[str, Any] = {}
    for line in reversed(p.stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                reported = json.loads(line)
                break
            except ValueError:
                continue
    reported["_cpu_seconds"] = float(lines[-1][1]) + float(lines[-1][2])
    return wall, int(lines[-1][0]) / 1024, reported


def interleaved(
    engines: Sequence[str], repeat: int, run_one: Callable[[str, int], tuple[float, float, dict[str, Any]]]
) -> dict[str, Runs]:
    """``run_one(engine, i)`` for every engine, ``repeat`` times, alternating the order each round."""
    out = {e: Runs() for e in engines}
    for i in range(repeat):
        order = list(engines) if i % 2 == 0 else list(reversed(engines))
        for engine in order:
            load = load1()
            seconds, peak, reported = run_one(engine, i)
            out[engine].add(seconds, peak, load, reported)
            print(f"    {engine} run {i + 1}/{repeat}: {seconds:.2f}s (cpu {out[engine].cpu_seconds[-1]:.2f}s) {peak:.0f} MiB (load {load:.2f})", file=sys.stderr, flush=True)
    return out


def in_subprocess(code: str, *args: str) -> str:
    """Run a helper (e.g. building a table) in its own process; returns its stdout."""
    p = subprocess.run([PYTHON, "-c", code, *args], capture_output=True, text=True, cwd=ROOT)
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-2000:])
    return p.stdout


def build_log_in_subprocess(root: str, commits: int, files: int, configuration: dict[str, str] | None = None) -> None:
    code = (
        "import json, sys; sys.path.insert(0, 'benchmarks'); from snapshot_load import build_log; "
        "build_log(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), configuration=json.loads(sys.argv[4]))"
    )
    in_subprocess(code, root, str(commits), str(files), json.dumps(configuration or {}))


def fmt(s: dict[str, float], unit: str = "s", digits: int = 2) -> str:
    return f"{s['median']:.{digits}f}{unit} [{s['min']:.{digits}f}–{s['max']:.{digits}f}]"


def ratio_line(label: str, ours: Runs, peer: Runs) -> str:
    o, p = ours.to_dict(), peer.to_dict()
    t = o["seconds"]["median"] / p["seconds"]["median"]
    c = o["cpu_seconds"]["median"] / p["cpu_seconds"]["median"]
    m = o["peak_mib"]["median"] / p["peak_mib"]["median"]
    loads = ours.load + peer.load
    return (
        f"{label:<34} ours {fmt(o['seconds'])} {o['peak_mib']['median']:.0f} MiB | delta-rs {fmt(p['seconds'])} "
        f"{p['peak_mib']['median']:.0f} MiB | time {t:.2f}x  cpu {c:.2f}x ({o['cpu_seconds']['median']:.2f}/{p['cpu_seconds']['median']:.2f} s)  "
        f"memory {m:.2f}x | n={o['seconds']['n']}+{p['seconds']['n']} "
        f"load {statistics.mean(loads):.1f} (max {max(loads):.1f})"
    )
