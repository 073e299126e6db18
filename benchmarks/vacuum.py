"""VACUUM planning (listing + plan, a dry run) vs the deltalake wheel's ``vacuum(dry_run=True)``.

    python benchmarks/vacuum.py [--files 1000000 --partitions 100] [--repeat 3] [--work DIR] [--s3]

A local table whose one commit adds ``--files`` files in ``--partitions`` partitions; a second
commit removes a tenth of them, and as many untracked strays lie beside them (every file is a few
bytes: VACUUM reads names, sizes and times, never data). Both sides plan a FULL VACUUM with no
retention, in a fresh process as a user runs it: ours as ``delta-maintenance vacuum ROOT
--retention-hours 0 --allow-shorter-retention --json``, the wheel as ``DeltaTable(ROOT).vacuum(
retention_hours=0, enforce_retention_duration=False, dry_run=True, full=True)``. Both must plan the
same number of files. Engines alternate; medians with spread, CPU time and load (``_harness``).
The issue's target: time ≤ 0.5x, peak memory ≤ 1.0x the wheel's.

``--s3``: the same table copied to moto's S3 server (started on 127.0.0.1 by this script with the
copy loaded into its backend before it serves, ``_moto_preloaded.py``; stopped afterwards), both
sides reading it there with the same endpoint and keys from the environment. moto answers one
request at a time and scans the whole bucket for every LIST page, so at 1M files one listing keeps
it busy for many minutes (over an hour for a flat listing): use ``--repeat 1``, or
``--s3-indexed-listing`` (the same pages cut from a sorted index: a server whose cost per page does
not grow with the bucket). ``--s3-endpoint URL``: a moto
server already running (started by you, keys ``bench``/``bench``): the table is uploaded to it only
once (bucket ``bench-<files>-<partitions>``), so a run under ``flock /tmp/bench.lock`` times the
planning alone; ``--prepare`` builds and uploads, then stops.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import CLI, PYTHON, compile_package, in_subprocess, interleaved, ratio_line, run_measured

BUILD = r"""
import json, os, sys, uuid
root, files, partitions = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(os.path.join(root, "_delta_log"))
fields = [{"name": "id", "type": "long", "nullable": True, "metadata": {}}, {"name": "part", "type": "string", "nullable": True, "metadata": {}}]
head = [{"commitInfo": {"timestamp": 1, "operation": "WRITE"}}, {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}}, "schemaString": json.dumps({"type": "struct", "fields": fields}),
                      "partitionColumns": ["part"], "configuration": {}, "createdTime": 1}}]
names = []
for p in range(partitions):
    os.makedirs(os.path.join(root, f"part=p{p:04d}"))
with open(os.path.join(root, "_delta_log", "00000000000000000000.json"), "w") as log:
    log.write("".join(json.dumps(x) + "\n" for x in head))
    for i in range(files):
        part = f"p{i % partitions:04d}"
        rel = f"part={part}/part-{i:07d}-{uuid.uuid4()}.snappy.parquet"
        with open(os.path.join(root, rel), "wb") as f:
            f.write(b"PAR1")
        names.append(rel)
        log.write(json.dumps({"add": {"path": rel, "partitionValues": {"part": part}, "size": 4, "modificationTime": 1, "dataChange": True}}) + "\n")
with open(os.path.join(root, "_delta_log", "00000000000000000001.json"), "w") as log:
    log.write(json.dumps({"commitInfo": {"timestamp": 2, "operation": "DELETE"}}) + "\n")
    for rel in names[::10]:
        log.write(json.dumps({"remove": {"path": rel, "deletionTimestamp": 2, "dataChange": True, "size": 4}}) + "\n")
for i in range(files // 10):
    with open(os.path.join(root, f"part=p{i % partitions:04d}", f"stray-{i:07d}.parquet"), "wb") as f:
        f.write(b"PAR1")
"""

WHEEL = r"""
import json, sys, deltalake
options = json.loads(sys.argv[2]) if len(sys.argv) > 2 else None
paths = deltalake.DeltaTable(sys.argv[1], storage_options=options).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=True, full=True)
print(json.dumps({"files": len(paths)}))
"""

S3_KEYS = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}


def upload(root: str, endpoint: str, bucket: str) -> str:
    """``root`` uploaded to ``bucket`` on the S3 server at ``endpoint`` (once: a bucket that holds
    the table's last commit is taken as it is); its table URI."""
    from concurrent.futures import ThreadPoolExecutor

    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="bench", aws_secret_access_key="bench")
    for _ in range(100):
        try:
            client.head_object(Bucket=bucket, Key="t/_delta_log/00000000000000000001.json")
            return f"s3://{bucket}/t"
        except client.exceptions.ClientError:
            break
        except Exception:  # noqa: BLE001 - the server is still starting
            time.sleep(0.1)
    with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
        client.create_bucket(Bucket=bucket)
    started = time.perf_counter()
    files = sorted((os.path.join(d, n) for d, _, names in os.walk(root) for n in names), key=lambda f: "_delta_log" in f)
    last = [f for f in files if f.endswith("00000000000000000001.json")]
    with ThreadPoolExecutor(8) as pool:  # the last commit goes last: its presence says the copy is whole
        list(pool.map(lambda f: client.upload_file(f, bucket, "t/" + os.path.relpath(f, root)), [f for f in files if f not in last]))
    for f in last:
        client.upload_file(f, bucket, "t/" + os.path.relpath(f, root))
    print(f"uploaded {len(files):,} objects to moto in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return f"s3://{bucket}/t"


def cpu_seconds_of(pid: int | None) -> float:
    """User + system CPU seconds a process has used so far (the S3 server's share of a run)."""
    if not pid:
        return float("nan")
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def moto_copy(root: str, bucket: str, endpoint: str | None = None, pid: int | None = None, indexed: bool = False) -> Iterator[tuple[str, str, int | None]]:
    """``root`` on moto's S3: (table URI, endpoint, server pid). Without ``endpoint`` a fresh
    server is started here and stopped after."""
    if endpoint:
        yield upload(root, endpoint, bucket), endpoint, pid
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # the copy is loaded into moto's backend before it serves (HTTP uploads would take hours at 1M)
    moto = subprocess.Popen([sys.executable, str(Path(__file__).with_name("_moto_preloaded.py")), root, bucket, "t/", str(port), *(["--indexed-listing"] if indexed else [])],
                            stdout=subprocess.DEVNULL, start_new_session=True, env={**os.environ, **S3_KEYS})
    try:
        endpoint = f"http://127.0.0.1:{port}"
        while moto.poll() is None:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(1)
        if moto.poll() is not None:
            raise SystemExit(f"the moto server exited with {moto.returncode} while loading the table")
        yield upload(root, endpoint, bucket), endpoint, moto.pid
    finally:
        os.killpg(moto.pid, signal.SIGTERM)
        moto.wait(15)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--work", default=None, help="a directory to keep the built table in (reused when present)")
    ap.add_argument("--s3", action="store_true", help="plan on a copy in moto's S3 (started here) instead of the local disk")
    ap.add_argument("--s3-endpoint", default=None, help="with --s3: a moto server already running (the copy is made once)")
    ap.add_argument("--s3-server-pid", type=int, default=None, help="with --s3-endpoint: the server's pid (its CPU per run is reported)")
    ap.add_argument("--with-s3fs", action="store_true", help="with --s3: also ours listing through s3fs (DELTA_MAINTENANCE_NATIVE_S3=0), alternating")
    ap.add_argument("--s3-indexed-listing", action="store_true", help="with --s3: moto cuts LIST pages from a sorted index (see _moto_preloaded.py)")
    ap.add_argument("--prepare", action="store_true", help="build (and with --s3 upload) the table, then stop")
    args = ap.parse_args()
    compile_package()
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-vacuum-"))
    root = str(work / f"t-{args.files}-{args.partitions}")
    if not os.path.exists(os.path.join(root, "_delta_log", "00000000000000000001.json")):
        in_subprocess(BUILD, root, str(args.files), str(args.partitions))
        print(f"built {args.files:,} files in {args.partitions} partitions", file=sys.stderr)

    bucket = f"bench-{args.files}-{args.partitions}"
    with moto_copy(root, bucket, args.s3_endpoint, args.s3_server_pid, args.s3_indexed_listing) if args.s3 else contextlib.nullcontext((root, "", None)) as (uri, endpoint, pid):
        if args.prepare:
            return 0
        env = {**os.environ, **S3_KEYS} if args.s3 else None
        ours_options = ["-o", f"endpoint_url={endpoint}", "-o", "region_name=us-east-1"] if args.s3 else []
        wheel_options = [json.dumps({"AWS_ENDPOINT_URL": endpoint, "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true",
                                     "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench"})] if args.s3 else []

        def run_one(engine: str, i: int) -> tuple[float, float, dict]:
            server_before = cpu_seconds_of(pid)
            if engine.startswith("ours"):
                run_env = {**(env or os.environ), "DELTA_MAINTENANCE_NATIVE_S3": "0"} if engine == "ours-s3fs" else env
                wall, peak, rep = run_measured([CLI, "vacuum", uri, "--retention-hours", "0", "--allow-shorter-retention", "--json", *ours_options], env=run_env)
                files = rep["planned_files"] if "planned_files" in rep else rep["plan"]["files"]  # --json is the XCom record now
                rep = {"files": files, "_cpu_seconds": rep["_cpu_seconds"], "client": rep.get("listing_client")}
            else:
                wall, peak, rep = run_measured([PYTHON, "-c", WHEEL, uri, *wheel_options], env=env)
            rep["server_cpu"] = round(cpu_seconds_of(pid) - server_before, 2)
            return wall, peak, rep

        runs = interleaved(["ours", "wheel", *(["ours-s3fs"] if args.s3 and args.with_s3fs else [])], args.repeat, run_one)
    planned = {e: r.reported[-1]["files"] for e, r in runs.items()}
    print(f"  planned files: {planned}", file=sys.stderr)
    if len(set(planned.values())) > 1:
        raise SystemExit(f"the plans differ: {planned}")
    print(json.dumps({"argv": sys.argv[1:]}))
    where = "moto S3" if args.s3 else "local disk"
    print(ratio_line(f"{args.files:,} files / {args.partitions} partitions, {where}", runs["ours"], runs["wheel"]).replace("delta-rs", "wheel"))
    if "ours-s3fs" in runs:
        print(ratio_line(f"{args.files:,} files / {args.partitions} partitions, {where}, ours through s3fs", runs["ours-s3fs"], runs["wheel"])
              .replace("delta-rs", "wheel"))
    if pid:  # moto answers one request at a time in Python: its CPU per run is the floor of the wall time
        print("  S3 server CPU per run: " + "; ".join(f"{e} {[r['server_cpu'] for r in runs[e].reported]}" for e in runs)
              + "; our listing client: " + "; ".join(f"{e} {[r.get('client') for r in runs[e].reported]}" for e in runs if e != "wheel"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
