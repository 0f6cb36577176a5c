#!/bin/sh
# Runs once, on an empty data volume (docker-entrypoint-initdb.d): one database per service
# that keeps state, so each service's alembic history and tables stay its own.
# Services without a database today (editor-assist, runner) get none; add a name here when
# one starts to need it, then `docker compose down -v` (or create it by hand) to re-run.
set -eu
for db in llm_gateway review poll lesson_fix; do
    echo "creating database $db"
    psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
        -c "CREATE DATABASE $db OWNER \"$POSTGRES_USER\""
done
