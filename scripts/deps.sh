#!/usr/bin/env bash
# Installs what fastpath needs on a Debian machine, one set at a time (README, "Install"):
#
#   scripts/deps.sh build   building: clang and llvm (the BPF programs), libclang-dev (bindgen),
#                           libelf-dev, zlib1g-dev and pkg-config (libbpf), libpcap-dev (capture
#                           EXPRESSION: libpcap compiles and runs it), a C toolchain, git
#                           (the commit `fastpath --version` names), and Rust no older than the
#                           workspace's rust-version (Cargo.toml): an older rustc is refused in
#                           one line before anything is installed or built
#   scripts/deps.sh run     running: libelf1, zlib1g and libpcap0.8 (what the binary links), iproute2 and
#                           ethtool (the test beds of demo, bench and compare), bpffs mounted
#   scripts/deps.sh test    (the default, `make test`, `make demo`, `make lint`) both of the
#                           above, the tools the tests drive (tcpdump, tshark, promtool, strace,
#                           sockperf, iperf3, nftables, man-db, ...), the peers `fastpath compare
#                           --peers` measures against (DPDK's testpmd, xdp-tools) and rustfmt
#                           and clippy
#
# Idempotent; prints what it does. Installing needs root: as another user it names the
# missing packages and the command that installs them.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-test}
case "$mode" in
  build | run | test) ;;
  *)
    echo "deps: unknown set '$mode': give build, run or test (the default: all three)" >&2
    exit 2
    ;;
esac
export PATH="$HOME/.cargo/bin:$PATH"

# version_ge A B: A >= B as versions (1.95.0 >= 1.85).
version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }

want_rust=$(sed -n 's/^rust-version *= *"\(.*\)"/\1/p' "$root/Cargo.toml")
rustup_hint="get a newer one with rustup (rustup update stable; rustup itself: https://rustup.rs), then run make again"

# A rustc older than rust-version: refused in one line, before anything else happens.
check_rustc() {
  command -v "${RUSTC:-rustc}" >/dev/null 2>&1 || return 0
  local have
  have=$("${RUSTC:-rustc}" --version | awk '{print $2}')
  if ! version_ge "$have" "$want_rust"; then
    echo "deps: rustc $have is older than the workspace's rust-version $want_rust (Cargo.toml): $rustup_hint" >&2
    exit 1
  fi
}

# Debian packages, installed together when any is missing.
need_pkgs() {
  local missing=() p
  for p in "$@"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  if [ "$(id -u)" != 0 ]; then
    echo "deps: missing Debian packages: ${missing[*]} (run as root, or: sudo apt-get install ${missing[*]})" >&2
    exit 1
  fi
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
}

# A tool, from its package without the package's recommends, when the command is missing.
need_tool() { # command package
  command -v "$1" >/dev/null 2>&1 && return 0
  if [ "$(id -u)" != 0 ]; then
    echo "deps: $1 missing (run as root, or: sudo apt-get install --no-install-recommends $2)" >&2
    exit 1
  fi
  echo "deps: installing $2 (for $1)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends "$2" >/dev/null || { apt-get update -qq && apt-get install -y -qq --no-install-recommends "$2" >/dev/null; }
}

# Rust: the machine's (rustup's or Debian's); Debian's is installed only when it is new enough.
need_rust() {
  if ! command -v cargo >/dev/null 2>&1; then
    local cand
    cand=$(apt-cache policy rustc 2>/dev/null | awk '/Candidate:/ {print $2}')
    cand=${cand%%[+~-]*}
    if [ -z "$cand" ] || [ "$cand" = "(none)" ] || ! version_ge "$cand" "$want_rust"; then
      echo "deps: Rust is not installed and Debian's rustc (${cand:-none}) is older than the workspace's rust-version $want_rust: $rustup_hint" >&2
      exit 1
    fi
    need_pkgs cargo rustc
  fi
  check_rustc
}

build_pkgs=(clang llvm libclang-dev libelf-dev zlib1g-dev libpcap-dev pkg-config linux-libc-dev gcc libc6-dev binutils make git)
run_pkgs=(libelf1 zlib1g libpcap0.8 iproute2 ethtool)
test_pkgs=(util-linux procps python3 iputils-ping sockperf nftables iptables iperf3 tcpdump man-db systemd)

case "$mode" in
  build)
    check_rustc
    need_pkgs "${build_pkgs[@]}"
    need_rust
    ;;
  run)
    need_pkgs "${run_pkgs[@]}"
    ;;
  test)
    check_rustc
    need_pkgs "${build_pkgs[@]}" "${run_pkgs[@]}" "${test_pkgs[@]}"
    need_rust
    # Tools the tests run, each without its recommends: promtool (Debian package prometheus;
    # validates the --metrics output), tshark (reads every file `fastpath capture` writes),
    # strace (tests/ss.rs: which fds `fastpath ss` duplicates).
    need_tool promtool prometheus
    need_tool tshark tshark
    need_tool strace strace
    # The peers fastpath is measured against (issue 22; `fastpath compare --peers`): DPDK's
    # testpmd with the af_xdp, af_packet and tap PMDs, and xdp-tools (xdp-bench,
    # xdp-trafficgen, xdp-filter).
    need_tool dpdk-testpmd dpdk-dev
    need_tool xdp-bench xdp-tools
    # make lint: rustfmt and clippy, rustup components or Debian's packages.
    for tool in fmt clippy; do
      if ! cargo "$tool" --version >/dev/null 2>&1; then
        comp=$([ "$tool" = fmt ] && echo rustfmt || echo clippy)
        if command -v rustup >/dev/null 2>&1; then
          echo "deps: rustup component add $comp"
          rustup component add "$comp"
        else
          pkg=$([ "$tool" = fmt ] && echo rustfmt || echo rust-clippy)
          need_pkgs "$pkg"
        fi
      fi
    done
    ;;
esac

# bpffs: where `filter load --pin` pins the classifier (systemd mounts it at boot).
if [ "$mode" != build ] && [ "$(id -u)" = 0 ] && ! mount | grep -q ' /sys/fs/bpf type bpf'; then
  if mount -t bpf bpf /sys/fs/bpf 2>/dev/null; then
    echo "deps: mounted bpffs on /sys/fs/bpf"
  else
    echo "deps: could not mount bpffs on /sys/fs/bpf (filter load --pin needs it)"
  fi
fi
