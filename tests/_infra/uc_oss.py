"""The real Unity Catalog OSS server for the tests (pytest plugin, listed in ``tests/conftest.py``).

The server jars of UC 0.6.0 and 0.5.1, built from unmodified upstream sources, live in the shared
package ``../shared/unity-catalog-server`` beside the repository (``UC_SERVER_PKG`` overrides);
its ``start-uc-server.sh`` starts one bound to 127.0.0.1 only, creates the catalog ``main`` and
schema ``default``, and stops it by PID. Their runtime jars (Maven Central) are cached under
``.cache/uc-server/lib-<version>`` (``make jars`` fetches them, ``.ci/fetch-uc-server``).

``uc_oss_servers`` starts one server per (version, authorization) on first use and shares it for
the session; every test id names the server it ran on (``oss-0.6.0``, ``oss-0.5.1-auth``, …).
Without the shared package (a user's clone) these tests are skipped with the reason, the session
summary says loudly that they did not run, and under ``CI=true`` they fail instead (CI always has
the package).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .servers import assert_loopback_only, free_port, record_startup

REPO = Path(__file__).resolve().parents[2]
VERSIONS = ("0.6.0", "0.5.1")
# (version, authorization) of every server the suites run on, in the order of their ids
SERVERS = [(v, auth) for v in VERSIONS for auth in (False, True)]
API = "/api/2.1/unity-catalog"


def package_dir() -> Path:
    return Path(os.environ.get("UC_SERVER_PKG") or REPO.parent / "shared" / "unity-catalog-server")


def lib_dir(version: str) -> Path:
    return REPO / ".cache" / "uc-server" / f"lib-{version}"


def server_id(version: str, auth: bool) -> str:
    return f"oss-{version}{'-auth' if auth else ''}"


def missing_reason() -> str | None:
    pkg = package_dir()
    if not (pkg / "start-uc-server.sh").is_file():
        return (f"the Unity Catalog OSS server package is not at {pkg} (the shared/unity-catalog-server "
                "directory beside the repository, or UC_SERVER_PKG): the tests on the real UC server did not run")
    return None


@dataclass
class OSSServer:
    """One running UC OSS server; ``token`` is the admin's (``None`` with authorization off)."""

    version: str
    auth: bool
    port: int
    run_dir: Path
    pid: int
    started_s: float
    token: str | None = None
    _users: dict[str, str] = field(default_factory=dict)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def id(self) -> str:
        return server_id(self.version, self.auth)

    @property
    def label(self) -> str:
        return f"Unity Catalog OSS server {self.version}, authorization {'on' if self.auth else 'off'}"

    @property
    def storage_root(self) -> Path:
        return self.run_dir / "storage"

    def call(self, method: str, path: str, body: Any = None, token: str | None = None, base: str = API) -> tuple[int, str, str]:
        """(status, content type, body text) of one request; ``token`` defaults to the admin's."""
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        bearer = token if token is not None else self.token
        if bearer:
            headers["Authorization"] = f"Bearer {bearer}"
        req = urllib.request.Request(f"http://{self.host}{base}{path}", data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, resp.headers.get("Content-Type", ""), resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.headers.get("Content-Type", ""), exc.read().decode()

    def json(self, method: str, path: str, body: Any = None, token: str | None = None, base: str = API) -> dict[str, Any]:
        status, _, text = self.call(method, path, body, token, base)
        if status // 100 != 2:
            raise AssertionError(f"{self.label}: {method} {path} -> {status} {text}")
        return json.loads(text) if text.strip() else {}

    def user_token(self, email: str) -> str:
        """An access token for a (new) user ``email``, as the server's token exchange issues it.

        The user is created through the SCIM API as the admin. The token carries the claims of
        ``SecurityContext.createAccessToken`` and is signed with the server's own key from its
        ``etc/conf``, because the token exchange needs an external identity provider.
        """
        assert self.auth, "users and tokens exist only with authorization on"
        if email not in self._users:
            import jwt
            from cryptography.hazmat.primitives.serialization import load_der_private_key

            self.json("POST", "/scim2/Users", {"displayName": email.split("@")[0], "emails": [{"value": email, "primary": True}]},
                      base="/api/1.0/unity-control")
            conf = self.run_dir / "etc" / "conf"
            key = load_der_private_key((conf / "private_key.der").read_bytes(), None)
            now = int(time.time())
            claims = {"sub": email, "iss": "internal", "iat": now, "exp": now + 24 * 3600, "jti": str(uuid.uuid4()), "type": "ACCESS"}
            self._users[email] = jwt.encode(claims, key, algorithm="RS512",  # type: ignore[arg-type]
                                            headers={"kid": (conf / "key_id.txt").read_text().strip()})
        return self._users[email]

    def grant(self, securable: str, full_name: str, principal: str, *privileges: str) -> None:
        self.json("PATCH", f"/permissions/{securable}/{full_name}", {"changes": [{"principal": principal, "add": list(privileges)}]})

    def create_schema(self, name: str, catalog: str = "main") -> None:
        self.json("POST", "/schemas", {"name": name, "catalog_name": catalog})


class OSSServers:
    """Starts each (version, auth) server on first use, shares it for the session, stops them by PID."""

    def __init__(self, root: Path, config: pytest.Config) -> None:
        self.root = root
        self.config = config
        self.running: dict[tuple[str, bool], OSSServer] = {}
        self._lock = threading.Lock()

    def get(self, version: str, auth: bool) -> OSSServer:
        reason = missing_reason()
        if reason:
            if os.environ.get("CI") == "true":
                pytest.fail(f"{reason} (CI must have it)", pytrace=False)
            pytest.skip(reason)
        with self._lock:
            key = (version, auth)
            if key not in self.running:
                self.running[key] = self._start(version, auth)
            return self.running[key]

    def _start(self, version: str, auth: bool) -> OSSServer:
        pkg = package_dir()
        script = str(pkg / "start-uc-server.sh")
        run = self.root / server_id(version, auth)
        port = free_port()
        env = dict(os.environ, UC_LIB_DIR=str(lib_dir(version)))
        began = time.monotonic()
        started = subprocess.run([script, version, str(port), str(run), *(["auth"] if auth else [])],
                                 capture_output=True, text=True, env=env, timeout=900)
        if started.returncode != 0:
            raise RuntimeError(f"start-uc-server.sh {version} failed ({started.returncode}):\n{started.stderr[-3000:]}")
        pid = int(started.stdout.strip().splitlines()[-1])
        server = OSSServer(version, auth, port, run, pid, time.monotonic() - began)
        try:
            setup = subprocess.run([script, "setup", str(run)], capture_output=True, text=True, env=env, timeout=120)
            if setup.returncode != 0:
                raise RuntimeError(f"start-uc-server.sh setup failed:\n{setup.stderr[-3000:]}")
            if auth:
                server.token = (run / "etc" / "conf" / "token.txt").read_text().strip()
            assert_loopback_only(server.label, port)
        except BaseException:
            self._stop(server)
            raise
        record_startup(self.config, f"uc_oss[{server.id}]", f"{server.label} (shared jar, start-uc-server.sh) on {server.host}, "
                                                         f"pid {server.pid}, started in {server.started_s:.1f} s")
        return server

    @staticmethod
    def _stop(server: OSSServer) -> None:
        subprocess.run([str(package_dir() / "start-uc-server.sh"), "stop", str(server.pid)], capture_output=True, timeout=60)

    def stop_all(self) -> None:
        stoppers = [threading.Thread(target=self._stop, args=(server,)) for server in self.running.values()]
        for t in stoppers:
            t.start()
        for t in stoppers:
            t.join()


@pytest.fixture(scope="session")
def uc_oss_servers(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Iterator[OSSServers]:
    servers = OSSServers(tmp_path_factory.mktemp("uc-oss"), pytestconfig)
    try:
        yield servers
    finally:
        servers.stop_all()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    reason = missing_reason()
    if reason:
        bar = "!" * 100
        terminalreporter.write_line(bar, red=True, bold=True)
        terminalreporter.write_line(f"NOT RUN: {reason}.", red=True, bold=True)
        terminalreporter.write_line("Every test id containing 'oss-' was skipped; CI runs them with the package present.", red=True, bold=True)
        terminalreporter.write_line(bar, red=True, bold=True)
