// Command afxdp-plugin-interop takes an XSKMAP from fastpath's `filter load --xsk-handoff`
// server through the AF_XDP device plugin's own pod-side client (package goclient of
// github.com/intel/afxdp-plugins-for-kubernetes, built from its source by
// scripts/interop-afxdp-plugin.sh), then checks the descriptor received with
// BPF_OBJ_GET_INFO_BY_FD: a BPF map of type BPF_MAP_TYPE_XSKMAP.
//
// Usage: afxdp-plugin-interop -device IFNAME [-as-is] [-print-path]
//
// The client dials constants.Uds.PodPath. Since the plugin's commit 720d92b ("multiple device
// request issue", November 2023) that is "/tmp/afxdp_dp/", the directory under which the
// plugin's Allocate mounts each device's socket (PodPath + device + SockName,
// internal/deviceplugin/poolManager.go), and no socket can be reached at a path ending in "/"
// (connect fails). Unless -as-is, PodPath is then set to that device's socket path before the
// client runs; the client's code is unchanged. A PodPath naming a file (the plugin before
// that commit: "/tmp/afxdp.sock") is used as it is.
//
// Output: one line per step on stdout. Exit 0: the client received an XSKMAP; 1: any failure
// (one line on stderr saying which step); 2: bad arguments.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"unsafe"

	"github.com/intel/afxdp-plugins-for-kubernetes/constants"
	"github.com/intel/afxdp-plugins-for-kubernetes/pkg/goclient"
	"golang.org/x/sys/unix"
)

// mapInfo is the head of struct bpf_map_info (include/uapi/linux/bpf.h); the kernel fills
// info_len bytes of it at most (bpf_map_get_info_by_fd, kernel/bpf/syscall.c).
type mapInfo struct {
	Type       uint32
	ID         uint32
	KeySize    uint32
	ValueSize  uint32
	MaxEntries uint32
	MapFlags   uint32
	Name       [unix.BPF_OBJ_NAME_LEN]byte
}

// infoAttr is the BPF_OBJ_GET_INFO_BY_FD member of union bpf_attr ("info").
type infoAttr struct {
	BpfFd   uint32
	InfoLen uint32
	Info    uint64
}

// xskmapInfo returns the map info of fd: an error unless fd is a BPF map (its /proc link
// "anon_inode:bpf-map") that BPF_OBJ_GET_INFO_BY_FD describes.
func xskmapInfo(fd int) (mapInfo, error) {
	var info mapInfo
	link, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil {
		return info, fmt.Errorf("fd %d: %v", fd, err)
	}
	if link != "anon_inode:bpf-map" {
		return info, fmt.Errorf("fd %d is %q, not a BPF map (anon_inode:bpf-map)", fd, link)
	}
	attr := infoAttr{BpfFd: uint32(fd), InfoLen: uint32(unsafe.Sizeof(info)), Info: uint64(uintptr(unsafe.Pointer(&info)))}
	_, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_OBJ_GET_INFO_BY_FD, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	if errno != 0 {
		return info, fmt.Errorf("BPF_OBJ_GET_INFO_BY_FD(%d): %v", fd, errno)
	}
	return info, nil
}

// socketPath is the path the client is to dial for device, and why if it is not PodPath.
func socketPath(device string) (string, string) {
	p := constants.Uds.PodPath
	if !strings.HasSuffix(p, "/") {
		return p, ""
	}
	s := p + device + constants.Uds.SockName
	return s, fmt.Sprintf("constants.Uds.PodPath %q is a directory, where the plugin mounts %s; set to it", p, s)
}

func fail(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "afxdp-plugin-interop: "+format+"\n", a...)
	os.Exit(1)
}

func main() {
	device := flag.String("device", "", "the interface whose XSKMAP is asked (/xsk_map_fd,<device>)")
	asIs := flag.Bool("as-is", false, "dial constants.Uds.PodPath unchanged, even a directory")
	printPath := flag.Bool("print-path", false, "print the socket path the client dials for -device, and exit")
	flag.Parse()
	if *device == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "afxdp-plugin-interop: give -device IFNAME (the interface fastpath's --xsk-handoff serves), nothing else")
		os.Exit(2)
	}
	path, why := socketPath(*device)
	if *asIs {
		path, why = constants.Uds.PodPath, ""
	}
	if *printPath {
		fmt.Println(path)
		return
	}
	constants.Uds.PodPath = path
	host, err := os.Hostname()
	if err != nil {
		fail("os.Hostname (what the client sends with /connect): %v", err)
	}
	fmt.Printf("goclient: client version %s; dials %s (%s) as host %q (%d bytes)\n",
		goclient.GetClientVersion(), path, constants.Uds.Protocol, host, len(host))
	if why != "" {
		fmt.Printf("goclient: %s\n", why)
	}

	version, cleanup, err := goclient.GetServerVersion()
	if err != nil {
		fail("GetServerVersion: %v", err)
	}
	defer cleanup()
	fmt.Printf("goclient: GetServerVersion() = %q\n", version)
	if version != goclient.GetClientVersion() {
		fail("the server's version %q is not the client's %q", version, goclient.GetClientVersion())
	}

	fd, _, err := goclient.RequestXSKmapFD(*device)
	if err != nil {
		fail("RequestXSKmapFD(%q): %v", *device, err)
	}
	fmt.Printf("goclient: RequestXSKmapFD(%q) = fd %d\n", *device, fd)
	info, err := xskmapInfo(fd)
	if err != nil {
		fail("%v", err)
	}
	name := strings.TrimRight(string(info.Name[:]), "\x00")
	fmt.Printf("BPF_OBJ_GET_INFO_BY_FD(%d): map type %d, id %d, key %d bytes, value %d bytes, max entries %d, name %q\n",
		fd, info.Type, info.ID, info.KeySize, info.ValueSize, info.MaxEntries, name)
	if info.Type != unix.BPF_MAP_TYPE_XSKMAP {
		fail("fd %d is a BPF map of type %d, not BPF_MAP_TYPE_XSKMAP (%d)", fd, info.Type, unix.BPF_MAP_TYPE_XSKMAP)
	}
	fmt.Printf("ok: the plugin's client holds an XSKMAP (type %d) of %d entries for %s\n", info.Type, info.MaxEntries, *device)
}
