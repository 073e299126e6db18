"""Ending a process that is ours alone (the command, a Spark job's driver, the demo) once its work
is done, without the interpreter's teardown.

Teardown frees every module and object one by one (about 0.1 s after a checkpoint of 200,000
files) and then runs the C++ static destructors of the native libraries loaded. Arrow's thread
pools are destroyed there, and a pool thread still alive at that moment makes the process abort
now and then ("terminate called without an active exception", SIGABRT; apache/arrow#34314 and
#39862, still open): the work was done, yet the command, the job or the demo exits with 134 and its
caller reports a failure. Airflow's task runner ends its task processes the same way (``os._exit``).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading


def end_process(code: int) -> int:
    """Run the exit handlers (``atexit``: logging, temporary directories), flush stdout and stderr
    and end the process with ``code`` at once. A non-daemon thread still working keeps the normal
    exit, which waits for it: then ``code`` is returned, for ``sys.exit``."""
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        return code
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe: what Python's own exit reports
        code = code or 120
    os._exit(code)
