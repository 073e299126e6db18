"""Version checksums (``<v>.crc``) through the CLI: ``checksums`` writes each version's from the
previous one plus its commit, equal to the checksum of a full replay at every version of a random
history (adds, removes, deletion vectors, set transactions, domains, metadata and protocol
changes, in-commit timestamps, growth past the ``allFiles`` threshold); ``verify`` and ``status``
name the version of a tampered checksum; an existing checksum is never rewritten."""

from __future__ import annotations

import contextlib
import io
import json
import random
from pathlib import Path
from typing import Any

import fsspec
import pytest

from airflow_delta_maintenance.cli import main
from airflow_delta_maintenance.deltalog.checksum import checksum_from_snapshot, parse_checksum
from airflow_delta_maintenance.deltalog.model.paths import crc_name
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot

from .logbuilder import LogBuilder, add, commit_info, dv, metadata, protocol, remove


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def _remove(path: str, size: int, d: dict[str, Any] | None = None) -> dict[str, Any]:
    r = remove(path, 1_000, dv=d)
    r["remove"].update(size=size, extendedFileMetadata=True, partitionValues={})
    return r


def random_history(root: Path, commits: int, seed: int) -> None:
    """A table with deletion vectors and in-commit timestamps enabled, and a random history."""
    rng = random.Random(seed)
    log = LogBuilder(fsspec.filesystem("file"), str(root))
    conf = {"delta.enableDeletionVectors": "true", "delta.enableInCommitTimestamps": "true"}
    proto = protocol(3, 7, ["deletionVectors"], ["deletionVectors", "inCommitTimestamp", "domainMetadata"])
    live: dict[str, tuple[int, dict[str, Any] | None]] = {}
    ict = 1_700_000_000_000
    for v in range(commits):
        ict += rng.randint(1, 10_000)
        info = commit_info(ict)
        info["commitInfo"]["txnId"] = f"txn-{v}"
        actions: list[dict[str, Any]] = [info]
        earlier = sorted(live)  # one commit never adds and removes the same file
        if v == 0:
            actions += [proto, metadata(conf)]
        for _ in range(rng.randint(0, 4)):
            name = f"f{v}-{rng.randrange(10**6)}.parquet"
            size = rng.choice([10, 9_000, 70_000, 5 << 20, 130 << 20])
            live[name] = (size, None)
            actions.append(add(name, size))
        gone = rng.sample(earlier, k=min(len(earlier), rng.randint(0, 2)))
        for name in gone:
            size, old = live.pop(name)
            actions.append(_remove(name, size, old))
        kept = [n for n in earlier if n not in gone]
        for name in rng.sample(kept, k=min(len(kept), rng.randint(0, 1))):  # a deletion vector (re)written
            size, old = live[name]
            new = dv(f"dv{v}{name}", offset=1)
            new["cardinality"] = rng.choice([1, 5, 50, 20_000])
            actions += [_remove(name, size, old), add(name, size, dv=new)]
            live[name] = (size, new)
        if rng.random() < 0.2:
            actions.append({"txn": {"appId": f"app-{rng.randrange(3)}", "version": v}})
        if rng.random() < 0.15:
            actions.append({"domainMetadata": {"domain": f"d{rng.randrange(3)}", "configuration": "{}", "removed": rng.random() < 0.3}})
        if v and rng.random() < 0.05:
            actions.append(metadata({**conf, "k": str(v)}))
        log.commit(v, actions)


def _dicts_equal(ours: dict[str, Any], expected: dict[str, Any]) -> None:
    def norm(d: dict[str, Any]) -> dict[str, Any]:
        d = dict(d)
        if d.get("allFiles") is not None:
            d["allFiles"] = sorted(d["allFiles"], key=lambda a: (a["path"], json.dumps(a.get("deletionVector"), sort_keys=True)))
        for k in ("setTransactions", "domainMetadata"):
            if d.get(k) is not None:
                d[k] = sorted(d[k], key=lambda a: json.dumps(a, sort_keys=True))
        return d

    if "allFiles" not in ours:  # once past the threshold, the commits alone cannot list the files again (as delta-spark)
        expected = {k: v for k, v in expected.items() if k != "allFiles"}
    assert norm(ours) == norm(expected)


@pytest.mark.slow  # 1.6 CPU s: make test runs it; the fast tier (plain pytest) stays under two minutes
@pytest.mark.parametrize("seed", [1, 2])
def test_incremental_checksums_equal_a_full_replay_at_every_version(tmp_path: Path, seed: int) -> None:
    root = tmp_path / "t"
    random_history(root, 70, seed)
    rc, out, err = run("checksums", str(root), "--from", "0", "--json")
    assert rc == 0, err
    report = json.loads(out)
    assert report["count"] == 70 and report["replays"] == 1, report  # one replay, then commit by commit
    log = root / "_delta_log"
    sizes = []
    for v in range(70):
        data = (log / crc_name(v)).read_bytes()
        ours = parse_checksum(data, crc_name(v), v)
        snapshot = load_snapshot(str(root), v)
        expected = checksum_from_snapshot(snapshot, {"txnId": f"txn-{v}"})
        _dicts_equal(json.loads(data), expected.to_dict())
        assert ours.num_deletion_vectors is not None and ours.in_commit_timestamp == snapshot.timestamp
        sizes.append(ours.num_files)
    assert min(sizes) < 50 <= max(sizes)  # allFiles carried below the threshold, dropped above it

    rc, out, err = run("checksums", str(root))
    assert rc == 0 and "skipped — every published version has its checksum" in out, (out, err)
    rc, out, err = run("verify", str(root))
    assert rc == 0 and "70 checksum(s) agree" in out, (out, err)


def _tamper(path: Path, change: str) -> None:
    c = json.loads(path.read_text())
    if change == "numFiles":
        c["numFiles"] += 1
    elif change == "tableSizeBytes":
        c["tableSizeBytes"] += 7
    elif change == "metadata":
        c["metadata"]["configuration"]["tampered.key"] = "yes"
    elif change == "histogram":
        c["fileSizeHistogram"]["fileCounts"][0] += 1
    elif change == "truncated":
        path.write_text(json.dumps(c)[:100])
        return
    path.write_text(json.dumps(c))


@pytest.mark.parametrize("change", ["numFiles", "tableSizeBytes", "metadata", "histogram", "truncated"])
def test_verify_and_status_name_the_version_of_a_tampered_checksum(tmp_path: Path, change: str) -> None:
    root = tmp_path / "t"
    random_history(root, 30, 7)
    assert run("checksums", str(root), "--from", "0")[0] == 0
    log = root / "_delta_log"
    _tamper(log / crc_name(17), change)
    rc, out, err = run("verify", str(root))
    assert rc == 4 and "v17" in err and "29 checksum(s) agree" in out, (out, err)
    assert run("status", str(root))[0] == 0  # status checks the newest checksum only: v29 is intact

    _tamper(log / crc_name(29), change)
    rc, out, err = run("status", str(root), "--json")
    problems = json.loads(out)["problems"]
    assert rc == 0 and len(problems) == 1 and "checksum of v29" in problems[0], (out, err)
    rc, out, err = run("status", str(root), "--strict")
    assert rc == 4 and "warning: checksum of v29" in out


def test_a_tampered_checksum_is_never_rewritten_and_fails_the_run(tmp_path: Path) -> None:
    root = tmp_path / "t"
    random_history(root, 20, 11)
    assert run("checksums", str(root), "--from", "0", "--to", "9")[0] == 0
    crc = root / "_delta_log" / crc_name(9)
    _tamper(crc, "numFiles")
    tampered = crc.read_bytes()
    # v9's checksum would be the anchor of v10..v19: refused, the rest written from a replay
    rc, out, err = run("checksums", str(root), "--from", "0")
    assert rc == 2 and "ChecksumMismatchError" in err and "v9" in err, (out, err)
    assert crc.read_bytes() == tampered
    for v in range(10, 20):
        data = (root / "_delta_log" / crc_name(v)).read_bytes()
        _dicts_equal(json.loads(data), checksum_from_snapshot(load_snapshot(str(root), v), {"txnId": f"txn-{v}"}).to_dict())
    rc, out, err = run("verify", str(root), "--from", "5", "--to", "15")
    assert rc == 4 and "v9" in err and "10 checksum(s) agree" in out, (out, err)


def test_metadata_tampered_in_the_anchor_does_not_spread(tmp_path: Path) -> None:
    """A tampered metadata is consistent with itself: the anchor is checked against the log's own
    protocol and metadata before any later checksum inherits them."""
    root = tmp_path / "t"
    random_history(root, 12, 5)
    assert run("checksums", str(root), "--from", "0", "--to", "5")[0] == 0
    _tamper(root / "_delta_log" / crc_name(5), "metadata")
    rc, _out, err = run("checksums", str(root), "--from", "0")
    assert rc == 2 and "v5" in err
    for v in range(6, 12):
        c = json.loads((root / "_delta_log" / crc_name(v)).read_text())
        assert "tampered.key" not in c["metadata"]["configuration"]


def test_without_flags_the_chain_goes_on_after_the_newest_checksum_even_past_a_newer_checkpoint(tmp_path: Path) -> None:
    """A checkpoint written after the last checksums run must not leave the versions between
    them without a checksum: the default range starts after the newest checksum."""
    root = tmp_path / "t"
    random_history(root, 30, 3)
    assert run("checksums", str(root), "--from", "0", "--to", "9")[0] == 0
    assert run("checkpoint", str(root), "--force")[0] == 0  # at v29
    rc, out, err = run("checksums", str(root), "--json")
    report = json.loads(out)
    assert rc == 0 and (report["from_version"], report["to_version"], report["anchor"]) == (10, 29, "checksum of v9"), (report, err)
    assert all((root / "_delta_log" / crc_name(v)).exists() for v in range(30))
