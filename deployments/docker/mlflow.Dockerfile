# MLflow tracking server: PostgreSQL backend and basic-auth user store (psycopg2), S3 artifacts
# on MinIO (boto3), basic auth (`mlflow[auth]`). Versions match the client pinned in
# constraints.txt. The entrypoint writes the auth configuration from the environment (the user
# store's URL holds a password); mlflow_users.py is the one-shot `mlflow-init` (worker account);
# deployments/mlflow_ui.py puts greylab's UI default in front of the basic-auth app.
FROM python:3.11.13-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    MLFLOW_AUTH_CONFIG_PATH=/home/mlflow/basic_auth.ini

RUN pip install "mlflow[auth]==3.17.2" "psycopg2-binary==2.9.13" "boto3==1.44.8" \
    && useradd --system --uid 10002 --create-home --home-dir /home/mlflow mlflow

COPY deployments/docker/mlflow-entrypoint.sh /usr/local/bin/mlflow-entrypoint.sh
COPY deployments/docker/mlflow_users.py /usr/local/lib/greylab/mlflow_users.py
# The server app: MLflow's basic-auth app behind greylab's UI default (standard library only;
# `python -m deployments.mlflow_ui server --app-name basic-auth`, docker-compose.yml)
COPY deployments/__init__.py deployments/mlflow_ui.py /usr/local/lib/greylab/deployments/
ENV PYTHONPATH=/usr/local/lib/greylab

USER mlflow
EXPOSE 5000
ENTRYPOINT ["/usr/local/bin/mlflow-entrypoint.sh"]
