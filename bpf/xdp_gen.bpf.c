// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * xdp_gen - the in-kernel traffic source of `fastpath gen --engine xdp-live`.
 * Run by BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES (kernel >= 5.18,
 * Documentation/bpf/bpf_prog_run.rst "Running XDP programs in live frame mode"):
 * every run stamps the next per-CPU sequence number, the CPU id and a
 * CLOCK_MONOTONIC timestamp into the fastpath payload, fixes the UDP checksum
 * incrementally (RFC 1624) and XDP_REDIRECTs the frame out of out_ifindex.
 * Live-frames pages keep the bytes of their previous use, so the checksum is
 * always updated from the bytes actually in the frame.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "fastpath_abi.h"

/* Set before load. */
const volatile __u32 out_ifindex = 0;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} gen_seq SEC(".maps");

/* Pacing per CPU (struct fp_gen_pace): written by user space before a run. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FP_GEN_MAX_CPUS);
	__type(key, __u32);
	__type(value, struct fp_gen_pace);
} gen_pace SEC(".maps");

/* 1 if this run sends a frame now, 0 if it is not yet due (the run is then XDP_DROPped, its
 * page recycled). Paced per frame, so any 1 ms window holds the nominal rate; the windows
 * are counted here, where the frames leave. */
static __always_inline int pace_ok(void)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct fp_gen_pace *p = bpf_map_lookup_elem(&gen_pace, &cpu);
	__u64 now, ms;

	if (!p || !p->interval_ns)
		return 1;
	now = bpf_ktime_get_ns();
	if (now < p->next_ns)
		return 0;
	if (now - p->next_ns > FP_GEN_PACE_SLACK_NS)
		p->next_ns = now - FP_GEN_PACE_SLACK_NS;
	p->next_ns += p->interval_ns;
	ms = now / 1000000;
	if (ms != p->win_ms) {
		if (p->win_ms) {
			__u64 c = p->win_count * p->interval_ns;
			__u64 gap = ms - p->win_ms;

			/* The closed window, then any empty ones between it and this one. */
			p->windows += gap;
			if (c >= 800000 && c <= 1200000)
				p->within_20pct += 1;
		}
		p->win_ms = ms;
		p->win_count = 0;
	}
	p->win_count += 1;
	return 1;
}

/* Offset of the UDP checksum: 14 Ethernet + 20 IPv4 + 6. */
#define UDP_CSUM_OFF 40

static __always_inline __u16 csum_fold(__u64 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)sum;
}

SEC("xdp")
int xdp_gen(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 key = 0;
	__u64 *seq;
	__u32 old_words[FP_PAYLOAD_LEN / 4];
	__u32 new_words[FP_PAYLOAD_LEN / 4];
	struct fp_payload *p;
	__u16 *udp_csum;
	__s64 diff;
	__u16 csum;

	if (data + FP_PAYLOAD_OFF + FP_PAYLOAD_LEN > data_end)
		return XDP_ABORTED;
	if (!pace_ok())
		return XDP_DROP;
	seq = bpf_map_lookup_elem(&gen_seq, &key);
	if (!seq)
		return XDP_ABORTED;
	*seq += 1;

	p = data + FP_PAYLOAD_OFF;
	udp_csum = data + UDP_CSUM_OFF;
	__builtin_memcpy(old_words, p, FP_PAYLOAD_LEN);
	p->magic = FP_PAYLOAD_MAGIC;
	p->stream = (__u16)bpf_get_smp_processor_id();
	p->seq = *seq;
	p->tstamp_ns = bpf_ktime_get_ns();
	__builtin_memcpy(new_words, p, FP_PAYLOAD_LEN);

	if (*udp_csum) {
		/* HC' = ~(~HC + ~m + m'), RFC 1624 eqn. 3. */
		diff = bpf_csum_diff(old_words, FP_PAYLOAD_LEN, new_words, FP_PAYLOAD_LEN,
				     (__u16)~*udp_csum);
		csum = ~csum_fold((__u32)diff);
		*udp_csum = csum ? csum : 0xffff;
	}
	return bpf_redirect(out_ifindex, 0);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
