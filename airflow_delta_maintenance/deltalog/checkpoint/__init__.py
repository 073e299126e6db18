"""Checkpoints: writing them (classic, multi-part, V2 with sidecars), reading back what was written,
checking a complete one."""
