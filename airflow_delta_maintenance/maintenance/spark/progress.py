"""Spark's output as a person wants it: progress of the stages, warnings and errors, no INFO noise.

A maintenance job submitted with ``quiet_spark_conf`` logs through our log4j2 configuration:
Spark's loggers at WARN, except the scheduler's two INFO loggers whose lines tell where the job is
(stages submitted and finished, tasks finished ``(12/40)``). ``SparkOutput`` reads the job's
output line by line (the Airflow hook's log, or the CLI's ``spark-submit`` stderr): scheduler
lines become progress messages (the caller throttles them) and are not passed on, nor are the lines
every JVM start prints (``WARNING: Using incubator modules``); everything else (warnings, errors,
the job's own lines) is. The job's result line (a JSON object) is kept as
``job_result`` and, like the scheduler's lines, not passed on.
With verbose output nothing is configured or held back: Spark's own log4j2 defaults apply.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from importlib.resources import files
from pathlib import Path

from ..operations.summary import Progress

__all__ = ["LOG4J2_PROPERTIES", "SparkOutput", "heartbeats", "log4j2_file", "quiet_spark_conf"]

# Spark's logging for a quiet job: a file shipped with the package (``log4j2.properties`` beside
# this module), so that no process leaves a copy behind in the temporary directory
_PACKAGED = files(__package__) / "log4j2.properties"
LOG4J2_PROPERTIES = _PACKAGED.read_text(encoding="utf-8")

_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
_FILE: str | None = None


def log4j2_file() -> str:
    """``LOG4J2_PROPERTIES`` as a file the driver can read: the packaged one, or (a package that
    is not plain files on disk, or a path with spaces, which Java options cannot carry) a copy
    written once per process and removed when it exits."""
    global _FILE
    if isinstance(_PACKAGED, Path) and not any(c.isspace() for c in str(_PACKAGED)):
        return str(_PACKAGED)
    if _FILE and os.path.exists(_FILE):
        return _FILE
    directory = tempfile.mkdtemp(prefix="delta-maintenance-log4j2-")
    path = os.path.join(directory, "log4j2.properties")
    with open(path, "w", encoding="utf-8") as f:
        f.write(LOG4J2_PROPERTIES)
    atexit.register(shutil.rmtree, directory, True)
    _FILE = path
    return path


def quiet_spark_conf(conf: Mapping[str, str]) -> dict[str, str]:
    """``conf`` with the driver pointed at our log4j2 configuration, unless it names its own."""
    out = dict(conf)
    options = out.get(_JAVA_OPTIONS, "")
    if "log4j2.configurationFile" in options or "log4j.configuration" in options:
        return out
    out[_JAVA_OPTIONS] = f"-Dlog4j2.configurationFile=file:{log4j2_file()} {options}".strip()
    return out


# Printed by the JVM or by Spark's launcher on every start, whatever the job: nothing to act on.
_START_NOISE = re.compile(
    r"^(WARNING: Using incubator modules: |Using Spark's default log4j profile|Setting default log level to "
    r"|To adjust logging level use sc\.setLogLevel)"
)
_LINE = re.compile(r"\b(INFO|WARN|ERROR|DEBUG|TRACE)\s+(DAGScheduler|TaskSetManager):\s*(.*)$")
_SUBMIT_TASKS = re.compile(r"Submitting (\d+) missing tasks from \w+ (\d+) \((.*?)\)")
_TASK_DONE = re.compile(r"Finished task \S+ in stage (\d+)\.\d+ .*\((\d+)/(\d+)\)\s*$")
_STAGE_DONE = re.compile(r"\w+Stage (\d+) \((.*?)\) finished in ([\d.]+) (ms|s)\b")
_JOB_DONE = re.compile(r"Job (\d+) finished: .*took ([\d.]+) (ms|s)\b")


def _short(name: str) -> str:
    """``collect at /long/path/checkpoint.py:120`` → ``collect at checkpoint.py:120``; Spark's
    internal call sites (``$anonfun$...``) say nothing to a reader and are dropped."""
    name = re.sub(r"^\S+\[\d+\] at ", "", name)  # "MapPartitionsRDD[5] at collect at ..." → "collect at ..."
    return "" if "$" in name else re.sub(r"(?<= at )\S*/", "", name)


def _seconds(value: str, unit: str) -> float:
    return float(value) / 1000 if unit == "ms" else float(value)


class SparkOutput:
    """Reads a Spark job's output lines; see the module's docstring."""

    def __init__(self, progress: Progress | None = None, *, verbose: bool = False, clock: Callable[[], float] = time.monotonic) -> None:
        self._progress = progress
        self.verbose = verbose
        self._clock = clock
        self._started = clock()
        self._names: dict[int, str] = {}
        self._state = "waiting for the first stage"
        self.stages_done = 0
        self.jobs_done = 0
        self.job_result: dict[str, object] | None = None

    def _say(self, message: str) -> None:
        self._state = message
        if self._progress is not None:
            self._progress(f"spark: {message} ({self.stages_done} stage(s) done, {self._clock() - self._started:.0f} s)")

    def heartbeat(self) -> None:
        """Say the current state again (called on a timer: the driver's start is silent)."""
        self._say(self._state)

    def _stage(self, stage: int) -> str:
        name = self._names.get(stage, "")
        return f"stage {stage}" + (f" ({name})" if name else "")

    def feed(self, line: str) -> bool:
        """Take one output line; True if it should be passed on to the reader's log."""
        text = line.rstrip("\r\n")
        stripped = text.strip()
        if stripped.startswith("{") and stripped.endswith("}"):
            try:
                value = json.loads(stripped)
            except ValueError:
                value = None
            if isinstance(value, dict) and "version" in value:
                self.job_result = value
                return self.verbose  # read, not shown: the task's summary line says what the job did
        match = _LINE.search(text)
        if match is None:
            return self.verbose or not _START_NOISE.match(stripped)
        message = match.group(3)
        if m := _SUBMIT_TASKS.search(message):
            stage = int(m.group(2))
            self._names[stage] = _short(m.group(3))
            self._say(f"{self._stage(stage)} started, {m.group(1)} task(s)")
        elif m := _TASK_DONE.search(message):
            self._say(f"{self._stage(int(m.group(1)))}: {m.group(2)}/{m.group(3)} task(s) done")
        elif m := _STAGE_DONE.search(message):
            self.stages_done += 1
            self._say(f"{self._stage(int(m.group(1)))} finished in {_seconds(m.group(3), m.group(4)):.1f} s")
        elif m := _JOB_DONE.search(message):
            self.jobs_done += 1
        # the scheduler's INFO lines are progress, read above; its warnings and errors are shown
        return self.verbose or match.group(1) in ("WARN", "ERROR")


@contextmanager
def heartbeats(output: SparkOutput, every_s: float = 1.0) -> Iterator[None]:
    """While the block runs, offer ``output`` a heartbeat every ``every_s`` (it throttles): the
    driver's start prints nothing for a minute or more, and silence reads as a hang."""
    done = threading.Event()

    def beat() -> None:
        while not done.wait(every_s):
            output.heartbeat()

    threading.Thread(target=beat, daemon=True).start()
    try:
        yield
    finally:
        done.set()
