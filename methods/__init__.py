"""Pure numerical core of greylab.

Imports numpy, scipy, casadi and pandas only: never prefect or mlflow (a test enforces it).
"""
