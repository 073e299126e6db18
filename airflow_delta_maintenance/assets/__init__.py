"""Airflow assets of a Delta table (the table, its published log), for writer DAGs and the generated
maintenance DAGs."""
