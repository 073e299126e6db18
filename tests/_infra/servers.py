"""Real servers for the tests, started by session fixtures on 127.0.0.1 and stopped by PID.

- ``dynamodb_endpoint``: the official DynamoDB Local (Maven Central jars fetched by ``make jars``),
  mounted on a loopback-only connector by ``java/DynamoDBLocalLoopback.java``.
- ``s3_endpoint`` / ``s3_bucket``: moto's server (it enforces ``If-None-Match: *`` on PUT).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from .jars import jar_dir

JAVA_DIR = Path(__file__).with_name("java")
FAKE_AWS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, proc: subprocess.Popen[Any], timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}: {log.read_text()[-2000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"server did not listen on 127.0.0.1:{port} within {timeout}s: {log.read_text()[-2000:]}")


def stop(proc: subprocess.Popen[Any]) -> None:
    """Stop a server started with ``start_new_session`` by its process group."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=15)


def listening_addresses(port: int) -> set[str]:
    """Local addresses with a listening TCP socket on ``port`` (from /proc/net/tcp and tcp6)."""
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
            if state == "0A" and int(hexport, 16) == port:
                out.add(addr)
    return out


@contextmanager
def running_server(name: str, cmd: list[str], port: int, log: Path, timeout: float, env: dict[str, str] | None = None) -> Iterator[int]:
    """Start ``cmd`` in its own process group, wait until 127.0.0.1:``port`` answers, stop it by PID."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    try:
        wait_for_port(port, proc, timeout, log)
        print(f"\n[servers] {name} on 127.0.0.1:{port}, pid {proc.pid}", file=sys.stderr)
        yield proc.pid
    finally:
        stop(proc)


LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F", "00000000000000000000000001000000"}


@pytest.fixture(scope="session")
def dynamodb_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    jars = jar_dir("dynamodb-local")
    port = free_port()
    cmd = ["java", f"-Djava.library.path={jars}", "-cp", f"{jars}/*", str(JAVA_DIR / "DynamoDBLocalLoopback.java"), str(port)]
    with running_server("DynamoDB Local (official jar)", cmd, port, tmp_path_factory.mktemp("dynamodb-local") / "server.log", 90):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture
def dynamodb_table_name(dynamodb_endpoint: str) -> str:
    """A fresh coordinator table name per test (DynamoDB Local is shared by the session)."""
    return f"delta_commits_{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    cmd = [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(port)]
    with running_server("moto S3 server", cmd, port, tmp_path_factory.mktemp("moto") / "server.log", 60, env={**os.environ, **FAKE_AWS}):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Fake credentials for local servers (never real secrets)."""
    for key, value in FAKE_AWS.items():
        monkeypatch.setenv(key, value)
    return dict(FAKE_AWS)


@pytest.fixture
def s3_bucket(s3_endpoint: str, aws_env: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """A fresh bucket and the s3fs storage options that reach it."""
    import boto3

    name = f"bucket-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1").create_bucket(Bucket=name)
    options = {
        "key": aws_env["AWS_ACCESS_KEY_ID"],
        "secret": aws_env["AWS_SECRET_ACCESS_KEY"],
        "client_kwargs": {"endpoint_url": s3_endpoint, "region_name": "us-east-1"},
    }
    return name, options


@pytest.fixture(scope="session")
def uc_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The UC OpenAPI test server (the OSS server is not on Maven Central; see its docstring)."""
    port = free_port()
    script = Path(__file__).resolve().parents[1] / "uc_openapi_server" / "server.py"
    log = tmp_path_factory.mktemp("uc") / "server.log"
    with running_server("UC OpenAPI test server (not the OSS server)", [sys.executable, str(script), str(port)], port, log, 30):
        yield f"127.0.0.1:{port}"
