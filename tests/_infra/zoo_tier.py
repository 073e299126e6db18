"""Which zoo tables the slowest differential tests run on.

Each zoo-wide differential (OPTIMIZE, VACUUM, checksums against delta-spark) costs 40 s to 4 min a
table on two cores, too much for every table inside ``make test``'s budget. ``make test`` runs
each on the few tables named by the test, chosen to cover the features its acceptance names;
``DELTA_TEST_ZOO=all`` (``make test-zoo``) runs every table.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TypeVar

__all__ = ["zoo_tables"]

T = TypeVar("T")


def zoo_tables(every: Sequence[T], quick: Sequence[T]) -> list[T]:
    """``every`` under ``DELTA_TEST_ZOO=all``, else ``quick`` (each of which must be in ``every``)."""
    unknown = set(quick) - set(every)
    if unknown:
        raise ValueError(f"not among the test's tables: {sorted(unknown)}")
    return list(every) if os.environ.get("DELTA_TEST_ZOO", "") == "all" else list(quick)
