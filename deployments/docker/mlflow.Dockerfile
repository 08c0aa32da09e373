# MLflow tracking server: PostgreSQL backend (psycopg2), S3 artifacts on MinIO (boto3),
# basic auth (`mlflow[auth]`). Versions match the client pinned in constraints.txt.
FROM python:3.11.13-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    MLFLOW_AUTH_CONFIG_PATH=/etc/mlflow/basic_auth.ini

RUN pip install "mlflow[auth]==3.17.2" "psycopg2-binary==2.9.13" "boto3==1.44.8" \
    && useradd --system --uid 10002 --create-home mlflow \
    && mkdir -p /var/lib/mlflow-auth /etc/mlflow \
    && chown mlflow:mlflow /var/lib/mlflow-auth

COPY deployments/docker/mlflow-basic-auth.ini /etc/mlflow/basic_auth.ini

USER mlflow
VOLUME ["/var/lib/mlflow-auth"]
EXPOSE 5000
