"""A proxy in front of moto (and DynamoDB Local) that makes assumed-role keys expire, as AWS does.

moto's STS (5.2.5) issues keys with an ``Expiration`` but never enforces it (``moto/iam/
access_control.py`` checks nothing of the kind), and botocore refuses ``DurationSeconds`` below
900, so no test could see keys run out. This proxy forwards every request to moto unchanged,
except:

- an ``AssumeRole`` answer's ``Expiration`` is set to ``lifetime`` seconds from now, and the keys
  it carries are remembered with that time;
- a request signed with such keys after their time gets AWS's own answer for expired keys:
  S3 ``400 ExpiredToken``, DynamoDB ``400 ExpiredTokenException``, other services ``ExpiredToken``.

It also records, per request, the service, the key used and whether the request was served after
the first keys issued had expired — what a test needs to prove it ran across an expiry. It serves
on 127.0.0.1 (port 0) in a thread of the test process and is shut down by its fixture.
"""

from __future__ import annotations

import http.client
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/[^/]+/[^/]+/([^/]+)/")
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection", "te", "trailer", "upgrade", "expect"}


@dataclass
class Served:
    service: str
    key: str
    at: float
    expired: bool  # refused: signed with keys past their expiry
    agent: str = ""  # the client's User-Agent (aws-sdk-java: s3a in a Spark JVM)


@dataclass
class ExpiringCredentialsProxy:
    upstream: str
    lifetime: float
    routes: dict[str, str] = field(default_factory=dict)  # service -> its own upstream (DynamoDB Local)
    issued: dict[str, float] = field(default_factory=dict)  # access key id -> expiry (epoch seconds)
    log: list[Served] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    @property
    def endpoint(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> ExpiringCredentialsProxy:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    chunks = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            return b"".join(chunks)
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _handle(self) -> None:
                body = self._body()
                found = _CREDENTIAL.search(self.headers.get("Authorization", ""))
                key, service = (found.group(1), found.group(2)) if found else ("", "")
                now = time.time()
                with proxy.lock:
                    expiry = proxy.issued.get(key)
                    expired = expiry is not None and now >= expiry
                    proxy.log.append(Served(service, key, now, expired, self.headers.get("User-Agent", "")))
                if expired:
                    return self._expired(service)
                status, headers, data = proxy.forward(service, self.command, self.path, dict(self.headers.items()), body)
                if service == "sts" and b"<AssumeRoleResult>" in data:
                    data = proxy.shorten(data)
                self.send_response(status)
                for name, value in headers:
                    if name.lower() not in _HOP:
                        self.send_header(name, value)
                length = headers_get(headers, "content-length") if self.command == "HEAD" else str(len(data))
                self.send_header("Content-Length", length or "0")
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def _expired(self, service: str) -> None:
                if service == "dynamodb":
                    data = b'{"__type":"com.amazon.coral.service#ExpiredTokenException","message":"The security token included in the request is expired"}'
                    kind = "application/x-amz-json-1.0"
                elif service == "s3":
                    data = b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>ExpiredToken</Code><Message>The provided token has expired.</Message></Error>'
                    kind = "application/xml"
                else:
                    data = (b'<ErrorResponse><Error><Type>Sender</Type><Code>ExpiredToken</Code>'
                            b'<Message>The security token included in the request is expired</Message></Error></ErrorResponse>')
                    kind = "text/xml"
                self.send_response(400)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", "0" if self.command == "HEAD" else str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, name="expiring-sts-proxy", daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def forward(self, service: str, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        target = urlsplit(self.routes.get(service, self.upstream))
        conn = http.client.HTTPConnection(target.hostname, target.port, timeout=120)
        try:
            sent = {k: v for k, v in headers.items() if k.lower() not in _HOP}
            sent["Content-Length"] = str(len(body))
            conn.request(method, path, body=body, headers=sent)
            answer = conn.getresponse()
            return answer.status, answer.getheaders(), answer.read()
        finally:
            conn.close()

    def shorten(self, data: bytes) -> bytes:
        """The AssumeRole answer with keys that expire ``lifetime`` seconds from now."""
        expiry = time.time() + self.lifetime
        stamp = datetime.fromtimestamp(expiry, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        key = re.search(rb"<AccessKeyId>([^<]+)</AccessKeyId>", data)
        assert key is not None, data[:500]
        with self.lock:
            self.issued[key.group(1).decode()] = expiry
        return re.sub(rb"<Expiration>[^<]+</Expiration>", f"<Expiration>{stamp}</Expiration>".encode(), data)

    # --- what a test asserts -----------------------------------------------------------------

    def refused(self) -> list[Served]:
        with self.lock:
            return [s for s in self.log if s.expired]

    def served_after_first_expiry(self, service: str) -> list[Served]:
        """Requests to ``service`` with assumed keys, served after the first assumed keys had expired."""
        with self.lock:
            if not self.issued:
                return []
            first = min(self.issued.values())
            return [s for s in self.log if s.service == service and not s.expired and s.key in self.issued and s.at > first]

    def keys_used(self, service: str) -> set[str]:
        with self.lock:
            return {s.key for s in self.log if s.service == service and s.key in self.issued}


def headers_get(headers: list[tuple[str, str]], name: str) -> str | None:
    return next((v for k, v in headers if k.lower() == name), None)
