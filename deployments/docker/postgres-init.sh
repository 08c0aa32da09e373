#!/bin/sh
# Runs once, when the PostgreSQL volume is first initialised (/docker-entrypoint-initdb.d).
# A role per service and a database per store: Prefect and MLflow must not share one database
# (both keep an `alembic_version` table); MLflow's basic-auth user store is a third database
# (mlflow_auth), owned by the mlflow role. The prefect role cannot connect to MLflow's databases
# and vice versa. Passwords come from the environment and are passed to psql as
# variables (quoted by psql with :'name'), never pasted into SQL text.
set -eu

: "${PREFECT_DB_PASSWORD:?set PREFECT_DB_PASSWORD in .env}"
: "${MLFLOW_DB_PASSWORD:?set MLFLOW_DB_PASSWORD in .env}"

psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
    -v prefect_pw="$PREFECT_DB_PASSWORD" -v mlflow_pw="$MLFLOW_DB_PASSWORD" <<'SQL'
CREATE ROLE prefect LOGIN PASSWORD :'prefect_pw';
CREATE DATABASE prefect OWNER prefect;
CREATE ROLE mlflow LOGIN PASSWORD :'mlflow_pw';
CREATE DATABASE mlflow OWNER mlflow;
CREATE DATABASE mlflow_auth OWNER mlflow;
REVOKE ALL ON DATABASE prefect FROM PUBLIC;
REVOKE ALL ON DATABASE mlflow FROM PUBLIC;
REVOKE ALL ON DATABASE mlflow_auth FROM PUBLIC;
SQL
