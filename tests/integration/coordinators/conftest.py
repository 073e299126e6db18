"""Fixtures of the coordinator contract suite (see ``_targets``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from airflow_delta_maintenance.maintenance.coordinator import open_coordinator
from tests.integration.coordinators._targets import KINDS, Target, create_table, make_spec


@pytest.fixture(params=KINDS)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    kind = request.param
    spec = make_spec(request, kind, tmp_path)
    client = open_coordinator(spec)
    table_uri = create_table(kind, client, tmp_path)
    t = Target(kind, spec, table_uri, client, [client])
    yield t
    for c in t.opened:
        c.close()


@pytest.fixture
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], None]:
    """Set the coordinators' wall clock (ms); in-commit timestamps must still increase."""
    from airflow_delta_maintenance.coordinators import _commit_file

    def freeze(now_ms: int) -> None:
        monkeypatch.setattr(_commit_file, "wall_clock_ms", lambda: now_ms)

    return freeze
