"""Apache Airflow provider for Delta Lake log maintenance.

The package root imports nothing so that it can be shipped to Spark executors with ``py_files``.
"""

__version__ = "0.1.0"
