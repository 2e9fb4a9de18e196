// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * xsk_redirect - the cheapest program in front of an AF_XDP socket: every frame
 * received on queue q goes to the XSK in slot q of the XSKMAP, or to the kernel
 * stack (XDP_PASS) when no socket is bound there.
 * Kernel: XSKMAP since 4.18; the default action in bpf_redirect_map's flags since 5.3
 * (Documentation/bpf/map_xskmap.rst).
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "fastpath_abi.h"

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, FP_MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

SEC("xdp")
int xsk_redirect(struct xdp_md *ctx)
{
	return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
