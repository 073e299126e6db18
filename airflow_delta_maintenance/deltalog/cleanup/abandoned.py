"""Leftovers of killed runs: temp files, Spark staging directories and sidecars no checkpoint references.

Found by name (our temp files are ``.<target>.<tag>.tmp``; staging directories are
``_spark_staging/<tag>``; our sidecars carry the writing run's tag) and judged by
``run_identity.is_abandoned``: owner proven dead, or older than a day by the storage's modification
times and the real clock and owner not proven alive. Another live run's files are never removed.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import DeltaLogError
from ..log_segment.listing import list_log_files
from ..model.paths import LEGACY_STAGED_DIR, SIDECAR_DIR, STAGED_DIR, LogFileType, ParsedLogPath
from ..model.validation import loads_action
from ..storage import FileStat, LogStore
from ..storage.run_identity import STAGING_DIR, RunIdentity, find_run_tag, is_abandoned

__all__ = ["Leftover", "find_abandoned", "remove_leftovers", "abandoned_sidecars", "referenced_sidecars"]

_TEMP = re.compile(r"^\.[^/]+\.[^./]+\.tmp$")  # storage.temp_path_for, and the untagged uuid form before it
_OUR_SIDECAR = re.compile(r"^(\d{20})\.checkpoint\.\d{10}\.\d{10}\.[^/]+\.parquet$")


@dataclass(frozen=True)
class Leftover:
    path: str  # relative to _delta_log: a file, or a staging directory
    kind: str  # "temp_file", "staging_dir" or "sidecar"
    size: int
    newest_mtime_ms: int
    run: RunIdentity | None

    @property
    def run_tag(self) -> str | None:
        return self.run.tag if self.run is not None else None


def find_abandoned(store: LogStore, top_level_hidden: Sequence[FileStat] | None = None) -> list[Leftover]:
    """Abandoned temp files (beside log files, sidecars and staged commits) and staging directories.

    ``top_level_hidden``: the dot-named files of a LIST of ``_delta_log`` the caller just made
    (``LogSegmentFiles.hidden``), instead of listing the whole log again for them.
    """
    out: list[Leftover] = []
    for sub in ("", SIDECAR_DIR, STAGED_DIR, LEGACY_STAGED_DIR):
        listed = top_level_hidden if sub == "" and top_level_hidden is not None else store.list_dir(sub)
        for st in listed:
            filename = st.name.rsplit("/", 1)[-1]
            if _TEMP.match(filename) is None:
                continue
            run = find_run_tag(filename)
            if is_abandoned(run, st.modification_time):
                out.append(Leftover(st.name, "temp_file", st.size, st.modification_time, run))
    for directory in store.list_subdirs(STAGING_DIR):
        files = store.list_tree(directory)
        own = store.stat(directory)  # a local directory's own mtime: it may still be empty
        newest = max([f.modification_time for f in files] + [own.modification_time if own else 0])
        run = find_run_tag(directory.rsplit("/", 1)[-1])
        if is_abandoned(run, newest):
            out.append(Leftover(directory, "staging_dir", sum(f.size for f in files), newest, run))
    return out


def referenced_sidecars(store: LogStore, checkpoints: Iterable[ParsedLogPath]) -> set[str]:
    """File names of the sidecars the given checkpoint files reference (multi-part ones never do)."""
    names: set[str] = set()
    for c in checkpoints:
        if c.type is LogFileType.CHECKPOINT_MULTIPART:
            continue
        if c.extension == "json":
            for line in store.read(c.name).split(b"\n"):
                if line.strip() and b'"sidecar"' in line:
                    action = loads_action(line, store.display(c.name), None)
                    if "sidecar" in action:
                        names.add(action["sidecar"]["path"].rsplit("/", 1)[-1])
            continue
        pf = pq.ParquetFile(io.BytesIO(store.read(c.name)))
        if "sidecar" in pf.schema_arrow.names:
            column = pf.read(columns=["sidecar"]).column("sidecar")
            names.update(s["path"].rsplit("/", 1)[-1] for s in column.to_pylist() if s)
    return names


def abandoned_sidecars(store: LogStore) -> list[Leftover]:
    """Our sidecars (tagged) that no checkpoint references and whose run is abandoned.

    Order matters: the sidecars are judged first and the checkpoints listed after, so a run that
    finished (wrote its top-level file) and exited before the judgement is seen referencing them.
    """
    candidates: list[tuple[ParsedLogPath, RunIdentity | None, int]] = []
    for s in store.list_log(SIDECAR_DIR):
        m = _OUR_SIDECAR.match(s.filename)
        run = find_run_tag(s.filename)
        if m is None or run is None:
            continue  # not written by us: metadata cleanup's own one-day rule applies to it
        if is_abandoned(run, s.modification_time):
            candidates.append((s, run, int(m.group(1))))
    if not candidates:
        return []
    lowest = min(v for _, _, v in candidates)
    checkpoints = [c for c in list_log_files(store).checkpoints if c.version >= lowest]
    try:
        referenced = referenced_sidecars(store, checkpoints)
    except (DeltaLogError, pa.ArrowException, ValueError, KeyError, TypeError, AttributeError, OSError):
        return []  # a checkpoint that cannot be read may reference any of them: none is a leftover
    return [Leftover(s.name, "sidecar", s.size, s.modification_time, run) for s, run, _ in candidates if s.filename not in referenced]


def remove_leftovers(store: LogStore, leftovers: Sequence[Leftover]) -> int:
    """Delete them (a leftover already gone is fine); returns how many were handled."""
    files = [x.path for x in leftovers if x.kind != "staging_dir"]
    if files:
        store.delete_many(files)
    for x in leftovers:
        if x.kind == "staging_dir":
            store.delete_tree(x.path)
    return len(leftovers)
