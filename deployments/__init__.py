"""Deployments of greylab's flows (`prefect.yaml`) and the serving entry point."""
