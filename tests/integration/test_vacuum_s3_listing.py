"""VACUUM's listing of S3 tables by Arrow's C++ client against s3fs's, on moto and MinIO.

The native listing (``deltalog.storage.native_s3``, ``deltalog.vacuum.s3_listing``) must list
exactly what s3fs lists — keys with ``%``, ``=``, ``+``, spaces and non-ASCII characters as stored,
sizes, mtimes — and leave out the same things: hidden names at any depth (checksum shadows kept
aside), the log, directory markers, other tables whose names start like this one's. A VACUUM run
as users run it (the CLI with storage options, the hook's role connection) lists natively and
plans what the ``deltalake`` wheel plans; without Arrow's S3 support, or with a store option Arrow
has no equivalent for, s3fs lists as before.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any
from urllib.parse import unquote

import pytest

from airflow_delta_maintenance.deltalog.storage import open_table_storage
from airflow_delta_maintenance.deltalog.storage.native_s3 import NATIVE_S3_ENV, native_s3
from airflow_delta_maintenance.deltalog.vacuum.listing import TableListing, list_table_files
from airflow_delta_maintenance.deltalog.vacuum.paths import HiddenNames
from tests._infra.expiring_sts import ExpiringCredentialsProxy
from tests._infra.servers import FAKE_AWS
from tests._infra.store_servers import Bucket, _new_bucket

pytestmark = pytest.mark.integration

VISIBLE = ["part=a b/f 1.parquet", "part=100%25/x%20y.parquet", "part=ü/日本 語.parquet", "part=a+b/c=d&e.parquet", "root file.parquet",
           "part=a b/sub/deeper/g.parquet", "_change_data/c.parquet", "part=a b/_change_data/d.parquet", "metadata/m.json", "part=a b/f 1.parquet.crc"]
HIDDEN = ["_delta_log/00000000000000000000.json", "_tmp/x.parquet", ".hidden/y.parquet", "part=a b/sub/_x/z.parquet", "part=a b/.w.parquet"]
SHADOWS = ["part=a b/.f 1.parquet.crc"]
OUTSIDE = ["t-other/q.parquet", "tx/r.parquet", "t_/s.parquet"]  # other tables whose names start like "t"


@pytest.fixture(params=["moto", "minio"])
def s3_table(request: pytest.FixtureRequest, aws_env: dict[str, str]) -> tuple[Bucket, str]:
    """A fresh bucket on moto or MinIO holding the keys above under ``t/`` (sizes differ per key)."""
    bucket = _new_bucket(request.getfixturevalue(request.param))
    fs = bucket.filesystem()
    for i, rel in enumerate(VISIBLE + HIDDEN + SHADOWS):
        fs.pipe(f"{bucket.name}/t/{rel}", b"x" * (i + 1))
    for rel in OUTSIDE:
        fs.pipe(f"{bucket.name}/{rel}", b"outside")
    fs.pipe(f"{bucket.name}/t/part=empty/", b"")  # directory markers: of a partition, of the root itself
    fs.pipe(f"{bucket.name}/t/", b"")
    return bucket, f"s3://{bucket.name}/t"


def rows(listing: TableListing, which: str = "files") -> dict[str, tuple[int, int]]:
    table = getattr(listing, which)
    return {p: (s, m) for p, s, m in zip(*(table.column(c).to_pylist() for c in ("path", "size", "mtime")), strict=True)}


def both_listings(uri: str, options: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> tuple[TableListing, TableListing]:
    store = open_table_storage(uri, options)
    native = list_table_files(store, HiddenNames(["part"]))
    monkeypatch.setenv(NATIVE_S3_ENV, "0")
    plain = list_table_files(store, HiddenNames(["part"]))
    monkeypatch.delenv(NATIVE_S3_ENV)
    return native, plain


@pytest.mark.parametrize("keys", ["options", "environment"])
def test_arrow_lists_exactly_what_s3fs_lists(s3_table: tuple[Bucket, str], keys: str, monkeypatch: pytest.MonkeyPatch) -> None:
    bucket, uri = s3_table
    options = bucket.storage_options
    if keys == "environment":  # no keys in the options: s3fs's session finds them, and so must Arrow's client
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", options.pop("key"))
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", options.pop("secret"))
    native, plain = both_listings(uri, options, monkeypatch)
    assert (native.client, plain.client) == ("arrow", "s3fs")
    got, want = rows(native), rows(plain)
    assert sorted(got) == sorted(want) == sorted(VISIBLE)
    for path, (size, mtime) in want.items():
        assert got[path][0] == size and abs(got[path][1] - mtime) < 1000, (path, got[path], (size, mtime))
    assert abs(got["root file.parquet"][1] - time.time() * 1000) < 600_000  # a real time, not 0
    assert sorted(rows(native, "shadows")) == sorted(rows(plain, "shadows")) == SHADOWS


def test_a_vacuum_through_the_cli_lists_natively_and_plans_what_the_wheel_plans(
    s3_table: tuple[Bucket, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import deltalake
    import pyarrow as pa

    from airflow_delta_maintenance.cli import main
    from airflow_delta_maintenance.maintenance.operations.vacuum import run_vacuum
    from airflow_delta_maintenance.maintenance.table.maintained import open_table

    bucket, _ = s3_table
    uri = f"s3://{bucket.name}/tables/special"
    endpoint = bucket.storage_options["client_kwargs"]["endpoint_url"]
    creds = bucket.store.credentials
    wheel_options = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": creds["key"], "AWS_SECRET_ACCESS_KEY": creds["secret"], "AWS_REGION": "us-east-1",
                     "AWS_ALLOW_HTTP": "true", "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
    data = pa.table({"id": [1, 2, 3, 4], "p": ["a b", "100%", "ü=日本", "x+y"]})
    deltalake.write_deltalake(uri, data, partition_by=["p"], storage_options=wheel_options)
    deltalake.DeltaTable(uri, storage_options=wheel_options).delete("id = 2")  # a removed file in "p=100%25"
    fs = bucket.filesystem()
    for rel in ["p=a b/stray 1.parquet", "p=ü=日本/stray.parquet", "stray%20root.parquet", "_tmp/hidden.parquet"]:
        fs.pipe(f"{bucket.name}/tables/special/{rel}", b"stray")

    flags = ["--retention-hours", "0", "--allow-shorter-retention", "--json", "-o", f"endpoint_url={endpoint}", "-o", "region_name=us-east-1",
             "-o", f"key={creds['key']}", "-o", f"secret={creds['secret']}"]
    assert main(["vacuum", uri, *flags]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["listing_client"] == "arrow", record

    with open_table(uri, bucket.storage_options) as table:
        plan = run_vacuum(table, retention_ms=0, allow_shorter_retention=True).plan
    assert plan is not None and plan.listing_client == "arrow"
    wheel = deltalake.DeltaTable(uri, storage_options=wheel_options).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=True, full=True)
    ours = set(plan.paths())
    assert {"p=a b/stray 1.parquet", "p=ü=日本/stray.parquet", "stray%20root.parquet"} <= ours and record["planned_files"] == len(ours) == 4
    assert ours == {w.split("/tables/special/", 1)[-1] for w in wheel}, (sorted(ours), sorted(wheel))


@pytest.mark.parametrize("option", ["no pyarrow S3", "requester_pays", "botocore S3 setting", "proxy"])
def test_without_arrow_s3_or_with_an_option_it_lacks_s3fs_lists(
    option: str, s3_bucket: tuple[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    name, options = s3_bucket
    uri = f"s3://{name}/t"
    if option == "no pyarrow S3":
        monkeypatch.setitem(sys.modules, "pyarrow._s3fs", None)  # as a pyarrow built without S3: the import fails
    elif option == "requester_pays":
        options["requester_pays"] = True
    elif option == "botocore S3 setting":
        options["config_kwargs"] = {"s3": {"addressing_style": "path", "payload_signing_enabled": True}}
    else:
        monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # botocore skips it for this http endpoint
    store = open_table_storage(uri, options)
    for rel in VISIBLE:
        store.fs.pipe(f"{name}/t/{rel}", b"x")
    assert native_s3(store.fs) is None
    listing = list_table_files(store, HiddenNames(["part"]))
    assert listing.client == "s3fs" and sorted(rows(listing)) == sorted(VISIBLE)


def test_a_roles_keys_are_taken_fresh_for_each_listing(s3_endpoint: str, s3_bucket: tuple[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    """Arrow cannot refresh botocore's credentials: each listing takes the role's current keys.
    Behind the proxy the role's keys expire after two seconds and are then refused, as AWS does."""
    from airflow_delta_maintenance.hooks.storage import DeltaStorageHook

    name, options = s3_bucket
    uri = f"s3://{name}/t"
    seeded = open_table_storage(uri, options)
    for rel in VISIBLE:
        seeded.fs.pipe(f"{name}/t/{rel}", b"x")
    proxy = ExpiringCredentialsProxy(s3_endpoint, 2.0).start()
    try:
        for key in [k for k in os.environ if k.startswith("AWS_")]:
            monkeypatch.delenv(key)
        monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
        monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
        monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
        monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps({
            "conn_type": "delta_storage", "login": FAKE_AWS["AWS_ACCESS_KEY_ID"], "password": FAKE_AWS["AWS_SECRET_ACCESS_KEY"],
            "extra": {"region_name": "us-east-1", "role_arn": "arn:aws:iam::123456789012:role/vacuum", "endpoint_url": proxy.endpoint}}))
        store = open_table_storage(uri, DeltaStorageHook("lake").get_storage_options(uri))  # one store, as a long task holds it
        first = list_table_files(store, HiddenNames(["part"]))
        time.sleep(2.5)  # the keys of the first listing have expired
        second = list_table_files(store, HiddenNames(["part"]))
    finally:
        proxy.stop()
    assert (first.client, second.client) == ("arrow", "arrow")  # a refused request would have fallen back to s3fs
    assert sorted(rows(first)) == sorted(rows(second)) == sorted(VISIBLE)
    assert len(proxy.keys_used("s3")) >= 2 and not proxy.refused(), proxy.log


def test_a_list_page_slower_than_three_seconds_is_waited_for_as_s3fs_waits(
    s3_bucket: tuple[str, dict[str, Any]], s3_endpoint: str, fault_proxy: Any
) -> None:
    """Arrow's client (curl) gives up on an answer silent for 3 s by default; s3fs waits 15 s
    (botocore's ``read_timeout`` as s3fs sets it), and so must the listing that replaces it."""
    name, options = s3_bucket
    seeded = open_table_storage(f"s3://{name}/t", options)
    for rel in VISIBLE:
        seeded.fs.pipe(f"{name}/t/{rel}", b"x")
    proxy = fault_proxy(s3_endpoint.removeprefix("http://"))
    slowed: list[str] = []

    def arrows_listing_of_one_prefix(exchange: Any) -> bool:  # s3fs's LIST asks for encoding-type=url, Arrow's does not
        path = unquote(exchange.path)
        if "list-type=2" not in path or "encoding-type" in path or "prefix=t/part=a b/" not in path:
            return False
        slowed.append(exchange.path)  # each attempt: a client that gave up would fall back to s3fs
        return True

    proxy.rewrite_answer(arrows_listing_of_one_prefix, lambda body: time.sleep(4) or body)
    store = open_table_storage(f"s3://{name}/t", {**options, "client_kwargs": {**options["client_kwargs"], "endpoint_url": f"http://{proxy.host}"}})
    listing = list_table_files(store, HiddenNames(["part"]))
    assert len(slowed) == 1 and listing.client == "arrow" and sorted(rows(listing)) == sorted(VISIBLE)


def test_when_arrows_listing_fails_s3fs_lists_from_the_start(s3_bucket: tuple[str, dict[str, Any]], s3_endpoint: str, fault_proxy: Any) -> None:
    name, options = s3_bucket
    seeded = open_table_storage(f"s3://{name}/t", options)
    for rel in VISIBLE:
        seeded.fs.pipe(f"{name}/t/{rel}", b"x")
    proxy = fault_proxy(s3_endpoint.removeprefix("http://"))
    # Arrow's LIST pages of one prefix arrive garbled (its other prefixes may already be listed)
    proxy.rewrite_answer(lambda ex: "encoding-type" not in ex.path and "prefix=t/part=ü/" in unquote(ex.path), lambda body: b"<ListBucketResult><Con")
    store = open_table_storage(f"s3://{name}/t", {**options, "client_kwargs": {**options["client_kwargs"], "endpoint_url": f"http://{proxy.host}"}})
    listing = list_table_files(store, HiddenNames(["part"]))
    assert listing.client == "s3fs" and sorted(rows(listing)) == sorted(VISIBLE)


def test_the_spark_engines_tasks_list_natively_what_the_worker_lists(s3_table: tuple[Bucket, str]) -> None:
    """The Spark engine's driver splits the root (``split_listing``); each executor task lists one
    prefix (``list_prefix``) — by Arrow too, with the worker's rules."""
    from airflow_delta_maintenance.deltalog.vacuum.listing import concat_listings, list_prefix, split_listing

    bucket, uri = s3_table
    store = open_table_storage(uri, bucket.storage_options)
    hidden = HiddenNames(["part"])
    head, prefixes = split_listing(store, hidden)
    parts = [list_prefix(store, prefix, mtime, hidden) for prefix, mtime in prefixes]
    assert parts and {p.client for p in parts} == {"arrow"}
    whole = concat_listings([head, *parts])
    assert sorted(rows(whole)) == sorted(VISIBLE) and rows(whole) == rows(list_table_files(store, hidden))
    assert sorted(rows(whole, "shadows")) == SHADOWS
