#!/usr/bin/env bash
# uv for `make env` when none is on PATH, without touching the system's Python: Debian 12 and
# Ubuntu >= 23.04 refuse `pip install` (even --user) into their Python (PEP 668,
# externally-managed-environment). uv goes into a private venv under .data/tools/uv, linked as
# .data/tools/bin/uv (on the Makefile's PATH); where python3 has no venv module (no
# python3-venv), pip installs it with --target instead, which PEP 668 leaves alone. A uv
# already importable as a module (python3 -m uv) is used as it is. Talks on stderr only.
set -euo pipefail
tools="$(cd "$(dirname "$0")/.." && pwd)/.data/tools"
mkdir -p "$tools/bin"
link() { ln -sf "$1" "$tools/bin/uv"; "$tools/bin/uv" --version >&2; }
if python3 -m uv --version >/dev/null 2>&1; then
    printf '#!/bin/sh\nexec python3 -m uv "$@"\n' > "$tools/bin/uv"; chmod +x "$tools/bin/uv"
    exit 0
fi
echo "uv is not on PATH: installing it under .data/tools (make clean removes it)" >&2
rm -rf "$tools/uv"
if python3 -m venv "$tools/uv" >/dev/null 2>&1 \
    && "$tools/uv/bin/python" -m pip install --quiet --disable-pip-version-check uv >&2; then
    link "$tools/uv/bin/uv"; exit 0
fi
rm -rf "$tools/uv"
if python3 -m pip --version >/dev/null 2>&1 \
    && python3 -m pip install --quiet --disable-pip-version-check --target "$tools/uv" uv >&2; then
    link "$tools/uv/bin/uv"; exit 0
fi
rm -rf "$tools/uv"
cat >&2 <<'MSG'
make: could not install uv. Either install it (https://docs.astral.sh/uv/getting-started/installation/:
`curl -LsSf https://astral.sh/uv/install.sh | sh`, or `pipx install uv`), or give python3 its
venv module (Debian/Ubuntu: apt install python3-venv), then `make run` again.
MSG
exit 1
