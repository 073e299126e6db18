"""OPTIMIZE (data-file compaction): planning bins, the commit's actions, and conflicts (pure)."""
