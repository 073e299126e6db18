"""Regenerate ``tests/golden/README.md``, the catalogue of the golden tables.

    .venv/bin/python -m tests.golden.catalogue > tests/golden/README.md

Descriptions are derived from each table's log (layout, features, operations in commitInfo) plus
the reason strings of the lists in ``test_golden_tables.py``; nothing here is asserted, the test is.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

import deltalake

from airflow_delta_maintenance.deltalog.errors import DeltaLogError
from airflow_delta_maintenance.deltalog.replay.snapshot import Snapshot, load_snapshot
from tests.golden.test_golden_tables import (
    CASES,
    EXPECTED_FAILURES,
    OUR_EXPECTATIONS,
    WHEEL_CANNOT_READ,
    WHEEL_CANNOT_READ_VERSIONS,
    _table_roots,
    _unpack,
)


def _operations(log: Path) -> list[str]:
    ops: list[str] = []
    for name in sorted(os.listdir(log)):
        if not re.match(r"^\d+\.json$", name):
            continue
        for line in (log / name).read_text(errors="replace").splitlines():
            if line.startswith('{"commitInfo"'):
                try:
                    op = json.loads(line)["commitInfo"].get("operation")
                except ValueError:
                    continue
                if op and op not in ops:
                    ops.append(op)
    return ops


def _layout(log: Path) -> list[str]:
    names = os.listdir(log)
    out = []
    commits = sorted(int(m.group(1)) for n in names if (m := re.match(r"^(\d+)\.json$", n)))
    if not commits:
        out.append("no commit files")
    elif commits[0] > 0:
        out.append(f"commits before {commits[0]} cleaned up")
    kinds = {
        "classic checkpoint": r"^\d+\.checkpoint\.parquet$",
        "multi-part checkpoint": r"^\d+\.checkpoint\.\d+\.\d+\.parquet$",
        "V2 checkpoint (UUID, json)": r"^\d+\.checkpoint\.[^.]+-[^.]+\.json$",
        "V2 checkpoint (UUID, parquet)": r"^\d+\.checkpoint\.[^.]+-[^.]+\.parquet$",
        "log compaction": r"^\d+\.\d+\.compacted\.json$",
        ".crc": r"^\d+\.crc$",
    }
    for label, pattern in kinds.items():
        count = sum(1 for n in names if re.match(pattern, n))
        if count:
            out.append(f"{count} {label}" if count > 1 else label)
    if (log / "_sidecars").is_dir():
        out.append("sidecars")
    if "_last_checkpoint" in names:
        hint = (log / "_last_checkpoint").read_text(errors="replace").strip()
        try:
            json.loads(hint)
        except ValueError:
            out.append("corrupt _last_checkpoint")
    return out


def _state(s: Snapshot) -> list[str]:
    out = [f"v{s.version}", f"{s.num_files} files"]
    if s.metadata.partition_columns:
        out.append("partitioned by " + ", ".join(s.metadata.partition_columns))
    dvs = s.num_files - s.files.column("deletionVector").null_count
    if dvs:
        out.append(f"{dvs} with DVs")
    mode = s.metadata.configuration.get("delta.columnMapping.mode")
    if mode and mode != "none":
        out.append(f"column mapping {mode}")
    if s.in_commit_timestamps_enabled:
        out.append("in-commit timestamps")
    if s.txns:
        out.append(f"{len(s.txns)} txn")
    if s.domain_metadata:
        out.append("domains " + ", ".join(sorted(s.domain_metadata)))
    return out


def _wheel_versions(root: Path, latest: int) -> tuple[int, int]:
    ok = refused = 0
    for v in range(latest + 1):
        try:
            deltalake.DeltaTable(str(root), version=v)
            ok += 1
        except Exception:  # noqa: BLE001
            refused += 1
    return ok, refused


def _cell(items: Iterable[str]) -> str:
    text = "; ".join(i for i in items if i)
    return (text or "-").replace("|", "\\|")


def rows() -> list[str]:
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for key, entry in CASES:
            origin, name = key.split("/", 1)
            location = entry
            if entry.name.endswith(".tar.zst"):
                (Path(tmp) / name).mkdir()
                location = _unpack(entry, Path(tmp) / name)
            roots = _table_roots(location) or [location]
            protocols, features, description, expectation = set(), set(), [], []
            if len(roots) > 1:
                description.append(f"{len(roots)} tables: " + ", ".join(str(r.relative_to(location)) for r in roots))
            for root in roots:
                log = root / "_delta_log"
                if not log.is_dir():
                    description.append("no _delta_log")
                    continue
                description += _layout(log)
                try:
                    s = load_snapshot(str(root))
                except DeltaLogError as exc:
                    description.append(f"ours: {type(exc).__name__}")
                    continue
                protocols.add(f"{s.protocol.min_reader_version}/{s.protocol.min_writer_version}")
                features.update(s.protocol.reader_features or ())
                features.update(s.protocol.writer_features or ())
                description += _state(s)
                if key not in EXPECTED_FAILURES and key not in WHEEL_CANNOT_READ:
                    ok, refused = _wheel_versions(root, s.version)
                    note = f"all {ok} versions equal the wheel's" if not refused else f"{ok} of {s.version + 1} versions equal the wheel's"
                    if len(roots) > 1:
                        note = f"{root.relative_to(location)}: {note}"
                    if refused:
                        listed = WHEEL_CANNOT_READ_VERSIONS.get(key, {})
                        cleaned = refused - len(listed)
                        if cleaned:
                            note += f"; {cleaned} cleaned-up versions refused by both (MissingCommitError)"
                        for v, why in listed.items():
                            note += f"; v{v} wheel cannot read ({why}), ours = naive replay"
                    expectation.append(note)
                ops = _operations(log)
                if ops:
                    description.append("ops: " + ", ".join(ops[:6]) + (" …" if len(ops) > 6 else ""))
            if key in EXPECTED_FAILURES:
                error, reason = EXPECTED_FAILURES[key]
                expectation = [f"refused with {error.__name__}: {reason}; the wheel refuses too"]
            elif key in WHEEL_CANNOT_READ:
                expectation = [f"wheel cannot read: {WHEEL_CANNOT_READ[key]}; ours: {OUR_EXPECTATIONS[key].source} (+ naive replay)"]
            out.append(
                f"| `{name}` | {origin} | {_cell(sorted(protocols))} | {_cell(sorted(features))} | "
                f"{_cell(dict.fromkeys(description))} | {_cell(dict.fromkeys(expectation))} |"
            )
    return out


HEADER = """# Golden tables catalogue

`tables/` is a vendored, byte-identical copy of the upstream golden tables (Apache-2.0 tables from
delta-io/delta `connectors/golden-tables`, delta-io/delta-rs `crates/test/tests/data` and
delta-io/delta-kernel-rs `kernel/tests/data`; origins in `tables/README.md`). `*.tar.zst` entries
are unpacked into a temporary directory by the test (the `zstandard` module, else `tar --zstd`).

`test_golden_tables.py` checks every row, with no silent skips:

* **same as the wheel**: at every version the `deltalake` wheel (1.6.6) loads, our version,
  protocol (min versions, reader and writer features), metadata (id, name, description, created
  time, partition columns, configuration, schema string parsed as JSON), active files (path and
  size), partition values, txns and, for files with deletion vectors, the number of deleted rows
  equal the wheel's. Versions whose commits were cleaned up are refused by both (we raise exactly
  `MissingCommitError`);
* **refused** (`EXPECTED_FAILURES`): we raise exactly the listed error class; the wheel refuses too;
* **wheel cannot read** (`WHEEL_CANNOT_READ`): the wheel's refusal is asserted (so the list cannot go
  stale) and our state must equal the upstream suite's expectation (`OUR_EXPECTATIONS`) and a
  deliberately naive replay.

Paths are compared exactly as the log stores them; see `wheel_oracle.py` for the few normalisations.
`delta-kernel-rs/unshredded-variant.expected.in` is not a table (expected query output of the
`unshredded-variant` archive), so 208 of the 209 entries are tested.

Regenerate this file with `.venv/bin/python -m tests.golden.catalogue > tests/golden/README.md`.

| Table | Origin | Protocol (r/w) | Features | Description (from the log) | Tests / expectation |
|---|---|---|---|---|---|
"""


def main() -> int:
    sys.stdout.write(HEADER + "\n".join(rows()) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
