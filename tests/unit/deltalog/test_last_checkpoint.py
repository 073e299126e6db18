from __future__ import annotations

import json

from airflow_delta_maintenance.deltalog.log_segment.last_checkpoint import LastCheckpointHint, json_checksum, parse_last_checkpoint

SPEC_VECTOR = '{"k0":"\'v 0\'", "checksum": "adsaskfljadfkjadfkj", "k1":{"k2": 2, "k3": ["v3", [1, 2], {"k4": "v4", "k5": ["v5", "v6", "v7"]}]}}'


def test_checksum_matches_the_protocol_test_vector() -> None:
    assert json_checksum(json.loads(SPEC_VECTOR)) == "6a92d155a59bf2eecbd4b4ec7fd1f875"


def test_written_hint_round_trips_with_a_valid_checksum() -> None:
    hint = LastCheckpointHint(version=10, size=13, parts=None, size_in_bytes=4096, num_of_add_files=9)
    data = hint.to_json_bytes()
    parsed = parse_last_checkpoint(data)
    assert parsed is not None and parsed.version == 10 and parsed.num_of_add_files == 9
    assert parsed.checksum == json_checksum(json.loads(data))


def test_corrupt_hints_parse_to_none() -> None:
    good = json.loads(LastCheckpointHint(version=3, size=4).to_json_bytes())
    tampered = dict(good, version=4)
    for data in [b"", b"{", b"[]", b'{"size": 1}', json.dumps(tampered).encode(), b'{"version":1,"version":2,"size":1}']:
        assert parse_last_checkpoint(data) is None, data
    assert parse_last_checkpoint(b'{"version": 7, "size": 2}').version == 7  # no checksum is fine
