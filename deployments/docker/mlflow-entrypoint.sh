#!/bin/sh
# Entrypoint of the MLflow image: writes the basic-auth configuration from the environment, then
# runs the command (`python -m deployments.mlflow_ui server --app-name basic-auth ...`: MLflow's
# basic-auth server with greylab's UI default, deployments/mlflow_ui.py). The user store lives in
# PostgreSQL (database mlflow_auth), so its URL holds a password: it is written to a private
# file (umask 077) read through MLFLOW_AUTH_CONFIG_PATH, never baked into the image.
#
#   MLFLOW_AUTH_DATABASE_URI   postgresql://mlflow:...@postgres:5432/mlflow_auth   (required)
#   MLFLOW_AUTH_ADMIN_USERNAME / MLFLOW_AUTH_ADMIN_PASSWORD   admin created on first start
#   MLFLOW_AUTH_DEFAULT_PERMISSION   what every signed-in user may do on others' experiments
#                                    (default READ)
#   MLFLOW_AUTH_CONFIG_PATH    where to write the file (default $HOME/basic_auth.ini)
#
# tests/test_compose.py runs this script for real; test_production_topology.py starts the
# integration test's MLflow server through it.
set -eu

: "${MLFLOW_AUTH_DATABASE_URI:?set MLFLOW_AUTH_DATABASE_URI (the auth user store)}"
: "${MLFLOW_AUTH_ADMIN_USERNAME:?set MLFLOW_AUTH_ADMIN_USERNAME}"
: "${MLFLOW_AUTH_ADMIN_PASSWORD:?set MLFLOW_AUTH_ADMIN_PASSWORD}"
: "${MLFLOW_FLASK_SERVER_SECRET_KEY:?set MLFLOW_FLASK_SERVER_SECRET_KEY}"
case "$MLFLOW_AUTH_DATABASE_URI$MLFLOW_AUTH_ADMIN_PASSWORD$MLFLOW_FLASK_SERVER_SECRET_KEY" in
    *change-me*) echo "mlflow: refusing to start with a change-me value" >&2; exit 1 ;;
esac

MLFLOW_AUTH_CONFIG_PATH="${MLFLOW_AUTH_CONFIG_PATH:-${HOME:-/tmp}/basic_auth.ini}"
export MLFLOW_AUTH_CONFIG_PATH
umask 077
cat > "$MLFLOW_AUTH_CONFIG_PATH" <<INI
[mlflow]
default_permission = ${MLFLOW_AUTH_DEFAULT_PERMISSION:-READ}
database_uri = ${MLFLOW_AUTH_DATABASE_URI}
admin_username = ${MLFLOW_AUTH_ADMIN_USERNAME}
authorization_function = mlflow.server.auth:authenticate_request_basic_auth
INI

exec "$@"
