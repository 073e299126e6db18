"""The one resolver of data-file paths (``model.data_paths``): what it resolves names the file the
``deltalake`` wheel reads; what would leave the table root is refused; and ``reference_reader_name``
is exactly where the wheel's reader looks, so VACUUM can keep it."""

from __future__ import annotations

import json
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

from airflow_delta_maintenance.deltalog.errors import DataPathError, DeltaLogError
from airflow_delta_maintenance.deltalog.model.data_paths import DataPathResolver, reference_reader_name
from airflow_delta_maintenance.deltalog.storage import open_table_storage

pytestmark = pytest.mark.interop

INSIDE = ["part-0.parquet", "a%20b.parquet", "a b.parquet", "region=x/part-1.parquet", "region%3Dx/p%252F.parquet", "a%2Fb.parquet", "sub//x.parquet", "%zz.parquet"]
HOSTILE = ["../../../../etc/passwd", "/etc/shadow", "file:///etc/hosts", "%2E%2E/%2E%2E/etc/passwd", "..%2F..%2Fetc%2Fpasswd", "sub/../x.parquet",
           "./x.parquet", "s3://bucket/x.parquet", "file:/etc/hosts", "http://example.com/x", "C:\\x", "x.parquet?y=1", "x#y", "dir/%FF.parquet"]


def _wheel_location(root: Path, raw: str) -> str:
    """Where the wheel's reader looks for an add path ``raw``, relative to the table root."""
    log = root / "_delta_log"
    (log / f"{1:020d}.json").write_text(
        json.dumps({"commitInfo": {}}) + "\n" + json.dumps({"add": {"path": raw, "size": 1, "partitionValues": {}, "modificationTime": 1, "dataChange": True}}) + "\n"
    )
    uris = set(deltalake.DeltaTable(str(root)).file_uris())
    (log / f"{1:020d}.json").unlink()
    (new,) = uris - set(deltalake.DeltaTable(str(root)).file_uris())
    assert new.startswith(str(root) + "/"), new
    return new[len(str(root)) + 1 :]


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("paths") / "t"
    deltalake.write_deltalake(str(root), pa.table({"x": [1]}))
    return root


@pytest.mark.parametrize("raw", INSIDE)
def test_a_path_inside_names_the_file_the_wheel_reads(table: Path, raw: str) -> None:
    found = DataPathResolver.for_store(open_table_storage(str(table))).resolve(raw)
    wheel = _wheel_location(table, raw)
    assert found.relative == wheel and found.fs_path == f"{table}/{wheel}" and not found.absolute_in_log
    assert reference_reader_name(raw) == wheel


@pytest.mark.parametrize("raw", HOSTILE)
def test_a_path_that_would_leave_the_table_is_refused_and_the_wheel_keeps_it_inside(table: Path, raw: str) -> None:
    resolver = DataPathResolver.for_store(open_table_storage(str(table)))
    with pytest.raises(DataPathError) as refused:
        resolver.resolve(raw)
    assert isinstance(refused.value, DeltaLogError) and refused.value.path == raw and repr(raw)[1:-1] in str(refused.value)
    if "%FF" not in raw:  # the wheel reads every one of them as a name inside the table: so must VACUUM keep it
        assert reference_reader_name(raw) == _wheel_location(table, raw)


def test_absolute_uris_of_the_same_store_inside_the_root_resolve_there(table: Path) -> None:
    resolver = DataPathResolver(str(table))
    for raw in (f"{table}/part-0.parquet", f"file://{table}/part-0.parquet", f"file:{table}/part-0.parquet", f"file://localhost{table}/part-0.parquet"):
        found = resolver.resolve(raw)
        assert found.relative == "part-0.parquet" and found.fs_path == f"{table}/part-0.parquet" and found.absolute_in_log, raw
    for raw in (f"{table}", f"{table}-other/part-0.parquet", f"{table.parent}/part-0.parquet"):
        with pytest.raises(DataPathError, match=r"outside the table root|names no file"):
            resolver.resolve(raw)


def test_object_store_tables_accept_their_own_bucket_below_the_root_only() -> None:
    resolver = DataPathResolver("s3://bucket/warehouse/t", "bucket/warehouse/t")
    assert resolver.resolve("day=1/f.parquet").uri == "s3://bucket/warehouse/t/day=1/f.parquet"
    assert resolver.resolve("s3a://bucket/warehouse/t/f.parquet").fs_path == "bucket/warehouse/t/f.parquet"
    assert resolver.resolve("/warehouse/t/f.parquet").relative == "f.parquet"  # an unqualified absolute path: the same bucket
    for raw in ("s3://other/warehouse/t/f.parquet", "s3://bucket/warehouse/t2/f.parquet", "gs://bucket/warehouse/t/f.parquet", "/etc/passwd",
                "s3://bucket/warehouse/t/../t2/f.parquet"):
        with pytest.raises(DataPathError):
            resolver.resolve(raw)
