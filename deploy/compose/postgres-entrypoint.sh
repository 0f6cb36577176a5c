#!/bin/sh
# The compose stack's PostgreSQL (image quiz-postgres, Debian's postgresql-15): on an empty data
# volume, initdb with POSTGRES_USER/POSTGRES_PASSWORD and run postgres-init.sh (one database
# per stateful service) on a server reachable by its socket only; then serve on
# 127.0.0.1:$PGPORT (the host's network: see docker-compose.yml).
set -eu
: "${PGDATA:=/var/lib/postgresql/data}" "${PGPORT:=5432}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pwfile=$(mktemp)
    printf '%s' "$POSTGRES_PASSWORD" > "$pwfile"
    initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" \
        --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8
    rm -f "$pwfile"
    pg_ctl -D "$PGDATA" -w -o "-c listen_addresses='' -c unix_socket_directories=/tmp" start
    PGHOST=/tmp sh /etc/quiz/postgres-init.sh
    pg_ctl -D "$PGDATA" -w -m fast stop
fi
exec postgres -D "$PGDATA" -c listen_addresses=127.0.0.1 -c port="$PGPORT" \
    -c unix_socket_directories=/tmp
