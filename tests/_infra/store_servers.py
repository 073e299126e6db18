"""Real object-store servers for the tests (a pytest plugin, see ``tests/conftest.py``).

``make servers`` (``.ci/fetch-servers``) builds or installs them into ``.cache/servers/``:

- ``minio``: MinIO server (S3 API), ``go install`` from the Go module proxy. Single drive, in a
  session temp directory; ``--address 127.0.0.1:0``.
- ``azurite``: Azurite's blob service (npm), in memory. It serves the Blob API only, not the ADLS
  Gen2 ``dfs`` endpoint: adlfs (``az://``, ``abfs://``, ``abfss://``) talks to the blob endpoint
  anyway, which real Gen2 accounts serve too, so every Azure scheme is tested on it.
- ``fake-gcs-server``: GCS JSON/upload API over plain HTTP (``-scheme http``), in memory.

Each runs as in ``servers.py``: on 127.0.0.1 only, in its own process group, stopped by PID at the
end of the session. A session fixture yields an ``ObjectStore`` (endpoint, credentials, fsspec
options, a filesystem factory); a per-test fixture makes a fresh bucket or container on it.
Missing or stale binaries are an error, never a skip: a skipped store test looks like a passing one.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import socket
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .servers import RunningServer, fake_aws_env, free_port, serving

if TYPE_CHECKING:
    import fsspec

# gcsfs (2026.x), unless told otherwise, asks GCS's storage-control gRPC API for every bucket's layout
# (zonal or hierarchical namespace) before an object operation. fake-gcs-server has no gRPC endpoint:
# each lookup waits 60 s for its timeout, and that answer is never cached. The emulator only has flat
# buckets, which the plain client serves; set before anything imports gcsfs (it reads it on import).
GCSFS_LAYOUT_SWITCH = "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"
os.environ.setdefault(GCSFS_LAYOUT_SWITCH, "false")

REPO = Path(__file__).resolve().parents[2]
ROOT = REPO / ".cache" / "servers"
FETCH_SCRIPT = REPO / ".ci" / "fetch-servers"
_SPEC_LINE = re.compile(r'^\s*"(\S+) (go|npm) (\S+)"\s*$', re.M)

# Azurite's fixed development account (documented by Microsoft; it opens nothing real).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
MINIO_USER = "minio-test"
MINIO_PASSWORD = "minio-test-secret"  # MinIO wants at least 8 characters


class ServerMissingError(RuntimeError):
    """A store server was not installed, or was installed for another line of .ci/fetch-servers."""


def _specs() -> dict[str, tuple[str, str]]:
    """``name -> (kind, what)`` from the SERVERS lines of .ci/fetch-servers."""
    return {name: (kind, what) for name, kind, what in _SPEC_LINE.findall(FETCH_SCRIPT.read_text())}


def _expected_stamp(kind: str, what: str) -> str:
    """The stamp .ci/fetch-servers writes: sha1 of its spec_of output, the script's sha1 and a newline."""
    spec = f"{kind} {what}\n".encode()
    if kind == "npm":
        spec += (REPO / what / "package.json").read_bytes() + (REPO / what / "package-lock.json").read_bytes()
    script_sha = hashlib.sha1(FETCH_SCRIPT.read_bytes()).hexdigest()
    return ".done-" + hashlib.sha1(spec + f"{script_sha}\n".encode()).hexdigest()[:12]


def server_binary(name: str, tool: str | None = None) -> tuple[Path, str]:
    """``(path of the executable, what was installed)`` for one server, checked to be current."""
    hint = "run `make servers` (`make test` does it first)"
    specs = _specs()
    if name not in specs:
        raise ServerMissingError(f"no server {name!r} in {FETCH_SCRIPT}")
    kind, what = specs[name]
    path = ROOT / name / "bin" / (tool or name)
    if not path.exists():
        raise ServerMissingError(f"{name} is not installed under {ROOT / name}: {hint}")
    if not (ROOT / name / _expected_stamp(kind, what)).exists():
        raise ServerMissingError(f"{name} under {ROOT / name} is stale (.ci/fetch-servers or its lock changed): {hint}")
    return path, what


# --- what a test gets -------------------------------------------------------------------------


@dataclass(frozen=True)
class ObjectStore:
    """One running store server and how clients reach it."""

    name: str  # "minio", "azurite", "fake-gcs-server"
    server: RunningServer
    protocol: str  # the fsspec protocol tables on it use: "s3", "az", "gs"
    storage_options: dict[str, Any]  # for fsspec / open_table_storage: endpoint and credentials
    credentials: dict[str, str] = field(repr=False)

    @property
    def endpoint(self) -> str:
        return self.server.endpoint

    def filesystem(self, **overrides: Any) -> fsspec.AbstractFileSystem:
        """A new fsspec filesystem on this server (never a cached instance another test changed)."""
        import fsspec

        return fsspec.filesystem(self.protocol, **{**self.storage_options, "skip_instance_cache": True, **overrides})


@dataclass(frozen=True)
class Bucket:
    """A fresh bucket (S3, GCS) or container (Azure) on an ``ObjectStore``."""

    store: ObjectStore
    name: str

    @property
    def url(self) -> str:
        """``<protocol>://<bucket>``: append ``/<table>`` for a table URI."""
        return f"{self.store.protocol}://{self.name}"

    @property
    def storage_options(self) -> dict[str, Any]:
        return dict(self.store.storage_options)

    def filesystem(self, **overrides: Any) -> fsspec.AbstractFileSystem:
        return self.store.filesystem(**overrides)

    def options_via(self, endpoint: str) -> dict[str, Any]:
        """Storage options that reach this bucket through ``endpoint`` (a proxy in front of the server)."""
        options = self.storage_options
        if self.store.protocol == "s3":
            options["client_kwargs"] = {**options["client_kwargs"], "endpoint_url": endpoint}
        elif self.store.protocol == "az":
            options["connection_string"] = azurite_connection_string(endpoint)
        else:
            options["endpoint_url"] = endpoint
        return options


def _new_bucket(store: ObjectStore) -> Bucket:
    bucket = Bucket(store, f"b-{uuid.uuid4().hex[:12]}")  # valid for S3, GCS and Azure alike
    fs = store.filesystem()
    if store.protocol == "s3":  # s3fs would send LocationConstraint us-east-1, which moto (like AWS) refuses
        fs.call_s3("create_bucket", Bucket=bucket.name)
    else:
        fs.mkdir(bucket.name)
    return bucket


# --- MinIO --------------------------------------------------------------------------------------


def _hold_ipv6_loopback(port: int) -> socket.socket | None:
    """Bind (never listen on) [::1]:``port`` so that nothing else can listen there; None if ::1 is
    absent or the port is taken on it."""
    if not socket.has_ipv6:
        return None
    sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)  # no SO_REUSEADDR: a later bind fails
    try:
        sock.bind(("::1", port))
    except OSError:
        sock.close()
        return None
    return sock


def _wait_until_ready(url: str, timeout: float) -> None:
    """MinIO accepts connections before it serves requests (503 while it formats its drive)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not answer 200 within {timeout}s")
        time.sleep(0.1)


# MinIO refuses every write ("XMinioStorageFull") once its drive has under ~1 GiB free or is 99% full
# (hasFreeSpace in cmd/xl-storage.go), which a busy CI disk can be while the suite still has room.
MINIO_MIN_FREE = 2 << 30


def _minio_drive(workdir: Path) -> Path:
    """The drive directory on whichever of the session's temp dir and /dev/shm has more room."""
    candidates = [workdir]
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        candidates.append(shm)
    best = max(candidates, key=lambda p: shutil.disk_usage(p).free)
    free = shutil.disk_usage(best).free
    if free < MINIO_MIN_FREE:
        raise RuntimeError(f"MinIO needs {MINIO_MIN_FREE >> 30} GiB free for its drive; the most any of {[str(c) for c in candidates]} has is {free >> 20} MiB")
    if best == workdir:
        return workdir / "data"
    return Path(tempfile.mkdtemp(prefix="minio-drive-", dir=best))  # removed by the fixture


@pytest.fixture(scope="session")
def minio(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Iterator[ObjectStore]:
    """MinIO server, one drive in a temp directory, console off.

    MinIO listens on every loopback address of the machine besides the one it is given (for its
    console: ``getServerListenAddrs`` in cmd/server-main.go), and carries on when some of them fail.
    The fixture holds [::1]:<port> bound, not listening, while it starts, so it serves 127.0.0.1
    only (checked by ``serving``). Its port is therefore chosen here, not by the kernel in MinIO.
    """
    binary, what = server_binary("minio")
    workdir = tmp_path_factory.mktemp("minio")
    env = fake_aws_env()
    env.update(
        MINIO_ROOT_USER=MINIO_USER,
        MINIO_ROOT_PASSWORD=MINIO_PASSWORD,
        MINIO_BROWSER="off",  # no console
        MINIO_UPDATE="off",
        HOME=str(workdir),  # its config dir (~/.minio) stays in the session's temp directory
    )
    data = _minio_drive(workdir)
    for _ in range(20):
        port = free_port()
        held = _hold_ipv6_loopback(port)
        if held is not None or not socket.has_ipv6:
            break
    address = f"127.0.0.1:{port}"
    cmd = ["sh", "-c", 'echo "LISTENING $1"; shift; exec "$@"', "sh", address, str(binary), "server", "--address", address, str(data)]
    try:
        with serving(pytestconfig, "minio", f"MinIO server ({what})", cmd, workdir / "server.log", 120, env, workdir) as server:
            _wait_until_ready(f"{server.endpoint}/minio/health/ready", 60)
            credentials = {"key": MINIO_USER, "secret": MINIO_PASSWORD}
            options = {**credentials, "client_kwargs": {"endpoint_url": server.endpoint, "region_name": "us-east-1"}}
            yield ObjectStore("minio", server, "s3", options, credentials)
    finally:
        if held is not None:
            held.close()
        if not data.is_relative_to(workdir):
            shutil.rmtree(data, ignore_errors=True)


@pytest.fixture
def minio_bucket(minio: ObjectStore) -> Bucket:
    """A fresh bucket on the session's MinIO."""
    return _new_bucket(minio)


# --- Azurite ------------------------------------------------------------------------------------

_AZURITE_READY = re.compile(rb"Blob service successfully listens on http://127\.0\.0\.1:(\d+)")


def azurite_connection_string(endpoint: str) -> str:
    return (
        f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
        f"BlobEndpoint={endpoint}/{AZURITE_ACCOUNT};"
    )


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Iterator[ObjectStore]:
    """Azurite's blob service, in memory, on 127.0.0.1:0.

    ``--skipApiVersionCheck``: azure-storage-blob sends the newest service version it knows, which
    can be newer than the Azurite release (the API itself is what is tested, not the version).
    """
    binary, what = server_binary("azurite", "azurite-blob")
    workdir = tmp_path_factory.mktemp("azurite")
    cmd = [
        str(binary), "--blobHost", "127.0.0.1", "--blobPort", "0", "--inMemoryPersistence", "--extentMemoryLimit", "512",
        "--skipApiVersionCheck", "--disableTelemetry", "--silent",
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AZURE_")}
    with serving(pytestconfig, "azurite", f"Azurite blob service ({what}: {_npm_version('azurite')})", cmd, workdir / "server.log", 120, env, workdir,
                 ready=_AZURITE_READY) as server:
        connection_string = azurite_connection_string(server.endpoint)
        credentials = {"account_name": AZURITE_ACCOUNT, "account_key": AZURITE_KEY}
        options = {"account_name": AZURITE_ACCOUNT, "connection_string": connection_string}
        yield ObjectStore("azurite", server, "az", options, credentials)


def _npm_version(package: str) -> str:
    import json

    try:
        return str(json.loads((ROOT / package / "node_modules" / package / "package.json").read_text())["version"])
    except (OSError, ValueError, KeyError):
        return "unknown version"


@pytest.fixture
def azurite_container(azurite: ObjectStore) -> Bucket:
    """A fresh container on the session's Azurite."""
    return _new_bucket(azurite)


# --- fake-gcs-server ----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def fake_gcs(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Iterator[ObjectStore]:
    """fake-gcs-server over plain HTTP, in memory.

    It cannot report a port it was given as 0, and needs its public address before it starts (the
    resumable-upload URLs it hands out name it), so it gets a port free right now.
    """
    import fsspec
    import gcsfs.core

    if fsspec.get_filesystem_class("gs") is not gcsfs.core.GCSFileSystem:
        raise RuntimeError(f"gcsfs was imported before {GCSFS_LAYOUT_SWITCH}=false was set: every call would wait 60 s for a gRPC lookup")
    binary, what = server_binary("fake-gcs-server")
    workdir = tmp_path_factory.mktemp("fake-gcs")
    port = free_port()
    address = f"127.0.0.1:{port}"
    cmd = [
        str(binary), "-scheme", "http", "-host", "127.0.0.1", "-port", str(port), "-public-host", address,
        "-external-url", f"http://{address}", "-backend", "memory", "-log-level", "warn",
    ]
    # its own start-up line is printed at info level; this one says the port is ours to use
    launcher = ["sh", "-c", 'echo "LISTENING $1"; shift; exec "$@"', "sh", address, *cmd]
    env = {k: v for k, v in os.environ.items() if k not in ("GOOGLE_APPLICATION_CREDENTIALS", "STORAGE_EMULATOR_HOST")}
    with serving(pytestconfig, "fake_gcs", f"fake-gcs-server ({what})", launcher, workdir / "server.log", 60, env, workdir) as server:
        options = {"endpoint_url": server.endpoint, "token": "anon", "project": "test-project"}
        yield ObjectStore("fake-gcs-server", server, "gs", options, {"token": "anon"})


@pytest.fixture
def fake_gcs_bucket(fake_gcs: ObjectStore) -> Bucket:
    """A fresh bucket on the session's fake-gcs-server."""
    return _new_bucket(fake_gcs)


# --- moto, as an ObjectStore ---------------------------------------------------------------------


@pytest.fixture(scope="session")
def moto(s3_server: RunningServer) -> ObjectStore:
    """The session's moto S3 server (``servers.s3_server``) as an ``ObjectStore``."""
    from .servers import FAKE_AWS, s3_storage_options

    credentials = {"key": FAKE_AWS["AWS_ACCESS_KEY_ID"], "secret": FAKE_AWS["AWS_SECRET_ACCESS_KEY"]}
    return ObjectStore("moto", s3_server, "s3", s3_storage_options(s3_server.endpoint), credentials)


# --- every store at once ------------------------------------------------------------------------

STORES = ("minio", "azurite", "fake_gcs")
# the real servers and moto, the mock S3 the rest of the suite runs on
EVERY_STORE = ("moto", "minio", "azurite", "fake_gcs")


@pytest.fixture(params=STORES)
def store_bucket(request: pytest.FixtureRequest) -> Bucket:
    """A fresh bucket on each real store server in turn (the test runs once per store)."""
    store: ObjectStore = request.getfixturevalue(request.param)
    return _new_bucket(store)


@pytest.fixture(params=EVERY_STORE)
def every_store_bucket(request: pytest.FixtureRequest, aws_env: dict[str, str]) -> Bucket:
    """``store_bucket`` over moto too."""
    store: ObjectStore = request.getfixturevalue(request.param)
    return _new_bucket(store)
