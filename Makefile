# Cairn: `make run` starts the embedded mode, `make test` runs the whole suite.
SHELL := /bin/bash
PYTHON ?= $(shell for p in python3.13 python3.12 python3.11 python3; do command -v $$p >/dev/null && $$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null && { echo $$p; break; }; done)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
FRONTEND_STAMP := frontend/dist/.built
FRONTEND_SOURCES := $(shell find frontend/src -type f ! -name schema.d.ts 2>/dev/null) frontend/openapi.json frontend/package.json frontend/package-lock.json frontend/index.html frontend/vite.config.ts frontend/tsconfig.json
# Parallel by default (pytest-xdist); e.g. `make test PYTEST_ARGS="-n 0 -x tests/workloads"`.
PYTEST_ARGS ?= -n auto

.PHONY: run test venv frontend chromium sandbox services kube slurm api-types lint clean bench code-server

venv: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt requirements-torch.txt requirements-s3emu.txt sdk/pyproject.toml
	@test -n "$(PYTHON)" || { echo "Python 3.11+ is required"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --disable-pip-version-check -q -r requirements-dev.txt
	scripts/install-torch.sh $(BIN)/pip  # examples/ddp_train.py and its tests; wheels kept in ~/.cache/cairn
	$(BIN)/pip install --disable-pip-version-check -q --no-deps -r requirements-s3emu.txt
	$(BIN)/pip install --disable-pip-version-check -q -e ./sdk
	touch $@

frontend: $(FRONTEND_STAMP)

$(FRONTEND_STAMP): $(FRONTEND_SOURCES)
	cd frontend && npm ci --no-audit --no-fund --loglevel=error && npm run build
	touch $@

# The dashboard's browser tests (tests/e2e/test_dashboard*.py) drive Debian's chromium through
# Playwright; no browser is downloaded. Installed with apt when missing (needs root).
CHROMIUM := /usr/bin/chromium

chromium:
	@if [ ! -x $(CHROMIUM) ]; then \
	  if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then \
	    echo "error: the browser tests need Debian's chromium at $(CHROMIUM), and installing it needs apt-get as root:" >&2; \
	    echo "       sudo apt-get install -y chromium   (then run make test again)" >&2; \
	    exit 1; \
	  fi; \
	  echo "installing chromium for the browser tests (apt-get)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
	    || { echo "error: apt-get install chromium failed" >&2; exit 1; }; \
	fi

# VS Code in the browser for notebooks with `ide: vscode` (docs/notebooks.md): code-server from the
# npm registry into .cache/code-server (CAIRN_CODE_SERVER points there by default), once per
# version. Its own postinstall downloads ripgrep from GitHub and node-gyp fetches Node's headers,
# so scripts/install-code-server.sh does those steps offline: ripgrep and the Kerberos headers
# (for a native module) come from Debian, installed with apt when missing (as root).
CODE_SERVER_VERSION := 4.100.3
CODE_SERVER_DIR := .cache/code-server
CODE_SERVER_STAMP := $(CODE_SERVER_DIR)/.installed

code-server:
	@if [ "$$(cat $(CODE_SERVER_STAMP) 2>/dev/null)" != "$(CODE_SERVER_VERSION)" ]; then \
	  if ! command -v rg >/dev/null 2>&1 || [ ! -f /usr/include/gssapi/gssapi.h ] || ! command -v g++ >/dev/null 2>&1; then \
	    if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then \
	      echo "error: code-server needs ripgrep, libkrb5-dev and a C++ toolchain:" >&2; \
	      echo "       sudo apt-get install -y ripgrep libkrb5-dev g++ make   (then run make again)" >&2; \
	      exit 1; \
	    fi; \
	    echo "installing ripgrep, libkrb5-dev and g++ for code-server (apt-get)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ripgrep libkrb5-dev g++ make >/dev/null \
	      || { echo "error: apt-get install failed" >&2; exit 1; }; \
	  fi; \
	  scripts/install-code-server.sh $(CODE_SERVER_VERSION) $(CODE_SERVER_DIR); \
	fi

# Local replicas run in a bubblewrap sandbox and, when Cairn runs as root, as the unprivileged
# user $(RUN_USER), each workload in a network namespace of its own with slirp4netns and nftables
# for outbound access (docs/local-backend.md). As root, all are set up here when missing.
RUN_USER ?= cairn-run

sandbox:
	@if [ "$$(id -u)" = 0 ]; then \
	  missing=""; \
	  command -v bwrap >/dev/null 2>&1 || missing="$$missing bubblewrap"; \
	  command -v slirp4netns >/dev/null 2>&1 || missing="$$missing slirp4netns"; \
	  command -v nft >/dev/null 2>&1 || missing="$$missing nftables"; \
	  command -v ip >/dev/null 2>&1 || missing="$$missing iproute2"; \
	  ls /usr/lib/*/libseccomp.so.2 >/dev/null 2>&1 || missing="$$missing libseccomp2"; \
	  if [ -n "$$missing" ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing$$missing to sandbox replicas (apt-get)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null \
	      || echo "warning: apt-get install$$missing failed: replicas will run less isolated" >&2; \
	  fi; \
	  id -u $(RUN_USER) >/dev/null 2>&1 || { echo "creating the run user '$(RUN_USER)' for replicas"; \
	    useradd --system --no-create-home --shell /usr/sbin/nologin $(RUN_USER); }; \
	elif ! command -v bwrap >/dev/null 2>&1; then \
	  echo "warning: bubblewrap (bwrap) is not installed and Cairn does not run as root:" >&2; \
	  echo "         replicas will NOT be isolated from Cairn (sudo apt-get install bubblewrap)" >&2; \
	fi

# `make test` runs against a private PostgreSQL and Redis started for the run
# (scripts/with-test-services.sh); their server packages come from Debian when missing (as root).
services:
	@missing=""; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	if [ -n "$$DATABASE_URL" ]; then missing=$${missing/ postgresql/}; fi; \
	if [ -n "$$REDIS_URL" ]; then missing=$${missing/ redis-server/}; fi; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then \
	    echo "error: the tests need$$missing (or DATABASE_URL / REDIS_URL):" >&2; \
	    echo "       sudo apt-get install -y$$missing   (then run make test again)" >&2; \
	    exit 1; \
	  fi; \
	  echo "installing$$missing for the tests (apt-get)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null \
	    || { echo "error: apt-get install$$missing failed" >&2; exit 1; }; \
	fi

# A real Slurm for the Slurm backend's tests (docs/slurm.md): Debian's slurmctld, slurmd, the client
# commands and munge, installed with apt when missing (as root). tests/backends/slurm/testbed.py
# starts them per test session with a private configuration in a temporary directory.
slurm:
	@missing=""; \
	for p in slurmctld:slurmctld slurmd:slurmd sbatch:slurm-client munged:munge; do \
	  command -v $${p%%:*} >/dev/null 2>&1 || [ -x /usr/sbin/$${p%%:*} ] || missing="$$missing $${p#*:}"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then \
	    echo "error: the Slurm tests need$$missing:" >&2; \
	    echo "       sudo apt-get install -y$$missing   (then run make test again, as root)" >&2; \
	    exit 1; \
	  fi; \
	  echo "installing$$missing for the Slurm tests (apt-get)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends$$missing >/dev/null \
	    || { echo "error: apt-get install$$missing failed" >&2; exit 1; }; \
	fi

# A real Kubernetes control plane for the Kubernetes tests (docs/kubernetes.md, "How this is
# tested"): kube-apiserver, kube-controller-manager, kube-scheduler, etcd, kwok and kustomize, built
# from Go modules once per version into ~/.cache/cairn (outside the clone, so a clean clone reuses
# it): ~26 min cold on 2 busy cores, ~40 s from Go's build cache, nothing when the stamp matches.
# Kueue's manager too (the Kueue tests run it): ~72 min cold on 2 busy cores, ~50 s warm.
kube:
	scripts/build-kube.sh
	scripts/build-kueue.sh

# `make run PORT=8001` (and HOST=0.0.0.0 to listen beyond this machine); an exported PORT is not used.
PORT = 8000
HOST = 127.0.0.1

# code-server too (VS Code notebooks), best effort: ~2 minutes the first time, a no-op after; where
# it cannot be installed, Cairn still starts, and a vscode notebook is refused at submit (400).
run: venv frontend sandbox
	@$(MAKE) --no-print-directory code-server || echo "warning: VS Code notebooks are off (code-server not installed, see above); JupyterLab works" >&2
	$(BIN)/python manage.py run_embedded --host $(HOST) --port $(PORT)

test: venv frontend chromium sandbox services code-server kube slurm
	scripts/check-commit-subjects.sh
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-cache
	cd frontend && npm test
	cd frontend && npm run lint
	scripts/with-test-services.sh $(BIN)/python -m pytest $(PYTEST_ARGS)

# Regenerate the dashboard's API types after changing an endpoint (a test checks they match).
api-types: venv
	$(BIN)/python manage.py spectacular --format openapi-json --file frontend/openapi.json
	cd frontend && npm run gen:api

lint: venv frontend
	scripts/check-commit-subjects.sh
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-cache
	cd frontend && npm run lint

bench: venv
	@echo "See docs/benchmarks.md for the benchmark commands."

clean:
	rm -rf $(VENV) frontend/node_modules frontend/dist var
