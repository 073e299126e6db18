"""Racing writers against one store: who wins a create-if-absent."""

from __future__ import annotations

import threading

from airflow_delta_maintenance.deltalog.errors import LogFileExistsError
from airflow_delta_maintenance.deltalog.storage import LogStore


def race_put_if_absent(store: LogStore, name: str, writers: int) -> list[int]:
    """``writers`` threads create ``name`` at once with their own bytes; returns the winners."""
    winners: list[int] = []
    barrier = threading.Barrier(writers)

    def attempt(i: int) -> None:
        barrier.wait()
        try:
            store.put_if_absent(name, f"writer {i}\n".encode())
            winners.append(i)
        except LogFileExistsError:
            pass

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return winners
