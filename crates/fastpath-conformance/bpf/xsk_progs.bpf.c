// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * The XDP programs the conformance scenarios put in front of their AF_XDP socket (the kernel's
 * selftests have their own; these are fastpath's, written from the scenario descriptions).
 * Each redirects what it keeps to XSKMAP slot 0 and drops the rest (XDP_DROP when the slot
 * is empty too). All are frags-aware (xdp.frags, kernel >= 5.18) so that they attach with a
 * 9000-byte MTU; the multi-buffer scenarios need that.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

/* Frames xsk_drop_half has seen. */
__u64 seen = 0;
/* The next count xsk_meta writes. */
__u64 meta_count = 0;
/* Bytes xsk_adjust_tail adds to each frame (negative: removes); set before load. */
const volatile int adjust_by = 0;
/* The last error bpf_xdp_adjust_tail returned to xsk_adjust_tail (0: none). */
int adjust_err = 0;

/* XDP_METADATA_COPY: a 32-byte metadata area in front of the packet, its first 8 bytes the
 * frame's arrival count (from 0), read back by user space at the frame's address - 32. */
struct meta {
	__u64 count;
	__u64 pad[3];
};

/* XDP_DROP_HALF: every other frame by arrival order is dropped (the 2nd, 4th, ...). */
SEC("xdp.frags")
int xsk_drop_half(struct xdp_md *ctx)
{
	__u64 n = __sync_fetch_and_add(&seen, 1);

	if (n & 1)
		return XDP_DROP;
	return bpf_redirect_map(&xsks, 0, XDP_DROP);
}

SEC("xdp.frags")
int xsk_meta(struct xdp_md *ctx)
{
	struct meta *m;
	void *data;

	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(struct meta)))
		return XDP_DROP;
	data = (void *)(long)ctx->data;
	m = (void *)(long)ctx->data_meta;
	if ((void *)(m + 1) > data)
		return XDP_DROP;
	m->count = __sync_fetch_and_add(&meta_count, 1);
	m->pad[0] = m->pad[1] = m->pad[2] = 0;
	return bpf_redirect_map(&xsks, 0, XDP_DROP);
}

/* XDP_ADJUST_TAIL_SHRINK and _GROW: every frame changes length by adjust_by; one the helper
 * refuses is dropped, its error kept in adjust_err (-EOPNOTSUPP: this driver or generic XDP
 * cannot grow it), one whose new length is not the old one + adjust_by is dropped. */
SEC("xdp.frags")
int xsk_adjust_tail(struct xdp_md *ctx)
{
	__u32 len = bpf_xdp_get_buff_len(ctx);
	int err = bpf_xdp_adjust_tail(ctx, adjust_by);

	if (err) {
		adjust_err = err;
		return XDP_DROP;
	}
	if (bpf_xdp_get_buff_len(ctx) != len + adjust_by)
		return XDP_DROP;
	return bpf_redirect_map(&xsks, 0, XDP_DROP);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
