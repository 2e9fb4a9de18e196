#!/usr/bin/env bash
# `make interop-afxdp-plugin AFXDP_PLUGIN_SRC=DIR` (root; not in CI, which has no plugin source):
# fastpath's `filter load --xsk-handoff` served to the AF_XDP device plugin for Kubernetes's own
# pod-side client (pkg/goclient of github.com/intel/afxdp-plugins-for-kubernetes, built from DIR
# with interop/afxdp-plugin/main.go). The client asks the server's version and the XSKMAP of a
# veth, as an unprivileged user (uid 65534, no capabilities) with a pod's longest host name (63
# characters, which it sends whole); the program checks the descriptor it got is an XSKMAP
# (BPF_OBJ_GET_INFO_BY_FD). Last line "interop-afxdp-plugin: PASSED" (exit 0)
# or "... FAILED: why" (exit 1); a bad DIR is refused in one line (exit 2).
#
#   scripts/interop-afxdp-plugin.sh DIR            the whole check
#   scripts/interop-afxdp-plugin.sh --check-src DIR  only whether DIR is the plugin's source
#
# Nothing on the host is touched: the server runs in a private mount namespace (unshare -m) with
# a tmpfs over /tmp/afxdp_dp, the directory under which the plugin mounts each device's socket in
# a pod; the veth pair lives in a network namespace of its own (10.99.0.1/24, 10.99.0.2/24).
# /tmp/afxdp_dp is made (empty) on the host only if absent, as the mount point, and removed again.
# The namespace, the server and the build directory go on every exit path. Go modules the
# plugin's client needs come from the Go module proxy (GOPROXY) the first time.
set -euo pipefail
cd "$(dirname "$0")/.."

GET="git clone https://github.com/intel/afxdp-plugins-for-kubernetes"
refuse() {
  echo "interop-afxdp-plugin: $*" >&2
  exit 2
}
fail() {
  echo "interop-afxdp-plugin: FAILED: $*" >&2
  exit 1
}

check_only=0
if [ "${1:-}" = "--check-src" ]; then
  check_only=1
  shift
fi
[ $# -le 1 ] || refuse "give one directory (the plugin's source), not $#: $*"
src=${1:-}
[ -n "$src" ] || refuse "no plugin source given (AFXDP_PLUGIN_SRC=DIR): get it with \`$GET\` and give its directory"
[ -d "$src" ] || refuse "$src: no such directory: get the plugin's source with \`$GET\` and give its directory"
if [ ! -f "$src/pkg/goclient/goclient.go" ] \
  || ! grep -qx 'module github.com/intel/afxdp-plugins-for-kubernetes' "$src/go.mod" 2>/dev/null; then
  refuse "$src is not the AF_XDP device plugin's source (no go.mod of module github.com/intel/afxdp-plugins-for-kubernetes with pkg/goclient/goclient.go): get it with \`$GET\` and give its directory"
fi
[ "$check_only" = 0 ] || exit 0

[ "$(id -u)" = 0 ] || refuse "needs root (network and mount namespaces, XDP): run it as root"
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
[ -x "$GO" ] || refuse "no Go toolchain (go not in PATH, none at /usr/local/go/bin/go): install Go 1.21 or newer, or set GO=/path/to/go"
FASTPATH=${FASTPATH:-$PWD/target/release/fastpath}
[ -x "$FASTPATH" ] || refuse "$FASTPATH missing: run make bin (or set FASTPATH=/path/to/fastpath)"
src=$(cd "$src" && pwd)

ns="fp-k8s-$$"
a="fpk8sa$$"
b="fpk8sb$$"
client_uid=65534
# The client's host name: 63 characters, the longest a pod's gets (Kubernetes cuts it there);
# the client sends it whole: "/connect, " and 63 bytes, over the protocol's 64-byte message.
pod_host=$(printf 'interop-afxdp-plugin-pod-name-of-63-characters-%016d' 0)
tmp=$(mktemp -d /tmp/fastpath-interop.XXXXXX)
made_mount_point=0
cleanup() {
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$tmp"
  if [ "$made_mount_point" = 1 ]; then rmdir /tmp/afxdp_dp 2>/dev/null || true; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# 1. The plugin's client, built from its source.
commit=$(git -C "$src" rev-parse --short=7 HEAD 2>/dev/null || echo "not a git checkout")
echo "interop-afxdp-plugin: building the client with $("$GO" version | cut -d' ' -f3) from $src ($commit)"
mkdir "$tmp/build"
cp interop/afxdp-plugin/main.go interop/afxdp-plugin/go.mod "$tmp/build/"
plugin=github.com/intel/afxdp-plugins-for-kubernetes
(
  cd "$tmp/build"
  export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0
  "$GO" mod edit \
    -require="$plugin@v0.0.0" -replace="$plugin=$src" \
    -require="$plugin/pkg/goclient@v0.0.0" -replace="$plugin/pkg/goclient=$src/pkg/goclient" \
    -replace="$plugin/pkg/subfunctions=$src/pkg/subfunctions"
  "$GO" mod tidy
  "$GO" build -o "$tmp/interop" .
) >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log" >&2; fail "the client did not build (above)"; }
chmod 0755 "$tmp" "$tmp/interop"
sock=$("$tmp/interop" -device "$b" -print-path)
case "$sock" in
  /tmp/afxdp_dp/*) ;;
  *) fail "the client dials $sock, not under /tmp/afxdp_dp/ (this check covers the plugin since commit 720d92b, November 2023)" ;;
esac

# 2. The test bed.
ip netns add "$ns"
ip link add "$a" netns "$ns" type veth peer name "$b" netns "$ns"
ip -n "$ns" addr add 10.99.0.1/24 dev "$a"
ip -n "$ns" addr add 10.99.0.2/24 dev "$b"
ip -n "$ns" link set "$a" up
ip -n "$ns" link set "$b" up
echo "interop-afxdp-plugin: test bed: netns $ns, veth $a 10.99.0.1/24 <-> $b 10.99.0.2/24"

# 3. Server and client in a private mount namespace: a tmpfs over /tmp/afxdp_dp, the socket where
# the plugin mounts it in a pod (read-only there, as the pod's volume should be: the client's
# cleanup removes the path it dialed).
cat >"$tmp/inner.sh" <<'EOF'
set -euo pipefail
server=
stop() {
  if [ -n "$server" ]; then kill -TERM "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
}
trap stop EXIT
mount -t tmpfs -o mode=0755,size=1m fastpath-interop /tmp/afxdp_dp
dir=$(dirname "$SOCK")
mkdir -m 0755 "$dir"
echo "interop-afxdp-plugin: server: fastpath filter load --rule proto=udp,dst_port=9,action=xsk --netns $NS -i $IFACE --xsk-handoff $SOCK --xsk-handoff-allow $CLIENT_UID"
"$FASTPATH" filter load --rule proto=udp,dst_port=9,action=xsk --netns "$NS" -i "$IFACE" \
  --xsk-handoff "$SOCK" --xsk-handoff-allow "$CLIENT_UID" --duration 120 >"$TMP/server.log" 2>&1 &
server=$!
for _ in $(seq 100); do
  [ -S "$SOCK" ] && break
  kill -0 "$server" 2>/dev/null || { cat "$TMP/server.log" >&2; exit 3; }
  sleep 0.1
done
[ -S "$SOCK" ] || { cat "$TMP/server.log" >&2; exit 3; }
mount --bind "$dir" "$dir"
mount -o remount,bind,ro "$dir"
echo "interop-afxdp-plugin: client (uid $CLIENT_UID, no capabilities, netns $NS, host name $POD_HOST): $TMP/interop -device $IFACE"
rc=0
# shellcheck disable=SC2016 # expanded by the inner bash
unshare -u bash -c 'hostname "$0" && exec nsenter --net="$1" setpriv --reuid="$2" --regid="$2" --clear-groups \
  --inh-caps=-all --bounding-set=-all -- "$3" -device "$4"' "$POD_HOST" "/run/netns/$NS" "$CLIENT_UID" "$TMP/interop" "$IFACE" \
  2>&1 | sed 's/^/  client: /' || rc=10
[ -S "$SOCK" ] || { echo "  the socket is gone after the client's cleanup" >&2; rc=10; }
stop
server=
sed 's/^/  server: /' "$TMP/server.log"
exit "$rc"
EOF
if [ ! -d /tmp/afxdp_dp ]; then
  mkdir -m 0755 /tmp/afxdp_dp || fail "/tmp/afxdp_dp cannot be made a mount point"
  made_mount_point=1
fi
rc=0
SOCK="$sock" NS="$ns" IFACE="$b" CLIENT_UID="$client_uid" POD_HOST="$pod_host" TMP="$tmp" FASTPATH="$FASTPATH" \
  unshare -m --propagation private bash "$tmp/inner.sh" || rc=$?
case "$rc" in
  0) echo "interop-afxdp-plugin: PASSED: the plugin's client ($commit) received fastpath's XSKMAP of $b" ;;
  3) fail "fastpath filter load did not serve $sock (its output above)" ;;
  10) fail "the plugin's client did not receive an XSKMAP (above)" ;;
  *) fail "the mount namespace could not be set up (exit $rc, above)" ;;
esac
