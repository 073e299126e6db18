"""Helpers the tests share that production code has no use for (kept out of the package).

Each module imports only the layer it helps with, so the log-library tests import no Airflow.
"""
