"""Reading a log segment into table state: NDJSON commits and Parquet checkpoints into Arrow,
reconciliation of file actions, snapshots."""
