"""Airflow notifiers of the provider."""
