"""Airflow plugins of the provider (registered through the ``airflow.plugins`` entry point): the
fleet health page, the run recorder, the health gauges."""
