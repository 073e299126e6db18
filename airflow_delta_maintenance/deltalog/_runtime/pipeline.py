"""Overlap producing the next item of a stream with consuming the current one.

A checkpoint's row groups are built (stats parsed, structs assembled: pyarrow compute, which
releases the GIL) and then encoded and compressed by the Parquet writer (also GIL-free). Done in
turn, one core idles; with the next row group built on a worker thread while the writer encodes
this one, both run at once. At most ``depth`` items wait, so memory stays bounded.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import TypeVar, cast

T = TypeVar("T")

_DONE = object()


class _Failed:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def prefetched(items: Iterable[T], depth: int = 1) -> Iterator[T]:
    """``items`` in order, the next ``depth`` produced on a worker thread ahead of the consumer.

    An exception raised while producing is re-raised to the consumer at that point in the
    stream. When the consumer stops early (``close()`` or garbage collection), the producer stops
    after the item it is working on.
    """
    slots: queue.Queue[object] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                slots.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put(item):
                    return
            put(_DONE)
        except BaseException as exc:  # noqa: BLE001  (handed to the consumer, which re-raises it)
            put(_Failed(exc))

    worker = threading.Thread(target=produce, name="delta-prefetch", daemon=True)
    worker.start()
    try:
        while True:
            item = slots.get()
            if item is _DONE:
                return
            if isinstance(item, _Failed):
                raise item.exc
            yield cast(T, item)
    finally:
        stop.set()
        worker.join()
