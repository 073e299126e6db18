"""moto's S3 server on 127.0.0.1 holding a copy of a local directory, loaded before it serves.

    python benchmarks/_moto_preloaded.py ROOT BUCKET PREFIX PORT

Uploading through HTTP puts ~120-300 objects a second into moto, so a 1M-file table would take
hours to copy. Here the objects go into moto's S3 backend directly, in the server's own process
(~40 s per million), then the server starts. What a client sees is the same: the same keys and
bytes, answered by the same moto code. Keys are put in the order ``upload`` in ``vacuum.py`` uses
(the log last). Stopped by SIGTERM (the benchmark stops it by PID).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time


def main() -> int:
    root, bucket, prefix, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends
    from moto.server import ThreadedMotoServer

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    backend.create_bucket(bucket, "us-east-1")
    started = time.perf_counter()
    files = sorted((os.path.join(d, n) for d, _, names in os.walk(root) for n in names), key=lambda f: "_delta_log" in f)
    for path in files:
        with open(path, "rb") as f:
            backend.put_object(bucket, prefix + os.path.relpath(path, root), f.read())
    print(f"loaded {len(files):,} objects into moto in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    done.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
