// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * xdp_gen - the in-kernel traffic source of `fastpath gen --engine xdp-live`.
 * Run by BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES (kernel >= 5.18,
 * Documentation/bpf/bpf_prog_run.rst "Running XDP programs in live frame mode"):
 * every run stamps the next per-CPU sequence number, the CPU id and a
 * CLOCK_MONOTONIC timestamp into the fastpath payload, fixes the UDP checksum
 * incrementally (RFC 1624) and XDP_REDIRECTs the frame out of out_ifindex.
 * The frame is Ethernet / IPv4 (no options) or IPv6 (no extension header) /
 * UDP, as crates/fastpath/src/packet.rs builds it.
 *
 * With flows > 0 (`gen --flows N --seed S`) frame seq of a CPU carries flow
 * (seq - 1) % flows: the last byte of the source address and the source port
 * become flow_mix(flow), the same seeded bijection of 0..2^24 as
 * packet::Flows::mix, and the IPv4 header and UDP checksums are fixed
 * incrementally.
 *
 * With src_count > 0 as well (a source spread, crates/fastpath/src/spread.rs,
 * `bench ddos --flood-sources N`) flow i instead comes from source index
 * s = (i * SPREAD_STRIDE + flow_k0) % src_count, the last 32 bits of the
 * source address becoming src_base + s (the whole IPv4 address), and the
 * source port (i / src_count * 0x9e37 + flow_k1) & 0xffff: every src_count
 * consecutive flows come from src_count distinct addresses, and the flows are
 * distinct 5-tuples (spread::SourceSpread holds the same arithmetic).
 *
 * A TCP frame (a SYN of `bench ddos --flood syn`) gets no payload: with flows
 * only its source address and port change, the TCP checksum fixed.
 *
 * With a pace set for the CPU (map gen_pace, `gen --rate` without --count)
 * a run that is not yet due is XDP_DROPped, so frames leave one per interval.
 *
 * Live-frames pages keep the bytes of their previous use, so every checksum
 * is always updated from the bytes actually in the frame, and the MACs and
 * TTL / hop limit are put back from map gen_hdr (a forwarder downstream,
 * `fastpath fwd`, rewrites them in the very page that comes back); a TCP
 * frame gets its whole template back (a SYN answered in place with a cookie
 * SYN-ACK by the classifier's syncookie action comes back as that SYN-ACK).
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "fastpath_abi.h"

/* Set before load. */
const volatile __u32 out_ifindex = 0;
/* Number of flows (0: send the frame's own 5-tuple) and the mix's keys. */
const volatile __u32 flows = 0;
const volatile __u32 flow_k0 = 0;
const volatile __u32 flow_k1 = 0;
const volatile __u32 flow_k2 = 0;
/* A source spread (0: the flows vary the address's last byte) and its first address's last
 * 32 bits, host order. */
const volatile __u32 src_count = 0;
const volatile __u32 src_base = 0;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} gen_seq SEC(".maps");

/* What to restore before each frame leaves (struct fp_gen_hdr): written by user space with
 * each BPF_PROG_RUN call from the frame it passes. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fp_gen_hdr);
} gen_hdr SEC(".maps");

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
	ms = now / 1000000;
	if (!p->win_ms) {
		/* The first frame: the schedule starts now, in a window of its own. */
		p->next_ns = now;
		p->win_ms = ms;
		p->first_ms = ms;
	}
	if (now < p->next_ns)
		return 0;
	if (now - p->next_ns > FP_GEN_PACE_SLACK_NS)
		p->next_ns = now - FP_GEN_PACE_SLACK_NS;
	p->next_ns += p->interval_ns;
	if (ms != p->win_ms) {
		if (p->interval_ns <= FP_GEN_PACE_SCORED_MAX_INTERVAL_NS) {
			__u64 c = p->win_count * p->interval_ns;
			__u64 gap = ms - p->win_ms;

			/* The closed window (unless it is the first, partial one), then any
			 * empty ones between it and this one. */
			if (p->win_ms == p->first_ms) {
				gap -= 1;
			} else if (c >= 800000 && c <= 1200000) {
				p->within_20pct += 1;
			}
			p->windows += gap;
		}
		p->win_ms = ms;
		p->win_count = 0;
	}
	p->win_count += 1;
	return 1;
}

#define M24 0xffffffu
/* 14 Ethernet + 20 IPv4 (no options) or 40 IPv6. */
#define UDP_OFF4 34
#define UDP_OFF6 54
#define IP4_CSUM_OFF 24
/* The last 16-bit word of the source address. */
#define SRC_WORD4 28
#define SRC_WORD6 36

static __always_inline __u16 csum_fold(__u64 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)sum;
}

/* RFC 1624 eqn. 3 for one 16-bit word: HC' = ~(~HC + ~m + m'). Words as read
 * from the frame (any byte order, the same for all three). */
static __always_inline __u16 csum_replace(__u16 hc, __u16 old, __u16 new)
{
	return ~csum_fold((__u64)(__u16)~hc + (__u16)~old + new);
}

/* packet::Flows::mix: keyed xor, add, odd multiplies mod 2^24 and xorshifts. */
static __always_inline __u32 flow_mix(__u32 i)
{
	__u32 x = (i ^ flow_k0) & M24;

	x = (x * 0x9e3779u) & M24;
	x ^= x >> 12;
	x = (x + flow_k1) & M24;
	x = (x * 0x85ebcbu) & M24;
	x ^= x >> 11;
	return (x ^ flow_k2) & M24;
}

/* A prime above any src_count (spread::MAX_SOURCES): i -> i * SPREAD_STRIDE mod src_count is a
 * bijection of the residues, so src_count consecutive flows visit every source once. */
#define SPREAD_STRIDE 2654435761ull

/* A source spread's flow i: rewrites the last 32 bits of the source address (two words, the
 * second at src_word) and the source port at pw, fixing the IPv4 header checksum (ip_csum_off,
 * 0 for IPv6) and the L4 checksum at l4c (fix_l4 0: a UDP-over-IPv4 checksum of 0, none)
 * incrementally from the bytes in the frame. RFC 1624 eqn. 3 gives the checksum a sender
 * computes from scratch (0x0000 included); only UDP (udp 1) sends a 0 as 0xffff (RFC 768),
 * TCP keeps it. */
static __always_inline void spread_apply(void *data, __u32 i, const int src_word, const int ip_csum_off,
					 __u16 *l4c, int fix_l4, const int udp, __u16 *pw)
{
	__u32 s = (__u32)(((__u64)i * SPREAD_STRIDE + flow_k0) % src_count);
	__u32 a = src_base + s;
	__u16 *hi = data + src_word - 2;
	__u16 *lo = data + src_word;
	__u16 new_hi = bpf_htons((__u16)(a >> 16));
	__u16 new_lo = bpf_htons((__u16)a);
	__u16 new_p = bpf_htons((__u16)((i / src_count) * 0x9e37u + flow_k1));
	__u16 c;

	if (ip_csum_off) {
		__u16 *ic = data + ip_csum_off;
		*ic = csum_replace(csum_replace(*ic, *hi, new_hi), *lo, new_lo);
	}
	if (fix_l4) {
		c = csum_replace(csum_replace(csum_replace(*l4c, *hi, new_hi), *lo, new_lo), *pw, new_p);
		*l4c = (c || !udp) ? c : 0xffff;
	}
	*hi = new_hi;
	*lo = new_lo;
	*pw = new_p;
}

static __always_inline int gen_frame(void *data, void *data_end, __u64 seqno, const int udp_off,
				     const int src_word, const int ip_csum_off)
{
	__u32 old_words[FP_PAYLOAD_LEN / 4];
	__u32 new_words[FP_PAYLOAD_LEN / 4];
	struct fp_payload *p;
	__u16 *udp_csum;
	__u16 csum;

	if (data + udp_off + 8 + FP_PAYLOAD_LEN > data_end)
		return XDP_ABORTED;
	p = data + udp_off + 8;
	udp_csum = data + udp_off + 6;

	if (flows && src_count) {
		spread_apply(data, (__u32)((seqno - 1) % flows), src_word, ip_csum_off, udp_csum,
			     *udp_csum || !ip_csum_off, 1, data + udp_off);
	} else if (flows) {
		__u32 t = flow_mix((__u32)((seqno - 1) % flows));
		__u16 *aw = data + src_word;
		__u16 *pw = data + udp_off;
		/* Words in network byte order as they sit in the frame. */
		__u16 new_a = bpf_htons((bpf_ntohs(*aw) & 0xff00) | (__u16)(t >> 16));
		__u16 new_p = bpf_htons((__u16)t);

		if (ip_csum_off) {
			__u16 *ic = data + ip_csum_off;
			*ic = csum_replace(*ic, *aw, new_a);
		}
		if (*udp_csum || !ip_csum_off) {
			csum = csum_replace(csum_replace(*udp_csum, *aw, new_a), *pw, new_p);
			*udp_csum = csum ? csum : 0xffff;
		}
		*aw = new_a;
		*pw = new_p;
	}

	__builtin_memcpy(old_words, p, FP_PAYLOAD_LEN);
	p->magic = FP_PAYLOAD_MAGIC;
	p->stream = (__u16)bpf_get_smp_processor_id();
	p->seq = seqno;
	p->tstamp_ns = bpf_ktime_get_ns();
	__builtin_memcpy(new_words, p, FP_PAYLOAD_LEN);

	if (*udp_csum) {
		/* HC' = ~(~HC + ~m + m'), RFC 1624 eqn. 3, over the payload's 32-bit words
		 * inline (one's-complement sums of 32-bit words fold to the same 16-bit sum);
		 * no helper call per frame. */
		__u64 sum = (__u16)~*udp_csum;
		int i;

#pragma unroll
		for (i = 0; i < FP_PAYLOAD_LEN / 4; i++)
			sum += (__u32)~old_words[i] + (__u64)new_words[i];
		csum = ~csum_fold(sum);
		*udp_csum = csum ? csum : 0xffff;
	}
	return bpf_redirect(out_ifindex, 0);
}

/* A TCP frame (`bench ddos --flood syn`): no fastpath payload; with flows the source
 * address word and source port are rewritten and the TCP checksum (l4 + 16) fixed. */
static __always_inline int gen_tcp(void *data, void *data_end, __u64 seqno, const int l4_off,
				   const int src_word, const int ip_csum_off)
{
	if (data + l4_off + 20 > data_end)
		return XDP_ABORTED;
	if (flows && src_count) {
		/* The TCP checksum is never optional, and a 0 stays 0. */
		spread_apply(data, (__u32)((seqno - 1) % flows), src_word, ip_csum_off, data + l4_off + 16, 1, 0,
			     data + l4_off);
	} else if (flows) {
		__u32 t = flow_mix((__u32)((seqno - 1) % flows));
		__u16 *aw = data + src_word;
		__u16 *pw = data + l4_off;
		__u16 *tc = data + l4_off + 16;
		__u16 new_a = bpf_htons((bpf_ntohs(*aw) & 0xff00) | (__u16)(t >> 16));
		__u16 new_p = bpf_htons((__u16)t);

		if (ip_csum_off) {
			__u16 *ic = data + ip_csum_off;
			*ic = csum_replace(*ic, *aw, new_a);
		}
		*tc = csum_replace(csum_replace(*tc, *aw, new_a), *pw, new_p);
		*aw = new_a;
		*pw = new_p;
	}
	return bpf_redirect(out_ifindex, 0);
}

/* Puts back a TCP frame's whole template (headers; no payload to keep): a receiver that
 * answered the page in place (the classifier's cookie SYN-ACK swaps addresses and ports, sets
 * flags, rewrites options and the lengths) leaves those bytes for the next use of the page.
 * Word by word, then an odd last byte: the first tcp_len bytes (at most FP_GEN_TCP_MAX) that
 * the frame holds. Returns 1 if it did. */
static __always_inline int restore_tcp(void *data, void *data_end, const struct fp_gen_hdr *h)
{
	__u32 n = h->tcp_len, i;

	if (n < 54 || n > FP_GEN_TCP_MAX)
		return 0;
	for (i = 0; i < FP_GEN_TCP_MAX / 2; i++) {
		if (2 * i + 2 > n || data + 2 * i + 2 > data_end)
			break;
		((__u16 *)data)[i] = ((const __u16 *)h->tcp)[i];
	}
	/* An odd length: its last byte too (it may lie inside the datagram the checksum covers). */
	if (n & 1) {
		__u32 last = n - 1;
		__u8 *p;

		/* Hide the value from the compiler so the bound check stays for the verifier. */
		asm volatile("" : "+r"(last));
		if (last >= FP_GEN_TCP_MAX)
			return 1;
		p = (__u8 *)data + last;
		if ((void *)(p + 1) <= data_end)
			*p = h->tcp[last];
	}
	return 1;
}

/* Puts back the MACs and the TTL / hop limit a forwarder may have rewritten in this page's
 * previous life (the IPv4 header checksum follows the TTL, RFC 1624); a TCP frame gets its
 * whole template back (restore_tcp). */
static __always_inline void restore_hdr(void *data, void *data_end, int v6, int tcp)
{
	__u32 key = 0;
	struct fp_gen_hdr *h = bpf_map_lookup_elem(&gen_hdr, &key);
	__u8 *b = data;

	if (!h || !h->set || data + UDP_OFF4 > data_end)
		return;
	if (tcp && restore_tcp(data, data_end, h))
		return;
	__builtin_memcpy(b, h->macs, 12);
	if (v6) {
		b[21] = h->ttl;
	} else if (b[22] != h->ttl) {
		__u16 *ic = data + IP4_CSUM_OFF;
		__u16 *tw = data + 22;
		__u16 old = *tw;
		b[22] = h->ttl;
		*ic = csum_replace(*ic, old, *tw);
	}
}

SEC("xdp")
int xdp_gen(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 key = 0;
	__u64 *seq;
	__u16 *proto = data + 12;

	int v6, tcp;
	__u8 *l4proto;

	if (data + 14 > data_end)
		return XDP_ABORTED;
	v6 = *proto == bpf_htons(0x86dd);
	/* IPv4 protocol (offset 23) or IPv6 next header (offset 20). */
	l4proto = data + (v6 ? 20 : 23);
	if ((void *)(l4proto + 1) > data_end)
		return XDP_ABORTED;
	tcp = *l4proto == 6;
	/* The frame must hold what is written into it before it counts as sent. */
	if (data + (v6 ? UDP_OFF6 : UDP_OFF4) + (tcp ? 20 : 8 + FP_PAYLOAD_LEN) > data_end)
		return XDP_ABORTED;
	if (!pace_ok())
		return XDP_DROP;
	seq = bpf_map_lookup_elem(&gen_seq, &key);
	if (!seq)
		return XDP_ABORTED;
	restore_hdr(data, data_end, v6, tcp);
	*seq += 1;
	if (tcp && v6)
		return gen_tcp(data, data_end, *seq, UDP_OFF6, SRC_WORD6, 0);
	if (tcp)
		return gen_tcp(data, data_end, *seq, UDP_OFF4, SRC_WORD4, IP4_CSUM_OFF);
	if (*proto == bpf_htons(0x86dd))
		return gen_frame(data, data_end, *seq, UDP_OFF6, SRC_WORD6, 0);
	return gen_frame(data, data_end, *seq, UDP_OFF4, SRC_WORD4, IP4_CSUM_OFF);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
