"""The fleet report: one JSON document and one self-contained HTML page (inline CSS and SVG
charts, no script, no network), worst tables first. Any static host or the provider's Airflow UI
plugin page serves it."""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..maintenance.operations.summary import human_bytes
from .history import (
    DEFAULT_MAX_SAMPLES,
    REPORT_HTML,
    REPORT_JSON,
    Alert,
    append_history,
    atomic_write_text,
    crossings,
    history_sample,
    read_history,
)
from .status import TableHealth

__all__ = ["PublishedReport", "publish_fleet_report", "render_html", "report_document"]

_CHART_SERIES = 8  # the worst tables get a line each; more would be unreadable
_PALETTE = ("#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")


def report_document(healths: Sequence[TableHealth], generated: str, alerts: Sequence[Alert] = ()) -> dict[str, Any]:
    """The JSON report: every table worst first, and the alerts this run raised."""
    return {
        "generated": generated,
        "tables": [h.to_dict() for h in healths],
        "lagging": [h.name for h in healths if h.breaches],
        "errors": [h.name for h in healths if h.error],
        "invalid": [h.name for h in healths if h.invalid],
        "alerts": [a.to_dict() for a in alerts],
    }


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _row(h: TableHealth) -> str:
    cls = "invalid error" if h.invalid else "error" if h.error else ("lagging" if h.breaches else "ok")
    runs = "".join(f"<li>{_e(task)}: {_e(when or 'unknown')}</li>" for task, when in h.last_success.items())
    head = f'<tr class="{cls}" data-table="{_e(h.name)}"><td class="name"><b>{_e(h.name)}</b><br><small>{_e(h.uri)}</small></td>'
    score = f'<td class="num">{h.lag_score:.2f}</td>'
    if h.status is None:
        return head + score + f'<td colspan="7" class="err">{_e(h.error)}</td><td><ul>{runs}</ul></td><td></td></tr>'
    s = h.status
    covered, total = h.compaction_coverage
    cleanup = f"{s.cleanup_candidates} / {human_bytes(s.cleanup_bytes)}" if not s.cleanup_skipped_reason else f"– ({_e(s.cleanup_skipped_reason)})"
    over = set(h.breaches)
    pending_cls = ' class="num over"' if "pending_commits" in over else ' class="num"'
    ckpt_cls = ' class="num over"' if "commits_since_checkpoint" in over else ' class="num"'
    problems = "".join(f"<li>{_e(p)}</li>" for p in s.problems)
    return head + score + "".join(
        [
            f'<td{pending_cls} data-figure="pending_commits">{len(s.pending_versions)}<small> / {h.thresholds.max_pending_commits}</small></td>',
            (
                f'<td{ckpt_cls} data-figure="commits_since_checkpoint">{s.commits_since_checkpoint}'
                f"<small> / {h.thresholds.max_commits_since_checkpoint}</small></td>"
            ),
            f'<td class="num" data-figure="log_files">{s.log_files}</td>',
            f'<td class="num" data-figure="log_bytes">{human_bytes(s.log_bytes)}</td>',
            f'<td class="num">{covered}/{total}</td>',
            f"<td>{cleanup}</td>",
            _small_cell(h, "small_files" in over),
            f"<td><ul>{runs}</ul></td>",
            f"<td><ul>{problems}</ul></td></tr>",
        ]
    )


def _small_cell(h: TableHealth, over: bool) -> str:
    """Small data files (OPTIMIZE's candidates): count / bytes, and the threshold when alerted."""
    if h.small_files is None:
        return '<td class="num" data-figure="small_files">–</td>'
    count, size = h.small_files
    limit = f"<small> / {h.thresholds.max_small_files}</small>" if h.thresholds.max_small_files is not None else ""
    cls = "num over" if over else "num"
    return f'<td class="{cls}" data-figure="small_files">{count:,} / {human_bytes(size)}{limit}</td>'


def _chart(
    title: str, figure: str, history: Sequence[Mapping[str, Any]], names: Sequence[str], fmt: Callable[[float], str] = str
) -> str:
    """A line chart (inline SVG) of ``figure`` over the samples, one line per table in ``names``."""
    w, h, left, bottom, top, right = 640, 240, 70, 30, 16, 12
    points = {n: [(i, s["tables"][n][figure]) for i, s in enumerate(history) if isinstance(s["tables"].get(n, {}).get(figure), (int, float))] for n in names}
    peak = max((v for series in points.values() for _, v in series), default=0) or 1
    span = max(len(history) - 1, 1)

    def x(i: int) -> float:
        return left + (w - left - right) * i / span

    def y(v: float) -> float:
        return top + (h - top - bottom) * (1 - v / peak)

    parts = [f'<svg class="chart" data-figure="{_e(figure)}" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="{_e(title)}">']
    parts.append(f'<line x1="{left}" y1="{h - bottom}" x2="{w - right}" y2="{h - bottom}" stroke="#888"/>')
    parts.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{h - bottom}" stroke="#888"/>')
    parts.append(f'<text x="{left - 6}" y="{top + 4}" text-anchor="end" font-size="11">{_e(fmt(peak))}</text>')
    parts.append(f'<text x="{left - 6}" y="{h - bottom}" text-anchor="end" font-size="11">0</text>')
    if history:
        parts.append(f'<text x="{left}" y="{h - 8}" font-size="11">{_e(history[0]["time"][:16])}</text>')
        parts.append(f'<text x="{w - right}" y="{h - 8}" text-anchor="end" font-size="11">{_e(history[-1]["time"][:16])}</text>')
    for color, name in zip(_PALETTE, names, strict=False):  # at most one line per colour
        series = points[name]
        if not series:
            continue
        coords = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in series)
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{coords}"><title>{_e(name)}</title></polyline>')
        parts.extend(f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="2.5" fill="{color}"/>' for i, v in series)
    parts.append("</svg>")
    legend = "".join(f'<span class="key"><i style="background:{c}"></i>{_e(n)}</span>' for c, n in zip(_PALETTE, names, strict=False))
    return f'<figure><figcaption>{_e(title)}</figcaption>{"".join(parts)}<div class="legend">{legend}</div></figure>'


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222}
h1{font-size:20px;margin:0 0 4px} .meta{color:#666;margin-bottom:16px}
.summary span{display:inline-block;margin-right:18px;padding:4px 10px;border-radius:4px;background:#eef}
.summary .bad{background:#fdd} table{border-collapse:collapse;width:100%;font-size:13px}
th,td{border-bottom:1px solid #ddd;padding:6px 8px;vertical-align:top;text-align:left} th{background:#f4f4f4}
td.num{text-align:right;white-space:nowrap} td.over{color:#b00;font-weight:bold}
tr.lagging{background:#fff3f3} tr.error{background:#fff8e0} td.err{color:#8a5a00}
ul{margin:0;padding-left:16px} small{color:#777} .charts{display:flex;flex-wrap:wrap;gap:24px;margin-top:24px}
figure{margin:0} figcaption{font-weight:bold;margin-bottom:4px} .legend{font-size:12px}
.key{margin-right:12px} .key i{display:inline-block;width:10px;height:10px;margin-right:4px}
.alerts{background:#fdd;padding:8px 12px;border-radius:4px;margin-bottom:12px}
"""


def render_html(healths: Sequence[TableHealth], history: Sequence[Mapping[str, Any]], generated: str, alerts: Sequence[Alert] = ()) -> str:
    """The report page: summary, alerts of this run, the tables worst first, and the charts."""
    lagging = sum(1 for h in healths if h.breaches)
    errors = sum(1 for h in healths if h.error and not h.invalid)
    invalid = sum(1 for h in healths if h.invalid)
    worst = [h.name for h in healths[:_CHART_SERIES]]
    alert_html = (
        '<div class="alerts"><b>Crossed a threshold in this run:</b><ul>' + "".join(f"<li>{_e(a.message())}</li>" for a in alerts) + "</ul></div>"
        if alerts
        else ""
    )
    header = (
        "<tr><th>table</th><th>lag score</th><th>pending commits</th><th>commits since checkpoint</th><th>log files</th>"
        "<th>log bytes</th><th>compaction coverage</th><th>cleanup candidates</th><th>small files</th><th>last success</th><th>problems</th></tr>"
    )
    return "".join(
        [
            '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Delta maintenance — fleet health</title>',
            f"<style>{_CSS}</style></head><body>",
            "<h1>Delta maintenance — fleet health</h1>",
            f'<div class="meta">generated {_e(generated)} · {len(history)} sample(s) of history</div>',
            (
                f'<div class="summary"><span>{len(healths)} table(s)</span><span class="{"bad" if lagging else ""}">{lagging} lagging</span>'
                f'<span class="{"bad" if errors else ""}">{errors} unreadable</span>'
                + (f'<span class="bad">{invalid} invalid configuration</span>' if invalid else "")
                + "</div><br>"
            ),
            alert_html,
            f'<table id="fleet"><thead>{header}</thead><tbody>{"".join(_row(h) for h in healths)}</tbody></table>',
            '<div class="charts">',
            _chart("Backlog: ratified commits not yet published", "pending_commits", history, worst),
            _chart("Commits since the last checkpoint", "commits_since_checkpoint", history, worst),
            _chart("_delta_log size", "log_bytes", history, worst, human_bytes),
            "</div></body></html>",
        ]
    )


@dataclass(frozen=True)
class PublishedReport:
    document: dict[str, Any]
    alerts: list[Alert]
    json_path: Path
    html_path: Path


def publish_fleet_report(
    healths: Sequence[TableHealth],
    report_dir: Path,
    generated: str,
    *,
    notify: Callable[[list[Alert]], None] | None = None,
    max_samples: int = DEFAULT_MAX_SAMPLES,
) -> PublishedReport:
    """Compare with the previous sample (alerts: figures that crossed their threshold since), send
    the alerts through ``notify``, append this run's sample to the history, then replace
    report.json and report.html atomically.

    Alerts are sent before the sample that records them is kept, so a crash in between sends them
    again (at least once). When ``notify`` fails, the report is still written, the sample records
    the unsent breaches as not yet seen (the next run sends them again), and the error is raised.
    """
    previous = read_history(report_dir, limit=1)
    last = previous[-1] if previous else None
    alerts = crossings(healths, last)
    failure: BaseException | None = None
    if alerts and notify is not None:
        try:
            notify(alerts)
        except Exception as exc:  # noqa: BLE001 - re-raised below, after the report is written
            failure = exc
    sample = history_sample(healths, generated, last)
    if failure is not None:
        for a in alerts:
            breaches = sample["tables"][a.table]["breaches"]
            if a.figure in breaches:
                breaches.remove(a.figure)
    append_history(report_dir, sample, max_samples=max_samples)
    history = read_history(report_dir, limit=max_samples)
    document = report_document(healths, generated, alerts)
    json_path, html_path = report_dir / REPORT_JSON, report_dir / REPORT_HTML
    atomic_write_text(json_path, json.dumps(document, sort_keys=True, indent=1) + "\n")
    atomic_write_text(html_path, render_html(healths, history, generated, alerts))
    if failure is not None:
        raise failure
    return PublishedReport(document, alerts, json_path, html_path)
