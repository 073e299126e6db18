"""Where the log lives: ``LogStore`` (atomic create-if-absent writes, listing, reads and batched
deletes over fsspec, with local fast paths), table URIs, and the run identity of temporary files."""

from .local_files import temp_path_for
from .log_store import FileStat, LogStore
from .uri import normalize_table_uri, open_table_storage

__all__ = ["LogStore", "FileStat", "open_table_storage", "normalize_table_uri", "temp_path_for"]
