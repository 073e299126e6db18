"""The deployable DAG files and an example tables.yaml: the one copy. The wheel ships this folder as
the package ``airflow_delta_maintenance.example_dags`` (setup.py maps it), from which
``delta-maintenance init-dags DIR`` copies the maintenance DAG file and tables.yaml into a DAGs
folder. This file only makes the folder that package; it defines no DAG."""
