"""VACUUM planning: the files every retained version needs, the table root's listing, and the plan."""
