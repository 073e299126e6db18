"""Only the optional C extensions live here; everything else is in pyproject.toml.

``_stats_json`` speeds up parsing ``add.stats`` (deltalog/stats/fast_stats.py), ``_file_keys``
finding the newest action per file (deltalog/replay/file_keys.py). Both are optional: where they cannot be
compiled (no C compiler), the install goes on and pyarrow does the work, with the same results.
"""

from setuptools import Extension, setup

FLAGS = ["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers"]

setup(
    ext_modules=[
        Extension(f"airflow_delta_maintenance.deltalog.{name}", [f"airflow_delta_maintenance/deltalog/{name.replace('.', '/')}.c"], extra_compile_args=FLAGS, optional=True)
        for name in ("stats._stats_json", "replay._file_keys")
    ]
)
