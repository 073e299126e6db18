"""What the fleet health view keeps between runs, in one local directory (the report directory).

    report.json, report.html      the latest report; replaced atomically (readers never see a partial one)
    history.jsonl                 one sample of every table's figures per fleet run (append-only, bounded)
    runs/<table>/<task>.json      the last success of each maintenance task (written when the task succeeds)

The history feeds the report's charts and the alert state: a table alerts when a figure crosses
its threshold, i.e. it is above it now and was not in the previous sample (once per crossing).
A line torn by a killed append is skipped when reading; trimming rewrites the file atomically.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..maintenance.config.tables import HealthConfig
from .status import WATCHED, TableHealth

__all__ = [
    "HISTORY_FILE",
    "REPORT_HTML",
    "REPORT_JSON",
    "Alert",
    "append_history",
    "atomic_write_text",
    "crossings",
    "history_sample",
    "read_history",
    "read_last_success",
    "record_task_success",
]

HISTORY_FILE = "history.jsonl"
REPORT_JSON = "report.json"
REPORT_HTML = "report.html"
RUNS_DIR = "runs"
DEFAULT_MAX_SAMPLES = 2000  # about 12 weeks of hourly fleet runs
_SAFE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,249}$")


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``path`` through a temporary file in the same directory and an atomic rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def history_sample(healths: Sequence[TableHealth], time_iso: str, previous: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One history line. A table that could not be measured keeps its previous breaches: not
    knowing is not a recovery (it would alert again on the next measured run otherwise)."""
    before = (previous or {}).get("tables", {})
    tables: dict[str, Any] = {}
    for h in healths:
        if h.status is None:
            tables[h.name] = {"error": True, "breaches": list(before.get(h.name, {}).get("breaches", []))}
            continue
        tables[h.name] = {
            **h.figures,
            "log_files": h.status.log_files,
            "log_bytes": h.status.log_bytes,
            "lag_score": h.lag_score,
            "breaches": h.breaches,
        }
    return {"time": time_iso, "tables": tables}


def read_history(report_dir: Path, *, limit: int | None = None) -> list[dict[str, Any]]:
    """The samples, oldest first (the newest ``limit`` when given); torn or foreign lines skipped."""
    path = report_dir / HISTORY_FILE
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    samples: list[dict[str, Any]] = []
    for line in lines:
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("tables"), dict) and isinstance(obj.get("time"), str):
            samples.append(obj)
    return samples[-limit:] if limit else samples


def append_history(report_dir: Path, sample: Mapping[str, Any], *, max_samples: int = DEFAULT_MAX_SAMPLES) -> None:
    """Append one sample (one ``write`` of one line); past twice ``max_samples`` lines, keep the
    newest ``max_samples`` (rewritten atomically), so the file stays bounded."""
    report_dir.mkdir(parents=True, exist_ok=True)
    path = report_dir / HISTORY_FILE
    line = json.dumps(sample, sort_keys=True, separators=(",", ":")) + "\n"
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = "\n" + line  # a torn last line (a killed append): never glue this sample onto it
        os.write(fd, line.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    with path.open(encoding="utf-8") as f:
        count = sum(1 for _ in f)
    if count > 2 * max_samples:
        kept = read_history(report_dir, limit=max_samples)
        atomic_write_text(path, "".join(json.dumps(s, sort_keys=True, separators=(",", ":")) + "\n" for s in kept))


@dataclass(frozen=True)
class Alert:
    """A figure of a table that crossed its threshold since the previous sample."""

    table: str
    table_uri: str
    figure: str  # a key of fleet_status.WATCHED
    value: int
    threshold: int

    def message(self) -> str:
        return f"{self.table} ({self.table_uri}): {self.figure.replace('_', ' ')} is {self.value}, above its threshold {self.threshold}"

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "table_uri": self.table_uri, "figure": self.figure, "value": self.value, "threshold": self.threshold}


def crossings(healths: Iterable[TableHealth], previous: Mapping[str, Any] | None) -> list[Alert]:
    """Figures above their threshold now and not in the previous sample (no sample: every breach)."""
    before = (previous or {}).get("tables", {})
    alerts: list[Alert] = []
    for h in healths:
        was = set(before.get(h.name, {}).get("breaches", []))
        for figure in h.breaches:
            if figure not in was:
                threshold = _threshold(h.thresholds, figure)
                alerts.append(Alert(h.name, h.uri, figure, h.figures[figure], threshold))
    return alerts


def _threshold(health: HealthConfig, figure: str) -> int:
    return int(getattr(health, WATCHED[figure]))


def record_task_success(report_dir: Path, table: str, task_id: str, end_iso: str, run_id: str | None = None) -> None:
    """The last success of ``task_id`` of ``table`` (replaced atomically; names are checked so a
    hostile id cannot write outside the directory)."""
    if not (_SAFE.match(table) and _SAFE.match(task_id)):
        raise ValueError(f"refusing to record a run for table {table!r}, task {task_id!r}: not a plain name")
    atomic_write_text(report_dir / RUNS_DIR / table / f"{task_id}.json", json.dumps({"end": end_iso, "run_id": run_id}, sort_keys=True))


def read_last_success(report_dir: Path | None) -> dict[str, dict[str, str | None]]:
    """table → task id → ISO end time of its last success (what ``record_task_success`` wrote)."""
    out: dict[str, dict[str, str | None]] = {}
    root = report_dir / RUNS_DIR if report_dir is not None else None
    if root is None or not root.is_dir():
        return out
    for table_dir in sorted(root.iterdir()):
        if table_dir.is_symlink() or not table_dir.is_dir():
            continue
        for f in sorted(table_dir.glob("*.json")):
            try:
                end = json.loads(f.read_text(encoding="utf-8")).get("end")
            except (OSError, ValueError, AttributeError):
                continue
            out.setdefault(table_dir.name, {})[f.stem] = end if isinstance(end, str) else None
    return out
