"""Where a data file named by the log lives: the one resolver of ``add``/``remove``/``cdc`` paths
(and deletion vectors stored by absolute path) for every operation that reads or deletes data files
(OPTIMIZE's reads, writes and deletion vectors; VACUUM). Log maintenance never needs it: it copies
paths as they are. (Naming a new file, the inverse, is ``datafiles.paths``.)

A log path is a URI reference (PROTOCOL "Add File and Remove File": "a relative path to a data file
from the root of the table or an absolute path ... which needs to be decoded"). ``DataPathResolver``
turns one into a ``DataFile`` below the table root, or refuses it with ``DataPathError`` naming the
path and the reason. Its rules, and how they relate to the readers we test against:

- **relative paths** are percent-decoded once (``a%20b`` is ``a b``, ``a%2Fb`` is ``a/b``; an
  invalid escape such as ``%zz`` stays as written), split at ``/``, empty segments dropped — as the
  ``deltalake`` wheel and delta-spark (Hadoop ``Path``) both read them;
- **``.`` and ``..`` segments** (also when encoded, ``%2E%2E``) are refused: the wheel keeps them
  inside the table as literal names (``../x`` is ``<root>/%2E%2E/x`` to its ``file_uris`` and
  pyarrow reads), while its DataFusion scan and delta-spark resolve them outside the root — readers
  disagree about which file is meant, so no operation may touch either;
- **absolute paths and URIs** (``/data/t/x``, ``file:///data/t/x``, ``s3://bucket/t/x``: what a
  shallow clone or an old writer records) are accepted when they name the table's own store (same
  scheme, ``s3a``/``s3n`` being ``s3``, same bucket or host) and lie below the table root; every
  other one — ``/etc/shadow``, ``file:///etc/hosts``, another bucket, a source table of a shallow
  clone — is refused: an operation never resolves a path outside the table root. (The wheel keeps
  such paths inside the table as names, ``<root>/etc/shadow``; refusing is the safe side of both.)
- a raw ``?`` or ``#`` (a URI's query or fragment to delta-spark, part of the name to the wheel),
  a NUL, or bytes that do not decode as UTF-8 are refused, and so is a path into ``_delta_log``
  (a data file never lies there: an operation that took it for one would rewrite or delete the log).

``reference_reader_name`` gives, for any path, the name inside the table where the ``deltalake``
wheel's reader looks for it (``../../etc/passwd`` → ``%2E%2E/%2E%2E/etc/passwd``): VACUUM must keep
a file of that name, since that reader would read it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from ..errors import DataPathError
from .paths import LOG_DIR

__all__ = ["DataFile", "DataPathResolver", "reference_reader_name"]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
_ALIASES = {"s3a": "s3", "s3n": "s3"}


@dataclass(frozen=True)
class DataFile:
    """A data file below the table root."""

    raw: str  # the path as the log holds it
    relative: str  # decoded, "/"-separated, below the table root: never empty, no "." or ".."
    uri: str  # the table URI joined with ``relative`` (decoded: a location, not a URI reference)
    fs_path: str  # the path for the table's file system (``LogStore.fs``, or ``os`` for a local table)
    absolute_in_log: bool  # the log named it by an absolute path or URI


def _decode(text: str, raw: str) -> str:
    try:
        return unquote(text, errors="strict")
    except UnicodeDecodeError:
        raise DataPathError(f"data file path {raw!r} does not decode as UTF-8", path=raw) from None


def _segments(decoded: str, raw: str) -> list[str]:
    parts = [p for p in decoded.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise DataPathError(
            f"data file path {raw!r} has a '.' or '..' segment: readers disagree on whether it stays inside the table; refused", path=raw
        )
    if not parts:
        raise DataPathError(f"data file path {raw!r} names no file", path=raw)
    return parts


def _not_the_log(parts: list[str], raw: str) -> list[str]:
    if parts[0] == LOG_DIR:
        raise DataPathError(f"data file path {raw!r} names a file of the table's {LOG_DIR}; refused", path=raw)
    return parts


class DataPathResolver:
    """Resolves the log's data-file paths of one table (``table_uri`` as ``normalize_table_uri``
    gives it, ``table_root`` the file system path of the same directory)."""

    def __init__(self, table_uri: str, table_root: str | None = None) -> None:
        self.table_uri = table_uri.rstrip("/") or "/"
        self.table_root = (table_root if table_root is not None else self.table_uri).rstrip("/") or "/"
        scheme, sep, rest = self.table_uri.partition("://")
        if sep:
            self._scheme = _ALIASES.get(scheme.lower(), scheme.lower())
            self._authority, _, path = rest.partition("/")
            self._root_parts = [p for p in path.split("/") if p]
        else:  # a local path
            self._scheme, self._authority = "file", ""
            self._root_parts = [p for p in self.table_uri.split("/") if p]

    @classmethod
    def for_store(cls, store: object) -> DataPathResolver:
        """The resolver of a ``LogStore``'s table (its ``uri`` and ``table_root``)."""
        return cls(store.uri, store.table_root)  # type: ignore[attr-defined]

    def resolve(self, raw: str) -> DataFile:
        """The file ``raw`` names, below the table root; ``DataPathError`` when it is not one."""
        if not isinstance(raw, str) or not raw:
            raise DataPathError(f"data file path {raw!r} is empty", path=str(raw))
        if "\x00" in raw or "?" in raw or "#" in raw:
            raise DataPathError(f"data file path {raw!r} holds a NUL, '?' or '#' (readers disagree on what it names); refused", path=raw)
        m = _SCHEME.match(raw)
        if m is None and not raw.startswith("/"):
            parts = _segments(_decode(raw, raw), raw)
            return self._inside(raw, _not_the_log(parts, raw), absolute=False)
        if m is None:  # an absolute path on the table's own store
            parts = _segments(_decode(raw, raw), raw)
        else:
            url = urlsplit(raw)
            scheme = _ALIASES.get(url.scheme.lower(), url.scheme.lower())
            authority = url.netloc if scheme != "file" or url.netloc not in ("localhost",) else ""
            if scheme != self._scheme or authority != self._authority:
                raise DataPathError(
                    f"data file path {raw!r} is on another store than the table {self.table_uri}; an operation never leaves the table root",
                    path=raw,
                )
            parts = _segments(_decode(url.path, raw), raw)
        root = self._root_parts
        if len(parts) <= len(root) or parts[: len(root)] != root:
            raise DataPathError(f"data file path {raw!r} lies outside the table root {self.table_uri}; refused", path=raw)
        return self._inside(raw, _not_the_log(parts[len(root) :], raw), absolute=True)

    def _inside(self, raw: str, parts: list[str], *, absolute: bool) -> DataFile:
        relative = "/".join(parts)
        sep = "" if self.table_uri.endswith("/") else "/"
        fs_sep = "" if self.table_root.endswith("/") else "/"
        return DataFile(raw, relative, f"{self.table_uri}{sep}{relative}", f"{self.table_root}{fs_sep}{relative}", absolute)


def reference_reader_name(raw: str) -> str:
    """Where the ``deltalake`` wheel's reader (its ``file_uris`` and the pyarrow dataset built on
    them) looks for ``raw``, as a name relative to the table root: decoded once, split at ``/``,
    empty segments dropped, ``.``/``..`` kept as the literal names ``%2E``/``%2E%2E``, absolute
    paths and URIs taken as names too (``file:///etc/hosts`` → ``file:/etc/hosts``)."""
    decoded = unquote(raw, errors="replace")
    return "/".join({".": "%2E", "..": "%2E%2E"}.get(p, p) for p in decoded.split("/") if p)
