"""Every golden table is read with the same state as an independent reader, or refused with an
expected, listed error. No silent skips: a table not listed must match the `deltalake` wheel.

Oracles: the `deltalake` wheel (delta-rs) at every version it can load; where the wheel cannot
read a table, a deliberately naive line-by-line replay (``naive_state`` below, written for
clarity, not speed) plus the expectation of the upstream suite that produced the table.
"""

from __future__ import annotations

import glob
import json
import os
import tarfile
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from airflow_delta_maintenance.deltalog import errors as E
from airflow_delta_maintenance.deltalog.snapshot import load_snapshot

import deltalake  # the independent oracle: a test dependency, never skipped
pytestmark = pytest.mark.interop

# Vendored copy of ../shared/golden-tables (Apache-2.0; see tables/README.md for the origins), so a
# clean clone tests the same tables; DELTA_GOLDEN_TABLES points elsewhere if needed.
GOLDEN = Path(os.environ.get("DELTA_GOLDEN_TABLES") or Path(__file__).with_name("tables"))
MAX_VERSIONS = 30  # time-travel comparison for the first versions of long tables

# Tables we refuse, with the error we must raise and why (the wheel refuses them too).
EXPECTED_FAILURES: dict[str, tuple[type[Exception], str]] = {
    "delta-kernel-rs/crc-malformed": (E.TableNotFoundError, "only .crc files, no commit or checkpoint"),
    "delta-rs/simple_table_features": (E.UnsupportedFeatureError, "reader version 5 is beyond the protocol's 3"),
    "delta-spark/data-reader-absolute-paths-escaped-chars": (E.ProtocolViolationError, "the log has no metaData action"),
    "delta-spark/deltalog-invalid-protocol-version": (E.UnsupportedFeatureError, "reader version 99"),
    "delta-spark/deltalog-state-reconstruction-from-checkpoint-missing-metadata": (E.ProtocolViolationError, "checkpoint without metaData"),
    "delta-spark/deltalog-state-reconstruction-from-checkpoint-missing-protocol": (E.ProtocolViolationError, "checkpoint without protocol"),
    "delta-spark/deltalog-state-reconstruction-without-metadata": (E.ProtocolViolationError, "commits without metaData"),
    "delta-spark/deltalog-state-reconstruction-without-protocol": (E.ProtocolViolationError, "commits without protocol"),
    "delta-spark/log-store-listFrom": (E.TableNotFoundError, "a LogStore fixture, not a table"),
    "delta-spark/log-store-read": (E.TableNotFoundError, "a LogStore fixture, not a table"),
    "delta-spark/no-delta-log-folder": (E.TableNotFoundError, "no _delta_log directory"),
    "delta-spark/versions-not-contiguous": (E.MissingCommitError, "version 1 is missing between 0 and 2"),
}

# Tables the wheel cannot read but we can: (version, number of active files) expected, and why.
WHEEL_CANNOT_READ: dict[str, tuple[int, int, str]] = {
    "delta-kernel-rs/table-with-geo": (0, 0, "wheel: unsupported 'geometry' type in the schema (a data type; the log is fine)"),
    "delta-spark/canonicalized-paths-normal-a": (1, 0, "metaData without schemaString; delta-spark: /p and file:/p are one file, removed at v1"),
    "delta-spark/canonicalized-paths-normal-b": (1, 0, "as normal-a with file:///p"),
    "delta-spark/canonicalized-paths-special-a": (1, 0, "as normal-a with escaped characters"),
    "delta-spark/canonicalized-paths-special-b": (1, 0, "as normal-b with escaped characters"),
    "delta-spark/corrupted-last-checkpoint": (10, 11, "metaData without schemaString; the corrupt hint must not matter"),
    "delta-spark/deltalog-commit-info": (0, 1, "metaData without schemaString"),
    "delta-spark/update-deleted-directory": (0, 10, "metaData without schemaString; state from the checkpoint"),
}


def _table_roots(path: Path) -> list[Path]:
    if (path / "_delta_log").is_dir():
        return [path]
    return sorted({Path(p).parent for p in glob.glob(str(path / "**" / "_delta_log"), recursive=True)})


def _cases() -> list[tuple[str, Path]]:
    out = []
    for origin in sorted(p for p in GOLDEN.iterdir() if p.is_dir()):
        for entry in sorted(origin.iterdir()):
            if entry.name.endswith(".tar.zst") or entry.is_dir():
                out.append((f"{origin.name}/{entry.name.removesuffix('.tar.zst')}", entry))
    return out


CASES = _cases()


def _unpack(archive: Path, dest: Path) -> Path:
    import zstandard

    with open(archive, "rb") as fh, zstandard.ZstdDecompressor().stream_reader(fh) as reader:
        with tarfile.open(fileobj=reader, mode="r|") as tar:
            tar.extractall(dest, filter="data")
    return dest


def _dv_id(dv: dict[str, Any] | None) -> str | None:
    if not dv:
        return None
    return f"{dv['storageType']}{dv['pathOrInlineDv']}" + (f"@{dv['offset']}" if dv.get("offset") is not None else "")


def naive_state(root: Path, version: int) -> set[tuple[str, str | None]]:
    """A slow, obvious replay: newest checkpoint ≤ version (classic or multi-part), then commits."""
    log = root / "_delta_log"
    names = sorted(os.listdir(log))
    cps = sorted({int(n.split(".")[0]) for n in names if ".checkpoint." in n and n.endswith(".parquet") and int(n.split(".")[0]) <= version})
    live: dict[tuple[str, str | None], bool] = {}

    def apply(action: dict[str, Any]) -> None:
        for kind in ("add", "remove"):
            if action.get(kind):
                path = action[kind]["path"]
                for prefix in ("file:///", "file:/"):
                    if path.startswith(prefix):
                        path = "/" + path[len(prefix):]
                live[(path, _dv_id(action[kind].get("deletionVector")))] = kind == "add"

    start = 0
    if cps:
        cp = cps[-1]
        for n in names:
            if n.startswith(f"{cp:020d}.checkpoint") and n.endswith(".parquet"):
                for row in pq.read_table(log / n, columns=[c for c in ("add", "remove") if c in pq.read_schema(log / n).names]).to_pylist():
                    apply(row)
        start = cp + 1
    for v in range(start, version + 1):
        for line in (log / f"{v:020d}.json").read_text().splitlines():
            if line.strip():
                apply(json.loads(line))
    return {k for k, alive in live.items() if alive}


def _wheel_state(root: Path, version: int | None) -> tuple[Any, set[tuple[str, int]]]:
    table = deltalake.DeltaTable(str(root), version=version) if version is not None else deltalake.DeltaTable(str(root))
    actions = table.get_add_actions(flatten=True)
    return table, set(zip(actions.column("path").to_pylist(), actions.column("size_bytes").to_pylist()))


def _assert_same_as_wheel(root: Path, key: str) -> int:
    table, files = _wheel_state(root, None)
    latest = table.version()
    versions = sorted({*range(0, min(latest, MAX_VERSIONS) + 1), latest})
    compared = 0
    for v in versions:
        try:
            table, files = _wheel_state(root, v)
        except Exception:  # noqa: BLE001 - versions the wheel cannot time-travel to (cleaned logs)
            continue
        ours = load_snapshot(str(root), v)
        assert ours.version == table.version() == v, key
        assert {(f["path"], f["size"]) for f in ours.file_list()} == files, f"{key}@{v}: active files differ"
        proto = table.protocol()
        assert (ours.protocol.min_reader_version, ours.protocol.min_writer_version) == (proto.min_reader_version, proto.min_writer_version), key
        assert set(ours.protocol.reader_features or ()) == set(proto.reader_features or ()), key
        assert set(ours.protocol.writer_features or ()) == set(proto.writer_features or ()), key
        meta = table.metadata()
        assert ours.metadata.id == meta.id and list(ours.metadata.partition_columns) == list(meta.partition_columns), key
        assert dict(ours.metadata.configuration) == dict(meta.configuration), key
        compared += 1
    assert compared, f"{key}: the wheel loaded no version"
    return compared


@pytest.mark.parametrize(("key", "entry"), CASES, ids=[k for k, _ in CASES])
def test_golden_table(key: str, entry: Path, tmp_path: Path) -> None:
    location = _unpack(entry, tmp_path) if entry.name.endswith(".tar.zst") else entry
    roots = _table_roots(location) or [location]
    for root in roots:
        sub = "" if root == location else f"::{root.relative_to(location)}"
        name = key if not sub else key  # nested tables share the entry's expectations
        if name in EXPECTED_FAILURES:
            error, reason = EXPECTED_FAILURES[name]
            with pytest.raises(error):
                load_snapshot(str(root))
            continue
        if name in WHEEL_CANNOT_READ:
            version, count, reason = WHEEL_CANNOT_READ[name]
            ours = load_snapshot(str(root))
            assert (ours.version, ours.num_files) == (version, count), reason
            assert ours.active_file_keys() == naive_state(root, version), reason
            continue
        _assert_same_as_wheel(root, key + sub)


def test_every_listed_table_exists() -> None:
    names = {k for k, _ in CASES}
    assert set(EXPECTED_FAILURES) <= names and set(WHEEL_CANNOT_READ) <= names
    assert len(CASES) >= 200, len(CASES)
