"""Spark submission of the maintenance jobs without Airflow: settings, the job specs, packaging of
the job code, credentials, progress."""
