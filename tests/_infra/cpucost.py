"""Per-test CPU cost, independent of the machine's load: ``-p tests._infra.cpucost`` writes one JSON
line per test (``id``, ``cpu``: seconds of this process and of every descendant, ``wall``, ``load``)
to ``$CPUCOST_OUT`` (and ``worker``: the xdist worker that ran it; each appends its own lines). How ``make test``'s budget is kept on a machine shared with other work.

A child that starts and exits inside a test (a ``dag.test()`` subprocess, ``spark-submit``, a venv
install) is counted through ``RUSAGE_CHILDREN`` once it is waited for; a live one (a session's
server or JVM) through psutil, with the children it has itself waited for. Sampling only the live
descendants at a test's start and end counted none of the former: 0.6 s for a test whose two DAG
runs took minutes of CPU. A daemon a fixture detached (no longer a descendant) is not counted: its
startup shows in ``wall``."""

from __future__ import annotations

import json
import os
import resource
import time

import psutil
import pytest

_me = psutil.Process()
_start: dict[str, tuple[float, float]] = {}


def cpu_seconds() -> float:
    """User + system CPU of this process, its waited-for descendants and its live descendants."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    for child in _me.children(recursive=True):
        try:
            t = child.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.Error:  # gone between the listing and the read: RUSAGE_CHILDREN has it once waited for
            pass
    return total


def pytest_runtest_setup(item: pytest.Item) -> None:
    _start[item.nodeid] = (cpu_seconds(), time.monotonic())


def pytest_runtest_logfinish(nodeid: str, location: tuple[str, int | None, str]) -> None:
    if nodeid not in _start:
        return
    cpu0, wall0 = _start.pop(nodeid)
    record = {"id": nodeid, "cpu": round(cpu_seconds() - cpu0, 2), "wall": round(time.monotonic() - wall0, 2), "load": os.getloadavg()[0],
              "worker": os.environ.get("PYTEST_XDIST_WORKER", "main")}  # each xdist worker measures its own tests
    with open(os.environ.get("CPUCOST_OUT", "cpucost.jsonl"), "a") as out:
        out.write(json.dumps(record) + "\n")
