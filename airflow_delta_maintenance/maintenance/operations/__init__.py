"""The maintenance operations on one table (publish, checkpoint, log compaction, log cleanup,
status, inspect, sensing) and their summary record."""
