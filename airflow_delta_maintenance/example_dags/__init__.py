"""The example DAG file and its tables.yaml, shipped in the wheel: ``delta-maintenance init-dags DIR``
copies them into a DAGs folder (the files are read as package data; this package is never imported
for them)."""
