"""Only the optional C extension lives here; everything else is in pyproject.toml.

``_stats_json`` speeds up parsing ``add.stats`` (see deltalog/fast_stats.py). It is optional: where
it cannot be compiled (no C compiler), the install goes on and the pyarrow reader does the work.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "airflow_delta_maintenance.deltalog._stats_json",
            ["airflow_delta_maintenance/deltalog/_stats_json.c"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers"],
            optional=True,
        )
    ]
)
