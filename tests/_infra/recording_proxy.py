"""An HTTP/1.1 proxy in front of a store server, on 127.0.0.1, for what a test must see on the wire.

It records every request (method, target, headers), and on demand it:

- ``strip``: removes the conditional-create precondition from requests (``If-None-Match`` headers,
  ``ifGenerationMatch`` query parameters, ``x-goog-if-generation-match``): a server that ignored
  them, to show a test would catch it. Only where the server does not check signatures (moto,
  fake-gcs-server): S3 SigV4 and Azure Shared Key sign these headers;
- ``accept_conflicts``: answers a refused create (409, 412) as the server would have answered a
  create it accepted (200/201, no body but ``{}`` for GCS's JSON): what a client of a server
  ignoring the condition hears, for servers that check signatures (MinIO, Azurite);
- ``drop_next_response(predicate)``: forwards the next matching request, lets the server answer,
  and closes the client's connection without passing the answer on: a create whose response
  was lost after the server stored the object (the client then resends it).

Clients sign the Host header (S3 SigV4); the proxy forwards it unchanged. One upstream connection
per request; responses go back with a Content-Length (de-chunked).
"""

from __future__ import annotations

import http.client
import re
import socket
import socketserver
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit

__all__ = ["Recorded", "RecordingProxy", "recording_proxy"]

_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}
_PRECONDITION_HEADERS = {"if-none-match", "x-goog-if-generation-match", "x-amz-if-none-match"}
_GENERATION_PARAM = re.compile(r"([?&])ifGenerationMatch=[^&]*&?")


@dataclass(frozen=True)
class Recorded:
    method: str
    target: str
    headers: dict[str, str]  # lower-case names

    @property
    def query(self) -> str:
        return urlsplit(self.target).query


@dataclass
class RecordingProxy:
    upstream: tuple[str, int]
    port: int = 0
    requests: list[Recorded] = field(default_factory=list)
    strip: bool = False
    accept_conflicts: bool = False
    dropped: list[Recorded] = field(default_factory=list)
    _drop: Callable[[Recorded], bool] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def drop_next_response(self, predicate: Callable[[Recorded], bool]) -> None:
        with self._lock:
            self._drop = predicate

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()
            self.dropped.clear()

    def _take_drop(self, request: Recorded) -> bool:
        with self._lock:
            if self._drop is not None and self._drop(request):
                self._drop = None
                self.dropped.append(request)
                return True
            return False

    def handle(self, rfile: object, wfile: object, sock: socket.socket) -> None:
        while True:
            line = rfile.readline(65537)  # type: ignore[attr-defined]
            if not line or line in (b"\r\n", b"\n"):
                return
            method, target, _version = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
            headers: list[tuple[str, str]] = []
            while True:
                h = rfile.readline(65537)  # type: ignore[attr-defined]
                if h in (b"\r\n", b"\n", b""):
                    break
                name, _, value = h.decode("latin-1").partition(":")
                headers.append((name.strip(), value.strip()))
            lower = {k.lower(): v for k, v in headers}
            if lower.get("expect", "").lower() == "100-continue":  # answered here, not forwarded
                headers = [(k, v) for k, v in headers if k.lower() != "expect"]
                wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # type: ignore[attr-defined]
                wfile.flush()  # type: ignore[attr-defined]
            body = self._read_body(rfile, lower)
            if self.strip:
                headers = [(k, v) for k, v in headers if k.lower() not in _PRECONDITION_HEADERS]
                target = _GENERATION_PARAM.sub(lambda m: m.group(1), target).rstrip("?&")
            recorded = Recorded(method, target, lower)
            with self._lock:
                self.requests.append(recorded)
            conn = http.client.HTTPConnection(*self.upstream, timeout=120)
            try:
                conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
                for k, v in headers:
                    if k.lower() not in _HOP and k.lower() != "content-length":
                        conn.putheader(k, v)
                conn.putheader("Content-Length", str(len(body)))
                conn.endheaders(body)
                response = conn.getresponse()
                data = response.read()
            finally:
                conn.close()
            if self._take_drop(recorded):
                sock.shutdown(socket.SHUT_RDWR)  # the server has stored it; the client never hears
                return
            status, reason, answer_headers = response.status, response.reason, response.getheaders()
            if self.accept_conflicts and status in (409, 412) and method in ("PUT", "POST"):
                gcs = "/upload/storage/v1/" in target
                status, reason = (200, "OK") if gcs or "x-amz-date" in lower else (201, "Created")
                data = b"{}" if gcs else b""
                answer_headers = [(k, v) for k, v in answer_headers if k.lower().startswith("x-ms-") and k.lower() != "x-ms-error-code"]
                answer_headers += [("ETag", '"0x1"'), ("Last-Modified", "Thu, 01 Jan 2026 00:00:00 GMT")]
            out = [f"HTTP/1.1 {status} {reason}\r\n".encode("latin-1")]
            for k, v in answer_headers:
                if k.lower() not in _HOP and k.lower() != "content-length":
                    out.append(f"{k}: {v}\r\n".encode("latin-1"))
            out.append(f"Content-Length: {len(data)}\r\n\r\n".encode("latin-1"))
            wfile.write(b"".join(out) + (b"" if method == "HEAD" else data))  # type: ignore[attr-defined]
            wfile.flush()  # type: ignore[attr-defined]
            if lower.get("connection", "").lower() == "close":
                return

    @staticmethod
    def _read_body(rfile: object, headers: dict[str, str]) -> bytes:
        if headers.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(rfile.readline().split(b";")[0].strip() or b"0", 16)  # type: ignore[attr-defined]
                if size == 0:
                    while rfile.readline() not in (b"\r\n", b"\n", b""):  # type: ignore[attr-defined]
                        pass
                    return b"".join(chunks)
                chunks.append(rfile.read(size))  # type: ignore[attr-defined]
                rfile.readline()  # type: ignore[attr-defined]
        length = int(headers.get("content-length") or 0)
        return rfile.read(length) if length else b""  # type: ignore[attr-defined]


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        try:
            self.server.proxy.handle(self.rfile, self.wfile, self.connection)  # type: ignore[attr-defined]
        except (ConnectionError, OSError, ValueError):
            pass


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


@contextmanager
def recording_proxy(upstream_endpoint: str) -> Iterator[RecordingProxy]:
    """A proxy on 127.0.0.1 (a port of its own) in front of ``http://127.0.0.1:<port>``."""
    parts = urlsplit(upstream_endpoint)
    assert parts.hostname == "127.0.0.1" and parts.port, upstream_endpoint
    proxy = RecordingProxy((parts.hostname, parts.port))
    server = _Server(("127.0.0.1", 0), _Handler)
    server.proxy = proxy  # type: ignore[attr-defined]
    proxy.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        server.shutdown()
        server.server_close()
