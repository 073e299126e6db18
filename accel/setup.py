"""The two extensions; everything else is in pyproject.toml.

On CPython 3.11+ they are built against the stable ABI (``Py_LIMITED_API`` 3.11: the buffer
protocol entered it in 3.11), so one ``cp311-abi3`` wheel serves every later Python; 3.10 gets a
wheel of its own. The extensions are not optional here: this distribution exists only for them, and
a build that cannot compile them fails instead of installing an empty package.
"""

import sys

from setuptools import Extension, setup

FLAGS = ["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers"]
ABI3 = sys.implementation.name == "cpython" and sys.version_info >= (3, 11)

setup(
    ext_modules=[
        Extension(
            f"airflow_delta_maintenance_accel.{name}",
            [f"airflow_delta_maintenance_accel/{name}.c"],
            extra_compile_args=FLAGS,
            define_macros=[("Py_LIMITED_API", "0x030B0000")] if ABI3 else [],
            py_limited_api=ABI3,
        )
        for name in ("_stats_json", "_file_keys", "_log_lines")
    ],
    options={"bdist_wheel": {"py_limited_api": "cp311"}} if ABI3 else {},
)
