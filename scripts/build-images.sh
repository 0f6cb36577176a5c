#!/usr/bin/env bash
# `make images`: the six service images and the compose stack's nats, postgres and nginx, tagged
# quiz-<name>:${TAG:-dev}, all on one base image (build argument PYTHON_IMAGE):
#   BASE_IMAGE unset   -> quiz-base:bookworm, built from Debian packages when missing
#                         (scripts/build-base-image.sh: no registry needed)
#   BASE_IMAGE=python:3.11-slim make images   -> the registry's image, elsewhere
# Builds run with --network host (an engine started with --bridge=none has no other network for
# RUN steps); BuildKit when the docker CLI has buildx, the classic builder otherwise (the
# Dockerfiles need nothing of BuildKit). Prints each build's duration.
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${TAG:-dev}
base=${BASE_IMAGE:-quiz-base:bookworm}
# What this needs, said first and plainly, rather than the first tool that fails (issue 22).
if [ "$base" = quiz-base:bookworm ] && [ "$(id -u)" != 0 ] \
    && ! docker image inspect "$base" >/dev/null 2>&1; then
    echo "make images needs root and a Docker engine here: it builds its Debian base image" \
        "($base) with debootstrap and chroot. Run it as root (sudo make images), or with" \
        "BASE_IMAGE=python:3.11-slim make images where a registry is reachable." >&2
    exit 1
fi
if ! docker info >/dev/null 2>&1; then
    echo "make images needs a Docker engine it may use: \`docker info\` fails" \
        "($( (docker info 2>&1 >/dev/null || true) | grep -m1 . || echo 'no docker command'))." >&2
    exit 1
fi
if [ "$base" = quiz-base:bookworm ]; then scripts/build-base-image.sh "$base"; fi
if docker buildx version >/dev/null 2>&1; then export DOCKER_BUILDKIT=1; else export DOCKER_BUILDKIT=0; fi
build() {  # build NAME ARGS...
    local name=$1 start=$SECONDS; shift
    docker build -q --force-rm --network host --build-arg "PYTHON_IMAGE=$base" -t "quiz-$name:$tag" "$@" >/dev/null
    echo "quiz-$name:$tag built in $((SECONDS - start)) s"
}
for target in nats postgres nginx; do
    build "$target" -f deploy/docker/infra.Dockerfile --target "$target" deploy/docker
done
for service in llm-gateway editor-assist review poll lesson-fix; do
    build "$service" -f deploy/docker/service.Dockerfile --build-arg "SERVICE=$service" .
done
build runner -f services/runner/Dockerfile .
