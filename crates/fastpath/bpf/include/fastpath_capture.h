/* SPDX-License-Identifier: (MIT OR Apache-2.0) */
/*
 * The capture ring shared by xdp_capture (every frame) and the classifier (frames of rules
 * with FP_ACT_F_COPY, `fastpath capture` with rules): cap_copy() copies a frame, up to
 * cap_snaplen bytes and every buffer of a multi-buffer frame, into the BPF ring buffer
 * cap_ring as a struct fp_cap_hdr and the bytes, and counts it per queue in cap_stats. The
 * frame itself is not changed. Kernel: BPF ring buffer 5.8, bpf_xdp_load_bytes 5.18.
 */
#ifndef FASTPATH_CAPTURE_H
#define FASTPATH_CAPTURE_H

#include "fastpath_abi.h"

/* Bytes of the ring buffer: set before load (a power of two, a multiple of the page size);
 * one page unless the program is loaded for a capture. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
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
const volatile __u32 cap_snaplen = FP_CAP_MAX_BYTES;

static __always_inline void cap_copy(struct xdp_md *ctx)
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
		return;
	st->seen++;
	caplen = len < cap_snaplen ? len : cap_snaplen;
	/* Bounds the verifier can follow, 1..FP_CAP_MAX_BYTES, checked on the very register passed
	 * on (the barrier keeps the compiler from passing an unchecked copy). */
	asm volatile("" : "+r"(caplen));
	if (caplen == 0 || caplen > FP_CAP_MAX_BYTES)
		return;
	if (bpf_xdp_load_bytes(ctx, 0, r->data, caplen) < 0)
		return;
	r->hdr.tstamp_ns = bpf_ktime_get_ns();
	r->hdr.queue = ctx->rx_queue_index;
	r->hdr.len = len;
	r->hdr.caplen = caplen;
	r->hdr._pad = 0;
	if (bpf_ringbuf_output(&cap_ring, r, sizeof(r->hdr) + caplen, 0) == 0)
		st->captured++;
	else
		st->ringbuf_full++;
}

#endif /* FASTPATH_CAPTURE_H */
