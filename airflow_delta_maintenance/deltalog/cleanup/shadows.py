"""Hadoop's checksum shadows (``.<name>.crc``) of the files metadata cleanup deletes.

On a local file system delta-spark (Hadoop's checksummed ``LocalFileSystem``) writes a shadow next
to every log file it writes. Cleanup deletes each shadow with its file, and the shadows already
orphaned (by an earlier cleanup, or another tool) of files it would have deleted. Shadows are found
in the listings the plan makes anyway: a table without them costs nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..model.paths import LogFileType, parse_log_path
from ..storage import FileStat

__all__ = ["SHADOW_KIND", "shadow_target", "shadows_to_delete"]

SHADOW_KIND = "crc_shadow"


def shadow_target(name: str) -> str | None:
    """The file a shadow name shadows (``dir/.x.crc`` → ``dir/x``), None for any other name."""
    directory, _, base = name.rpartition("/")
    if not (base.startswith(".") and base.endswith(".crc")) or len(base) <= 5:
        return None
    return f"{directory}/{base[1:-4]}" if directory else base[1:-4]


def _below(name: str, anchor: int, published: int) -> bool:
    """Whether cleanup with this anchor deletes the log file ``name`` (were it there)."""
    p = parse_log_path(name)
    if p is None:
        return False
    if p.type in (LogFileType.COMMIT, LogFileType.CRC) or p.is_checkpoint:
        return p.version < anchor
    if p.type is LogFileType.COMPACTION:
        return p.version <= anchor
    if p.type is LogFileType.STAGED_COMMIT:
        return p.version <= anchor and p.version <= published
    return p.type is LogFileType.SIDECAR  # a sidecar's shadow without its sidecar


def shadows_to_delete(
    hidden: Mapping[str, Iterable[FileStat]], deleting: set[str], present: set[str], anchor: int, published: int
) -> list[tuple[str, int]]:
    """``(shadow name, size)`` for every shadow, among the dot-named files listed per directory
    (``hidden``), whose file is being deleted, or is gone and would have been."""
    out = []
    for stats in hidden.values():
        for st in stats:
            target = shadow_target(st.name)
            if target is None:
                continue
            if target in deleting or (target not in present and _below(target, anchor, published)):
                out.append((st.name, st.size))
    return out
