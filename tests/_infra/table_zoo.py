"""The table zoo: real Delta tables written by delta-spark 4.4 and the ``deltalake`` wheel, built
once and cached under ``.cache/table-zoo/<name>/<key>/``, each with a manifest of what every version
reads as in both engines (``zoo_oracle``). A pytest plugin (``tests/conftest.py``).

    zoo = table_zoo                              # session fixture: a Zoo
    t = zoo_copy("spark_deletion_vectors")       # function fixture: a private, writable copy
    ... run OPTIMIZE / VACUUM / write checksums on t.path ...
    assert_versions_unchanged(t.path, t.manifest, spark=spark)

- ``names(tag=..., writer=...)`` lists tables; ``ZOO`` (zoo_registry) has their specs and tags.
- ``Zoo.get(name)`` returns the cached table (read-only: its files are chmod a-w; never write it);
  ``ZooTable.copy_to(dest)`` copies it keeping every file's mtime.
- The key is a sha256 of the builder's code (``code_fingerprint``), its parameters, the oracle's
  reading and recording code, the zoo format and the engines' versions: editing a builder rebuilds that table only.
- An entry older than ``MAX_AGE_S`` is rebuilt: delta-spark refuses time travel to versions whose
  commit is older than ``delta.deletedFileRetentionDuration`` (7 days), and copies keep the
  timestamps.
- ``TABLE_ZOO_CACHE`` overrides the cache directory.
- Builds go to a temporary directory renamed into place, so concurrent runs never see half a table,
  under a file lock per table and key, so that two processes (xdist workers) never build one twice.

``python -m tests._infra.table_zoo [NAME ...]`` builds (or checks) tables outside pytest and prints
the build times.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from . import zoo_oracle, zoo_spark_layouts, zoo_spark_tables, zoo_wheel_tables  # noqa: F401 - builders register themselves
from .jars import REPO
from .zoo_oracle import clear_spark_cache, record
from .zoo_registry import ZOO, ZooSpec, code_fingerprint

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ZOO_FORMAT = 2  # bump when the manifest's layout or meaning changes
CACHE = Path(os.environ.get("TABLE_ZOO_CACHE") or REPO / ".cache" / "table-zoo")
MAX_AGE_S = 3 * 86_400
COMMIT = re.compile(r"^(\d{20})\.json$")


@dataclass
class Manifest:
    """What each version of a zoo table read as when it was built.

    ``versions[v]``: ``operation`` (its commitInfo's) and, per key ``spark`` / ``wheel`` (and
    ``row_tracking`` for row-tracking tables: delta-spark with ``_row_id`` and
    ``_row_commit_version``), a recording from ``zoo_oracle.record``: ``{"count", "digest", "rows"}``
    (``rows`` only up to ``ROWS_INLINE_MAX`` rows) or ``{"error": why that engine cannot read it}``.
    """

    name: str
    writer: str
    key: str
    latest_version: int
    versions: dict[int, dict[str, Any]]
    tags: list[str] = field(default_factory=list)
    doc: str = ""
    built_at: float = 0.0
    build_seconds: float = 0.0
    manifest_seconds: float = 0.0
    engines: dict[str, str] = field(default_factory=dict)

    def readable(self, version: int | None = None, engine: str = "wheel") -> bool:
        """Whether ``engine`` read ``version`` (default: the latest) when the table was built."""
        return "count" in self.versions[self.latest_version if version is None else version].get(engine, {})

    def rows(self, version: int, engine: str = "spark") -> list[dict[str, Any]]:
        """The recorded rows; a KeyError naming the reason when they were not kept (too many
        rows: re-read the cached table with ``read_rows``) or the engine could not read them."""
        rec = self.versions[version].get(engine) or {"error": "not recorded"}
        if "rows" not in rec:
            why = rec.get("error") or f"{rec['count']} rows, only the digest is kept"
            raise KeyError(f"{self.name} version {version} ({engine}): {why}")
        return list(rec["rows"])

    def count(self, version: int, engine: str = "spark") -> int:
        return int(self.versions[version][engine]["count"])

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        data = json.loads(text)
        data["versions"] = {int(v): e for v, e in data["versions"].items()}
        return cls(**data)


@dataclass(frozen=True)
class ZooTable:
    name: str
    path: Path
    manifest: Manifest

    @property
    def uri(self) -> str:
        return str(self.path)

    def copy_to(self, dest: Path) -> ZooTable:
        """A writable copy at ``dest`` (must not exist) with every file's and directory's mtime kept."""

        def copy(src: str, dst: str) -> None:
            shutil.copy2(src, dst)
            os.chmod(dst, 0o644)

        shutil.copytree(self.path, dest, copy_function=copy, symlinks=True)
        return ZooTable(self.name, Path(dest), self.manifest)


def engine_versions() -> dict[str, str]:
    import deltalake
    import pyspark

    from .jars import DELTA_SPARK, jar_version

    return {"delta-spark": jar_version(DELTA_SPARK, "delta-spark_2.13"), "pyspark": pyspark.__version__, "deltalake": deltalake.__version__}


def cache_key(spec: ZooSpec, engines: dict[str, str] | None = None) -> str:
    import hashlib

    # the oracle's part: how rows are read, canonicalised and recorded (record and what it calls)
    material = json.dumps(
        {"format": ZOO_FORMAT, "code": code_fingerprint(spec.build), "params": spec.params, "row_tracking": spec.row_tracking,
         "oracle": code_fingerprint(zoo_oracle.record), "engines": engines or engine_versions()},
        sort_keys=True,
    )  # fmt: skip
    return hashlib.sha256(material.encode()).hexdigest()[:16]


def latest_version(table: Path) -> int:
    versions = [int(m.group(1)) for n in os.listdir(table / "_delta_log") if (m := COMMIT.match(n))]
    if not versions:
        raise RuntimeError(f"{table}: the builder wrote no commit")
    return max(versions)


def _operation(table: Path, version: int) -> str | None:
    path = table / "_delta_log" / f"{version:020d}.json"
    if not path.exists():  # a commit cleaned up (or only in a checkpoint / compaction)
        return None
    for line in path.read_text().splitlines():
        if line.startswith('{"commitInfo"'):
            return str(json.loads(line)["commitInfo"].get("operation"))
    return None


def record_manifest(spec: ZooSpec, key: str, table: Path, spark: SparkSession) -> Manifest:
    """Read every version of ``table`` in both engines (and row tracking where the spec asks)."""
    clear_spark_cache(spark)
    latest = latest_version(table)
    versions: dict[int, dict[str, Any]] = {}
    for v in range(latest + 1):
        entry: dict[str, Any] = {"operation": _operation(table, v)}
        for what in ("spark", "wheel", "row_tracking") if spec.row_tracking else ("spark", "wheel"):
            entry[what] = record(table, v, what, spark=spark)
        if "error" in entry["spark"]:
            raise RuntimeError(f"zoo table {spec.name}: delta-spark cannot read version {v} of its own build: {entry['spark']['error']}")
        versions[v] = entry
    return Manifest(spec.name, spec.writer, key, latest, versions, sorted(spec.tags), spec.doc, engines=engine_versions())


def _make_read_only(root: Path) -> None:
    for dirpath, _, files in os.walk(root):
        for name in files:
            p = Path(dirpath) / name
            p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def _remove(path: Path) -> None:
    def writable(func: Callable[..., Any], p: str, _exc: Any) -> None:
        os.chmod(os.path.dirname(p), 0o755)
        func(p)

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=writable)
    else:
        shutil.rmtree(path, onerror=writable)


class Zoo:
    """The cached zoo of one process; ``spark`` is asked for only when a table must be built."""

    def __init__(self, spark: Callable[[], SparkSession], cache: Path = CACHE, log: Callable[[str], None] | None = None) -> None:
        self._spark = spark
        self.cache = cache
        self._tables: dict[str, ZooTable] = {}
        self._engines: dict[str, str] | None = None
        self.log = log or (lambda _msg: None)
        self.built: dict[str, float] = {}  # name -> seconds, for the tables this process built

    def key(self, name: str) -> str:
        if self._engines is None:
            self._engines = engine_versions()
        return cache_key(ZOO[name], self._engines)

    def get(self, name: str) -> ZooTable:
        if name not in self._tables:
            self._tables[name] = self._load_or_build(name)
        return self._tables[name]

    def copy(self, name: str, dest: Path) -> ZooTable:
        return self.get(name).copy_to(dest)

    def _load_or_build(self, name: str) -> ZooTable:
        if name not in ZOO:
            raise KeyError(f"no zoo table {name!r}; there are {sorted(ZOO)}")
        spec, key = ZOO[name], self.key(name)
        final = self.cache / name / key
        manifest_file = final / "manifest.json"
        if manifest_file.exists():
            manifest = Manifest.from_json(manifest_file.read_text())
            if time.time() - manifest.built_at < MAX_AGE_S:
                return ZooTable(name, final / "table", manifest)
        # One builder per table and key across processes (the workers of `make test`, other
        # checkouts sharing the cache): the others wait and take its result instead of building
        # the same table again on the same cores.
        from filelock import FileLock

        (self.cache / name).mkdir(parents=True, exist_ok=True)
        with FileLock(self.cache / name / f".lock-{key}"):
            if manifest_file.exists():
                manifest = Manifest.from_json(manifest_file.read_text())
                if time.time() - manifest.built_at < MAX_AGE_S:
                    return ZooTable(name, final / "table", manifest)
            return self._build(name, spec, key, final)

    def _build(self, name: str, spec: ZooSpec, key: str, final: Path) -> ZooTable:
        started = time.monotonic()
        build = self.cache / name / f".build-{uuid.uuid4().hex}"
        table = build / "table"
        table.mkdir(parents=True)
        try:
            spark = self._spark()
            spec.build(str(table), spark) if spec.writer == "spark" else spec.build(str(table))
            built = time.monotonic()
            manifest = record_manifest(spec, key, table, spark)
            manifest.built_at, manifest.build_seconds, manifest.manifest_seconds = time.time(), built - started, time.monotonic() - built
            (build / "manifest.json").write_text(manifest.to_json())
            _make_read_only(table)
            if final.exists():  # stale: replaced whole, never in place
                _remove(final)
            try:
                os.rename(build, final)
            except OSError:  # a process that ignores the lock put the same key in place first: use theirs
                _remove(build)
                return ZooTable(name, final / "table", Manifest.from_json((final / "manifest.json").read_text()))
        except BaseException:
            if build.exists():
                _remove(build)
            raise
        clear_spark_cache(spark)  # the build directory is gone; no cached DeltaLog may point at it
        self._prune(name, keep=final)
        self.built[name] = time.monotonic() - started
        self.log(f"table zoo: built {name} in {self.built[name]:.1f}s (writes {manifest.build_seconds:.1f}s, manifest {manifest.manifest_seconds:.1f}s)")
        return ZooTable(name, final / "table", manifest)

    def _prune(self, name: str, keep: Path) -> None:
        """Remove entries of ``name`` under other keys once they are stale anyway (a younger one may
        belong to another checkout's code, sharing the cache, and be in use)."""
        for other in (self.cache / name).iterdir():
            manifest = other / "manifest.json"
            if other != keep and manifest.exists() and time.time() - manifest.stat().st_mtime > MAX_AGE_S:
                _remove(other)
                other.with_name(f".lock-{other.name}").unlink(missing_ok=True)


def names(tag: str | None = None, writer: str | None = None, *, exclude: Iterable[str] = ()) -> list[str]:
    """Names of the zoo tables with ``tag`` and/or ``writer``, sorted, except those with an ``exclude`` tag."""
    excluded = set(exclude)
    return sorted(n for n, s in ZOO.items() if (tag is None or tag in s.tags) and (writer is None or s.writer == writer) and not (s.tags & excluded))


@pytest.fixture(scope="session")
def table_zoo(request: pytest.FixtureRequest) -> Zoo:
    """The zoo; builds what is missing or stale with the session's ``spark`` (started only then)."""
    return Zoo(lambda: request.getfixturevalue("spark"), log=lambda msg: print(msg, file=sys.stderr))


@pytest.fixture
def zoo_copy(table_zoo: Zoo, tmp_path: Path) -> Callable[[str], ZooTable]:
    """``zoo_copy(name)``: a private writable copy of a zoo table under ``tmp_path``."""
    counter = iter(range(1_000_000))

    def copy(name: str) -> ZooTable:
        return table_zoo.copy(name, tmp_path / f"{name}-{next(counter)}")

    return copy


def main(argv: list[str]) -> int:
    from .spark import start_local_spark

    wanted = argv or sorted(ZOO)
    session: list[SparkSession] = []

    def spark() -> SparkSession:
        if not session:
            session.append(start_local_spark(Path("/tmp") / f"table-zoo-spark-{os.getpid()}"))
        return session[0]

    zoo = Zoo(spark, log=print)
    started = time.monotonic()
    try:
        for name in wanted:
            t = zoo.get(name)
            readable = sum(t.manifest.readable(v) for v in t.manifest.versions)
            print(f"{name}: {t.path} v{t.manifest.latest_version}, wheel reads {readable}/{t.manifest.latest_version + 1} versions")
    finally:
        if session:
            session[0].stop()
    print(f"total {time.monotonic() - started:.1f}s, built {len(zoo.built)}: {sum(zoo.built.values()):.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
