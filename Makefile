# graph-ascend: build, demo, test, bench.
#
#   make demo     build everything and start TensorBoard with the plugin on examples/
#   make test     every test (Rust, shim in real TensorBoard, frontend, end-to-end in Chromium)
#   make install  install binary + plugin + page into the active Python environment
#   make bench    benchmarks (converter and service), not tests
#   make fuzz     each fuzz target of fuzz/ for FUZZ_SECONDS (nightly + cargo-fuzz); `make test`
#                 replays their corpora and crash cases on stable Rust
#
# One Cargo profile (release) is used for the binary, the tests and the benchmarks, so a clean
# machine compiles the dependencies once.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
CARGO ?= cargo
PYTHON ?= python3
VENV ?= .venv
VPY := $(VENV)/bin/python
BIN := target/release/graph-ascend
PKG := python_shim/graph_ascend_tb
HOST ?= localhost
PORT ?= 6006
LOGDIR ?= examples
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := dump_json construct_json stack_json npy pt

.PHONY: build rust frontend shim venv install demo test test-rust lint-rust test-frontend test-shim test-e2e bench fuzz clean

build: rust frontend shim

rust:
	$(CARGO) build --release --locked -p graph-ascend

frontend/node_modules/.installed: frontend/package-lock.json
	cd frontend && npm ci --no-audit --no-fund --loglevel=error
	touch $@

frontend: frontend/node_modules/.installed
	cd frontend && npm run --silent build

# The binary and the API descriptor travel inside the Python package.
shim: rust
	mkdir -p $(PKG)/bin
	cp $(BIN) $(PKG)/bin/graph-ascend
	$(BIN) proto-descriptor --out $(PKG)/graph_ascend.desc

$(VENV)/.installed: python_shim/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q --disable-pip-version-check tensorboard pytest ruff
	$(VPY) -m pip install -q --disable-pip-version-check -e python_shim
	touch $@

venv: $(VENV)/.installed

# Into the active environment (a venv with TensorBoard, say): `python` is whatever is on PATH.
install: build
	python -m pip install --disable-pip-version-check ./python_shim
	@echo "Installed. Run: tensorboard --logdir <folder with .vis.db files>, then open the GRAPH_ASCEND tab."

demo: build venv
	@echo "Open http://$(HOST):$(PORT)/#graph_ascend (Ctrl-C stops)."
	$(VENV)/bin/tensorboard --logdir $(LOGDIR) --host $(HOST) --port $(PORT)

test: build venv test-rust lint-rust test-frontend test-shim test-e2e
	@echo "make test: all suites passed"

test-rust:
	$(CARGO) test --release --locked --workspace

lint-rust:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --release --locked --workspace --all-targets -- -D warnings

test-frontend: frontend/node_modules/.installed
	cd frontend && npm run --silent typecheck && npm run --silent lint && npm run --silent test

test-shim: venv shim
	$(VENV)/bin/ruff check python_shim tests/shim
	GRAPH_ASCEND_BINARY=$(CURDIR)/$(BIN) $(VPY) -m pytest tests/shim -q

test-e2e: build venv
	GRAPH_ASCEND_BINARY=$(CURDIR)/$(BIN) GA_PYTHON=$(CURDIR)/$(VPY) node --test tests/e2e/

bench: build venv
	bash bench/convert.sh
	@if [ -f bench/service.sh ]; then bash bench/service.sh; fi

# New inputs that raise coverage go to fuzz/corpus/<target>/, crashes to fuzz/artifacts/<target>/:
# commit the crash cases with their fix (plugin/dump/tests/fuzz_corpus.rs replays both).
fuzz:
	for t in $(FUZZ_TARGETS); do \
		$(CARGO) +nightly fuzz run --fuzz-dir fuzz -O $$t -- -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048; \
	done

clean:
	$(CARGO) clean
	rm -rf $(VENV) frontend/node_modules $(PKG)/bin $(PKG)/static $(PKG)/graph_ascend.desc
