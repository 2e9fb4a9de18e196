#!/usr/bin/env bash
# `make deb-check` (CI, root): the package `make deb` built is checked file by file, installed for
# real (dpkg -i), used (--version names HEAD's commit, `man -w fastpath-filter` finds the page,
# the bash completion completes, the example rules compile), then purged, leaving nothing; and
# `make install` / `make uninstall` run into a scratch DESTDIR. One line per check, then
# "deb-check: N passed, 0 failed"; the first failure ends it (exit 1).
#
# It never leaves the package installed (purged on every exit path) and refuses to start when a
# fastpath package or a /usr/bin/fastpath is there already: it would replace it, then purge it.
# The tests' binary (target/release/fastpath) is not touched: cargo-deb strips a copy.
set -euo pipefail
cd "$(dirname "$0")/.."

passed=0
ok() {
  echo "deb-check: ok: $*"
  passed=$((passed + 1))
}
fail() {
  echo "deb-check: FAILED: $*" >&2
  exit 1
}

[ "$(id -u)" = 0 ] || fail "needs root (it installs the package with dpkg -i, then purges it)"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
arch=$(dpkg --print-architecture)
deb=target/debian/fastpath_${version}-1_${arch}.deb
ddeb=target/debian/fastpath-dbgsym_${version}-1_${arch}.ddeb
[ -f "$deb" ] || fail "$deb missing: run make deb"
head=$(git rev-parse --short=7 HEAD)

tmp=$(mktemp -d)
installed=0
cleanup() {
  if [ "$installed" = 1 ]; then dpkg --purge fastpath >/dev/null 2>&1 || echo "deb-check: could not purge fastpath" >&2; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# 1. The package as built: fields and files.
depends=$(dpkg-deb -f "$deb" Depends)
for d in libc6 libelf1 zlib1g; do
  [[ $depends == *"$d"* ]] || fail "Depends lacks $d: $depends"
done
ok "Depends: $depends"
dpkg-deb -x "$deb" "$tmp/x"
bin=$tmp/x/usr/bin/fastpath
[ -x "$bin" ] || fail "usr/bin/fastpath missing from $deb"
if readelf -SW "$bin" | grep -Eq '\.debug_(info|line|str) '; then fail "usr/bin/fastpath in $deb has debug sections"; fi
ok "usr/bin/fastpath is stripped ($(stat -c %s "$bin") bytes; target/release/fastpath: $(stat -c %s target/release/fastpath))"
for f in usr/share/man/man1/fastpath.1.gz usr/share/man/man1/fastpath-filter.1.gz \
  usr/share/man/man1/fastpath-filter-load.1.gz usr/share/bash-completion/completions/fastpath \
  usr/share/zsh/vendor-completions/_fastpath usr/share/fish/vendor_completions.d/fastpath.fish \
  usr/share/doc/fastpath/examples/filter-rules.toml; do
  [ -s "$tmp/x/$f" ] || fail "$f missing from $deb"
done
for u in dist/systemd/*.service; do
  [ -e "$u" ] || continue
  [ -s "$tmp/x/usr/lib/systemd/system/${u##*/}" ] || fail "unit ${u##*/} missing from $deb"
done
for g in dist/grafana/*.json; do
  [ -e "$g" ] || continue
  [ -s "$tmp/x/usr/share/doc/fastpath/grafana/${g##*/}" ] || fail "dashboard ${g##*/} missing from $deb"
done
ok "$(dpkg-deb -c "$deb" | grep -vc '/$') files: man pages, completions, units, example rules"
id=$(readelf -n "$bin" | sed -n 's/.*Build ID: *//p')
[ -f "$ddeb" ] || fail "$ddeb (the debug info) missing"
dpkg-deb -c "$ddeb" | grep -q "usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug" ||
  fail "$ddeb has no usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug for the binary's build ID"
ok "debug info in $ddeb under the binary's build ID $id"

# 2. Installed for real, used, purged.
if dpkg -s fastpath >/dev/null 2>&1; then
  fail "a fastpath package is installed already: remove it first (dpkg -r fastpath); this check would replace it, then purge it"
fi
[ ! -e /usr/bin/fastpath ] || fail "/usr/bin/fastpath exists (not from a package): move it away first"
installed=1
dpkg -i "$deb" >"$tmp/dpkg.log" 2>&1 || {
  cat "$tmp/dpkg.log" >&2
  fail "dpkg -i $deb"
}
ok "dpkg -i $deb"
v=$(/usr/bin/fastpath --version)
[[ $v == "fastpath $version ($head"* ]] || fail "fastpath --version says '$v', not HEAD's commit $head"
ok "fastpath --version: $v"
command -v man >/dev/null || fail "man missing (scripts/deps.sh test installs man-db)"
page=$(man -w fastpath-filter 2>&1) || true
[ "$page" = /usr/share/man/man1/fastpath-filter.1.gz ] || fail "man -w fastpath-filter: '$page', not /usr/share/man/man1/fastpath-filter.1.gz"
ok "man -w fastpath-filter: $page"
MANWIDTH=100 man fastpath-filter-load 2>/dev/null | grep -q -- '--pin' || fail "man fastpath-filter-load does not show --pin"
ok "man fastpath-filter-load renders its options"
words=$(bash -c 'source /usr/share/bash-completion/completions/fastpath
  COMP_WORDS=(fastpath fil); COMP_CWORD=1; COMP_LINE="fastpath fil"; COMP_POINT=${#COMP_LINE}
  _fastpath fastpath fil fastpath; echo "${COMPREPLY[*]}"')
[[ " $words " == *" filter "* ]] || fail "bash completion of 'fastpath fil' gave '$words', not filter"
ok "bash completion: 'fastpath fil<TAB>' -> $words"
for u in /usr/lib/systemd/system/fastpath-*.service; do
  [ -e "$u" ] || continue
  n=${u##*/}
  [ ! -e "/etc/systemd/system/multi-user.target.wants/$n" ] || fail "$n was enabled on install"
done
ok "units in /usr/lib/systemd/system, none enabled: $(cd /usr/lib/systemd/system && echo fastpath-*)"
/usr/bin/fastpath filter check /usr/share/doc/fastpath/examples/filter-rules.toml >/dev/null ||
  fail "the example rules do not compile"
ok "fastpath filter check /usr/share/doc/fastpath/examples/filter-rules.toml"
dpkg --purge fastpath >"$tmp/dpkg.log" 2>&1 || {
  cat "$tmp/dpkg.log" >&2
  fail "dpkg --purge fastpath"
}
installed=0
! dpkg -s fastpath >/dev/null 2>&1 || fail "fastpath still installed after dpkg --purge"
for f in /usr/bin/fastpath /usr/share/man/man1/fastpath-filter.1.gz /usr/share/bash-completion/completions/fastpath; do
  [ ! -e "$f" ] || fail "$f left after dpkg --purge"
done
ok "dpkg --purge fastpath: nothing left"

# 3. make install / make uninstall into a scratch DESTDIR.
root=$tmp/root
make --no-print-directory install DESTDIR="$root" PREFIX=/usr/local >"$tmp/install.log" 2>&1 || {
  cat "$tmp/install.log" >&2
  fail "make install DESTDIR=$root"
}
ib=$root/usr/local/bin/fastpath
if readelf -SW "$ib" | grep -Eq '\.debug_(info|line|str) '; then fail "make install: bin/fastpath has debug info"; fi
id=$(readelf -n "$ib" | sed -n 's/.*Build ID: *//p')
dbg=$root/usr/local/lib/debug/.build-id/${id:0:2}/${id:2}.debug
readelf -SW "$dbg" 2>/dev/null | grep -q '\.debug_info ' || fail "make install: no debug info at $dbg"
readelf -SW "$ib" | grep -q '\.gnu_debuglink ' || fail "make install: bin/fastpath has no .gnu_debuglink"
"$ib" --version | grep -q "($head" || fail "make install: bin/fastpath --version does not name $head"
for f in share/man/man1/fastpath.1 share/man/man1/fastpath-filter-load.1 share/bash-completion/completions/fastpath \
  share/zsh/vendor-completions/_fastpath share/fish/vendor_completions.d/fastpath.fish \
  share/doc/fastpath/examples/filter-rules.toml; do
  [ -s "$root/usr/local/$f" ] || fail "make install: $f missing"
done
for u in dist/systemd/*.service; do
  [ -e "$u" ] || continue
  iu=$root/usr/local/lib/systemd/system/${u##*/}
  [ -s "$iu" ] || fail "make install: unit ${u##*/} missing"
  ! grep -q '/usr/bin/fastpath' "$iu" || fail "make install: ${u##*/} still runs /usr/bin/fastpath, not PREFIX's"
done
ok "make install PREFIX=/usr/local: $(find "$root" -type f | wc -l) files, stripped binary, debug info under its build ID"
make --no-print-directory uninstall DESTDIR="$root" PREFIX=/usr/local >"$tmp/install.log" 2>&1 || {
  cat "$tmp/install.log" >&2
  fail "make uninstall DESTDIR=$root"
}
left=$(find "$root" -type f)
[ -z "$left" ] || fail "make uninstall left: $left"
ok "make uninstall: no file left"

echo "deb-check: $passed passed, 0 failed"
