// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * xsk_redirect_meta - xsk_redirect with the driver's RX metadata in front of every frame:
 * the RX timestamp, the RSS hash with its type, the VLAN tag (the XDP metadata kfuncs,
 * Documentation/networking/xdp-rx-metadata.rst), as struct fp_rx_meta (fastpath_abi.h) put
 * with bpf_xdp_adjust_meta right before the packet, where the AF_XDP socket's frame carries it
 * (copied in copy mode). A kfunc the driver does not implement, or that has nothing for this
 * frame, leaves its field out of `valid`; what each kfunc returned is in `valid` too, as an
 * errno (FP_RX_META_ERRNO_*), so a driver that has no answer is told from one that was not asked.
 * Device-bound (BPF_F_XDP_DEV_BOUND_ONLY with the interface at load, Linux >= 6.3; the VLAN
 * kfunc >= 6.8): it attaches to that interface only. Kernel: XSKMAP >= 4.18.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "fastpath_abi.h"

/* The kernel's enum (include/net/xdp.h); only its name and size matter here. */
enum xdp_rss_hash_type {
	XDP_RSS_TYPE_NONE = 0,
};

extern int bpf_xdp_metadata_rx_timestamp(const struct xdp_md *ctx, __u64 *timestamp) __ksym;
extern int bpf_xdp_metadata_rx_hash(const struct xdp_md *ctx, __u32 *hash,
				    enum xdp_rss_hash_type *rss_type) __ksym;
extern int bpf_xdp_metadata_rx_vlan_tag(const struct xdp_md *ctx, __be16 *vlan_proto,
					__u16 *vlan_tci) __ksym __weak;

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, FP_MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

/* Frames whose metadata could not be put in front (bpf_xdp_adjust_meta refused: the driver
 * keeps no room). They go to the kernel's stack (XDP_PASS), not to the socket: a frame there
 * without fresh metadata would show whatever its UMEM frame held before. Per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} no_room SEC(".maps");

#define EOPNOTSUPP 95 /* include/uapi/asm-generic/errno.h */

/* A kfunc's return as the positive errno in bits shift..shift+7 of fp_rx_meta.valid. */
static __always_inline __u32 errno_bits(int err, int shift)
{
	return err < 0 ? ((__u32)-err & 0xff) << shift : 0;
}

SEC("xdp")
int xsk_redirect_meta(struct xdp_md *ctx)
{
	struct fp_rx_meta *m;
	enum xdp_rss_hash_type type = XDP_RSS_TYPE_NONE;
	__u64 ts = 0;
	__u32 hash = 0, zero = 0;
	__be16 proto = 0;
	__u16 tci = 0;
	__u32 valid = 0;
	void *data;
	int err;

	err = bpf_xdp_metadata_rx_timestamp(ctx, &ts);
	if (!err && ts)
		valid |= FP_RX_META_TIMESTAMP;
	valid |= errno_bits(err, FP_RX_META_ERRNO_TIMESTAMP_SHIFT);
	err = bpf_xdp_metadata_rx_hash(ctx, &hash, &type);
	if (!err)
		valid |= FP_RX_META_HASH;
	valid |= errno_bits(err, FP_RX_META_ERRNO_HASH_SHIFT);
	err = bpf_ksym_exists(bpf_xdp_metadata_rx_vlan_tag) ?
		bpf_xdp_metadata_rx_vlan_tag(ctx, &proto, &tci) : -EOPNOTSUPP;
	if (!err)
		valid |= FP_RX_META_VLAN;
	valid |= errno_bits(err, FP_RX_META_ERRNO_VLAN_SHIFT);

	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(*m))) {
		__u64 *c = bpf_map_lookup_elem(&no_room, &zero);

		if (c)
			*c += 1;
		return XDP_PASS;
	}
	data = (void *)(long)ctx->data;
	m = (void *)(long)ctx->data_meta;
	if ((void *)(m + 1) > data)
		return XDP_PASS;
	m->rx_timestamp_ns = (valid & FP_RX_META_TIMESTAMP) ? ts : 0;
	m->rx_hash = (valid & FP_RX_META_HASH) ? hash : 0;
	m->rx_hash_type = (valid & FP_RX_META_HASH) ? (__u32)type : 0;
	m->vlan_proto = (valid & FP_RX_META_VLAN) ? proto : 0;
	m->vlan_tci = (valid & FP_RX_META_VLAN) ? tci : 0;
	m->valid = valid;
	return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
