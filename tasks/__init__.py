"""Prefect tasks: thin wrappers, one numerical step each, plus the one MLflow adapter."""
