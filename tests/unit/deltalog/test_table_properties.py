from __future__ import annotations

import pytest

from airflow_delta_maintenance.deltalog.errors import InvalidTablePropertyError
from airflow_delta_maintenance.deltalog.model.table_properties import DAY_MS, TableProperties, parse_interval_ms


def test_defaults_follow_the_protocol_and_delta_spark() -> None:
    p = TableProperties.from_configuration({})
    assert p.log_retention_ms == 30 * DAY_MS
    assert p.deleted_file_retention_ms == 7 * DAY_MS
    assert p.checkpoint_retention_ms == 2 * DAY_MS
    assert p.enable_expired_log_cleanup is True
    assert p.checkpoint_interval == 10 and p.checkpoint_policy == "classic"
    assert p.compression_codec == "zstd" and p.write_stats_as_json is True
    assert p.set_transaction_retention_ms is None and p.checkpoint_protection_version == 0


@pytest.mark.parametrize(
    ("text", "ms"),
    [("interval 30 days", 30 * DAY_MS), ("30 days", 30 * DAY_MS), ("INTERVAL 1 WEEK", 7 * DAY_MS), ("1 day 12 hours", DAY_MS + DAY_MS // 2), ("interval 2 seconds", 2000)],
)
def test_intervals_parse(text: str, ms: int) -> None:
    assert parse_interval_ms(text) == ms


@pytest.mark.parametrize(
    ("conf", "key"),
    [
        ({"delta.logRetentionDuration": "interval 1 month"}, "delta.logRetentionDuration"),
        ({"delta.logRetentionDuration": "forever"}, "delta.logRetentionDuration"),
        ({"delta.enableExpiredLogCleanup": "yes"}, "delta.enableExpiredLogCleanup"),
        ({"delta.checkpointInterval": "0"}, "delta.checkpointInterval"),
        ({"delta.checkpointPolicy": "v3"}, "delta.checkpointPolicy"),
        ({"delta.coordinatedCommits.tableConf-preview": "not json"}, "delta.coordinatedCommits.tableConf-preview"),
    ],
)
def test_bad_values_name_the_key(conf: dict[str, str], key: str) -> None:
    with pytest.raises(InvalidTablePropertyError) as err:
        TableProperties.from_configuration(conf)
    assert err.value.key == key and key in str(err.value)
