"""Process-level helpers of the log library: the allocator settings of large log operations, the
overlap of I/O and parsing, the end of a process that is ours alone."""
