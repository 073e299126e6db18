"""The listing split as the Spark engine's tasks run it (the root's entries, then one task per
top-level directory, each part through its Arrow form) equals the worker's listing."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa

from airflow_delta_maintenance.deltalog.storage import open_table_storage
from airflow_delta_maintenance.deltalog.vacuum.listing import (
    concat_listings,
    list_prefix,
    list_table_files,
    listing_from_arrow,
    listing_to_arrow,
    split_listing,
)
from airflow_delta_maintenance.deltalog.vacuum.paths import HiddenNames


def _rows(t: pa.Table) -> list[tuple[object, ...]]:
    return sorted(zip(*(t.column(c).to_pylist() for c in t.column_names), strict=True))


def test_split_listing_through_arrow_equals_the_workers_listing(tmp_path: Path) -> None:
    root = tmp_path / "t"
    for rel in ["_delta_log/00000000000000000000.json", "a.parquet", ".a.parquet.crc", "p=1/b.parquet", "p=1/.b.parquet.crc",
                "p=1/q=2/c.parquet", "_tmp/x.parquet", ".hidden/y", "deep/er/d.parquet", "_change_data/e.parquet"]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"x" * len(rel))
    (root / "empty").mkdir()
    (root / "p=2").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "o.parquet").write_bytes(b"o")
    os.symlink(outside, root / "link")
    os.symlink(outside, root / "p=1" / "inner-link")
    store = open_table_storage(str(root))
    hidden = HiddenNames(["p", "q"])

    whole = list_table_files(store, hidden, workers=1)
    head, tasks = split_listing(store, hidden)
    assert sorted(t[0] for t in tasks) == ["_change_data", "deep", "empty", "p=1", "p=2"]
    parts = [listing_from_arrow(listing_to_arrow(head))] + [listing_from_arrow(listing_to_arrow(list_prefix(store, p, m, hidden))) for p, m in tasks]
    split = concat_listings(parts)

    assert _rows(split.files) == _rows(whole.files) and split.num_files == 5
    assert _rows(split.shadows) == _rows(whole.shadows) == sorted([(".a.parquet.crc", 14, _rows(whole.shadows)[0][2]),
                                                                    ("p=1/.b.parquet.crc", 18, _rows(whole.shadows)[1][2])])
    assert _rows(split.empty_dirs) == _rows(whole.empty_dirs) and {r[0] for r in _rows(split.empty_dirs)} == {"empty", "p=2"}
    assert split.links == whole.links == ("link", "p=1/inner-link")


def test_the_names_only_listing_stats_later_what_the_full_listing_stats_now(tmp_path: Path) -> None:
    """VACUUM's local listing reads names and entry types only; ``with_stats`` then reads sizes and
    mtimes of the files asked for (the untracked ones), dropping files gone or turned into links
    since — never following a link, like the full listing."""
    root = tmp_path / "t"
    for rel in ["_delta_log/00000000000000000000.json", "a.parquet", ".a.parquet.crc", "p=1/b.parquet", "p=1/.b.parquet.crc",
                "p=1/q=2/c.parquet", "_tmp/x.parquet", ".hidden/y", "deep/er/d.parquet", "_change_data/e.parquet", "p=1/gone.parquet",
                "p=1/relinked.parquet"]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"x" * len(rel))
    (root / "empty").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "o.parquet").write_bytes(b"o" * 100)
    os.symlink(outside, root / "link")
    os.symlink(outside / "o.parquet", root / "p=1" / "file-link.parquet")
    store = open_table_storage(str(root))
    hidden = HiddenNames(["p", "q"])

    whole = list_table_files(store, hidden, workers=1)
    for workers in (1, 4):
        lazy = list_table_files(store, hidden, workers=workers, lazy_stats=True)
        assert lazy.files.column("size").null_count == lazy.num_files == whole.num_files == 7
        assert _rows(lazy.with_stats(lazy.files, workers=workers)) == _rows(whole.files)
        assert _rows(lazy.shadows) == _rows(whole.shadows) and _rows(lazy.empty_dirs) == _rows(whole.empty_dirs)
        assert lazy.links == whole.links == ("link", "p=1/file-link.parquet")

    (root / "p=1" / "gone.parquet").unlink()
    (root / "p=1" / "relinked.parquet").unlink()
    os.symlink(outside / "o.parquet", root / "p=1" / "relinked.parquet")
    later = lazy.with_stats(lazy.files)
    assert sorted(later.column("path").to_pylist()) == ["_change_data/e.parquet", "a.parquet", "deep/er/d.parquet", "p=1/b.parquet", "p=1/q=2/c.parquet"]
    assert (outside / "o.parquet").read_bytes() == b"o" * 100
