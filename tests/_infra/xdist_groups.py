"""``make test`` on every core: pytest-xdist with ``--dist loadgroup`` (a pytest plugin, see
``tests/conftest.py``).

Every test gets an ``xdist_group``, so xdist hands out whole groups and a group runs on one worker:

- by default its file, so that a module fixture (a wheel build, a migrated Airflow home) is set
  up once, not once per worker;
- a file that uses an expensive session fixture joins that fixture's family (``FAMILIES``): the
  fixture then starts once, on one worker (the shared Airflow deployment, the local Spark session
  and the table zoo it builds, the standalone cluster, the real Unity Catalog servers, the migrated
  Airflow home of ``dag.test()``). A file that uses several joins the first family in that list;
  the cheaper fixtures it also uses start on its worker as well (seconds, not minutes).

The groups are queued longest first (``WEIGHTS``: seconds measured on a quiet two-core machine,
``XDIST_TIMES_OUT`` writes them again; a group not listed counts ``DEFAULT_S`` per test), so that
the long ones start at once and the short ones fill the end. xdist's own reordering (by test count)
is turned off for that. The terminal summary says how busy each worker was and where the time went.

Run without ``-n`` (or with ``-n 0``) everything is as before: one process, collection order.
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

# (group, fixtures) by cost of the fixture: a file joins the first family one of its tests uses.
FAMILIES: tuple[tuple[str, frozenset[str]], ...] = (
    ("airflow-deployment", frozenset({"airflow_deployment", "fleet_deployment"})),  # migrate + 4 components: ~1 min
    ("spark", frozenset({"spark", "table_zoo"})),  # a JVM with 47 jars; the zoo builds with it in a clean clone
    ("spark-standalone", frozenset({"spark_standalone"})),  # master + worker JVMs
    ("uc-oss", frozenset({"uc_oss_servers"})),  # up to four Unity Catalog server JVMs, ~7 s each
    ("airflow-home", frozenset({"airflow_home"})),  # `airflow db migrate` of the dag.test() home
)
WEIGHTS_FILE = Path(__file__).with_name("xdist_weights.json")
DEFAULT_S = 0.5  # per test of a group with no measured weight


def _load_weights() -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(WEIGHTS_FILE.read_text()).items()}
    except FileNotFoundError:
        return {}


def group_of_files(items: list[pytest.Item]) -> dict[Path, str]:
    """``path -> group`` for every file of ``items``."""
    used: dict[Path, set[str]] = defaultdict(set)
    for item in items:
        used[item.path].update(getattr(item, "fixturenames", ()))
    rootdir = Path(str(items[0].config.rootpath)) if items else Path.cwd()
    groups = {}
    for path, fixtures in used.items():
        family = next((name for name, members in FAMILIES if fixtures & members), None)
        groups[path] = family or (path.relative_to(rootdir).as_posix() if path.is_relative_to(rootdir) else path.as_posix())
    return groups


def _distributed(config: pytest.Config) -> bool:
    """``--dist loadgroup``: on the controller ``dist``; a worker runs with ``dist`` "no" and ``loadgroup``."""
    return getattr(config.option, "dist", "no") == "loadgroup" or bool(getattr(config.option, "loadgroup", False))


def _tag_node_id(item: pytest.Item, group: str) -> None:
    """``<node id>@<group>``, the id the controller's LoadGroupScheduling groups by. pytest-xdist
    3.8 writes it to ``item._nodeid``, which pytest 9.2 no longer reads (a node's id is ``_id``, a
    structured NodeId): every group would silently be one test each. Where ``_id`` is what pytest
    reads, it is set here; an older pytest keeps xdist's own way."""
    if hasattr(item, "_nodeid") or not hasattr(item, "_id") or item.nodeid.endswith(f"@{group}"):
        return
    from _pytest.nodeid import coerce_node_id

    item._id = coerce_node_id(f"{item.nodeid}@{group}")


def pytest_configure(config: pytest.Config) -> None:
    # registered here too: the tier venvs (tests/integration/test_test_tiers.py) run without xdist
    config.addinivalue_line("markers", "xdist_group(name): the pytest-xdist group a test runs in (tests/_infra/xdist_groups.py)")
    if _distributed(config) and not hasattr(config, "workerinput"):
        config.option.loadscopereorder = False  # keep the longest-first order below
        config.pluginmanager.register(_Balance(config), "xdist-balance")


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook appends the group to each node id
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not items:
        return
    groups = group_of_files(items)
    for item in items:
        item.add_marker(pytest.mark.xdist_group(groups[item.path]))
    if not _distributed(config):
        return
    if hasattr(config, "workerinput"):
        for item in items:
            _tag_node_id(item, groups[item.path])
    weights = _load_weights()
    counts: dict[str, int] = defaultdict(int)
    for item in items:
        counts[groups[item.path]] += 1
    cost = {g: weights.get(g, DEFAULT_S * n) for g, n in counts.items()}
    order = {item: i for i, item in enumerate(items)}
    items.sort(key=lambda item: (-cost[groups[item.path]], groups[item.path], order[item]))


class _Balance:
    """On the controller: each worker's busy time and each group's, from the test reports."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.started = time.monotonic()
        self.busy: dict[str, float] = defaultdict(float)
        self.last: dict[str, float] = {}
        self.groups: dict[str, float] = defaultdict(float)
        self.group_worker: dict[str, str] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        node = getattr(report, "node", None)
        worker = node.gateway.id if node is not None else "controller"
        self.busy[worker] += report.duration
        self.last[worker] = time.monotonic() - self.started
        group = report.nodeid.rpartition("@")[2] if "@" in report.nodeid else "?"
        self.groups[group] += report.duration
        self.group_worker[group] = worker

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        wall = time.monotonic() - self.started
        tr = terminalreporter
        tr.write_sep("=", "xdist balance (tests/_infra/xdist_groups.py)")
        for worker in sorted(self.busy):
            tr.write_line(f"{worker}: busy {self.busy[worker]:.0f}s (setup + call + teardown), last test ended at {self.last[worker]:.0f}s of {wall:.0f}s")
        top = sorted(self.groups.items(), key=lambda kv: -kv[1])
        tr.write_line("longest groups: " + ", ".join(f"{g} {s:.0f}s ({self.group_worker[g]})" for g, s in top[:12]))
        out = os.environ.get("XDIST_TIMES_OUT")
        if out:
            Path(out).write_text(json.dumps({g: round(s, 1) for g, s in top}, indent=1) + "\n")
