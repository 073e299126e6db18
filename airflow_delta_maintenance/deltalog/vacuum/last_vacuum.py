"""``_delta_log/_last_vacuum_info``: how far VACUUM has looked at the log, as delta-spark records it.

delta-spark writes ``{"latestCommitVersionOutsideOfRetentionWindow": N}`` after a LITE run (``{}``
after a FULL one) and starts its next LITE run at ``N + 1``. We write the same key after FULL
runs too: a FULL run deleted every unreferenced file the commits up to ``N`` removed, so a LITE
run after it may start at ``N + 1`` as well. delta-spark ignores keys it does not know and treats
an unreadable file as absent; so do we (the next LITE run then needs the log from version 0).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..storage import LogStore

__all__ = ["LAST_VACUUM_INFO", "HORIZON_KEY", "LastVacuumInfo", "read_last_vacuum_info", "write_last_vacuum_info"]

LAST_VACUUM_INFO = "_last_vacuum_info"
HORIZON_KEY = "latestCommitVersionOutsideOfRetentionWindow"


@dataclass(frozen=True)
class LastVacuumInfo:
    """``horizon``: every tombstone of the commits up to it has been vacuumed (None: unknown)."""

    horizon: int | None
    present: bool = True
    problem: str | None = None  # why the file could not be used


def read_last_vacuum_info(store: LogStore) -> LastVacuumInfo:
    try:
        data = store.read(LAST_VACUUM_INFO)
    except FileNotFoundError:
        return LastVacuumInfo(None, present=False)
    try:
        parsed = json.loads(data)
        value = parsed.get(HORIZON_KEY) if isinstance(parsed, dict) else None
        if value is None:
            return LastVacuumInfo(None, problem=None if isinstance(parsed, dict) else "not a JSON object")
        if isinstance(value, bool) or not isinstance(value, int) or value < -1:
            return LastVacuumInfo(None, problem=f"{HORIZON_KEY} is {value!r}")
        return LastVacuumInfo(value)
    except (ValueError, UnicodeDecodeError) as exc:
        return LastVacuumInfo(None, problem=f"not valid JSON ({exc})")


def write_last_vacuum_info(store: LogStore, horizon: int | None) -> None:
    """Replace the file atomically (readers see the old or the new one); a Hadoop checksum shadow
    of the old one goes first, or delta-spark would find the new one "corrupt"."""
    body = json.dumps({HORIZON_KEY: horizon} if horizon is not None else {}, separators=(",", ":")) + "\n"
    if store.is_local:
        store.delete(f".{LAST_VACUUM_INFO}.crc")
    store.put_overwrite(LAST_VACUUM_INFO, body.encode())
