"""Builders of the DAGs the provider generates: one maintenance DAG per table, the fleet health DAG,
the catalog discovery DAG."""
