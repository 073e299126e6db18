"""``delta-maintenance optimize`` killed (SIGKILL) at random moments: nothing partial is ever
visible — the table reads either as before or as the complete OPTIMIZE commit — and the files a
dead run wrote are referenced by no version; a re-run converges."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

CLI = str(Path(sys.executable).with_name("delta-maintenance"))


def rows(path: str, version: int | None = None) -> list[tuple[int, str]]:
    t = deltalake.DeltaTable(path, version=version).to_pyarrow_table()
    return sorted(zip(t.column("id").to_pylist(), t.column("region").to_pylist(), strict=True))


def referenced(path: str) -> set[str]:
    out: set[str] = set()
    dt = deltalake.DeltaTable(path)
    for v in range(dt.version() + 1):
        out |= {Path(u).relative_to(path).as_posix() for u in deltalake.DeltaTable(path, version=v).file_uris()}
    return out


@pytest.mark.parametrize("seed", [5, 8])
def test_a_killed_run_leaves_nothing_partial(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path = str(tmp_path / "t")
    for i in range(40):
        region = "abcd"[i % 4]
        ids = range(i * 500, i * 500 + 500)
        deltalake.write_deltalake(path, pa.table({"id": pa.array(ids, pa.int64()), "region": [region] * 500,
                                                  "pad": [f"{x:032d}" for x in ids]}), mode="append", partition_by=["region"])
    base_version = deltalake.DeltaTable(path).version()
    expected = rows(path)
    initial = {p.relative_to(path).as_posix() for p in Path(path).rglob("*.parquet")}
    # How long a whole run takes here (on a copy): the kills land anywhere inside it, on any machine.
    pristine = str(tmp_path / "pristine")
    shutil.copytree(path, pristine)
    trial = str(tmp_path / "trial")
    shutil.copytree(path, trial)
    started = time.monotonic()
    subprocess.run([CLI, "optimize", trial, "--commit-batch-bytes", "1"], capture_output=True, check=True, timeout=300)
    whole = time.monotonic() - started
    kills = 0
    for _ in range(6):
        started = time.monotonic()
        proc = subprocess.Popen([CLI, "optimize", path, "--commit-batch-bytes", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = started + rng.uniform(0.3, 0.95) * whole
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        finished = proc.poll() is not None
        took = time.monotonic() - started
        if not finished:
            os.kill(proc.pid, signal.SIGKILL)
            kills += 1
        proc.wait(timeout=120)
        latest = deltalake.DeltaTable(path).version()
        for v in range(base_version, latest + 1):
            assert rows(path, v) == expected, f"v{v} is not the table's rows"  # every version whole, none partial
        on_disk = {p.relative_to(path).as_posix() for p in Path(path).rglob("*.parquet")}
        live = {Path(u).relative_to(path).as_posix() for u in deltalake.DeltaTable(path).file_uris()}
        assert live <= on_disk
        if finished:
            # the run outpaced the kill (the trial ran on a busier moment of a shared machine) and
            # left nothing to do: its own time is the new estimate, and the table starts over so
            # that the next run has work a kill can interrupt
            assert not (on_disk - referenced(path)) & initial
            whole = took
            shutil.rmtree(path)
            shutil.copytree(pristine, path)
    assert kills, "no run was killed: the sleeps were too long for this machine"
    # the files of dead runs are referenced by no version; a final run converges
    leftovers = {p.relative_to(path).as_posix() for p in Path(path).rglob("*.parquet")} - referenced(path)
    assert not leftovers & initial  # only files the dead runs wrote are unreferenced
    assert all(Path(name).name.startswith("part-00") and ".c000.snappy.parquet" in name for name in leftovers), leftovers
    done = subprocess.run([CLI, "optimize", path], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert rows(path) == expected and len(deltalake.DeltaTable(path).file_uris()) == 4
