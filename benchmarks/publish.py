"""Publishing throughput: 1,000 ratified commits on local storage and on the S3 emulator.

    python benchmarks/publish.py [--commits 1000]

Each table is written through the embedded coordinator (version 0 plus N ratified, unpublished
commits of one add action), then one `publish_ratified_commits` call publishes them all. Reports
commits per second and coordinator calls per commit (the client is wrapped in a counting proxy).
The S3 emulator is moto's server, started on 127.0.0.1 by this script and stopped afterwards.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: tests.helpers

from airflow_delta_maintenance.deltalog.storage import open_table_storage
from airflow_delta_maintenance.demo.sample_table import create_actions
from airflow_delta_maintenance.maintenance.operations.publish import publish_ratified_commits
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator
from tests.helpers.tables import bind_table


class Counting:
    """Counts the coordinator calls publishing makes."""

    def __init__(self, client: Any) -> None:
        self.client, self.calls = client, 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.client, name)
        if name in ("get_commits", "report_published", "latest_ratified_version", "commit"):
            def counted(*a: Any, **k: Any) -> Any:
                self.calls += 1
                return attr(*a, **k)
            return counted
        return attr


def run(uri: str, spec: str, options: dict[str, Any], commits: int) -> dict[str, float]:
    client = open_coordinator(spec, options)
    client.commit(uri, 0, create_actions(ict=True))
    for v in range(1, commits + 1):
        client.commit(uri, v, [{"add": {"path": f"part-{v:05d}.parquet", "partitionValues": {"region": "x"}, "size": 1000, "modificationTime": 1, "dataChange": True}}])
    counting = Counting(client)
    store = open_table_storage(uri, options)
    started = time.perf_counter()
    result = publish_ratified_commits(bind_table(store, counting))  # type: ignore[arg-type]
    elapsed = time.perf_counter() - started
    assert result.published == list(range(1, commits + 1)), "every commit published"
    return {"seconds": elapsed, "commits_per_second": commits / elapsed, "calls_per_commit": counting.calls / commits}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--commits", type=int, default=1000)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-publish-"))
    rows = {"local": run(str(work / "local"), f"local://{work}/local.db?create=true", {}, args.commits)}

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}
    moto = subprocess.Popen([str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, env=env)
    try:
        import boto3

        endpoint = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="bench", aws_secret_access_key="bench").create_bucket(Bucket="bench-bucket")
                break
            except Exception:  # noqa: BLE001 - server still starting
                time.sleep(0.1)
        options = {"key": "bench", "secret": "bench", "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"}}
        rows["s3 (moto)"] = run("s3://bench-bucket/table", f"local://{work}/s3.db?create=true", options, args.commits)
    finally:
        os.killpg(moto.pid, signal.SIGTERM)
        moto.wait(15)
    print(f"{'storage':<10} {'commits':>8} {'seconds':>8} {'commits/s':>10} {'coordinator calls/commit':>25}")
    for name, r in rows.items():
        print(f"{name:<10} {args.commits:>8} {r['seconds']:>8.2f} {r['commits_per_second']:>10.0f} {r['calls_per_commit']:>25.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
