"""Data files: paths, deletion vectors, reading with DVs applied, writing with delta-spark's statistics."""
