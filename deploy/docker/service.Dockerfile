# Every service but the runner (which adds toolchains): one file, the service as a build arg.
# Build from the repository root (the uv workspace), e.g.
#   docker build -f deploy/docker/service.Dockerfile --build-arg SERVICE=review -t quiz-${SERVICE} .

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build
ARG SERVICE
RUN test -n "$SERVICE" || (echo 'build with --build-arg SERVICE=<name>' >&2; exit 1)
# uv from pip, pinned to the version the lock file was written with.
ARG UV_VERSION=0.13.9
RUN pip install --no-cache-dir "uv==${UV_VERSION}"
# Bytecode compiled at build time (the runtime filesystem may be read-only); copies, not
# hardlinks and no uv cache kept in a layer; the image's own Python only. No BuildKit cache
# mounts: the classic builder (and an engine without buildx) builds these files too, and the
# dependencies' layer is cached until uv.lock changes.
ENV UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_NO_CACHE=1 \
    UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/app/.venv
WORKDIR /src
# Dependencies first: their layer survives any change to our own code. --frozen reads the
# workspace members from uv.lock, so their sources are not needed yet.
COPY pyproject.toml uv.lock ./
RUN uv sync --frozen --no-dev --no-install-workspace --package quiz-${SERVICE}
# Then the libs and this service only, installed as wheels (--no-editable): the runtime
# stage copies the venv and nothing of /src.
COPY libs ./libs
COPY services/${SERVICE} ./services/${SERVICE}
RUN uv sync --frozen --no-dev --no-editable --package quiz-${SERVICE}

FROM ${PYTHON_IMAGE} AS runtime
ARG SERVICE
# A numeric uid, so Kubernetes' runAsNonRoot can check it without reading /etc/passwd.
RUN groupadd --system --gid 10001 quiz \
    && useradd --system --uid 10001 --gid quiz --no-create-home --shell /usr/sbin/nologin quiz \
    && install -d -o quiz -g quiz -m 0750 /var/lib/quiz
COPY --from=build /app/.venv /app/.venv
# The package's console script (`quiz-<service>`, see its pyproject) under one fixed name, so
# CMD needs no shell to pick the service.
RUN ln -s "/app/.venv/bin/quiz-${SERVICE}" /app/service
# QUIZ_DATA_DIR holds the SQLite fallback when no DATABASE_URL is given (dev only).
ENV PATH=/app/.venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    QUIZ_DATA_DIR=/var/lib/quiz \
    HTTP_HOST=0.0.0.0 \
    HTTP_PORT=8080
WORKDIR /app
USER 10001:10001
EXPOSE 8080
# Liveness only (the process answers); readiness (/readyz) is the orchestrator's business.
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import os,urllib.request as u; u.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('HTTP_PORT', '8080'), timeout=2)"]
CMD ["/app/service"]
