"""Reference captures of delta-spark 4.4 and the deltalake wheel (``python -m tests._infra.delta_reference``)."""
