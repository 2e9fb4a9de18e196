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
	__uint(max_entries, FP_MAX_QUEUES * FP_MAX_QUEUES); /* queue * socks_per_queue + i */
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

/* Sockets per queue: with n > 1 (several sockets on one queue sharing a UMEM's FILL and
 * COMPLETION rings), queue q's frames go round robin, per CPU, to slots q*n .. q*n+n-1.
 * Set before load; with the default 1 the verifier drops the branch. */
const volatile __u32 socks_per_queue = 1;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} rr SEC(".maps");

static __always_inline int redirect(struct xdp_md *ctx)
{
	__u32 key = ctx->rx_queue_index;

	if (socks_per_queue > 1) {
		__u32 zero = 0;
		__u32 *c = bpf_map_lookup_elem(&rr, &zero);

		if (c) {
			key = key * socks_per_queue + *c % socks_per_queue;
			*c += 1;
		}
	}
	return bpf_redirect_map(&xsks, key, XDP_PASS);
}

/* Single-buffer: for sockets without XDP_USE_SG (a packet larger than one UMEM frame would be
 * dropped by the socket anyway). */
SEC("xdp")
int xsk_redirect(struct xdp_md *ctx)
{
	return redirect(ctx);
}

/* Frags-aware (BPF_F_XDP_HAS_FRAGS, kernel >= 5.18): for multi-buffer sockets (XDP_USE_SG,
 * kernel >= 6.6), which take a packet of several buffers as several descriptors chained by
 * XDP_PKT_CONTD (Documentation/networking/af_xdp.rst "Multi-Buffer Support"). The program reads
 * no packet bytes, so the frags need no care here. User space loads one of the two. */
SEC("xdp.frags")
int xsk_redirect_frags(struct xdp_md *ctx)
{
	return redirect(ctx);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
