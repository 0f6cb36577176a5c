# The compose stack's infrastructure from Debian packages on the same base as the services, so
# the stack needs no registry image at all (docs/operations.md, "Images"):
#   docker build -f deploy/docker/infra.Dockerfile --target nats     -t quiz-nats:dev     deploy/docker
#   docker build -f deploy/docker/infra.Dockerfile --target postgres -t quiz-postgres:dev deploy/docker
#   docker build -f deploy/docker/infra.Dockerfile --target nginx    -t quiz-nginx:dev    deploy/docker
# Their configuration is mounted by docker-compose.yml (deploy/nats, deploy/compose).
ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS nats
RUN apt-get update \
    && apt-get install -y --no-install-recommends nats-server wget \
    && rm -rf /var/lib/apt/lists/* \
    && install -d -o 10001 -g 10001 /data
USER 10001:10001
ENTRYPOINT ["nats-server"]

FROM ${PYTHON_IMAGE} AS postgres
RUN apt-get update \
    && apt-get install -y --no-install-recommends postgresql-15 \
    && rm -rf /var/lib/apt/lists/* \
    && install -d -o postgres -g postgres -m 0700 /var/lib/postgresql/data
ENV PATH=/usr/lib/postgresql/15/bin:$PATH \
    PGDATA=/var/lib/postgresql/data
USER postgres
# deploy/compose/postgres-entrypoint.sh, mounted: initdb + the databases on an empty volume.
ENTRYPOINT ["/bin/sh", "/etc/quiz/postgres-entrypoint.sh"]

FROM ${PYTHON_IMAGE} AS nginx
RUN apt-get update \
    && apt-get install -y --no-install-recommends nginx-light wget \
    && rm -rf /var/lib/apt/lists/*
ENTRYPOINT ["nginx", "-g", "daemon off;", "-c", "/etc/nginx/quiz.conf"]
