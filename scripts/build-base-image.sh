#!/usr/bin/env bash
# The base image of `make images` where no registry image can be pulled: Debian bookworm (the
# distribution python:3.11-slim is built on, with the same Python 3.11) from Debian's own
# packages, by debootstrap, then `docker import`. Needs root, debootstrap and a Docker engine.
#
#   scripts/build-base-image.sh [TAG]        # default quiz-base:bookworm
#
# Elsewhere pass a registry image instead: `make images BASE_IMAGE=python:3.11-slim`.
set -euo pipefail
tag=${1:-quiz-base:bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
if docker image inspect "$tag" >/dev/null 2>&1; then
    echo "$tag exists (docker rmi $tag to rebuild)"; exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "building $tag needs root and a Docker engine (debootstrap and chroot run as root): sudo make images, or BASE_IMAGE=python:3.11-slim make images where a registry is reachable" >&2
    exit 1
fi
command -v debootstrap >/dev/null || { echo "debootstrap is missing: apt-get install debootstrap" >&2; exit 1; }
root=$(mktemp -d /tmp/quiz-base.XXXXXX)
trap 'rm -rf "$root"' EXIT
# minbase: essential + apt. python-is-python3: `python` as in python:3.11-slim (healthchecks,
# CMD). wget: the infrastructure images' healthchecks.
debootstrap --variant=minbase \
    --include=python3,python3-venv,python3-pip,python-is-python3,ca-certificates,wget \
    bookworm "$root/rootfs" "$mirror" >&2
echo "deb $mirror bookworm-updates main" >> "$root/rootfs/etc/apt/sources.list"
# The build host's own CAs (a TLS-intercepting proxy's, as on our CI machines) are trusted in
# the image too, so `pip install uv` and `uv sync` reach PyPI from where the host does.
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
    cp /usr/local/share/ca-certificates/*.crt "$root/rootfs/usr/local/share/ca-certificates/"
    chroot "$root/rootfs" update-ca-certificates >&2
fi
rm -rf "$root"/rootfs/var/cache/apt/archives/*.deb "$root"/rootfs/var/lib/apt/lists/*
# PIP_BREAK_SYSTEM_PACKAGES: the Dockerfiles `pip install uv` into the image's own Python, as
# on python:3.11-slim (Debian's Python refuses that by default, PEP 668).
tar -C "$root/rootfs" -c . | docker import \
    --change 'ENV PIP_BREAK_SYSTEM_PACKAGES=1 LANG=C.UTF-8 SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
    --change 'CMD ["/bin/bash"]' - "$tag"
echo "built $tag"
