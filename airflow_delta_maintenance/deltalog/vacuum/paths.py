"""Which names under the table root VACUUM may look at, and which names a log path protects.

**Hidden names** (never listed, never deleted) follow delta-spark's ``isHiddenDirectory``, applied to
every component of a path: a name starting with ``.`` or ``_`` is hidden, except ``_delta_index*``,
``_change_data*`` and partition directories ``<partition column>=…``; ``metadata`` is hidden on
tables with Iceberg UniForm. ``_delta_log`` is always hidden.

**Protected names.** A log path (``add``/``remove``/``cdc`` path, a deletion vector's file) is
resolved by ``DataPathResolver`` (decoded once, inside the table root). Where readers could take
a path another way, every reading is protected: the resolver's, the raw path as a name (a writer
that did not encode ``%``), and where the ``deltalake`` wheel's reader looks
(``reference_reader_name``). Absolute paths outside the root (shallow clones) protect nothing
here: VACUUM never lists or deletes outside the root.

Most tables' paths are plain relative names (no ``%``, no scheme, no ``.``/``..``, no empty
segment): those are taken as they are, column-wise; only the rest go through Python.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..datafiles.deletion_vectors import dv_log_path
from ..errors import DataPathError
from ..model.data_paths import DataPathResolver, reference_reader_name
from ..model.paths import LOG_DIR

__all__ = ["HiddenNames", "DeferredHiddenNames", "ListingStoppedError", "protected_names", "protected_name_array", "names_of", "dv_file_path"]

# A log path needs the Python resolver when any of these matches (else it is its own name).
_SPECIAL = r"%|//|^/|/$|^[A-Za-z][A-Za-z0-9+.\-]*:|(^|/)\.\.?(/|$)|[?#\\\x00]"


# Only names with these beginnings can be hidden (``HiddenNames`` decides; all others are visible).
MAYBE_HIDDEN = (".", "_", "metadata")


class HiddenNames:
    """delta-spark's ``DeltaTableUtils.isHiddenDirectory`` for one table (its partition columns
    and whether Iceberg UniForm owns ``metadata/``)."""

    def __init__(self, partition_columns: Sequence[str], iceberg_metadata_hidden: bool = False) -> None:
        self._prefixes = tuple(f"{c}=" for c in partition_columns)
        self._iceberg = iceberg_metadata_hidden
        self.stopped = False  # a listing's walkers stop when set (``DeferredHiddenNames.stop``)

    def __call__(self, name: str) -> bool:
        if name == LOG_DIR:
            return True
        if self._iceberg and name == "metadata":
            return True
        if not name.startswith((".", "_")):
            return False
        if name.startswith(("_delta_index", "_change_data")):
            return False
        return not (self._prefixes and name.startswith(self._prefixes))

    def path_hidden(self, relative: str) -> bool:
        """Whether any component of a path relative to the table root is hidden."""
        return any(self(part) for part in relative.split("/"))


class ListingStoppedError(Exception):
    """A listing started before its table's snapshot was told to stop (the snapshot failed, or
    the operation was skipped)."""


class DeferredHiddenNames(HiddenNames):
    """``HiddenNames`` whose table is known later: a listing can start while the snapshot that
    gives the partition columns and UniForm formats is still loading. A name that cannot be
    hidden (one not starting with ``.`` or ``_`` and not ``metadata``) is answered at once; any
    other waits for ``resolve``. ``stop`` ends the listing (``stopped``, ``ListingStoppedError``)."""

    def __init__(self) -> None:
        super().__init__(())
        self._ready = threading.Event()
        self._real: HiddenNames | None = None

    def resolve(self, real: HiddenNames) -> None:
        self._real = real
        self._ready.set()

    def stop(self) -> None:
        self.stopped = True
        self._ready.set()

    def __call__(self, name: str) -> bool:
        if name == LOG_DIR:
            return True
        if not name.startswith(MAYBE_HIDDEN):
            return False
        self._ready.wait()
        if self._real is None:
            raise ListingStoppedError("the listing was stopped before its table was known")
        return self._real(name)


def dv_file_path(dv: Mapping[str, Any] | None) -> str | None:
    """The file of a deletion vector descriptor as a log path (``datafiles.deletion_vectors``:
    ``u`` → relative, ``p`` → its absolute path); ``i`` (inline) and none → None. ``DataPathError``
    for a descriptor that does not decode."""
    if not dv or not dv.get("pathOrInlineDv") or dv.get("storageType") not in ("u", "p"):
        return None
    text = str(dv["pathOrInlineDv"])
    try:
        return dv_log_path(str(dv["storageType"]), text)
    except ValueError as exc:
        raise DataPathError(f"deletion vector {text!r} does not name a file: {exc}", path=text) from None


def protected_names(raw: str, resolver: DataPathResolver) -> set[str]:
    """Every name relative to the table root that a reader might take ``raw`` to mean (see the
    module docstring); empty for a path outside the root."""
    out: set[str] = set()
    try:
        out.add(resolver.resolve(raw).relative)
    except DataPathError:
        pass
    if not raw.startswith("/") and "://" not in raw and ":" not in raw.split("/", 1)[0]:
        plain = "/".join(p for p in raw.split("/") if p)
        if plain and all(p not in (".", "..") for p in plain.split("/")):
            out.add(plain)  # the name as written (a writer that did not percent-encode)
    name = reference_reader_name(raw)
    if name:
        out.add(name)
    return out


def protected_name_array(paths: pa.Array | pa.ChunkedArray, resolver: DataPathResolver) -> pa.Array:
    """``protected_names`` of many log paths at once, as one string array (duplicates possible)."""
    if isinstance(paths, pa.ChunkedArray):
        paths = paths.combine_chunks() if paths.num_chunks else pa.array([], pa.string())
    if paths.type != pa.string():
        paths = paths.cast(pa.string())
    paths = paths.filter(pc.is_valid(paths)) if paths.null_count else paths
    if not len(paths):
        return pa.array([], pa.string())
    special = pc.match_substring_regex(paths, _SPECIAL)
    if not pc.any(special).as_py():
        return paths  # the common case: every path is its own name (no copy of a table's worth of strings)
    plain = paths.filter(pc.invert(special))
    odd = paths.filter(special).to_pylist()
    if not odd:
        return plain
    extra = sorted({n for raw in odd for n in protected_names(raw, resolver)})
    return pa.concat_arrays([plain, pa.array(extra, pa.string())])


def names_of(raws: Iterable[str], resolver: DataPathResolver) -> set[str]:
    """``protected_names`` of a few paths, as a set (for small inputs: commits, deletion vectors)."""
    out: set[str] = set()
    for raw in raws:
        if raw:
            out |= protected_names(raw, resolver)
    return out

