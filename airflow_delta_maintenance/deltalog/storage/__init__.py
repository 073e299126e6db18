"""Where the log lives: ``LogStore`` (atomic create-if-absent writes, listing, reads and batched
deletes over fsspec, with local fast paths), table URIs, and the run identity of temporary files."""

from .log_store import FileStat, LogStore, normalize_table_uri, open_table_storage, temp_path_for

__all__ = ["LogStore", "FileStat", "open_table_storage", "normalize_table_uri", "temp_path_for"]
