# fastpath: `make demo` and `make test` work on a fresh Debian machine (run as root).
CARGO ?= $(shell command -v cargo 2>/dev/null || echo $(HOME)/.cargo/bin/cargo)
FASTPATH := target/release/fastpath
export PATH := $(HOME)/.cargo/bin:$(PATH)

.PHONY: deps build demo test test-gate conformance mutants bench figures figures-check lint clean

deps:
	@scripts/deps.sh

build: deps
	$(CARGO) build --release --workspace --locked

demo: build
	$(FASTPATH) demo

# Unit tests (no privileges) and privileged end-to-end tests on test beds: run it as root. A
# test that cannot run fails; as another user `make test` refuses at once, unless
# UNPRIVILEGED=1 asks for the unprivileged subset: then each privileged test prints SKIPPED
# (and is not counted as passed) and the end says how many were skipped (never under CI=true).
SKIPPED_LOG := $(CURDIR)/target/skipped-tests.txt
test: test-gate build
	python3 -m unittest discover -s scripts -p 'test_*.py'
	@mkdir -p target && rm -f $(SKIPPED_LOG)
	FASTPATH_TEST_UNPRIVILEGED=$(UNPRIVILEGED) FASTPATH_TEST_SKIPPED_LOG=$(SKIPPED_LOG) \
	  $(CARGO) test --release --workspace --locked -- --test-threads=2
	@if [ -s $(SKIPPED_LOG) ]; then echo "make test: $$(wc -l < $(SKIPPED_LOG)) privileged tests SKIPPED, not run (they need root; names in target/skipped-tests.txt)"; fi

# As root, or UNPRIVILEGED=1 (`make test` refuses in one line otherwise, before building).
test-gate:
	@if [ "$$(id -u)" != 0 ] && [ "$(UNPRIVILEGED)" != 1 ]; then \
	  echo "make test: needs root (its privileged tests build network namespaces and attach XDP programs); run it as root, or UNPRIVILEGED=1 make test for only the unprivileged tests (the others reported SKIPPED)" >&2; \
	  exit 2; fi

# The kernel's AF_XDP selftest scenarios as fastpath's own tests, softirq and busy-poll modes:
# one line per scenario and mode (root; also part of `make test`). CONFORMANCE=NAME,... for some.
conformance: build
	$(CARGO) test --release --workspace --locked -p fastpath-conformance --test conformance

# Proves the tests can fail: each row of scripts/mutants/*.toml breaks the product code in a
# scratch copy and runs the one test that must catch it; one line per row, killed or SURVIVED
# (root, like `make test`; CI runs it after the tests).
# MUTANTS_ARGS: e.g. --files lifecycle,say; CI bounds its run with --budget-s (see the script).
MUTANTS_ARGS ?=
mutants: build
	scripts/mutants.py $(MUTANTS_ARGS)

bench: build
	scripts/bench.py

# Every figure of the README and docs/ in one sitting at the current commit, on the release build
# (docs/figures.json + docs/figures.md, and every <!-- figures:NAME:begin/end --> block of the
# README); resumable: run it again after an interruption. `scripts/figures.py --plan` prints the
# sections, runs and estimated time; FIGURES_ARGS="--quick --out /tmp/f --readme /tmp/R.md" smokes.
FIGURES_ARGS ?= --readme README.md
figures: build
	scripts/figures.py $(FIGURES_ARGS)

# No root, no benchmark: every generated block of README.md and docs/*.md must be what
# docs/figures.json renders, tables consistent, the JSON naming its commit.
figures-check:
	python3 scripts/figures.py --check

# rustfmt (rustfmt.toml), clippy and rustdoc with every warning an error; CI runs it before the tests.
lint: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --release --workspace --all-targets --locked -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps --locked

clean:
	$(CARGO) clean
