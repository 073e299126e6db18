"""Metadata (log) cleanup: what may be deleted within retention, and leftovers of abandoned runs."""
