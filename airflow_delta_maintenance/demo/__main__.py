"""`make demo`: the main job on the embedded default, end to end.

1. a demo table under ./demo/ on the embedded SQLite coordinator, with a few dozen commits that a
   writer ratified but nobody published yet (real Parquet data files);
2. the generated maintenance DAG for that table, run with ``dag.test()``: sensor, publish, Spark
   checkpoint in local mode, log compaction, cleanup as a dry run;
3. a before/after summary, and the cleanup plan as it will look once the commits expire.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ..cli.init_dags_cmd import copy_example_dags
from ..cli.status_cmd import render
from ..deltalog.model.table_properties import DAY_MS
from ..maintenance.operations.log_cleanup import run_metadata_cleanup
from ..maintenance.operations.status import table_status
from ..maintenance.table.coordinator_client import open_coordinator
from ..maintenance.table.maintained import open_table
from .sample_table import add_action_for, create_coordinated_table, data_batch

COMMITS = 36
REGIONS = ["emea", "amer", "apac"]


def banner(text: str) -> None:
    print(f"\n=== {text} " + "=" * max(0, 70 - len(text)), flush=True)


def write_history(table: str, spec: str) -> None:
    """Version 0 plus COMMITS ratified commits: appends, and a delete every seventh version."""
    create_coordinated_table(table, spec, configuration={"delta.checkpointInterval": "10"})  # as `delta-maintenance create-table` does
    client = open_coordinator(spec)
    live: list[dict] = []
    for v in range(1, COMMITS + 1):
        if v % 7 == 0 and live:
            gone = live.pop(0)["add"]
            actions = [{"remove": {"path": gone["path"], "deletionTimestamp": int(time.time() * 1000), "dataChange": True,
                                   "partitionValues": gone["partitionValues"], "size": gone["size"]}}]
        else:
            region = REGIONS[v % 3]
            add = add_action_for(table, data_batch(v * 100, 100, region), region)
            live.append(add)
            actions = [add]
        client.commit(table, v, actions)


def cli_command() -> str:
    """The ``delta-maintenance`` command as the user can run it from anywhere: the absolute path of
    the one installed beside this interpreter (a virtualenv's bin/), else the name (on PATH)."""
    beside = Path(sys.executable).with_name("delta-maintenance")
    return shlex.quote(str(beside.absolute())) if beside.exists() else "delta-maintenance"


def main() -> int:
    root = Path(os.environ.get("DELTA_DEMO_DIR", "demo")).resolve()
    shutil.rmtree(root, ignore_errors=True)
    table, airflow_home = root / "tables" / "orders", root / "airflow"
    spec = f"local://{root}/coordinator.db"
    airflow_home.mkdir(parents=True)

    banner("1. a writer commits through the embedded coordinator")
    write_history(str(table), spec + "?create=true")
    maintained = open_table(str(table), coordinator=spec)
    print(f"table {table}\ncoordinator {spec}: {COMMITS} commits ratified, none published yet")
    banner("before maintenance")
    print(render(table_status(maintained)), flush=True)

    # Spark when a Spark distribution is at hand (pip's pyspark, or SPARK_HOME/bin on PATH), else
    # the worker-local engine: a plain pip install of the package has no spark-submit
    beside = Path(sys.executable).with_name("spark-submit")
    engine = "spark" if beside.exists() or shutil.which("spark-submit") else "local"
    if engine == "local":
        print("no spark-submit found (install a Spark distribution for the Spark engine): checkpoints are written locally")
    config = root / "tables.yaml"
    config.write_text(
        "defaults:\n"
        f"  coordinator: {spec}\n"
        "  sensor: {min_new_commits: 1, timeout_minutes: 5, poke_interval_seconds: 5}\n"
        f"  checkpoint: {{interval: 10, engine: {engine}}}\n"
        "  compaction: {interval: 10}\n"
        "  cleanup: {mode: dry-run}\n"
        "tables:\n"
        f"  - name: demo_orders\n    uri: {table}\n    tags: [demo]\n"
    )
    dags = root / "dags"
    copy_example_dags(dags)  # the DAG file shipped in the package, as `delta-maintenance init-dags` does
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(airflow_home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "false",
        "DELTA_MAINTENANCE_CONFIG": str(config),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    banner("2. the generated DAG delta_maintenance__demo_orders (dag.test)")
    airflow = str(Path(sys.executable).with_name("airflow"))
    subprocess.run([airflow, "db", "migrate"], env=env, check=True, capture_output=True)
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "airflow_delta_maintenance.demo.run_dag", env["AIRFLOW__CORE__DAGS_FOLDER"] + "/delta_maintenance.py"],
        env=env, capture_output=True, text=True,
    )
    (root / "dag-run.log").write_text(proc.stdout + proc.stderr)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if proc.returncode != 0 or line is None:
        print(f"the DAG run failed; see {root / 'dag-run.log'}", file=sys.stderr)
        return 1
    result = json.loads(line[len("RESULT "):])
    x = result["xcom"]
    print(f"run {result['state']} in {time.monotonic() - started:.0f}s; tasks: " + ", ".join(f"{k}={v}" for k, v in sorted(result["tasks"].items())))
    print(f"  wait:       latest ratified {x['wait_for_ratified_commits']['latest_ratified_version']}, "
          f"published {x['wait_for_ratified_commits']['latest_published_version']}")
    p = x["publish"]
    print(f"  publish:    published versions {p['from_version']}..{p['to_version']} ({p['count']} commits), reported to the coordinator")
    c = x["checkpoint"]
    print(f"  checkpoint: {c['engine']} wrote the checkpoint at version {c['version']} ({c['bytes']} bytes)")
    k = x["compact_log"]
    print("  compaction: " + (f"{k['count']} window(s) over {k['from_version']}..{k['to_version']}" if k["count"] else k["reason"]))
    d = x["cleanup"]
    print(f"  cleanup:    dry run; {d['reason'] if d['skipped'] else str(d['count']) + ' file(s) would go'}")

    banner("after maintenance")
    print(render(table_status(maintained)), flush=True)

    banner("3. the cleanup plan once the log has expired (dry run at now + 31 days)")
    later = int(time.time() * 1000) + 31 * DAY_MS
    plan = run_metadata_cleanup(maintained, dry_run=True, now_ms=later, allow_future_now=True).plan  # a preview of the future
    maintained.close()
    print(f"cutoff {plan.cutoff_timestamp} → cutOffCommit {plan.cutoff_commit}, "
          f"anchor checkpoint {plan.cutoff_checkpoint}: would delete {len(plan.deletions)} file(s), {plan.bytes} bytes")
    for kind, count in plan.counts.items():
        if count:
            print(f"  {kind:<16} {count}")
    command = cli_command()
    print(f"\nnothing was deleted; try:  {command} status {table} --coordinator {spec}")
    print(f"a table of your own for a trial:  {command} create-table /abs/path/my_table --coordinator {spec} --sample-commits 12")
    return 0


if __name__ == "__main__":  # `make demo`: the process ends without teardown (see end_process)
    from ..deltalog._runtime.process_end import end_process

    sys.exit(end_process(main()))
