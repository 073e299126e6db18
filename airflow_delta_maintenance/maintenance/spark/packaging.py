"""The job code a cluster runs: the path of a ``spark_jobs`` application in the installed package,
and the package's ``deltalog`` and ``spark_jobs`` zipped for ``--py-files`` (cached by content
hash, built reproducibly and atomically) for masters other than ``local``."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
import zipfile
from pathlib import Path

from ..errors import SparkJobError

__all__ = ["SHIPPED_PACKAGES", "job_application", "package_zip"]


def job_application(job: str) -> str:
    """Path of ``spark_jobs/<job>.py`` inside the installed package (located without importing pyspark)."""
    spec = importlib.util.find_spec(f"airflow_delta_maintenance.spark_jobs.{job}")
    if spec is None or spec.origin is None:
        raise SparkJobError(f"Spark job {job!r} is not part of the installed package")
    return spec.origin


SHIPPED_PACKAGES = ("deltalog", "spark_jobs")  # what the jobs import (import-linter contract)


_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


def _shipped_files() -> list[tuple[str, Path]]:
    root = Path(__file__).resolve().parents[2]  # airflow_delta_maintenance/
    files = [("airflow_delta_maintenance/__init__.py", root / "__init__.py")]
    for package in SHIPPED_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if "__pycache__" not in path.parts:
                files.append((f"airflow_delta_maintenance/{path.relative_to(root).as_posix()}", path))
    return files


def _cache_dir() -> Path:
    base = os.environ.get("DELTA_MAINTENANCE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "airflow-delta-maintenance"
    )
    path = Path(base)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.lstat()
    if not path.is_dir() or path.is_symlink() or st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise SparkJobError(f"cache directory {path} must be a directory of this user, not writable by others")
    return path


def package_zip() -> str:
    """The package's ``deltalog`` and ``spark_jobs`` zipped for ``--py-files``: built once per
    content (the name carries the hash of every shipped file), reproducibly, atomically."""
    files = _shipped_files()
    digest = hashlib.sha256()
    contents = []
    for name, path in files:
        data = path.read_bytes()
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
        contents.append((name, data))
    directory = _cache_dir()
    target = directory / f"airflow_delta_maintenance-{digest.hexdigest()[:16]}.zip"
    if target.is_file() and not target.is_symlink():
        return str(target)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".zip-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as raw, zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data in contents:
                info = zipfile.ZipInfo(name, _ZIP_EPOCH)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                zf.writestr(info, data)
        os.replace(tmp, target)  # same bytes whoever wins a race
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return str(target)
