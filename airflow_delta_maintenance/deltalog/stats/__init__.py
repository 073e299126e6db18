"""File statistics (``add.stats``): parsing them to typed columns, the compiled fast path, the stats
pipeline of a snapshot load."""
