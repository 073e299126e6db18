"""No stampede: per-table jitter, one pool per coordinator endpoint, per-endpoint call budgets."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections import Counter
from datetime import timedelta

import pytest

from airflow_delta_maintenance.fleet.rate_limit import TokenBucket, bucket_for
from airflow_delta_maintenance.fleet.scheduling import jitter_cron, jitter_duration, jitter_start_offset, minute_offset, pools_for
from airflow_delta_maintenance.maintenance.config.tables import ConfigError, parse_config
from tests.helpers.rate_limit import reset_buckets


def test_the_minute_offset_is_the_uris_sha256_so_it_is_the_same_in_every_process() -> None:
    uri = "s3://lake/db/orders"
    expected = int.from_bytes(hashlib.sha256(uri.encode()).digest()[:8], "big") % 60
    assert minute_offset(uri) == minute_offset("s3a://lake/db/orders/") == expected
    code = f"from airflow_delta_maintenance.fleet.scheduling import minute_offset; print(minute_offset({uri!r}))"
    for seed in ("1", "2"):  # Python's own hash() would differ between these
        out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONHASHSEED": seed}, capture_output=True, text=True, check=True)
        assert int(out.stdout) == expected


def test_a_thousand_tables_spread_across_the_hour() -> None:
    minutes = Counter(int(jitter_cron("@hourly", f"s3://lake/db/t{i:05d}").split()[0]) for i in range(1000))
    assert len(minutes) == 60  # every minute of the hour is used
    assert max(minutes.values()) <= 3 * 1000 / 60  # and none carries a stampede


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [
        ("@hourly", "{o} * * * *"),
        ("@daily", "{o} 0 * * *"),
        ("0 * * * *", "{o} * * * *"),
        ("15 */2 * * *", "{o15} */2 * * *"),
        ("*/15 * * * *", "{o%15}-59/15 * * * *"),
        ("0,30 * * * *", "0,30 * * * *"),  # a list: left alone
        ("* * * * *", "* * * * *"),
        ("@once", "@once"),
    ],
)
def test_jitter_moves_the_minute_of_presets_and_single_minute_crons(schedule: str, expected: str) -> None:
    uri = "s3://lake/orders"
    o = minute_offset(uri)
    assert jitter_cron(schedule, uri) == expected.format(o=o, o15=(15 + o) % 60, **{"o%15": o % 15})


@pytest.mark.parametrize(
    ("interval", "expected"),
    [(timedelta(minutes=30), "{o30}-59/30 * * * *"), (timedelta(minutes=15), "{o15}-59/15 * * * *"), (timedelta(hours=1), "{o} * * * *"),
     (timedelta(days=1), "{o} 0 * * *"), (timedelta(minutes=45), None), (timedelta(seconds=90), None), (timedelta(minutes=1), None)],
)
def test_a_duration_that_divides_an_hour_or_a_day_becomes_a_jittered_cron(interval: timedelta, expected: str | None) -> None:
    uri = "s3://lake/orders"
    o = minute_offset(uri)
    assert jitter_duration(interval, uri) == (expected.format(o=o, o30=o % 30, o15=o % 15) if expected else None)
    two_hourly = jitter_duration(timedelta(hours=2), uri)
    assert two_hourly is not None and two_hourly.startswith(f"{o} ") and two_hourly.split()[1] in ("0-23/2", "1-23/2")


def test_watchers_first_polls_spread_within_their_interval() -> None:
    offsets = {jitter_start_offset(timedelta(minutes=1), f"/t/{i}") for i in range(200)}
    assert all(timedelta(0) <= o < timedelta(minutes=1) for o in offsets) and len(offsets) > 50


def _tables(**defaults: object) -> list:
    return parse_config({"defaults": defaults, "tables": [
        {"name": "a", "uri": "s3://lake/a", "coordinator": "dynamodb://commits?region=eu-west-1"},
        {"name": "b", "uri": "s3://lake/b", "coordinator": "dynamodb://commits?region=eu-west-1", "pool_slots": 4},
        {"name": "c", "uri": "s3://lake/c", "coordinator": "unity-catalog://uc.example.com:8080/main.s.c"},
        {"name": "d", "uri": "s3://lake/d", "coordinator_conn_id": "uc_prod"},
    ]})


def test_pool_auto_is_one_pool_per_coordinator_endpoint() -> None:
    a, b, c, d = _tables(pool="auto", pool_slots=16)
    assert a.resolved_pool == b.resolved_pool == "delta_coordinator__dynamodb_eu-west-1_commits"
    assert c.resolved_pool == "delta_coordinator__uc_uc.example.com_8080"
    assert d.resolved_pool == "delta_coordinator__conn_uc_prod"
    # tables sharing a pool but disagreeing on its size: the smaller budget protects the endpoint
    assert pools_for((t.resolved_pool, t.pool_slots) for t in (a, b, c, d)) == {
        "delta_coordinator__dynamodb_eu-west-1_commits": 4, "delta_coordinator__uc_uc.example.com_8080": 16, "delta_coordinator__conn_uc_prod": 16}
    assert _tables()[0].resolved_pool is None  # no pool configured: Airflow's default_pool
    assert _tables(pool="shared")[0].resolved_pool == "shared"


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ({"schedule": "watch", "publish": False}, "schedule"),  # watch needs a coordinator
        ({"pool": "auto", "publish": False}, "pool"),
        ({"coordinator": "local:///c.db", "jitter": "yes"}, "jitter"),
        ({"coordinator": "local:///c.db", "pool_slots": 0}, "pool_slots"),
        ({"coordinator": "local:///c.db", "rate_limit": {"calls_per_second": 0}}, "rate_limit.calls_per_second"),
        ({"coordinator": "local:///c.db", "rate_limit": {"per_minute": 5}}, "rate_limit.per_minute"),
    ],
)
def test_fleet_settings_are_validated(table: dict, key: str) -> None:
    with pytest.raises(ConfigError, match=f"table 't': {key}"):
        parse_config({"tables": [{"name": "t", "uri": "/t", **table}]})


def test_schedule_kinds() -> None:
    kinds = {t.name: (t.schedule_kind, t.airflow_schedule) for t in parse_config({"defaults": {"coordinator": "local:///c.db"}, "tables": [
        {"name": "a", "uri": "/a", "schedule": "asset"}, {"name": "w", "uri": "/w", "schedule": "watch"},
        {"name": "h", "uri": "/h"}, {"name": "n", "uri": "/n", "schedule": None}]})}
    assert kinds == {"a": ("asset", None), "w": ("watch", None), "h": ("time", "@hourly"), "n": ("none", None)}


def test_the_token_bucket_holds_an_endpoint_to_its_rate() -> None:
    now = [0.0]
    bucket = TokenBucket(rate=2.0, burst=2, clock=lambda: now[0])
    assert [bucket.reserve() for _ in range(2)] == [0.0, 0.0]  # the burst
    assert bucket.reserve() == pytest.approx(0.5) and bucket.reserve() == pytest.approx(1.0)  # then queued, 2 per second
    now[0] = 10.0  # idle for a while: at most `burst` saved up
    assert [bucket.reserve() for _ in range(3)][2] == pytest.approx(0.5)


def test_pollers_of_one_endpoint_share_one_bucket_and_the_stricter_limit() -> None:
    reset_buckets()
    try:
        first = bucket_for("dynamodb:eu-west-1:commits", 10, 10)
        assert bucket_for("dynamodb:eu-west-1:commits", 2, None) is first and first.rate == 2 and first.burst == 2
        assert bucket_for("uc:host:8080", 5) is not first
        assert bucket_for("uc:host:8080", None) is None  # no limit configured
    finally:
        reset_buckets()
