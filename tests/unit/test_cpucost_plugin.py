"""The suite's cost meter (tests/_infra/cpucost.py) counts what a test's subprocesses burn."""

from __future__ import annotations

import resource
import subprocess
import sys

from tests._infra.cpucost import cpu_seconds

BURN = "import sys, time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass\nprint('burned', flush=True)\n"


def test_a_subprocess_that_exits_within_the_test_is_counted() -> None:
    """A dag.test() or spark-submit subprocess: started and gone between two samples."""
    before = cpu_seconds()
    subprocess.run([sys.executable, "-c", BURN], check=True, capture_output=True, timeout=120)
    assert cpu_seconds() - before >= 0.4


def test_a_live_child_is_counted_while_it_runs() -> None:
    """A session's server: alive when the test ends, not yet in RUSAGE_CHILDREN."""
    child = subprocess.Popen([sys.executable, "-c", BURN + "sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "burned\n"  # its burn is done, it waits on stdin
        waited = sum(u.ru_utime + u.ru_stime for u in map(resource.getrusage, (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)))
        assert cpu_seconds() - waited >= 0.4
    finally:
        child.communicate("", timeout=120)
