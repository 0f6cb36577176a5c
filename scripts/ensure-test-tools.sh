#!/usr/bin/env bash
# Tools the tests use beyond Python packages: promtool (checks /metrics and the alert rules) and
# the Prometheus server (fires the rules on the running system),
# nginx (the API gateway of the e2e tests), a Docker engine (the runner's docker backend; the
# compose stack with docker-compose and debootstrap for its base image),
# kubernetes-validate (the rendered overlays) and Chromium (the poll pages' browser tests).
# Installed only
# when missing and only when we are root with apt-get (CI and these dev machines); elsewhere
# the tests that need them say why they skip.
set -u
tools="$(cd "$(dirname "$0")/.." && pwd)/.data/tools"
mkdir -p "$tools/bin"
can_apt() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; }
apt_updated=0
apt_update() { [ $apt_updated = 1 ] || { apt-get update -qq >/dev/null 2>&1; apt_updated=1; }; }

if { { ! command -v promtool >/dev/null && [ ! -x "$tools/bin/promtool" ]; } \
     || { ! command -v prometheus >/dev/null && [ ! -x "$tools/bin/prometheus" ]; }; } && can_apt; then
  # The prometheus package ships promtool and the server; unpacking it installs no service.
  # The server runs the alert rules against the running system (tests/e2e/test_alerts_fire.py).
  tmp=$(mktemp -d)
  apt_update
  if (cd "$tmp" && apt-get download -qq prometheus >/dev/null 2>&1); then
    dpkg -x "$tmp"/prometheus_*.deb "$tmp/x" \
      && cp "$tmp/x/usr/bin/promtool" "$tmp/x/usr/bin/prometheus" "$tools/bin/"
  fi
  rm -rf "$tmp"
fi
if ! command -v nginx >/dev/null && [ ! -x /usr/sbin/nginx ] && can_apt; then
  # The e2e tests put the platform's API gateway (nginx) in front of the services.
  apt_update
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light >/dev/null 2>&1 \
    || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null 2>&1 || true
  # Debian starts the packaged server; ours run with their own configs.
  command -v service >/dev/null && service nginx stop >/dev/null 2>&1 || true
fi
if ! command -v dockerd >/dev/null && can_apt; then
  apt_update
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null 2>&1 || true
fi
if { ! command -v docker-compose >/dev/null || ! command -v debootstrap >/dev/null; } && can_apt; then
  apt_update
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose debootstrap >/dev/null 2>&1 || true
fi
if [ ! -x "$tools/kv/bin/kubernetes-validate" ] && ! command -v kubernetes-validate >/dev/null; then
  # Validates the rendered Kubernetes overlays offline (tests/deploy/test_k8s_overlays.py), in a
  # venv of its own so the workspace's lock file stays the services' own.
  uv=$(command -v uv || echo "python3 -m uv")
  $uv venv -q "$tools/kv" --python 3.11 >/dev/null 2>&1 \
    && $uv pip install -q --python "$tools/kv/bin/python" "kubernetes-validate==1.37.0" >/dev/null 2>&1 \
    || rm -rf "$tools/kv"
fi
if ! command -v chromium >/dev/null && can_apt; then
  # The poll pages' browser tests drive Debian's headless Chromium (no browser download).
  apt_update
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1 || true
fi
web="$(cd "$(dirname "$0")/.." && pwd)/services/poll/web"
if command -v npm >/dev/null && [ ! -d "$web/node_modules" ]; then
  # The poll pages' sources, so a test can check the committed build is theirs (lockfile).
  (cd "$web" && npm ci --no-audit --no-fund >/dev/null 2>&1) || true
fi
exit 0
