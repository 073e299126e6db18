"""Every golden table is read with the same state as an independent reader, or refused with an
expected, listed error. No silent skips: a table (or a version of it) that is not listed must
match the ``deltalake`` wheel.

Three outcomes, each checked strictly:

* compared with the wheel (delta-rs) at EVERY version the wheel loads (time travel): version,
  protocol (min versions and feature sets), metadata (id, name, description, created time,
  partition columns, configuration, schema string parsed as JSON), active files (path, size),
  app transactions, and for files with a deletion vector the number of deleted rows. A version the
  wheel refuses must be refused by us too when its commits were cleaned up (``MissingCommitError``),
  or be listed in ``WHEEL_CANNOT_READ_VERSIONS``;
* ``EXPECTED_FAILURES``: we raise exactly the listed error class, and the wheel refuses the table too;
* ``WHEEL_CANNOT_READ``: the wheel refuses (asserted, so the list cannot go stale) and our state
  equals ``OUR_EXPECTATIONS`` (taken from the generator of the upstream suite) and a deliberately
  naive line-by-line replay (``naive_state``, written for clarity, not speed).

Paths are compared exactly as the log stores them (no decoding): both readers report the raw
``add.path`` string. Only the wheel's deletion-vector listing uses fully qualified file URIs; those
are made relative to the table URI and both sides are percent-decoded once before comparing.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import deltalake  # the independent oracle: a test dependency, never skipped
import pyarrow.parquet as pq
import pytest

from airflow_delta_maintenance.deltalog import errors as E
from airflow_delta_maintenance.deltalog.replay.snapshot import Snapshot, load_snapshot
from tests.golden.wheel_oracle import assert_same_as_wheel

pytestmark = pytest.mark.interop

# Vendored copy of the upstream golden tables (byte-identical; Apache-2.0, origins in tables/README.md) so
# that a clean clone tests the same tables; DELTA_GOLDEN_TABLES points elsewhere if needed.
GOLDEN = Path(os.environ.get("DELTA_GOLDEN_TABLES") or Path(__file__).with_name("tables"))

# Tables we refuse: the exact error class we must raise, and why. The wheel refuses each of them too.
EXPECTED_FAILURES: dict[str, tuple[type[E.DeltaLogError], str]] = {
    "delta-kernel-rs/crc-malformed": (E.TableNotFoundError, "_delta_log holds only .crc files, no commit or checkpoint"),
    "delta-rs/simple_table_features": (E.UnsupportedFeatureError, "minReaderVersion 5 (beyond the protocol's 3)"),
    "delta-spark/data-reader-absolute-paths-escaped-chars": (
        E.ProtocolViolationError,
        "a data-reader fixture whose log has a protocol but no metaData action",
    ),
    "delta-spark/deltalog-invalid-protocol-version": (E.UnsupportedFeatureError, "minReaderVersion 99 (upstream: must be refused)"),
    "delta-spark/deltalog-state-reconstruction-from-checkpoint-missing-metadata": (
        E.ProtocolViolationError,
        "the checkpoint was rewritten without its metaData row (upstream: must fail)",
    ),
    "delta-spark/deltalog-state-reconstruction-from-checkpoint-missing-protocol": (
        E.ProtocolViolationError,
        "the checkpoint was rewritten without its protocol row (upstream: must fail)",
    ),
    "delta-spark/deltalog-state-reconstruction-without-metadata": (E.ProtocolViolationError, "commit 0 has no metaData (upstream: must fail)"),
    "delta-spark/deltalog-state-reconstruction-without-protocol": (E.ProtocolViolationError, "commit 0 has no protocol (upstream: must fail)"),
    "delta-spark/log-store-listFrom": (E.TableNotFoundError, "a LogStore listing fixture without _delta_log, not a table"),
    "delta-spark/log-store-read": (E.TableNotFoundError, "a LogStore read fixture without _delta_log, not a table"),
    "delta-spark/no-delta-log-folder": (E.TableNotFoundError, "no _delta_log directory (upstream: table does not exist)"),
    "delta-spark/versions-not-contiguous": (E.MissingCommitError, "commit 1 was deleted between 0 and 2 (upstream: must fail)"),
}

_NO_SCHEMA = "its metaData has no schemaString (the wheel requires one; delta-spark's standalone reader does not)"

# Tables the wheel cannot read at all but we can: why the wheel fails. Our state is in OUR_EXPECTATIONS.
WHEEL_CANNOT_READ: dict[str, str] = {
    "delta-kernel-rs/table-with-geo": "the wheel rejects the 'geometry(OGC:CRS84)' column type (a data type; the log is plain)",
    "delta-spark/canonicalized-paths-normal-a": _NO_SCHEMA,
    "delta-spark/canonicalized-paths-normal-b": _NO_SCHEMA,
    "delta-spark/canonicalized-paths-special-a": _NO_SCHEMA,
    "delta-spark/canonicalized-paths-special-b": _NO_SCHEMA,
    "delta-spark/corrupted-last-checkpoint": _NO_SCHEMA,
    "delta-spark/deltalog-commit-info": _NO_SCHEMA,
    "delta-spark/update-deleted-directory": _NO_SCHEMA,
}

# Single versions the wheel refuses although their log is complete: {table: {version: reason}}.
WHEEL_CANNOT_READ_VERSIONS: dict[str, dict[int, str]] = {
    "delta-rs/delta-live-table": {0: "DLT's first commit has a metaData without schemaString (v1 adds one)"},
}


@dataclass(frozen=True)
class Expected:
    """Our state where the wheel cannot serve as oracle, per version: active add paths (as logged)."""

    files: dict[int, frozenset[str]]
    reader_writer: tuple[int, int]
    source: str  # where the expectation comes from


def _paths(*names: str) -> frozenset[str]:
    return frozenset(names)


_CANONICAL = "GoldenTables.scala 'paths should be canonicalized': add of {p} at v0, remove of {s}{p} at v1; upstream expects no file"
OUR_EXPECTATIONS: dict[str, Expected] = {
    "delta-kernel-rs/table-with-geo": Expected({0: _paths()}, (3, 7), "kernel-rs test data: protocol + metaData only"),
    "delta-spark/canonicalized-paths-normal-a": Expected(
        {0: _paths("/some/unqualified/absolute/path"), 1: _paths()}, (1, 2), _CANONICAL.format(p="/some/...", s="file:")
    ),
    "delta-spark/canonicalized-paths-normal-b": Expected(
        {0: _paths("/some/unqualified/absolute/path"), 1: _paths()}, (1, 2), _CANONICAL.format(p="/some/...", s="file://")
    ),
    "delta-spark/canonicalized-paths-special-a": Expected(
        {0: _paths("/some/unqualified/with%20space/p@%23h"), 1: _paths()}, (1, 2), _CANONICAL.format(p="/some/with%20space/...", s="file:")
    ),
    "delta-spark/canonicalized-paths-special-b": Expected(
        {0: _paths("/some/unqualified/with%20space/p@%23h"), 1: _paths()}, (1, 2), _CANONICAL.format(p="/some/with%20space/...", s="file://")
    ),
    "delta-spark/corrupted-last-checkpoint": Expected(
        {v: _paths(*(str(i) for i in range(v + 1))) for v in range(11)},
        (1, 2),
        "GoldenTables.scala: commits 0..10 each add file '<i>'; checkpoint 10; a corrupt _last_checkpoint must not matter",
    ),
    "delta-spark/deltalog-commit-info": Expected({0: _paths("abc")}, (1, 2), "GoldenTables.scala 'get commit info': one add 'abc'"),
    "delta-spark/update-deleted-directory": Expected(
        {0: _paths(*(str(i) for i in range(1, 11)))}, (1, 2), "GoldenTables.scala SC-8078: files '1'..'10' at v0, then a checkpoint"
    ),
}


# ---- discovery and unpacking ----------------------------------------------------------------------


def _cases() -> list[tuple[str, Path]]:
    out = []
    for origin in sorted(p for p in GOLDEN.iterdir() if p.is_dir()):
        for entry in sorted(origin.iterdir()):
            if entry.name.endswith(".tar.zst") or entry.is_dir():
                out.append((f"{origin.name}/{entry.name.removesuffix('.tar.zst')}", entry))
    return out


CASES = _cases()


def _unpack(archive: Path, dest: Path) -> Path:
    """kernel-rs packs some tables as .tar.zst: the zstandard module, else the zstd CLI through tar."""
    try:
        import zstandard
    except ImportError:  # pragma: no cover - the venv has zstandard; CI images may only have the CLI
        subprocess.run(["tar", "--zstd", "-xf", str(archive), "-C", str(dest)], check=True)
        return dest
    with open(archive, "rb") as fh, zstandard.ZstdDecompressor().stream_reader(fh) as reader:
        with tarfile.open(fileobj=reader, mode="r|") as tar:
            tar.extractall(dest, filter="data")
    return dest


def _table_roots(path: Path) -> list[Path]:
    """The entry itself, or the tables nested in it (archives wrap one; partition_cm holds three)."""
    if (path / "_delta_log").is_dir():
        return [path]
    return sorted({Path(p).parent for p in glob.glob(str(path / "**" / "_delta_log"), recursive=True)})


# ---- the naive oracle -----------------------------------------------------------------------------


def _canonical(path: str) -> str:
    # delta-spark reconciles canonical paths: file:/p, file:///p and /p are one file.
    for prefix in ("file:///", "file:/"):
        if path.startswith(prefix):
            return "/" + path[len(prefix) :]
    return path


def _dv_id(dv: dict[str, Any] | None) -> str | None:
    if not dv:
        return None
    return f"{dv['storageType']}{dv['pathOrInlineDv']}" + (f"@{dv['offset']}" if dv.get("offset") is not None else "")


def naive_state(root: Path, version: int) -> set[tuple[str, str | None]]:
    """Slow, obvious replay: newest single- or multi-part checkpoint ≤ version, then every commit."""
    log = root / "_delta_log"
    names = sorted(os.listdir(log))
    cps = sorted({int(n.split(".")[0]) for n in names if ".checkpoint." in n and n.endswith(".parquet") and int(n.split(".")[0]) <= version})
    live: dict[tuple[str, str | None], tuple[str, bool]] = {}

    def apply(action: dict[str, Any]) -> None:
        for kind in ("add", "remove"):
            if action.get(kind):
                body = action[kind]
                live[(_canonical(body["path"]), _dv_id(body.get("deletionVector")))] = (body["path"], kind == "add")

    start = 0
    if cps:
        for n in names:
            if n.startswith(f"{cps[-1]:020d}.checkpoint") and n.endswith(".parquet"):
                columns = [c for c in ("add", "remove") if c in pq.read_schema(log / n).names]
                for row in pq.read_table(log / n, columns=columns).to_pylist():
                    apply(row)
        start = cps[-1] + 1
    for v in range(start, version + 1):
        for line in (log / f"{v:020d}.json").read_text().splitlines():
            if line.strip():
                apply(json.loads(line))
    return {(path, key[1]) for key, (path, alive) in live.items() if alive}


def _commits_cleaned_up(root: Path, version: int) -> bool:
    """True when ``version`` cannot be rebuilt from the listing: no checkpoint ≤ it and a commit ≤ it gone."""
    names = os.listdir(root / "_delta_log")
    checkpoints = {int(m.group(1)) for n in names if (m := re.match(r"^(\d+)\.checkpoint\..*parquet$", n))}
    commits = {int(m.group(1)) for n in names if (m := re.match(r"^(\d+)\.json$", n))}
    return not any(c <= version for c in checkpoints) and not set(range(version + 1)) <= commits


# ---- comparison with the wheel --------------------------------------------------------------------


def _why(key: str, version: int | None) -> str:
    return f"{key}@{version}" if version is not None else key


def _assert_stats_parsed_during_load_match(root: Path, version: int, ours: Snapshot, why: str) -> None:
    """``load_snapshot(parse_stats=True)`` gives the files and statistics of a load that parses afterwards."""
    during = load_snapshot(str(root), version, parse_stats=True)
    assert during.files.equals(ours.files), why
    after = ours.parsed_stats()
    if after is None:
        assert during.preparsed_stats is None, f"{why}: the statistics do not parse afterwards, but did during the load"
    else:
        assert during.preparsed_stats is not None and during.preparsed_stats.equals(after), why


def _compare_every_version(root: Path, key: str) -> int:
    latest = deltalake.DeltaTable(str(root)).version()
    listed = WHEEL_CANNOT_READ_VERSIONS.get(key, {})
    compared = 0
    for v in range(latest + 1):
        why = _why(key, v)
        try:
            table = deltalake.DeltaTable(str(root), version=v)
        except Exception as wheel_error:  # noqa: BLE001 - the wheel's errors are untyped DeltaErrors
            if v in listed:
                ours = load_snapshot(str(root), v)
                assert ours.active_file_keys() == naive_state(root, v), f"{why}: {listed[v]}"
                continue
            assert _commits_cleaned_up(root, v), f"{why}: the wheel refuses ({wheel_error!s:.200}) but the log is complete; list it"
            with pytest.raises(E.MissingCommitError) as refused:
                load_snapshot(str(root), v)
            assert refused.type is E.MissingCommitError and refused.value.version <= v, why
            continue
        assert v not in listed, f"{why}: listed in WHEEL_CANNOT_READ_VERSIONS but the wheel reads it now"
        ours = load_snapshot(str(root), v)
        assert_same_as_wheel(ours, table, why, check_partition_values=True)
        _assert_stats_parsed_during_load_match(root, v, ours, why)
        compared += 1
    return compared


# ---- tests ----------------------------------------------------------------------------------------


def _location(entry: Path, tmp_path: Path) -> Path:
    return _unpack(entry, tmp_path) if entry.name.endswith(".tar.zst") else entry


@pytest.mark.parametrize(("key", "entry"), CASES, ids=[k for k, _ in CASES])
def test_golden_table(key: str, entry: Path, tmp_path: Path) -> None:
    location = _location(entry, tmp_path)
    roots = _table_roots(location) or [location]
    if key in EXPECTED_FAILURES:
        error, reason = EXPECTED_FAILURES[key]
        for root in roots:
            with pytest.raises(E.DeltaLogError) as refused:
                load_snapshot(str(root))
            assert refused.type is error, f"{key}: expected exactly {error.__name__} ({reason}), got {refused.type.__name__}: {refused.value}"
            assert str(refused.value) and refused.value.path, f"{key}: the error must say what and which file/table"
            with pytest.raises(Exception):  # noqa: B017 - the wheel refuses too (it has no typed errors)
                deltalake.DeltaTable(str(root))
        return
    if key in WHEEL_CANNOT_READ:
        expected = OUR_EXPECTATIONS[key]
        for root in roots:
            with pytest.raises(Exception):  # noqa: B017 - keep the list honest
                deltalake.DeltaTable(str(root))
            latest = max(expected.files)
            assert load_snapshot(str(root)).version == latest, f"{key}: {expected.source}"
            for v, paths in expected.files.items():
                ours = load_snapshot(str(root), v)
                assert {p for p, _ in ours.active_file_keys()} == paths, f"{key}@{v}: {expected.source}"
                assert ours.active_file_keys() == naive_state(root, v), f"{key}@{v}: naive replay differs"
                assert (ours.protocol.min_reader_version, ours.protocol.min_writer_version) == expected.reader_writer, key
        return
    compared = 0
    for root in roots:
        sub = "" if root == location else f"::{root.relative_to(location)}"
        compared += _compare_every_version(root, key + sub)
    assert compared, f"{key}: the wheel loaded no version"


def test_corrupt_last_checkpoint_hint_does_not_matter(tmp_path: Path) -> None:
    """Upstream 'handle corrupted _last_checkpoint file': the same state with a truncated hint."""
    table = tmp_path / "t"
    shutil.copytree(GOLDEN / "delta-spark" / "corrupted-last-checkpoint", table)
    (table / "_delta_log" / "_last_checkpoint").chmod(0o644)
    (table / "_delta_log" / "_last_checkpoint").write_text('{"version":10,"si')
    ours = load_snapshot(str(table))
    assert ours.version == 10 and ours.checkpoint_version == 10
    assert {p for p, _ in ours.active_file_keys()} == OUR_EXPECTATIONS["delta-spark/corrupted-last-checkpoint"].files[10]


def test_lists_are_consistent() -> None:
    names = {k for k, _ in CASES}
    listed = [*EXPECTED_FAILURES, *WHEEL_CANNOT_READ, *WHEEL_CANNOT_READ_VERSIONS]
    assert set(listed) <= names, sorted(set(listed) - names)
    assert not set(EXPECTED_FAILURES) & set(WHEEL_CANNOT_READ)
    assert set(WHEEL_CANNOT_READ) == set(OUR_EXPECTATIONS)
    assert len(CASES) >= 200, len(CASES)


def test_catalogue_lists_every_table() -> None:
    readme = Path(__file__).with_name("README.md").read_text()
    missing = [k for k, _ in CASES if f"`{k.split('/', 1)[1]}` | {k.split('/', 1)[0]}" not in readme]
    assert not missing, f"tests/golden/README.md lacks {missing}; regenerate it with tests/golden/catalogue.py"
