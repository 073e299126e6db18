"""The content of a log compaction file, built in memory: what ``write_compaction`` streams into
the file, for tests that compare the two or check the content itself."""

from __future__ import annotations

from airflow_delta_maintenance.deltalog.log_compaction import windows
from airflow_delta_maintenance.deltalog.log_compaction.lines import winning_lines
from airflow_delta_maintenance.deltalog.log_segment.listing import LogSegmentFiles
from airflow_delta_maintenance.deltalog.storage import LogStore

__all__ = ["compaction_actions"]


def compaction_actions(store: LogStore, files: LogSegmentFiles, start: int, end: int) -> bytes:
    """The NDJSON content of the compaction of published commits ``[start, end]``.

    File actions are the winning lines exactly as the commits wrote them (every field, even ones
    this library does not know, survives), in log order; non-file actions are re-serialised.
    """
    head, deltas, wanted = windows._compaction_plan(store, files, start, end)
    return b"".join([head, *(bytes(chunk) for chunk in winning_lines(store, deltas, wanted))])
