"""Airflow plugins of the provider (registered through the ``airflow.plugins`` entry point)."""
