"""A fleet of tables: DAG-file parse time, and coordinator calls per minute.

    python benchmarks/fleet_parse.py [--sizes 10 100 1000 10000] [--repeat 3] [--window 30]
    python benchmarks/fleet_parse.py --sizes 1000 --skip-calls --package-root /path/to/older/checkout   # a baseline

**Parse.** ``tables.yaml`` with N tables (``@hourly``, a DynamoDB coordinator: nothing is contacted),
parsed by Airflow's ``DagBag`` in a fresh process under ``/usr/bin/time`` — what the dag-processor
does with the example DAG file. Reports wall and CPU seconds of the ``DagBag`` fill (the interpreter
and Airflow's own import are reported apart), the load average, and the spread of start minutes.
CPU seconds are the figure to compare on this shared machine: wall time grows with the load.

**Coordinator calls per minute.** Computed from the configuration (a poll per table per interval,
capped by ``rate_limit.calls_per_second``), then measured: N ``schedule: watch`` watcher triggers
run in one event loop, as the triggerer runs them, against N tables on the embedded coordinator
whose ``get_commits`` is wrapped in a counter, for ``--window`` seconds, without and with a rate
limit. (A time-scheduled table's sensor makes the same one call per poke while it waits.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import PYTHON, ROOT, load1, run_measured

sys.path.insert(0, ROOT)  # tests.helpers

DAG_FILE = os.path.join(ROOT, "dags", "delta_maintenance.py")

PARSE = r"""
import json, os, sys, time
if os.environ.get("BENCH_PACKAGE_ROOT"):  # before the working directory, which is this checkout
    sys.path.insert(0, os.environ["BENCH_PACKAGE_ROOT"])
import airflow_delta_maintenance
assert airflow_delta_maintenance.__file__.startswith(os.environ.get("BENCH_PACKAGE_ROOT", "")), airflow_delta_maintenance.__file__
c0 = time.process_time(); w0 = time.perf_counter()
from airflow.dag_processing.dagbag import DagBag
c1 = time.process_time(); w1 = time.perf_counter()
bag = DagBag(dag_folder=sys.argv[1])
c2 = time.process_time(); w2 = time.perf_counter()
minutes = [int(d.timetable.expression.split()[0]) for d in bag.dags.values() if hasattr(d.timetable, "expression")]
print(json.dumps({"dags": len(bag.dag_ids), "errors": len(bag.import_errors), "import_cpu": c1 - c0, "import_wall": w1 - w0,
                  "parse_cpu": c2 - c1, "parse_wall": w2 - w1, "minutes": minutes}))
"""


def write_config(path: Path, n: int, **defaults: Any) -> None:
    lines = ["defaults:", "  coordinator: dynamodb://commits?region=eu-west-1", "  schedule: '@hourly'"]
    lines += [f"  {k}: {json.dumps(v)}" for k, v in defaults.items()]
    lines.append("tables:")
    lines += [f"  - {{name: t{i:05d}, uri: 's3://lake/db/t{i:05d}'}}" for i in range(n)]
    path.write_text("\n".join(lines) + "\n")


def bench_parse(sizes: list[int], repeat: int, work: Path, package_root: str | None = None) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for n in sizes:
        config = work / f"tables-{n}.yaml"
        write_config(config, n)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
        env.update(AIRFLOW_HOME=str(work / "home"), AIRFLOW__CORE__LOAD_EXAMPLES="false", AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT="3600",
                   DELTA_MAINTENANCE_CONFIG=str(config))
        if package_root:  # parse with another checkout's package (the DAG file is the same)
            env["BENCH_PACKAGE_ROOT"] = package_root
        runs = []
        for _ in range(repeat):
            load = load1()
            wall, peak, rep = run_measured([PYTHON, "-c", PARSE, DAG_FILE], env=env)
            assert rep.get("dags") == n and rep.get("errors") == 0, rep
            runs.append({**rep, "load": load, "peak_mib": peak, "process_wall": wall})
            print(f"  parse {n}: cpu {rep['parse_cpu']:.2f}s wall {rep['parse_wall']:.2f}s (load {load:.1f})", file=sys.stderr, flush=True)
        minutes = Counter(runs[0]["minutes"])
        med = lambda k, runs=runs: statistics.median(r[k] for r in runs)  # noqa: E731
        out[n] = {
            "parse_cpu_s": round(med("parse_cpu"), 2), "parse_wall_s": round(med("parse_wall"), 2),
            "parse_cpu_ms_per_table": round(1000 * med("parse_cpu") / n, 2),
            "import_cpu_s": round(med("import_cpu"), 2), "peak_mib": round(med("peak_mib")),
            "load_mean": round(statistics.mean(r["load"] for r in runs), 1), "runs": len(runs),
            "minutes_used": len(minutes), "max_tables_per_minute": max(minutes.values()),
        }
    return out


def make_tables(root: Path, n: int) -> tuple[str, list[str]]:
    from airflow_delta_maintenance.demo.sample_table import create_actions
    from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator

    spec = f"local://{root}/coordinator.db"
    client = open_coordinator(spec + "?create=true")
    uris = [str(root / "tables" / f"t{i:05d}") for i in range(n)]
    for uri in uris:
        client.commit(uri, 0, create_actions(ict=True))
    client.close()
    return spec, uris


async def _watch(spec: str, uris: list[str], poll: float, window: float, calls_per_second: float | None) -> int:
    from airflow_delta_maintenance.coordinators.local import LocalCoordinator
    from airflow_delta_maintenance.triggers.ratified_version import DeltaRatifiedVersionWatchTrigger
    from tests.helpers.rate_limit import reset_buckets

    reset_buckets()
    count = [0]
    real = LocalCoordinator.get_commits

    def counted(self: Any, *a: Any, **k: Any) -> Any:
        count[0] += 1
        return real(self, *a, **k)

    LocalCoordinator.get_commits = counted  # type: ignore[method-assign]
    triggers = [DeltaRatifiedVersionWatchTrigger(u, coordinator_spec=spec, min_new_commits=1, poll_interval=poll, endpoint="bench",
                                                 calls_per_second=calls_per_second) for u in uris]

    async def drain(t: DeltaRatifiedVersionWatchTrigger) -> None:
        async for _ in t.run():
            pass

    tasks = [asyncio.ensure_future(drain(t)) for t in triggers]
    # the first polls are spread over one interval: measure after it, over whole intervals
    await asyncio.sleep(poll)
    start = count[0]
    await asyncio.sleep(window)
    measured = count[0] - start
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    LocalCoordinator.get_commits = real  # type: ignore[method-assign]
    return measured


def bench_calls(sizes: list[int], poll: float, window: float, limit: float, work: Path) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for n in sizes:
        spec, uris = make_tables(work / f"coord-{n}", n)
        row: dict[str, Any] = {"poll_interval_s": poll}
        for label, cps in (("unlimited", None), (f"limit_{limit:g}_per_s", limit)):
            computed = n * 60 / poll if cps is None else min(n * 60 / poll, cps * 60)
            measured = asyncio.run(_watch(spec, uris, poll, window, cps)) * 60 / window
            row[label] = {"computed_per_min": round(computed), "measured_per_min": round(measured)}
            print(f"  calls {n} {label}: computed {computed:.0f}/min measured {measured:.0f}/min", file=sys.stderr, flush=True)
        out[n] = row
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--poll", type=float, default=10.0, help="watcher poll interval for the measured calls (s)")
    ap.add_argument("--window", type=float, default=30.0, help="measuring window (s)")
    ap.add_argument("--limit", type=float, default=20.0, help="rate_limit.calls_per_second of the limited run")
    ap.add_argument("--skip-calls", action="store_true")
    ap.add_argument("--output", help="also write the figures here (JSON)")
    ap.add_argument("--package-root", help="parse with the package of another checkout (a baseline)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
        work = Path(tmp)
        result: dict[str, Any] = {"parse": bench_parse(args.sizes, args.repeat, work, args.package_root)}
        if not args.skip_calls:
            result["coordinator_calls"] = bench_calls([n for n in args.sizes if n <= 1000], args.poll, args.window, args.limit, work)
    if args.output:
        Path(args.output).write_text(json.dumps(result, indent=2) + "\n")
    # one line, last: the watchers' own log lines share stdout
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
