"""Real servers for the tests (a pytest plugin, see ``tests/conftest.py``).

Every server is started by a session fixture on 127.0.0.1 only, in its own process group, and
stopped by that group at teardown (SIGTERM, then SIGKILL, then any straggler of the group by PID).
``setpriv --pdeathsig KILL`` makes the kernel kill it too if pytest itself dies without teardown.

- ``dynamodb_server`` / ``dynamodb_endpoint``: the official DynamoDB Local (Maven Central, ``make
  jars``). It has no bind-address option, so a small launcher (``DYNAMODB_LAUNCHER``) runs its own
  ``ServerRunner`` setup and points the Jetty connector at 127.0.0.1 before starting it.
- ``s3_server`` / ``s3_endpoint`` / ``s3_bucket``: moto's S3 (``MOTO_LAUNCHER``), which rejects a
  second ``PUT`` with ``If-None-Match: *`` with 412 PreconditionFailed.

Servers bind port 0 and print the port the kernel gave them, so two sessions never race for one.
The terminal summary says which implementation ran and how long each took to start.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .jars import DYNAMODB_LOCAL, jar_dir, jar_version, native_dir

# Fake credentials only: the servers accept anything, and real ones must never reach a test.
FAKE_AWS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
# Every other way an AWS SDK could find real credentials (or call the instance metadata service).
REAL_AWS_SOURCES = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
)
# /proc/net/tcp{,6} spellings of 127.0.0.1 (plain IPv4, IPv4-mapped IPv6) and ::1
LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F", "00000000000000000000000001000000"}
READY = re.compile(rb"LISTENING 127\.0\.0\.1:(\d+)")


def fake_aws_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default ``os.environ``) with fake AWS credentials and no other credential source."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in REAL_AWS_SOURCES}
    env.update(FAKE_AWS)
    env.update(
        AWS_REGION="us-east-1",
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
        AWS_CONFIG_FILE=os.devnull,
        AWS_EC2_METADATA_DISABLED="true",
    )
    return env


# --- process handling -------------------------------------------------------------------------

_LIVE: dict[int, subprocess.Popen[bytes]] = {}


def free_port() -> int:
    """A port free right now on 127.0.0.1 (for servers that cannot bind port 0 themselves)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn(cmd: list[str], log: Path, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> subprocess.Popen[bytes]:
    """Start ``cmd`` in a new session (its own process group), output to ``log``.

    ``setpriv --pdeathsig KILL`` (util-linux) execs ``cmd`` in place, so the PID is the server's,
    and the kernel kills it if this process dies before the fixture's teardown could run.
    """
    prefix = ["setpriv", "--pdeathsig", "KILL", "--"] if shutil.which("setpriv") else []
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [*prefix, *cmd],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=dict(env) if env is not None else None,
            cwd=cwd,
        )
    _LIVE[proc.pid] = proc
    return proc


def _group_members(pgid: int) -> list[int]:
    """PIDs still in process group ``pgid`` (field 5 of /proc/<pid>/stat)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": state ppid pgrp ...
        if int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def stop(proc: subprocess.Popen[Any], grace: float = 10.0) -> None:
    """Stop a server started with ``start_new_session``: its whole process group, by PID."""
    pgid = proc.pid
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=grace)
    for pid in _group_members(pgid):  # children that outlived the leader
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _LIVE.pop(proc.pid, None)


@atexit.register
def _stop_leftovers() -> None:
    """Last resort when a session ends without fixture teardown (e.g. KeyboardInterrupt in setup)."""
    for proc in list(_LIVE.values()):
        stop(proc, grace=5.0)


def _tail(log: Path) -> str:
    try:
        return log.read_text(errors="replace")[-3000:]
    except OSError:
        return ""


def wait_for_port(port: int, proc: subprocess.Popen[Any], timeout: float, log: Path) -> None:
    """Wait until 127.0.0.1:``port`` accepts connections; an error with the log if ``proc`` dies."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}:\n{_tail(log)}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"server did not listen on 127.0.0.1:{port} within {timeout}s:\n{_tail(log)}")


def wait_for_ready_line(proc: subprocess.Popen[Any], log: Path, timeout: float, ready: re.Pattern[bytes] = READY) -> int:
    """Wait for the server's ``LISTENING 127.0.0.1:<port>`` line (or ``ready``, whose group 1 is the port)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        match = ready.search(log.read_bytes())
        if match:
            return int(match.group(1))
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before listening:\n{_tail(log)}")
        time.sleep(0.05)
    raise RuntimeError(f"server did not report its port within {timeout}s:\n{_tail(log)}")


def listening_addresses(port: int) -> set[str]:
    """Local addresses with a listening TCP socket on ``port`` (hex, from /proc/net/tcp and tcp6)."""
    out = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state = fields[1], fields[3]
            addr, hexport = local.rsplit(":", 1)
            if state == "0A" and int(hexport, 16) == port:  # 0A = LISTEN
                out.add(addr)
    return out


def assert_loopback_only(name: str, port: int) -> None:
    addresses = listening_addresses(port)
    if not addresses or not addresses <= LOOPBACK:
        raise RuntimeError(f"{name} must listen on 127.0.0.1 only, but listens on {addresses or 'nothing'} (port {port})")


@contextmanager
def running_server(name: str, cmd: list[str], port: int, log: Path, timeout: float, env: dict[str, str] | None = None) -> Iterator[int]:
    """Start ``cmd`` (which listens on 127.0.0.1:``port``), wait for the port, stop it by PID."""
    proc = spawn(cmd, log, env)
    try:
        wait_for_port(port, proc, timeout, log)
        assert_loopback_only(name, port)
        print(f"\n[servers] {name} on 127.0.0.1:{port}, pid {proc.pid}", file=sys.stderr)
        yield proc.pid
    finally:
        stop(proc)


# --- what ran, and how long it took to start (terminal summary) ---------------------------------

STARTUPS = pytest.StashKey[dict[str, str]]()


def record_startup(config: pytest.Config, fixture: str, description: str) -> None:
    """One line for the terminal summary: which implementation a fixture ran, and its start time."""
    config.stash.setdefault(STARTUPS, {})[fixture] = description


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    startups = config.stash.get(STARTUPS, {})
    if startups:
        terminalreporter.write_sep("-", "real components started by fixtures")
        for fixture, description in startups.items():
            terminalreporter.write_line(f"{fixture}: {description}")


@dataclass(frozen=True)
class RunningServer:
    implementation: str  # what actually ran, e.g. "DynamoDB Local 3.3.1 (official jar)"
    endpoint: str  # http://127.0.0.1:<port>
    port: int
    pid: int
    startup_seconds: float
    log: Path


@contextmanager
def serving(config: pytest.Config, fixture: str, implementation: str, cmd: list[str], log: Path,
            timeout: float, env: Mapping[str, str], cwd: Path | None = None, ready: re.Pattern[bytes] = READY) -> Iterator[RunningServer]:
    """Run a server that binds 127.0.0.1:0 and prints ``LISTENING 127.0.0.1:<port>`` (or what
    ``ready`` matches: its own start-up line, group 1 the port the kernel gave it)."""
    started = time.monotonic()
    proc = spawn(cmd, log, env, cwd)
    try:
        port = wait_for_ready_line(proc, log, timeout, ready)
        wait_for_port(port, proc, timeout, log)
        assert_loopback_only(implementation, port)
        seconds = time.monotonic() - started
        server = RunningServer(implementation, f"http://127.0.0.1:{port}", port, proc.pid, seconds, log)
        record_startup(config, fixture, f"{implementation} on 127.0.0.1:{port} (pid {proc.pid}), started in {seconds:.1f}s")
        yield server
    finally:
        stop(proc)


# --- DynamoDB Local -----------------------------------------------------------------------------

# DynamoDB Local 3.x has no bind-address option (-help: -port, -inMemory, -dbPath, -sharedDb, -cors,
# -delayTransientStatuses, -optimizeDbBeforeStartup, -disableTelemetry), and its DynamoDBProxyServer
# builds `new org.eclipse.jetty.server.Server(port)`, a connector on every interface. This runs the
# official option parsing and handlers (ServerRunner.createServerFromCommandLineArgs) and, before
# start(), sets that connector's host to 127.0.0.1 and its port to 0 (the kernel picks a free one).
DYNAMODB_LAUNCHER = """\
import java.lang.reflect.Field;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

public class DynamoDBLocalOnLoopback {
    public static void main(String[] args) throws Exception {
        DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(args);
        Field field = DynamoDBProxyServer.class.getDeclaredField("server");
        field.setAccessible(true);
        Server server = (Server) field.get(proxy);
        Connector[] connectors = server.getConnectors();
        if (connectors.length != 1 || !(connectors[0] instanceof ServerConnector)) {
            throw new IllegalStateException("expected one ServerConnector, got " + java.util.Arrays.toString(connectors));
        }
        ServerConnector connector = (ServerConnector) connectors[0];
        connector.setHost("127.0.0.1");
        connector.setPort(0);
        proxy.start();  // prints and swallows a bind failure, hence the check
        if (!server.isStarted()) {
            System.exit(2);
        }
        System.out.println("LISTENING 127.0.0.1:" + connector.getLocalPort());
        System.out.flush();
        proxy.join();
    }
}
"""


@pytest.fixture(scope="session")
def dynamodb_server(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Iterator[RunningServer]:
    """The official DynamoDB Local, in memory, one database for all credentials and regions.

    ``-sharedDb``: delta-spark's JVM client and boto3 must see the same tables whatever region or
    (fake) key each uses; without it DynamoDB Local keeps one database per key and region.
    """
    jars = jar_dir(DYNAMODB_LOCAL)
    version = jar_version(DYNAMODB_LOCAL, "DynamoDBLocal")
    workdir = tmp_path_factory.mktemp("dynamodb-local")
    launcher = workdir / "DynamoDBLocalOnLoopback.java"
    launcher.write_text(DYNAMODB_LAUNCHER)
    cmd = [
        "java",
        f"-Djava.library.path={native_dir(DYNAMODB_LOCAL)}",
        "-Djava.net.preferIPv4Stack=true",  # a plain IPv4 socket: 127.0.0.1, not ::ffff:127.0.0.1
        "-Xmx512m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",  # faster start on 2 cores; the test load is tiny
        "-cp",
        f"{jars}/*",
        str(launcher),  # single-file source launch (JDK 11+)
        "-inMemory",
        "-sharedDb",
        "-disableTelemetry",
    ]
    implementation = f"DynamoDB Local {version} (official jar, software.amazon.dynamodb)"
    with serving(pytestconfig, "dynamodb_endpoint", implementation, cmd, workdir / "server.log", 120, fake_aws_env(), workdir) as server:
        yield server


@pytest.fixture(scope="session")
def dynamodb_endpoint(dynamodb_server: RunningServer) -> str:
    """``http://127.0.0.1:<port>`` of the session's DynamoDB Local."""
    return dynamodb_server.endpoint


@pytest.fixture
def dynamodb_table_name(dynamodb_endpoint: str) -> str:
    """A fresh coordinator table name per test (DynamoDB Local is shared by the session)."""
    return f"delta_commits_{uuid.uuid4().hex[:12]}"


# --- S3 on moto ---------------------------------------------------------------------------------

# moto's own server entry point, bound to 127.0.0.1:0. Requests are handled one at a time: moto
# checks If-None-Match and stores the object in two steps, which two threads of a threaded server
# could interleave (two winners of one create); S3 itself makes the conditional write atomic.
MOTO_LAUNCHER = """\
import logging, os, threading
from werkzeug.serving import make_server
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app

logging.getLogger("werkzeug").setLevel(logging.WARNING)
app = DomainDispatcherApplication(create_backend_app)
lock = threading.Lock()

def serialized(environ, start_response):
    with lock:
        return app(environ, start_response)

server = make_server("127.0.0.1", 0, serialized, threaded=True, request_handler=MotoRequestHandler)
os.environ["MOTO_PORT"] = str(server.server_port)
print(f"LISTENING 127.0.0.1:{server.server_port}", flush=True)
server.serve_forever()
"""


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Iterator[RunningServer]:
    """moto's S3 in its own process (not threads of the test process: Spark and s3fs talk to it)."""
    import moto

    workdir = tmp_path_factory.mktemp("moto")
    cmd = [sys.executable, "-c", MOTO_LAUNCHER]
    implementation = f"moto {moto.__version__} S3 server"
    with serving(pytestconfig, "s3_endpoint", implementation, cmd, workdir / "server.log", 60, fake_aws_env(), workdir) as server:
        yield server


@pytest.fixture(scope="session")
def s3_endpoint(s3_server: RunningServer) -> str:
    """``http://127.0.0.1:<port>`` of the session's moto S3."""
    return s3_server.endpoint


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Fake AWS credentials in this test's environment, every real credential source removed."""
    for key in REAL_AWS_SOURCES:
        monkeypatch.delenv(key, raising=False)
    env = fake_aws_env({})
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


def s3_storage_options(endpoint: str) -> dict[str, Any]:
    """What s3fs (and our storage layer) needs to reach the moto server."""
    return {
        "key": FAKE_AWS["AWS_ACCESS_KEY_ID"],
        "secret": FAKE_AWS["AWS_SECRET_ACCESS_KEY"],
        "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"},
    }


@pytest.fixture
def s3_bucket(s3_endpoint: str, aws_env: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """A fresh bucket and the s3fs storage options that reach it: ``(bucket_name, storage_options)``."""
    import boto3

    name = f"bucket-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1").create_bucket(Bucket=name)
    return name, s3_storage_options(s3_endpoint)
