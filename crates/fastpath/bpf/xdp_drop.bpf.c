// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * xdp_drop - the in-kernel reference: count every frame per CPU, then XDP_DROP.
 * Every AF_XDP figure of fastpath is held against this rate.
 * Frags-aware (SEC "xdp.frags", kernel >= 5.18): native mode at any MTU, all buffers counted.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "fastpath_abi.h"

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fp_pkt_stats);
} drop_stats SEC(".maps");

SEC("xdp.frags")
int xdp_drop(struct xdp_md *ctx)
{
	__u32 key = 0;
	struct fp_pkt_stats *st = bpf_map_lookup_elem(&drop_stats, &key);

	if (st) {
		st->packets++;
		st->bytes += bpf_xdp_get_buff_len(ctx); /* every buffer of a multi-buffer frame */
	}
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
