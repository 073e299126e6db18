"""One table's identity, built once and passed down: its storage, its coordinator (declared by the
table or given), staged commits, and the catalog's view of it."""
