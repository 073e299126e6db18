"""What pyproject.toml cannot say: the package list with the top-level ``dags/`` folder mapped into
it, and the optional C extensions; everything else is in pyproject.toml.

``dags/`` holds the deployable DAG files and the example tables.yaml, once: the wheel ships that
folder as ``airflow_delta_maintenance.example_dags``, which ``delta-maintenance init-dags`` copies
from (pyproject's ``packages.find`` cannot map a folder outside the package, hence the list here).

``_stats_json`` speeds up parsing ``add.stats`` (deltalog/stats/fast_stats.py), ``_file_keys``
finding the newest action per file (deltalog/replay/file_keys.py). Both are optional: where they
cannot be compiled (no C compiler), the install goes on and pyarrow does the work, with the same
results.
"""

from setuptools import Extension, find_packages, setup

FLAGS = ["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers"]
EXAMPLE_DAGS = "airflow_delta_maintenance.example_dags"

setup(
    packages=[*find_packages(include=["airflow_delta_maintenance", "airflow_delta_maintenance.*"]), EXAMPLE_DAGS],
    package_dir={EXAMPLE_DAGS: "dags"},
    ext_modules=[
        Extension(f"airflow_delta_maintenance.deltalog.{name}", [f"airflow_delta_maintenance/deltalog/{name.replace('.', '/')}.c"], extra_compile_args=FLAGS, optional=True)
        for name in ("stats._stats_json", "replay._file_keys")
    ],
)
