"""The UC OpenAPI stand-in fixture (pytest plugin, listed in ``tests/conftest.py``).

The UC tests run on the real Unity Catalog OSS server (``tests/_infra/uc_oss``). ``uc_server`` runs
the **UC OpenAPI stand-in (not the OSS server)** from ``tests/uc_openapi_server`` only for what the
real server cannot be made to do on demand: injected 5xx, throttling and answers lost after the
server applied a request. One process per session on 127.0.0.1 only (checked), with a bearer token
and a storage root where it allocates managed-table locations, stopped by its process group at
teardown. The terminal summary names it as the stand-in, and so do the ids of the tests using it.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .servers import RunningServer, serving

SERVER_SCRIPT = Path(__file__).resolve().parents[1] / "uc_openapi_server" / "server.py"
LABEL = "UC OpenAPI test server (not the Unity Catalog OSS server)"


@dataclass(frozen=True)
class UCServer:
    host: str  # 127.0.0.1:<port>
    token: str
    storage_root: Path
    process: RunningServer
    label: str = LABEL

    def inject_fault(self, *, count: int = 1, after: bool = False, code: str | None = None, status: int | None = None,
                     error_type: str | None = None, method: str | None = None) -> None:
        """Make the next ``count`` API requests (of ``method``) fail (``after``: apply each, then lose its answer)."""
        fault: dict[str, Any] = {"count": count, "after": after}
        for key, value in (("code", code), ("status", status), ("type", error_type), ("method", method)):
            if value is not None:
                fault[key] = value
        req = urllib.request.Request(f"http://{self.host}/__test__/faults", data=json.dumps(fault).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10):
            pass


@pytest.fixture(scope="session")
def uc_server(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Iterator[UCServer]:
    workdir = tmp_path_factory.mktemp("uc-server")
    root = tmp_path_factory.mktemp("uc-storage")
    token = "uc-test-" + secrets.token_hex(16)
    cmd = [sys.executable, str(SERVER_SCRIPT), "--port", "0", "--storage-root", str(root), "--token", token]
    with serving(pytestconfig, "uc_server", LABEL, cmd, workdir / "server.log", 30, dict(os.environ), workdir) as server:
        yield UCServer(f"127.0.0.1:{server.port}", token, root, server)
