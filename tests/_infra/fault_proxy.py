"""A fault-injecting HTTP proxy in front of a real server (pytest plugin, listed in ``tests/conftest.py``).

``fault_proxy(upstream)`` starts an asyncio TCP proxy on 127.0.0.1 (only; checked) that forwards
HTTP/1.1 requests to ``upstream`` (``host:port``) one at a time per connection, keeping
connections alive as clients expect. Rules act on the exchanges the client makes:

- ``drop_answer(match)``: the first request ``match`` accepts is forwarded, the server applies it
  and answers, and the answer is thrown away: the client's connection is closed instead, as when a
  network path fails after the server committed (botocore then resends the request);
- ``rewrite_answer(match, fn)``: the answer bodies of matching requests are replaced by ``fn(body)``
  (the server's JSON made malformed on the wire).

Every exchange is recorded (``exchanges``: request method, path, headers, body, answer status,
and whether the answer was dropped). The proxy runs in its own thread and event loop and is stopped
at teardown.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

from .servers import assert_loopback_only

__all__ = ["Exchange", "FaultProxy", "fault_proxy"]


@dataclass
class Exchange:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: bytes
    status: int | None = None
    dropped: bool = False


Match = Callable[[Exchange], bool]


@dataclass
class _Rewrite:
    match: Match
    fn: Callable[[bytes], bytes]


@dataclass
class FaultProxy:
    upstream_host: str
    upstream_port: int
    port: int = 0
    exchanges: list[Exchange] = field(default_factory=list)
    _drops: list[Match] = field(default_factory=list)
    _rewrites: list[_Rewrite] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def drop_answer(self, match: Match) -> None:
        """Throw away the answer to the next request ``match`` accepts (once)."""
        with self._lock:
            self._drops.append(match)

    def rewrite_answer(self, match: Match, fn: Callable[[bytes], bytes]) -> None:
        """Replace the answer body of every request ``match`` accepts by ``fn(body)``."""
        with self._lock:
            self._rewrites.append(_Rewrite(match, fn))

    def clear(self) -> None:
        with self._lock:
            self._drops.clear()
            self._rewrites.clear()

    def _drop(self, exchange: Exchange) -> bool:
        with self._lock:
            for i, match in enumerate(self._drops):
                if match(exchange):
                    del self._drops[i]
                    return True
        return False

    def _rewrite(self, exchange: Exchange) -> Callable[[bytes], bytes] | None:
        with self._lock:
            return next((r.fn for r in self._rewrites if r.match(exchange)), None)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(self.upstream_host, self.upstream_port)
        try:
            while True:
                request = await _read_message(reader, is_request=True)
                if request is None:
                    return
                head, body = request
                exchange = _exchange(head, body)
                with self._lock:
                    self.exchanges.append(exchange)
                drop = self._drop(exchange)
                up_writer.write(head + body)
                await up_writer.drain()
                answer = await _read_message(up_reader, is_request=False)
                if answer is None:
                    return
                ahead, abody = answer
                exchange.status = int(ahead.split(b" ", 2)[1])
                if drop:
                    exchange.dropped = True
                    return  # the server applied it; the client never hears back
                fn = self._rewrite(exchange)
                if fn is not None:
                    abody = fn(abody)
                    ahead = _with_length(ahead, len(abody))
                writer.write(ahead + abody)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            for w in (writer, up_writer):
                w.close()


def _exchange(head: bytes, body: bytes) -> Exchange:
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
    return Exchange(method, path, headers, body)


async def _read_message(reader: asyncio.StreamReader, *, is_request: bool) -> tuple[bytes, bytes] | None:
    """(head, body) of one HTTP/1.1 message; chunked bodies are returned de-chunked, with the head
    rewritten to a Content-Length. ``None`` when the peer closed before a new message."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise
        return None
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(b":") for ln in head.split(b"\r\n")[1:] if ln)}
    if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
        body = b""
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")  # no trailers are sent by these servers
                break
            body += await reader.readexactly(size)
            await reader.readexactly(2)
        return _with_length(head, len(body)), body
    length = headers.get(b"content-length")
    if length is not None:
        return head, await reader.readexactly(int(length))
    if is_request:
        return head, b""
    status = int(head.split(b" ", 2)[1])
    if status in (204, 304) or 100 <= status < 200:
        return head, b""
    return head, await reader.read()  # delimited by the close


def _with_length(head: bytes, length: int) -> bytes:
    lines = [ln for ln in head[:-4].split(b"\r\n") if not ln.lower().startswith((b"content-length:", b"transfer-encoding:"))]
    return b"\r\n".join([*lines, b"Content-Length: " + str(length).encode()]) + b"\r\n\r\n"


class _Running:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="fault-proxy", daemon=True)
        self.thread.start()
        self.servers: list[asyncio.base_events.Server] = []

    def start(self, upstream: str) -> FaultProxy:
        host, _, port = upstream.rpartition(":")
        proxy = FaultProxy(host, int(port))

        async def serve() -> asyncio.base_events.Server:
            return await asyncio.start_server(proxy.handle, "127.0.0.1", 0)

        server = asyncio.run_coroutine_threadsafe(serve(), self.loop).result(timeout=30)
        self.servers.append(server)
        proxy.port = server.sockets[0].getsockname()[1]
        assert_loopback_only("fault proxy", proxy.port)
        return proxy

    def stop(self) -> None:
        async def close() -> None:
            for server in self.servers:
                server.close()
            handlers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in handlers:  # connections a client keeps alive: closed here, inside the loop
                task.cancel()
            await asyncio.gather(*handlers, return_exceptions=True)
            for server in self.servers:
                await server.wait_closed()

        asyncio.run_coroutine_threadsafe(close(), self.loop).result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=30)
        self.loop.close()


@pytest.fixture
def fault_proxy() -> Iterator[Callable[[str], FaultProxy]]:
    """``fault_proxy("127.0.0.1:8000")`` → a running ``FaultProxy`` in front of that server."""
    running = _Running()
    try:
        yield running.start
    finally:
        running.stop()
