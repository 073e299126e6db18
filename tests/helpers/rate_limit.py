"""A clean slate for the process-wide coordinator-call buckets between tests."""

from __future__ import annotations

from airflow_delta_maintenance.fleet import rate_limit

__all__ = ["reset_buckets"]


def reset_buckets() -> None:
    """Forget every bucket."""
    with rate_limit._REGISTRY_LOCK:
        rate_limit._BUCKETS.clear()
