"""Log compaction files (``<x>.<y>.compacted.json``): planning the windows and writing their lines."""
