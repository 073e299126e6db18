"""What pyproject.toml cannot say: the package list with the top-level ``dags/`` folder mapped into
it; everything else is in pyproject.toml.

``dags/`` holds the deployable DAG files and the example tables.yaml, once: the wheel ships that
folder as ``airflow_delta_maintenance.example_dags``, which ``delta-maintenance init-dags`` copies
from (pyproject's ``packages.find`` cannot map a folder outside the package, hence the list here).

The package is pure Python (a ``py3-none-any`` wheel): its optional C accelerators are the separate
distribution in ``accel/``, installed by the ``[accel]`` extra.
"""

from setuptools import find_packages, setup

EXAMPLE_DAGS = "airflow_delta_maintenance.example_dags"

setup(
    packages=[*find_packages(include=["airflow_delta_maintenance", "airflow_delta_maintenance.*"]), EXAMPLE_DAGS],
    package_dir={EXAMPLE_DAGS: "dags"},
)
