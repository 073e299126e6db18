"""Which log files make up a version: listing ``_delta_log``, the ``_last_checkpoint`` hint, and the
segment (checkpoint + commits) to read."""
