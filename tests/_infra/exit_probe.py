"""Observe how child processes ended: their exit handlers ran, and whether the interpreter's
teardown ran (where Arrow's thread pools are destroyed; see ``deltalog._runtime.process_end``).
A ``sitecustomize`` put first on the children's PYTHONPATH registers an exit handler and an object
whose finaliser runs only when the modules are torn down; each writes a line naming its process."""

from __future__ import annotations

import os
from pathlib import Path

_SITECUSTOMIZE = '''
import atexit, os, sys
_MARKS, _PID = os.environ["EXIT_PROBE_FILE"], os.getpid()


def _mark(word, _open=open, _path=_MARKS, _pid=_PID, _sys=sys):
    try:
        program = _sys.argv[0]
    except Exception:  # torn down already
        program = "?"
    with _open(_path, "a") as f:
        f.write(f"{_pid}\\t{word}\\t{program}\\n")


atexit.register(_mark, "atexit")


class _Teardown:
    def __del__(self, _mark=_mark):
        _mark("teardown")


_probe = _Teardown()
'''


class ExitProbe:
    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "sitecustomize.py").write_text(_SITECUSTOMIZE)
        self.directory, self.marks = directory, directory / "marks.txt"

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ if base is None else base)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(self.directory), env.get("PYTHONPATH", "")) if p)
        env["EXIT_PROBE_FILE"] = str(self.marks)
        return env

    def ended(self) -> list[tuple[str, list[str]]]:
        """Each probed process so far, in the order they ended: its program (``sys.argv[0]`` at
        exit) and what ran at its end: "atexit", then "teardown" when the interpreter tore down."""
        lines = [line.split("\t") for line in self.marks.read_text().splitlines()] if self.marks.exists() else []
        programs = {pid: program for pid, word, program in lines if word == "atexit"}
        by_pid: dict[str, list[str]] = {}
        for pid, word, _ in lines:
            by_pid.setdefault(pid, []).append(word)
        return [(programs.get(pid, "?"), words) for pid, words in by_pid.items()]
