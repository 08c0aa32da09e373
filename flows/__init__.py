"""Prefect flows, their pydantic parameter models and the `greylab` command line."""
