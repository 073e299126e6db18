"""Fixtures of the coordinator contract suite (see ``_targets``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.coordinators._targets import KINDS, Target, new_target


@pytest.fixture(params=KINDS)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    t = new_target(request, request.param, tmp_path)
    yield t
    for c in t.opened:
        c.close()


@pytest.fixture
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], None]:
    """Set the coordinators' wall clock (ms); in-commit timestamps must still increase."""
    from airflow_delta_maintenance.coordinators import commit_file as _commit_file

    def freeze(now_ms: int) -> None:
        monkeypatch.setattr(_commit_file, "wall_clock_ms", lambda: now_ms)

    return freeze
