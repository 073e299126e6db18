"""Filled in by the infrastructure work."""
