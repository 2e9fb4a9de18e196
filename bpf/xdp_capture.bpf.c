// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * xdp_capture - `fastpath capture --mode copy`: copy each frame (up to the snap length, all
 * buffers of a multi-buffer frame) into a BPF ring buffer with a timestamp and its queue, then
 * let it go on untouched (XDP_PASS), as xdpdump does. A frame that finds the ring buffer full
 * is counted, per queue, and passed anyway: capture never disturbs the traffic.
 * Kernel: BPF ring buffer 5.8, bpf_xdp_load_bytes and xdp.frags 5.18.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "fastpath_abi.h"

/* Bytes of the ring buffer: set before load (power of two, a multiple of the page size). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24);
} cap_ring SEC(".maps");

struct cap_record {
	struct fp_cap_hdr hdr;
	__u8 data[FP_CAP_MAX_BYTES];
};

/* Where a record is built before it is copied into the ring (too large for the stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cap_record);
} cap_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FP_CAP_MAX_QUEUES);
	__type(key, __u32);
	__type(value, struct fp_cap_stats);
} cap_stats SEC(".maps");

/* Bytes of each frame kept (1..FP_CAP_MAX_BYTES); set before load. */
const volatile __u32 snaplen = FP_CAP_MAX_BYTES;

SEC("xdp.frags")
int xdp_capture(struct xdp_md *ctx)
{
	__u32 zero = 0, q = ctx->rx_queue_index;
	__u32 len = bpf_xdp_get_buff_len(ctx);
	__u64 caplen;
	struct cap_record *r;
	struct fp_cap_stats *st;

	if (q >= FP_CAP_MAX_QUEUES)
		q = FP_CAP_MAX_QUEUES - 1;
	st = bpf_map_lookup_elem(&cap_stats, &q);
	r = bpf_map_lookup_elem(&cap_scratch, &zero);
	if (!st || !r)
		return XDP_PASS;
	st->seen++;
	caplen = len < snaplen ? len : snaplen;
	/* Bounds the verifier can follow, 1..FP_CAP_MAX_BYTES, checked on the very register passed
	 * on (the barrier keeps the compiler from passing an unchecked copy). */
	asm volatile("" : "+r"(caplen));
	if (caplen == 0 || caplen > FP_CAP_MAX_BYTES)
		return XDP_PASS;
	if (bpf_xdp_load_bytes(ctx, 0, r->data, caplen) < 0)
		return XDP_PASS;
	r->hdr.tstamp_ns = bpf_ktime_get_ns();
	r->hdr.queue = ctx->rx_queue_index;
	r->hdr.len = len;
	r->hdr.caplen = caplen;
	r->hdr._pad = 0;
	if (bpf_ringbuf_output(&cap_ring, r, sizeof(r->hdr) + caplen, 0) == 0)
		st->captured++;
	else
		st->ringbuf_full++;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
