"""Only the optional C extensions live here; everything else is in pyproject.toml.

``_stats_json`` speeds up parsing ``add.stats`` (deltalog/fast_stats.py), ``_file_keys`` finding
the newest action per file (deltalog/file_keys.py). Both are optional: where they cannot be
compiled (no C compiler), the install goes on and pyarrow does the work, with the same results.
"""

from setuptools import Extension, setup

FLAGS = ["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers"]

setup(
    ext_modules=[
        Extension(f"airflow_delta_maintenance.deltalog.{name}", [f"airflow_delta_maintenance/deltalog/{name}.c"], extra_compile_args=FLAGS, optional=True)
        for name in ("_stats_json", "_file_keys")
    ]
)
