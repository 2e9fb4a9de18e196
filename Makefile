# fastpath: `make demo` and `make test` work on a fresh Debian machine (run as root).
CARGO ?= $(shell command -v cargo 2>/dev/null || echo $(HOME)/.cargo/bin/cargo)
FASTPATH := target/release/fastpath
export PATH := $(HOME)/.cargo/bin:$(PATH)

.PHONY: package deps deps-build build bin demo test test-gate conformance mutants bench figures figures-check lint features-check public-api clean
.PHONY: man completions strip install install-data uninstall cargo-deb deb deb-check interop-afxdp-plugin

# Everything (what building, running and the tests need); `scripts/deps.sh build` or `run` installs
# one set (README, "Install"). A rustc older than Cargo.toml's rust-version is refused in one line.
deps:
	@scripts/deps.sh test

deps-build:
	@scripts/deps.sh build

build: deps-build
	$(CARGO) build --release --workspace --locked

# The fastpath binary alone (what install and deb need).
bin: deps-build
	$(CARGO) build --release --locked -p fastpath-cli

demo: deps build
	$(FASTPATH) demo

# Unit tests (no privileges) and privileged end-to-end tests on test beds: run it as root. A
# test that cannot run fails; as another user `make test` refuses at once, unless
# UNPRIVILEGED=1 asks for the unprivileged subset: then each privileged test prints SKIPPED
# (and is not counted as passed) and the end says how many were skipped (never under CI=true).
SKIPPED_LOG := $(CURDIR)/target/skipped-tests.txt
test: test-gate deps build
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
FIGURES_ARGS ?= --readme README.md --readme docs/benchmarks.md
figures: build
	scripts/figures.py $(FIGURES_ARGS)

# No root, no benchmark: every generated block of README.md and docs/*.md must be what
# docs/figures.json renders, tables consistent, the JSON naming its commit.
figures-check:
	python3 scripts/figures.py --check

# rustfmt (rustfmt.toml), clippy and rustdoc with every warning an error, the public API as listed, every mutant row
# applying to a text that exists and naming a test that exists, and the library's cargo features; CI runs it before the tests.
lint: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --release --workspace --all-targets --locked -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps --locked
	python3 scripts/mutants.py --check
	$(MAKE) public-api
	$(MAKE) features-check

# The library with none of its optional cargo features, then with each alone (every name of
# crates/fastpath/Cargo.toml's [features] but default), clippy with warnings as errors: a gated
# module used ungated, or an optional dependency used outside its feature, fails here.
FEATURES = $(shell sed -n '/^\[features\]/,/^\[/s/^\([a-z0-9-]*\) *=.*/\1/p' crates/fastpath/Cargo.toml | grep -vx default)
features-check: deps-build
	@set -e; for f in "" $(FEATURES); do echo "features-check: fastpath --no-default-features $${f:+--features $$f}"; \
	  $(CARGO) clippy --release --locked -q -p fastpath --lib --no-default-features $${f:+--features $$f} -- -D warnings; done

# The library's public API against the committed listing crates/fastpath/public-api.txt (a
# difference fails, so every API change shows in review); PUBLIC_API_ARGS=--bless rewrites it.
PUBLIC_API_ARGS ?=
public-api: deps-build
	$(CARGO) run --release --locked -q -p xtask -- public-api $(PUBLIC_API_ARGS)

clean:
	$(CARGO) clean

# --- Install -------------------------------------------------------------------------------
# make install [PREFIX=/usr/local] [DESTDIR=]: the binary stripped (its debug info split off with
# objcopy into lib/debug/.build-id/NN/REST.debug, where gdb finds it by the binary's build ID
# when PREFIX=/usr), one man page per command, bash/zsh/fish completions, the systemd units of
# dist/systemd/ (their /usr/bin/fastpath made $(BINDIR)/fastpath), the example rules and, when
# present, the Grafana dashboards of dist/grafana/. `make uninstall` with the same variables
# removes them.
PREFIX ?= /usr/local
DESTDIR ?=
BINDIR := $(PREFIX)/bin
MANDIR := $(PREFIX)/share/man/man1
DOCDIR := $(PREFIX)/share/doc/fastpath
BASHCOMPDIR := $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR := $(PREFIX)/share/zsh/vendor-completions
FISHCOMPDIR := $(PREFIX)/share/fish/vendor_completions.d
UNITDIR ?= $(PREFIX)/lib/systemd/system
DEBUGDIR := $(PREFIX)/lib/debug
ASSETS := target/assets
STRIPPED := target/stripped
UNITS := $(wildcard dist/systemd/*.service dist/systemd/*.socket dist/systemd/*.timer)
DASHBOARDS := $(wildcard dist/grafana/*.json)

# One page per command (fastpath.1, fastpath-filter.1, fastpath-filter-load.1, ...) and the
# completions, written by the binary itself (`fastpath assets`, hidden) from its clap
# definition: they cannot drift from --help.
man: bin
	rm -rf $(ASSETS)/man
	$(FASTPATH) assets --man $(ASSETS)/man

completions: bin
	$(FASTPATH) assets --completions $(ASSETS)/completions

strip: bin
	@mkdir -p $(STRIPPED)
	objcopy --only-keep-debug --compress-debug-sections=zlib $(FASTPATH) $(STRIPPED)/fastpath.debug
	objcopy --strip-debug --strip-unneeded $(FASTPATH) $(STRIPPED)/fastpath
	objcopy --add-gnu-debuglink=$(STRIPPED)/fastpath.debug $(STRIPPED)/fastpath

# Build ID of the binary: the debug file's name under lib/debug/.build-id/.
build_id = $(shell readelf -n $(1) 2>/dev/null | sed -n 's/.*Build ID: *//p')

install: strip install-data
	install -d $(DESTDIR)$(BINDIR)
	install -m 0755 $(STRIPPED)/fastpath $(DESTDIR)$(BINDIR)/fastpath
	@id=$(call build_id,$(STRIPPED)/fastpath); if [ -n "$$id" ]; then \
	  dir=$(DESTDIR)$(DEBUGDIR)/.build-id/$$(echo $$id | cut -c1-2); \
	  echo "install -D -m 0644 $(STRIPPED)/fastpath.debug $$dir/$$(echo $$id | cut -c3-).debug"; \
	  install -D -m 0644 $(STRIPPED)/fastpath.debug $$dir/$$(echo $$id | cut -c3-).debug; fi

# Everything but the binary (make deb stages it for cargo-deb, which packs the binary itself).
install-data: man completions
	install -d $(DESTDIR)$(MANDIR) $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR) $(DESTDIR)$(FISHCOMPDIR) $(DESTDIR)$(DOCDIR)/examples
	install -m 0644 $(ASSETS)/man/*.1 $(DESTDIR)$(MANDIR)/
	install -m 0644 $(ASSETS)/completions/fastpath.bash $(DESTDIR)$(BASHCOMPDIR)/fastpath
	install -m 0644 $(ASSETS)/completions/_fastpath $(DESTDIR)$(ZSHCOMPDIR)/_fastpath
	install -m 0644 $(ASSETS)/completions/fastpath.fish $(DESTDIR)$(FISHCOMPDIR)/fastpath.fish
	install -m 0644 dist/examples/filter-rules.toml $(DESTDIR)$(DOCDIR)/examples/
	@set -e; for u in $(UNITS); do \
	  echo "install $$u -> $(DESTDIR)$(UNITDIR)/"; install -d $(DESTDIR)$(UNITDIR); \
	  sed 's|/usr/bin/fastpath|$(BINDIR)/fastpath|g' $$u > $(DESTDIR)$(UNITDIR)/$$(basename $$u); \
	  chmod 0644 $(DESTDIR)$(UNITDIR)/$$(basename $$u); done
	@set -e; for d in $(DASHBOARDS); do \
	  echo "install $$d -> $(DESTDIR)$(DOCDIR)/grafana/"; install -D -m 0644 $$d $(DESTDIR)$(DOCDIR)/grafana/$$(basename $$d); done

uninstall:
	@id=$(call build_id,$(DESTDIR)$(BINDIR)/fastpath); if [ -n "$$id" ]; then \
	  rm -fv $(DESTDIR)$(DEBUGDIR)/.build-id/$$(echo $$id | cut -c1-2)/$$(echo $$id | cut -c3-).debug; fi
	rm -fv $(DESTDIR)$(BINDIR)/fastpath $(DESTDIR)$(MANDIR)/fastpath.1 $(DESTDIR)$(MANDIR)/fastpath-*.1
	rm -fv $(DESTDIR)$(BASHCOMPDIR)/fastpath $(DESTDIR)$(ZSHCOMPDIR)/_fastpath $(DESTDIR)$(FISHCOMPDIR)/fastpath.fish
	rm -fv $(addprefix $(DESTDIR)$(UNITDIR)/,$(notdir $(UNITS)))
	rm -rfv $(DESTDIR)$(DOCDIR)

# make deb: target/debian/fastpath_<version>-1_<arch>.deb with the files of make install under
# /usr (staged in target/release/pkg-root, listed in crates/fastpath-cli/Cargo.toml's
# [package.metadata.deb]) and the stripped binary; its debug info goes into a separate
# fastpath-dbgsym .ddeb beside it. cargo-deb (a pinned version) is installed if missing.
CARGO_DEB_VERSION := 3.8.0
PKG_ROOT := target/release/pkg-root
cargo-deb:
	@$(CARGO) deb --version 2>/dev/null | grep -qx "cargo-deb $(CARGO_DEB_VERSION)" || \
	  $(CARGO) install --locked cargo-deb --version $(CARGO_DEB_VERSION)

deb: bin cargo-deb
	rm -rf $(PKG_ROOT)
	$(MAKE) --no-print-directory install-data DESTDIR=$(CURDIR)/$(PKG_ROOT) PREFIX=/usr UNITDIR=/usr/lib/systemd/system
	gzip -9n $(PKG_ROOT)/usr/share/man/man1/*.1
	$(CARGO) deb -p fastpath-cli --locked --no-build --dbgsym

# The library as crates.io would get it: `cargo package` packs crates/fastpath (its BPF programs
# and headers inside it, the licences, the examples) and builds the packed crate on its own.
package: deps-build
	$(CARGO) package -p fastpath --locked

# The package installed for real (dpkg -i) and purged again: --version names HEAD's commit,
# `man -w fastpath-filter` finds the page, the completions and units are in place; also make
# install/uninstall into a scratch DESTDIR. Root; refuses if a fastpath package is installed.
deb-check: deb
	scripts/deb-check.sh

# The AF_XDP device plugin for Kubernetes's own pod-side client (its pkg/goclient, built from
# AFXDP_PLUGIN_SRC=DIR, a `git clone https://github.com/intel/afxdp-plugins-for-kubernetes`)
# takes the XSKMAP from `fastpath filter load --xsk-handoff` (root, Go, the Go module proxy; not
# in CI). A DIR that is not the plugin's source is refused in one line, before building.
AFXDP_PLUGIN_SRC ?=
interop-afxdp-plugin:
	@scripts/interop-afxdp-plugin.sh --check-src "$(AFXDP_PLUGIN_SRC)"
	@$(MAKE) --no-print-directory bin
	scripts/interop-afxdp-plugin.sh "$(AFXDP_PLUGIN_SRC)"
