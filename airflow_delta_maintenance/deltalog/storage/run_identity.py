"""Who made a temporary file or staging directory, and when: the rule for removing another run's leftovers.

Every private file a run writes into ``_delta_log`` before making it visible — temp files of
create-if-absent writes, sidecars not yet referenced, Spark staging directories — carries a tag
``<created ms>-<host>-<pid>-<random>`` in its name. A later run (or metadata cleanup) may remove
such a leftover only when its owner is **proven dead** (same host, process gone) or when it is
older than ``SAFE_AGE_MS`` by the storage's modification times and the real clock and its owner is
not proven alive. A leftover of a live run is never removed, whatever a caller says the time is.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
import time
import uuid
from dataclasses import dataclass

__all__ = ["SAFE_AGE_MS", "STAGING_DIR", "RunIdentity", "new_run", "find_run_tag", "real_now_ms", "is_abandoned"]

# Same age as the protocol's rule for unreferenced sidecars: no write of ours takes a day between
# creating a private file and making it visible.
SAFE_AGE_MS = 24 * 60 * 60 * 1000
STAGING_DIR = "_spark_staging"

_TAG = re.compile(r"(?<![0-9a-f])(\d{13})-([0-9a-f]{8})-(\d{1,10})-([0-9a-f]{8,32})(?![0-9a-f])")


def real_now_ms() -> int:
    """The real clock; deliberately not injectable: a leftover's age is never a caller's claim."""
    return int(time.time() * 1000)


def _host_id() -> str:
    return hashlib.sha1(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:8]


@dataclass(frozen=True)
class RunIdentity:
    created_ms: int
    host: str  # 8 hex digits of the host name's SHA-1
    pid: int
    token: str

    @property
    def tag(self) -> str:
        return f"{self.created_ms:013d}-{self.host}-{self.pid}-{self.token}"

    def liveness(self) -> bool | None:
        """True: proven alive (this host, the process exists); False: proven dead; None: unknown."""
        if self.host != _host_id():
            return None
        if self.pid == os.getpid():
            return True
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True  # exists, owned by another user
        except OSError:
            return None
        # exists (a reused pid only delays removal until the owner is old); a zombie was killed and
        # is not yet reaped (its parent died with it): it writes nothing more
        return not _is_zombie(self.pid)


def _is_zombie(pid: int) -> bool:
    """A process that has exited but whose entry waits to be reaped: after a SIGKILL to a
    spark-submit's process group, the Python driver stays a zombie until init reaps it."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False  # no /proc (not Linux) or gone: kill(pid, 0) said it exists
    end = stat.rfind(b")")  # the state follows "(comm) "
    return stat[end + 2 : end + 3] == b"Z"


def new_run() -> RunIdentity:
    """A fresh identity for one write (unique even for several writes of one process)."""
    return RunIdentity(real_now_ms(), _host_id(), os.getpid(), uuid.uuid4().hex[:16])


def find_run_tag(name: str) -> RunIdentity | None:
    """The run tag inside a file or directory name, if it has one."""
    m = _TAG.search(name)
    if m is None:
        return None
    return RunIdentity(int(m.group(1)), m.group(2), int(m.group(3)), m.group(4))


def is_abandoned(run: RunIdentity | None, newest_mtime_ms: int) -> bool:
    """May a leftover of ``run`` whose newest file was modified at ``newest_mtime_ms`` be removed?"""
    if run is not None:
        alive = run.liveness()
        if alive is False:
            return True
        if alive is True:
            return False
    now = real_now_ms()
    youngest = max(newest_mtime_ms, run.created_ms if run is not None else 0)
    return now - youngest >= SAFE_AGE_MS
