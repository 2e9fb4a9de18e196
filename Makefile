# fastpath: `make demo` and `make test` work on a fresh Debian machine (run as root).
CARGO ?= $(shell command -v cargo 2>/dev/null || echo $(HOME)/.cargo/bin/cargo)
FASTPATH := target/release/fastpath
export PATH := $(HOME)/.cargo/bin:$(PATH)

.PHONY: deps build demo test bench figures lint clean

deps:
	@scripts/deps.sh

build: deps
	$(CARGO) build --release --workspace --locked

demo: build
	$(FASTPATH) demo

# Unit tests (no privileges) and privileged end-to-end tests on test beds (root; in CI they
# fail rather than skip when they cannot run).
test: build
	$(CARGO) test --release --workspace --locked -- --test-threads=2

bench: build
	scripts/bench.py

# Every figure of the README in one sitting (docs/figures.md + docs/figures.json, and the tables
# between the README's figures markers); resumable:
# run it again after an interruption. FIGURES_ARGS="--quick" for a smoke run.
FIGURES_ARGS ?= --runs 5 --duration 5 --readme README.md
figures: build
	scripts/figures.py $(FIGURES_ARGS)

# rustfmt (rustfmt.toml), clippy and rustdoc with every warning an error; CI runs it before the tests.
lint: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --release --workspace --all-targets --locked -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps --locked

clean:
	$(CARGO) clean
