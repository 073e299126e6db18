"""The `make demo` job: builds a real sample table under ./demo and runs the maintenance tooling on it."""
