from __future__ import annotations

import pytest

from airflow_delta_maintenance.deltalog.model.paths import (
    LogFileType,
    checkpoint_rank,
    classic_checkpoint_name,
    commit_name,
    compaction_name,
    crc_name,
    multipart_checkpoint_name,
    parse_log_path,
    staged_commit_name,
    uuid_checkpoint_name,
)


@pytest.mark.parametrize(
    ("name", "kind", "version", "end"),
    [
        ("00000000000000000007.json", LogFileType.COMMIT, 7, 7),
        ("7.json", LogFileType.COMMIT, 7, 7),
        ("00000000000000000010.checkpoint.parquet", LogFileType.CHECKPOINT_CLASSIC, 10, 10),
        ("00000000000000000010.checkpoint.0000000001.0000000003.parquet", LogFileType.CHECKPOINT_MULTIPART, 10, 10),
        ("00000000000000000002.checkpoint.6374b053-df23-479b-b2cf-c9c550132b49.json", LogFileType.CHECKPOINT_UUID, 2, 2),
        ("00000000000000000002.checkpoint.6374b053-df23-479b-b2cf-c9c550132b49.parquet", LogFileType.CHECKPOINT_UUID, 2, 2),
        ("00000000000000000004.00000000000000000006.compacted.json", LogFileType.COMPACTION, 4, 6),
        ("00000000000000000003.crc", LogFileType.CRC, 3, 3),
        ("_last_checkpoint", LogFileType.LAST_CHECKPOINT, -1, -1),
        ("_staged_commits/00000000000000000005.0f1e2d3c-aaaa-bbbb-cccc-111122223333.json", LogFileType.STAGED_COMMIT, 5, 5),
        ("_commits/00000000000000000005.0f1e2d3c-aaaa-bbbb-cccc-111122223333.json", LogFileType.STAGED_COMMIT, 5, 5),
        ("_sidecars/00000000000000000002.checkpoint.0000000001.0000000002.bd18.parquet", LogFileType.SIDECAR, -1, -1),
    ],
)
def test_every_log_file_kind_is_recognised(name: str, kind: LogFileType, version: int, end: int) -> None:
    parsed = parse_log_path(name, 12, 34)
    assert parsed is not None and parsed.type is kind
    assert (parsed.version, parsed.end_version, parsed.size, parsed.modification_time) == (version, end, 12, 34)


@pytest.mark.parametrize(
    "name",
    [
        "._last_checkpoint.crc",
        ".00000000000000000001.json.crc",
        "00000000000000000001.json.tmp",
        "00000000000000000001.json.crc",
        "foo.json",
        "_delta_log.json",
        "00000000000000000005.00000000000000000005.compacted.json",  # y > x strictly
        "00000000000000000005.00000000000000000004.compacted.json",
        "00000000000000000010.checkpoint.0000000004.0000000003.parquet",  # part beyond count
        "00000000000000000001.abc.json",  # staged name outside _staged_commits
        "_staged_commits/00000000000000000001.json",
        "_sidecars/notes.txt",
        "other/00000000000000000001.json",
        "_staged_commits/sub/00000000000000000001.x.json",
    ],
)
def test_unknown_files_are_ignored_never_misread(name: str) -> None:
    assert parse_log_path(name) is None


def test_formatters_round_trip_through_the_parser() -> None:
    names = [
        commit_name(3),
        classic_checkpoint_name(3),
        multipart_checkpoint_name(3, 2, 4),
        uuid_checkpoint_name(3, "u-1", "json"),
        compaction_name(1, 3),
        crc_name(3),
        staged_commit_name(3, "abc"),
        staged_commit_name(3, "abc", legacy=True),
    ]
    assert names[0] == "00000000000000000003.json"
    assert names[2] == "00000000000000000003.checkpoint.0000000002.0000000004.parquet"
    assert names[7] == "_commits/00000000000000000003.abc.json"
    for n in names:
        assert parse_log_path(n) is not None, n
    with pytest.raises(ValueError):
        compaction_name(3, 3)
    with pytest.raises(ValueError):
        commit_name(-1)


def test_checkpoint_ranking_prefers_uuid_then_multipart_then_classic() -> None:
    classic = parse_log_path(classic_checkpoint_name(5))
    multi = parse_log_path(multipart_checkpoint_name(5, 1, 2))
    v2 = parse_log_path(uuid_checkpoint_name(5, "z"))
    older = parse_log_path(uuid_checkpoint_name(4, "z"))
    ranked = sorted([v2, classic, older, multi], key=checkpoint_rank)
    assert ranked == [older, classic, multi, v2]
