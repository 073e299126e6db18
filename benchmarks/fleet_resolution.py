"""Parse-time cost of discovery: reading the fleet file and resolving every discovered table.

    python benchmarks/fleet_resolution.py [--sizes 100,1000,10000] [--repeat 3]

For each size a YAML with a Unity Catalog source and two overrides (a name glob, a property) and a
fleet file of that many discovered tables are written; a fresh process then times ``load_fleet``
(YAML, fleet file, precedence, validation of every table) — what the DAG file does before it
builds any DAG. DAG construction itself is measured by the DAG factory's own benchmark. Reports
the median wall time of ``load_fleet`` inside the process (not the interpreter's start), its
min–max, per-table cost and the 1-minute load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import PYTHON, in_subprocess, load1

YAML = """
defaults:
  checkpoint: {interval: 10, engine: local}
discovery:
  sources:
    - {name: uc, unity_catalog: "unity-catalog://uc.example:8080?api=v1", catalog: main}
  overrides:
    - match: {name: "*.t1*"}
      schedule: "15 * * * *"
    - match: {properties: {tier: gold}}
      cleanup: {retention_days: 3}
"""

WRITE = r"""
import sys
from airflow_delta_maintenance.maintenance.config.tables import read_yaml
from airflow_delta_maintenance.fleet.config import DiscoveredTable, parse_discovery
from airflow_delta_maintenance.fleet.catalog_discovery import DiscoveryResult, SourceResult, write_fleet_file
config, n = sys.argv[1], int(sys.argv[2])
d = parse_discovery(read_yaml(config), config)
found = [DiscoveredTable("uc", f"main.s{i % 20}.t{i}", f"s3://lake/t{i}", f"unity-catalog://uc.example:8080/main.s{i % 20}.t{i}?api=v1&table_id=id{i}",
                         {"tier": "gold"} if i % 3 == 0 else {}) for i in range(n)]
write_fleet_file(d.fleet_file, DiscoveryResult([SourceResult("uc", "unity-catalog", found)], "bench").document(d))
"""

MEASURE = r"""
import json, sys, time
from airflow_delta_maintenance.fleet.config import load_fleet
began = time.perf_counter()
fleet = load_fleet(sys.argv[1])
print(json.dumps({"seconds": time.perf_counter() - began, "tables": len(fleet.tables), "invalid": len(fleet.invalid)}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            config = os.path.join(tmp, "tables.yaml")
            with open(config, "w") as f:
                f.write(YAML)
            in_subprocess(WRITE, config, str(n))
            runs, loads = [], []
            for _ in range(args.repeat):
                loads.append(load1())
                out = json.loads(in_subprocess(MEASURE, config).strip().splitlines()[-1])
                assert out["tables"] == n and out["invalid"] == 0, out
                runs.append(out["seconds"])
        median = statistics.median(runs)
        rows.append({"tables": n, "median_s": round(median, 3), "min_s": round(min(runs), 3), "max_s": round(max(runs), 3),
                     "ms_per_table": round(median / n * 1000, 3), "load1_mean": round(statistics.mean(loads), 2)})
        print(f"{n:>6} tables: load_fleet {median:.3f} s (min {min(runs):.3f}, max {max(runs):.3f}), "
              f"{median / n * 1000:.3f} ms/table, load {statistics.mean(loads):.2f}", file=sys.stderr, flush=True)
    print(json.dumps({"benchmark": "fleet_resolution", "python": PYTHON, "rows": rows}))


if __name__ == "__main__":
    main()
