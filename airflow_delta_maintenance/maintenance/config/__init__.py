"""The per-table YAML configuration (tables.yaml): loading, validation with key-naming errors, and
the deploy-time check."""
