"""stdout carries the command's result and nothing else: ``delta-maintenance ... --json | jq`` must
parse whatever logging the process has. Airflow configures logging when it is imported (3.0's
``console`` handler writes to ``sys.stdout``, resolved at each record), a user's ``dictConfig`` may
name ``ext://sys.stdout``, and a script or task may call ``main()`` in a process so configured.

For the command's run, every logging handler that would write to the command's stdout is muted, and
a stand-in with the same level, formatter and filters writes its records to stderr instead; both are
undone when the command returns. The process's handlers are not otherwise touched: a handler on
stderr or a file keeps receiving everything."""

from __future__ import annotations

import io
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

__all__ = ["logs_off_stdout"]


def _fileno(stream: object) -> int | None:
    try:
        return stream.fileno()  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None


def _writes_to(handler: logging.Handler, out: IO[str]) -> bool:
    """Whether ``handler`` writes to ``out``: the same object (also a handler that reads
    ``sys.stdout`` at each record, as Airflow 3.0's does), or the same file descriptor. An embedding
    process that redirected stdout to take the result keeps its handlers on the real one."""
    if not isinstance(handler, logging.StreamHandler) or isinstance(handler, logging.FileHandler):
        return False
    try:
        stream = handler.stream
    except (AttributeError, ImportError, ValueError):  # a property that cannot answer now: leave it
        return False
    if stream is out:
        return True
    fd = _fileno(out)
    return fd is not None and _fileno(stream) == fd


def _loggers() -> Iterator[logging.Logger]:
    yield logging.getLogger()
    for logger in list(logging.Logger.manager.loggerDict.values()):
        if isinstance(logger, logging.Logger):  # a PlaceHolder has no handlers
            yield logger


def _mute(record: logging.LogRecord) -> bool:
    return False


@contextmanager
def logs_off_stdout() -> Iterator[None]:
    """Log records meant for stdout go to stderr while the block runs (see the module's doc)."""
    out = sys.stdout
    undo: list[tuple[logging.Logger, logging.Handler, logging.Handler]] = []
    for logger in _loggers():
        for handler in list(logger.handlers):
            if not _writes_to(handler, out):
                continue
            stand_in: logging.Handler = logging.StreamHandler(_Stderr())
            stand_in.setLevel(handler.level)
            stand_in.setFormatter(handler.formatter)
            for f in handler.filters:
                stand_in.addFilter(f)
            handler.addFilter(_mute)
            logger.addHandler(stand_in)
            undo.append((logger, handler, stand_in))
    try:
        yield
    finally:
        for logger, handler, stand_in in undo:
            logger.removeHandler(stand_in)
            handler.removeFilter(_mute)
            stand_in.close()


class _Stderr:
    """``sys.stderr`` as it is at each record (pytest's capture, a redirect), as print() finds it."""

    def write(self, text: str) -> Any:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()
