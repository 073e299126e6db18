"""Compiled accelerators for airflow-delta-maintenance's log library (the ``[accel]`` extra).

``_stats_json`` reads plain ``add.stats`` objects, ``_file_keys`` finds the newest action per file
path, ``_log_lines`` vouches for the plain add/remove lines of a commit being validated. The base package (``airflow_delta_maintenance.deltalog``) imports them when they are installed
and their ``INTERFACE`` is the one it was written for, and otherwise does the same work with pyarrow:
results never depend on this package, only speed does.
"""

__version__ = "0.1.0"

# The calling convention of the extension functions (argument tuples and buffer layouts). The base
# package checks it before using them; it changes whenever a signature does.
INTERFACE = 1
