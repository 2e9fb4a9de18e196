// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * xdp_replay - the in-kernel sender of `fastpath gen --pcap FILE --engine xdp-live`.
 * Run by BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES (kernel >= 5.18,
 * Documentation/bpf/bpf_prog_run.rst "Running XDP programs in live frame mode") on one
 * CPU, `repeat` times over one page-sized frame. A live-frames call takes ONE packet
 * (data_in), copied into every page of the call's page pool: so instead of a call per
 * distinct frame (each call sets up and tears down a page pool, ~24 ms back to back on a
 * 6.18 VM, see XdpGen::run) the frames of the capture sit in map replay_frames, and each
 * run writes the next one over the page in full: bpf_xdp_adjust_tail to its length
 * (from bpf_xdp_get_buff_len), then bpf_xdp_store_bytes of all its bytes (all three
 * kernel >= 5.18, as live frames). The page's earlier bytes (live-frames pages keep the
 * bytes of their previous use) never show: the frame leaves byte for byte as it is in
 * the file. Nothing is rewritten. Longest frame: the page less struct xdp_page_head,
 * XDP_PACKET_HEADROOM and skb_shared_info (bpf_xdp_adjust_tail grows no further), 3408
 * bytes with 4 KiB pages (crates/fastpath/src/bpf/replay.rs, max_frame_len).
 *
 * Timing (struct fp_replay_state, map replay_state): a run whose send is not yet due
 * (FP_REPLAY_FILE: the file's own gaps; FP_REPLAY_RATE: one per interval) is XDP_DROPped,
 * its page recycled, as xdp_gen paces; after `total` sends every run is dropped until user
 * space ends the call. Only one CPU may run it at a time (the state is not per CPU: the
 * frames leave in the file's order).
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "fastpath_abi.h"

/* Set before load. */
const volatile __u32 out_ifindex = 0;
const volatile __u32 nframes = 1;

struct replay_frame {
	struct fp_replay_frame_hdr h;
	__u8 data[FP_REPLAY_FRAME_MAX];
};

/* Frame i of the capture (max_entries set to the frame count before load). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct replay_frame);
} replay_frames SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fp_replay_state);
} replay_state SEC(".maps");

SEC("xdp")
int xdp_replay(struct xdp_md *ctx)
{
	__u32 key = 0, idx, len, cur;
	struct fp_replay_state *s = bpf_map_lookup_elem(&replay_state, &key);
	struct replay_frame *f;
	__u64 now, due, pass;

	if (!s || nframes == 0)
		return XDP_ABORTED;
	if (s->total && s->next >= s->total)
		return XDP_DROP;
	idx = (__u32)(s->next % nframes);
	pass = s->next / nframes;
	f = bpf_map_lookup_elem(&replay_frames, &idx);
	if (!f)
		return XDP_ABORTED;
	now = bpf_ktime_get_ns();
	if (s->mode == FP_REPLAY_FILE)
		due = pass * s->span_ns + f->h.at_ns;
	else if (s->mode == FP_REPLAY_RATE)
		due = s->next * s->interval_ns;
	else
		due = 0;
	if (s->start_ns && now - s->start_ns < due)
		return XDP_DROP;
	len = f->h.len;
	/* Bounds the verifier can see: 14..=FP_REPLAY_FRAME_MAX bytes of the map value. */
	if (len < 14 || len > FP_REPLAY_FRAME_MAX)
		goto refused;
	/* The page's current length (pkt_end arithmetic is refused by the verifier). */
	cur = (__u32)bpf_xdp_get_buff_len(ctx);
	if (bpf_xdp_adjust_tail(ctx, (int)len - (int)cur))
		goto refused;
	if (bpf_xdp_store_bytes(ctx, 0, f->data, len))
		goto refused;
	if (!s->start_ns)
		s->start_ns = now;
	s->next += 1;
	s->bytes += len;
	return bpf_redirect(out_ifindex, 0);
refused:
	if (!s->errors)
		s->err_frame = idx;
	s->errors += 1;
	return XDP_ABORTED;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
