#!/usr/bin/env bash
# Installs what fastpath needs on a fresh Debian machine: the BPF toolchain, libbpf's build
# dependencies, the test bed's tools, and Rust if missing. Mounts bpffs if absent.
# Idempotent; prints what it does.
set -euo pipefail

pkgs=(clang llvm libclang-dev libelf-dev zlib1g-dev pkg-config linux-libc-dev iproute2 ethtool make util-linux procps python3 iputils-ping sockperf nftables iptables iperf3 tcpdump)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  if [ "$(id -u)" != 0 ]; then
    echo "deps: missing Debian packages: ${missing[*]} (run as root, or: sudo apt-get install ${missing[*]})" >&2
    exit 1
  fi
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Tools the tests run, each installed without its recommends: promtool (Debian package
# prometheus; validates the --metrics output), tshark (reads every file `fastpath capture`
# writes) and strace (tests/ss.rs: which fds `fastpath ss` duplicates).
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
need_tool promtool prometheus
need_tool tshark tshark
need_tool strace strace
# The peers fastpath is measured against (issue 22): DPDK's testpmd with the af_xdp, af_packet
# and tap PMDs, and xdp-tools (xdp-bench, xdp-trafficgen, xdp-filter).
need_tool dpdk-testpmd dpdk-dev
need_tool xdp-bench xdp-tools

if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    echo "deps: cargo is in ~/.cargo/bin; add it to PATH" >&2
  else
    echo "deps: installing Rust (Debian's cargo and rustc)"
    apt-get install -y -qq cargo rustc >/dev/null
  fi
fi

# make lint needs rustfmt and clippy: rustup components, or Debian's packages.
export PATH="$HOME/.cargo/bin:$PATH"
if command -v cargo >/dev/null 2>&1; then
  for tool in fmt clippy; do
    if ! cargo "$tool" --version >/dev/null 2>&1; then
      comp=$([ "$tool" = fmt ] && echo rustfmt || echo clippy)
      if command -v rustup >/dev/null 2>&1; then
        echo "deps: rustup component add $comp"
        rustup component add "$comp"
      else
        pkg=$([ "$tool" = fmt ] && echo rustfmt || echo rust-clippy)
        echo "deps: installing $pkg"
        apt-get install -y -qq "$pkg" >/dev/null
      fi
    fi
  done
fi

# bpffs: needed for pinning (later issues); harmless to have.
if [ "$(id -u)" = 0 ] && ! mount | grep -q ' /sys/fs/bpf type bpf'; then
  mount -t bpf bpf /sys/fs/bpf 2>/dev/null && echo "deps: mounted bpffs on /sys/fs/bpf" || echo "deps: could not mount bpffs (not needed for issue-2 features)"
fi
