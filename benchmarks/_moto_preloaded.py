"""moto's S3 server on 127.0.0.1 holding a copy of a local directory, loaded before it serves.

    python benchmarks/_moto_preloaded.py ROOT BUCKET PREFIX PORT [--indexed-listing]

Uploading through HTTP puts ~120-300 objects a second into moto, so a 1M-file table would take
hours to copy. Here the objects go into moto's S3 backend directly, in the server's own process
(~110 s per million files read from the page cache), then the server starts. What a client sees is the same: the same keys and
bytes, answered by the same moto code (no client sees a partial copy: nothing is served before the
load ends). Stopped by SIGTERM (the benchmark stops it by PID).

``--indexed-listing``: moto answers each ListObjectsV2 page by scanning and sorting the whole
bucket (3.3 s a page at 1.1M keys, so a flat listing of 1M objects takes over an hour). With this
flag pages are cut from a sorted index of the bucket's key names (rebuilt when the key count
changes) with the same result: the same keys, common prefixes, order, truncation and continuation
tokens, rendered by moto's own response code. A measurement of the clients on a server whose
cost per page does not grow with the bucket, as S3's does not.
"""

from __future__ import annotations

import bisect
import logging
import os
import signal
import sys
import threading
import time


def main() -> int:
    root, bucket, prefix, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    if "--indexed-listing" in sys.argv[5:]:
        _index_listings()
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends
    from moto.server import ThreadedMotoServer

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    backend.create_bucket(bucket, "us-east-1")
    started = time.perf_counter()
    files = [os.path.join(d, n) for d, _, names in os.walk(root) for n in names]
    for path in files:
        with open(path, "rb") as f:
            backend.put_object(bucket, prefix + os.path.relpath(path, root), f.read())
    print(f"loaded {len(files):,} objects into moto in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # not a line per request in the benchmark's output
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    done.wait()
    os._exit(0)  # at once: tearing down a million keys takes longer than the benchmark waits


def _index_listings() -> None:
    """moto's ``list_objects_v2`` answered from a sorted index of the key names (see the module
    docstring); delete markers and versioned buckets are not handled (the benchmark has neither)."""
    from moto.s3.models import S3Backend
    from moto.utilities.utils import md5_hash

    cache: dict[str, tuple[int, list[str]]] = {}

    def names_of(bucket: object) -> list[str]:
        keys = bucket.keys  # type: ignore[attr-defined]
        hit = cache.get(bucket.name)  # type: ignore[attr-defined]
        if hit is None or hit[0] != len(keys):
            hit = (len(keys), sorted(keys.keys()))
            cache[bucket.name] = hit  # type: ignore[attr-defined]
        return hit[1]

    def list_objects_v2(self: S3Backend, bucket: object, prefix: str | None, delimiter: str | None, continuation_token: str | None,
                        start_after: str | None, max_keys: int) -> tuple[list[object], bool, str | None]:
        if max_keys == 0:
            return [], False, None
        names, prefix = names_of(bucket), prefix or ""
        after = self._pagination_tokens.get(continuation_token) if continuation_token else start_after
        i = bisect.bisect_left(names, prefix)
        if after:
            i = max(i, bisect.bisect_right(names, after))
        out: list[object] = []
        while i < len(names) and names[i].startswith(prefix) and len(out) <= max_keys:
            rest = names[i][len(prefix):]
            if delimiter and delimiter in rest:  # a common prefix: emitted once, its keys skipped
                folder = prefix + rest.split(delimiter)[0] + delimiter
                if not after or folder > after:
                    out.append(folder)
                i = bisect.bisect_left(names, folder[:-1] + chr(ord(delimiter[-1]) + 1))
                continue
            out.append(bucket.keys[names[i]])  # type: ignore[attr-defined]
            i += 1
        if len(out) <= max_keys:
            return out, False, None
        out = out[:max_keys]
        last = out[-1] if isinstance(out[-1], str) else out[-1].name  # type: ignore[attr-defined]
        token = md5_hash(last.encode("utf-8")).hexdigest()
        self._pagination_tokens[token] = last
        return out, True, token

    S3Backend.list_objects_v2 = list_objects_v2  # type: ignore[method-assign,assignment]


if __name__ == "__main__":
    sys.exit(main())
