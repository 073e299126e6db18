"""The fleet of tables, Airflow-free: its configuration (discovery sources, overrides, the fleet
file), catalog discovery, schedule jitter and pools, coordinator-call rate limits, health status,
history and the HTML/JSON report. It may import ``maintenance``; ``maintenance`` never imports it."""
