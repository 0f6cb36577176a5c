# The README's commands. `make run` and `make test` create the environment when it is missing.
SHELL := /bin/bash
# uv from PATH, else the one scripts/bootstrap-uv.sh installs under .data/tools (PEP 668 forbids
# pip into Debian's and Ubuntu's Python, so never there).
export PATH := $(CURDIR)/.data/tools/bin:$(PATH)
UV := uv
# uv trusts its own list of certificate authorities, not the system's: behind a proxy whose
# authority is in the system store alone, `uv sync` fails ("invalid peer certificate:
# UnknownIssuer"). The system's bundle, where there is one and nothing else was chosen.
ifeq ($(origin SSL_CERT_FILE),undefined)
ifneq ($(wildcard /etc/ssl/certs/ca-certificates.crt),)
export SSL_CERT_FILE := /etc/ssl/certs/ca-certificates.crt
endif
endif

.PHONY: run provision test lint typecheck unit bench token url docs ts ts-check env clean images compose-env test-deploy pages poll-demo

env: .venv/.synced

# Set-up talks on stderr only, so `make -s token` prints the token alone even on a fresh clone.
.venv/.synced: pyproject.toml uv.lock libs/*/pyproject.toml services/*/pyproject.toml
	@command -v uv >/dev/null 2>&1 || scripts/bootstrap-uv.sh
	@echo "$(UV) sync --frozen --all-packages --compile-bytecode" >&2
	@# Bytecode compiled once here: with PYTHONDONTWRITEBYTECODE set (as on these machines and
	@# CI) every service process would otherwise compile its libraries anew (~10 s of CPU for
	@# the gateway's anthropic + pydantic under load, instead of ~3 s).
	@$(UV) sync --frozen --all-packages --compile-bytecode >&2
	@touch $@

# `make run DEMO=1`: without a key, the model is the test kit's stub answering canned replies for
# the documented examples, labelled as such (README, "Demo mode").
run: env
	$(UV) run --no-sync python scripts/devrun.py

# The bus's streams, durable consumers and KV buckets (quiz_contracts.topology), created or
# updated as the `ops` user (issue 29: no service may): `make run` does it first; against another
# bus, NATS_URL (with the ops credentials, or NATS_USER/NATS_PASSWORD) and NATS_STREAM_REPLICAS.
provision: env
	@url="$${NATS_URL:-$$(python3 scripts/runinfo.py nats --as ops)}" || { echo "make provision:" \
	  "start make run first, or set NATS_URL to the bus with the ops user's credentials" >&2; exit 1; }; \
	$(UV) run --no-sync python -m quiz_servicekit.provision --nats-url "$$url"

test: env lint typecheck
	@scripts/ensure-test-tools.sh
	@# The TypeScript types (issue 33): always checked where node is; said skipped elsewhere.
	@if command -v node >/dev/null && command -v npm >/dev/null; then $(MAKE) -s ts-check; \
	else echo "make test: skipped ts-check (no node/npm; make ts-check says how to get them)"; fi
	@$(UV) run --no-sync pytest; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no test: failing on purpose"; exit 1; fi; exit $$rc

# The layering too (import-linter, its contracts in pyproject.toml's [tool.importlinter]): a
# service importing another, a domain module importing I/O, a lib importing the test kit fail.
lint: env
	$(UV) run --no-sync ruff check .
	$(UV) run --no-sync ruff format --check .
	$(UV) run --no-sync lint-imports

typecheck: env
	$(UV) run --no-sync mypy libs/contracts/src libs/servicekit/src libs/testkit/src services/*/src

unit: env
	$(UV) run --no-sync pytest -m "not integration and not e2e"

bench: env
	@for b in bench/*.py; do echo "== $$b"; $(UV) run --no-sync python $$b || exit 1; done

# `make -s token` prints the token alone: TOKEN=$$(make -s token GRANTS='question:42=contributor:mcq').
token: env
	@$(UV) run --no-sync python scripts/devtoken.py --sub "$${SUB:-teacher-1}" --grants "$${GRANTS:-}"

# With `make run` going: `make -s url S=editor-assist` prints that service's base URL alone (S=nats
# the bus's, AS=platform as that user of the locked bus); `make url` all of them. From the file
# `make run` writes (.data/urls), so no command assumes a port. The system's python3: no set-up.
# (AS is also make's built-in name of the assembler: only an AS given to make counts.)
url:
	@python3 scripts/runinfo.py $(S) $(if $(filter command line environment,$(origin AS)),--as $(AS))

# Everything `make run` and `make test` leave is under .data (the runner's state too; a docker
# job dir of a killed runner may still be a tmpfs mount there), plus the dev key `make
# compose-env` copies for the dev overlay and Python's bytecode caches.
clean:
	-@awk '$$2 ~ "^$(CURDIR)/.data/" {print $$2}' /proc/self/mounts | xargs -r umount -l 2>/dev/null
	rm -rf .data .venv .import_linter_cache deploy/k8s/overlays/dev/jwks.json
	find . -name node_modules -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

docs: env
	$(UV) run --no-sync python scripts/gen_asyncapi.py

# The contracts as TypeScript (docs/contracts-typescript.md): `make ts` rewrites
# libs/contracts/ts/index.d.ts and index.js (commit them); `make ts-check` fails when they are
# stale and runs tsc --strict on them and on every example. Node 20+ and npm; `npm ci` from the
# package's lockfile when node_modules is missing (the only step that needs the network).
ts: env
	@$(UV) run --no-sync python scripts/gen_ts.py

ts-check: env
	@$(UV) run --no-sync python scripts/gen_ts.py --check

# Deployment (docs/operations.md): the images on a Debian base built here (no registry needed;
# BASE_IMAGE=python:3.11-slim elsewhere), what compose reads from .data, and the compose stack
# driven through its nginx gateway then taken down (tests/deploy/test_compose_stack.py).
images:
	scripts/build-images.sh

compose-env: env
	@$(UV) run --no-sync python scripts/compose_env.py

test-deploy: env
	$(UV) run --no-sync pytest tests/deploy/test_compose_stack.py -p no:cacheprovider -v -rs

# With `make run` going, in another terminal: opens a brainstorm and prints its pages' URLs.
poll-demo: env
	@$(UV) run --no-sync python scripts/poll_demo.py $(ARGS)

# The poll's pages (issue 16): d3-force and esbuild from the npm registry, pinned by
# services/poll/web/package-lock.json. The built files are committed under
# services/poll/src/quiz_poll/static, so `make run` serves them without Node; this rebuilds them.
pages:
	@command -v npm >/dev/null || { echo "make pages needs node and npm (the built pages are committed)"; exit 1; }
	cd services/poll/web && npm ci --no-audit --no-fund && npm run build
