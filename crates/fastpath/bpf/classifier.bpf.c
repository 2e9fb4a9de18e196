// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * classifier - rules -> action at the driver, for selective bypass and flood drop.
 *
 * Loaded frags-aware (SEC "xdp.frags", BPF_F_XDP_HAS_FRAGS, kernel >= 5.18) so native mode works
 * at any MTU. A multi-buffer frame is judged exactly like a single-buffer one: lengths against
 * bpf_xdp_get_buff_len() (all buffers), headers read wherever they lie (parse_slow() when one
 * lies past the first buffer), `len` rules and byte counters on the whole frame.
 *
 * Technique: tuple space search (Srinivasan, Suri, Varghese, SIGCOMM 1999), the megaflow
 * classifier of Open vSwitch (NSDI 2015). Rules constraining the same fields the same way form a
 * tuple; each tuple is ONE exact-match lookup on the packet's fields masked the tuple's way: in
 * `cls_table`, an open-addressing table in an ARRAY map the compiler lays out (table_find(): a
 * cheap hash, at most FP_CLS_TABLE_PROBES inlined reads), or for a tuple too big for it in the
 * `cls_rules` hash. Tuples are sorted by the first rule they hold, so the loop stops as soon
 * as no later tuple can beat the match in hand. Port and length ranges become exact keys through
 * per-field equivalence classes (one array lookup per field). Per packet the cost is bounded by
 * the number of tuples (<= FP_CLS_MAX_TUPLES), never by the number of rules. Before a tuple's
 * lookup, a bitmap over the first 16 bits of its masked addresses (`cls_prefilter`, one
 * inlined array read) skips tuples the packet cannot match: under a flood of fresh flows the
 * tuple lookups are the dominant cost (a hash lookup: a helper call plus a hash over the
 * key). Chosen over a bit-vector scheme (Lakshman & Stiliadis, 1998), whose per-packet AND
 * grows with rules/64 words per field, and over per-field LPM tries, which cannot express a
 * rule's conjunction alone.
 *
 * Two rule sets (0 and 1) live side by side in every map; `cls_active[0]` names the one in use.
 * A reload writes the inactive set in full, then flips the index with one map update, so no
 * packet is classified by a half-written set (rules/compile.rs, bpf/classifier.rs).
 *
 * A frame that cannot be classified with certainty (truncated at a header boundary, IPv4 IHL < 5,
 * lengths beyond the frame, more than two VLAN tags, an IPv6 extension chain longer than
 * FP_MAX_IPV6_EXT) is counted `malformed` and gets the rule set's `malformed` action (drop or
 * pass), never a rule's verdict or the default by accident. Tiny and overlapping fragments
 * (RFC 1858, RFC 3128, RFC 7112) are counted `bad_fragment` and dropped (passed where the set
 * says FP_CLS_F_PASS_BAD_FRAG: capture). The decisions
 * are written out in rules/reference.rs, which this program must agree with on every frame.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "fastpath_abi.h"
#include "fastpath_capture.h"
#include "fastpath_syncookie.h"

#define NO_RULE 0xffffffffu

struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); __type(key, __u32); __type(value, __u32); } cls_active SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 2); __type(key, __u32); __type(value, struct fp_cls_config); } cls_config SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 2 * FP_CLS_MAX_TUPLES); __type(key, __u32); __type(value, struct fp_cls_tuple); } cls_tuples SEC(".maps");
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FP_CLS_MAX_ENTRIES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct fp_cls_key);
	__type(value, __u32);
} cls_rules SEC(".maps");
/* set * FP_CLS_TABLE_SLOTS + slot -> key and rule (open addressing; table_find()) */
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 2 * FP_CLS_TABLE_SLOTS); __type(key, __u32); __type(value, struct fp_cls_slot); } cls_table SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 2 * FP_CLS_MAX_RULES); __type(key, __u32); __type(value, struct fp_cls_action); } cls_actions SEC(".maps");
/* ((set * FP_CLS_MAX_TUPLES + tuple) * 2 + field(0 src, 1 dst)) * FP_CLS_PRE_WORDS + hi16 / 64 -> bits */
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 2 * FP_CLS_MAX_TUPLES * 2 * FP_CLS_PRE_WORDS); __type(key, __u32); __type(value, __u64); } cls_prefilter SEC(".maps");
/* set * 131072 + field(0 src, 1 dst) * 65536 + port -> class */
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 4 * 65536); __type(key, __u32); __type(value, __u32); } cls_port_class SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 2 * 65536); __type(key, __u32); __type(value, __u32); } cls_len_class SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, 2 * FP_CLS_MAX_RULES); __type(key, __u32); __type(value, struct fp_pkt_stats); } cls_rule_stats SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, 2 * FP_STAT_COUNT); __type(key, __u32); __type(value, struct fp_pkt_stats); } cls_stats SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, FP_CLS_CACHE_SLOTS); __type(key, __u32); __type(value, struct fp_cache_slot); } cls_cache SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, 1); __type(key, __u32); __type(value, struct fp_cache_ctl); } cls_cache_ctl SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 2 * FP_CLS_MAX_CPU_SETS); __type(key, __u32); __type(value, struct fp_cpu_set); } cls_cpu_sets SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_LRU_HASH); __uint(max_entries, FP_CLS_RATE_BUCKETS); __type(key, struct fp_rate_key); __type(value, struct fp_rate_bucket); } cls_rate SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 2 * FP_CLS_MAX_RULES); __type(key, __u32); __type(value, struct fp_rate_total); } cls_rate_total SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); __type(key, __u32); __type(value, struct fp_sc_config); } sc_config SEC(".maps");
/* Per-CPU scratch of action = "syncookie" (the classifier's stack is nearly all used). */
struct sc_scratch {
	struct sc_tuple tu;
	struct bpf_sock_tuple bt;
};
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, 1); __type(key, __u32); __type(value, struct sc_scratch); } sc_scratch SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_XSKMAP); __uint(max_entries, FP_MAX_QUEUES); __type(key, __u32); __type(value, __u32); } xsks SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_CPUMAP); __uint(max_entries, 256); __type(key, __u32); __type(value, struct bpf_cpumap_val); } cpu_map SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_DEVMAP); __uint(max_entries, 2 * FP_CLS_MAX_PORTS); __type(key, __u32); __type(value, struct bpf_devmap_val); } tx_ports SEC(".maps");

struct pkt {
	__u8 src[16];   /* first, and the struct 8-byte aligned: read as __u64 words */
	__u8 dst[16];
	__u16 vlan;
	__u16 eth_type;
	__u16 proto16;
	__u8 frag;
	__u8 flags;
	__u8 has_ports;
	__u8 _pad;
	__u16 sport;
	__u16 dport;
	__u16 len;
} __attribute__((aligned(8)));

struct vlan_hdr {
	__be16 tci;
	__be16 encap_proto;
};

/* What parse() found wrong with a frame. */
#define PARSE_OK        0
#define PARSE_MALFORMED 1  /* cannot be classified: the rule set's `malformed` policy applies */
#define PARSE_BAD_FRAG  2  /* tiny or overlapping fragment: always dropped */

static __always_inline int is_ipv6_ext(__u8 nh)
{
	/* The kernel's ipv6_ext_hdr() list, less NEXTHDR_NONE (59), which ends the chain. */
	return nh == 0 || nh == 43 || nh == 44 || nh == 51 || nh == 60;
}

/* The largest offset parse() reads at: Ethernet and two VLAN tags (22), the IPv6 header (40),
 * FP_MAX_IPV6_EXT extension headers of at most 2,048 bytes, then 20 bytes of TCP. hdr() masks
 * offsets with 0x7fff; a larger one would alias. */
#define RD_MAX_OFF (22 + 40 + FP_MAX_IPV6_EXT * 2048 + 20)
_Static_assert(RD_MAX_OFF <= 0x7fff, "hdr(): header offsets fit the 0x7fff mask");

#define PARSE_SLOW 3 /* a header lies past the first buffer: parse again with parse_slow() */

/* A pointer to the `n` bytes (a constant) at offset `off` of the frame, which the caller has
 * checked the frame holds (against bpf_xdp_get_buff_len()). Fast (slow == 0, a constant): into
 * the first buffer, or NULL if they lie past it (the caller then answers PARSE_SLOW). Slow:
 * copied into `buf` with bpf_xdp_load_bytes() (kernel >= 5.18), which reads across the buffers
 * of a multi-buffer frame; NULL if that fails. Each instantiation of parse_any() thus sees one
 * kind of pointer (packet or stack), which keeps the verifier's paths few. */
static __always_inline void *hdr(struct xdp_md *ctx, __u32 off, __u32 n, void *buf, const int slow)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;

	off &= 0x7fff; /* every caller's offset is below RD_MAX_OFF: bounded for the verifier */
	if (slow)
		return bpf_xdp_load_bytes(ctx, off, buf, n) ? 0 : buf;
	if (data + off + n > end)
		return 0;
	return data + off;
}

/* hdr() in parse_any(): NULL means "past the first buffer" when fast, "unreadable" when slow. */
#define HDR_OR(ptr, off, n, buf, fail)                                    \
	do {                                                              \
		(ptr) = hdr(ctx, (off), (n), (buf), slow);                \
		if (!(ptr))                                               \
			return slow ? (fail) : PARSE_SLOW;                \
	} while (0)

/* Fills *p. Mirrors rules/reference.rs::parse, which documents the policy:
 *  - every length is judged against the whole frame (`flen`, from bpf_xdp_get_buff_len(): all
 *    buffers of a multi-buffer frame) before a header is read; headers are read from the first
 *    buffer (fast) or wherever they lie (slow, see hdr()): both give the same verdict;
 *  - more than two VLAN tags, or a chain of more than FP_MAX_IPV6_EXT IPv6 extension headers:
 *    PARSE_MALFORMED (the kernel could still deliver it; we cannot say where);
 *  - IPv4 with an Authentication Header (RFC 4302): the header after it is the protocol and
 *    carries the ports, as for IPv6's AH; a second AH is PARSE_MALFORMED;
 *  - an IPv4 or IPv6 first fragment without the whole TCP (20 bytes) or UDP (8 bytes) header,
 *    or an IPv6 first fragment whose extension-header chain does not fit (RFC 7112), and a
 *    later TCP fragment whose offset lands inside the minimal TCP header (offset 8 or 16 bytes,
 *    RFC 1858 and RFC 3128): PARSE_BAD_FRAG;
 *  - a later fragment carries no L4 header: no ports, no flags (iptables and OVS do the same). */
static __always_inline int parse_any(struct xdp_md *ctx, struct pkt *p, __u32 flen, const int slow)
{
	__u32 off = 14, l4, l4end, fo_bytes = 0;
	__u16 et;
	__u8 proto;
	__u8 buf[40] __attribute__((aligned(8)));
	__u8 *eh;

	p->len = flen > 0xffff ? 0xffff : flen;
	p->vlan = FP_NO_VLAN;
	if (flen < 14)
		return PARSE_MALFORMED;
	HDR_OR(eh, 0, 14, buf, PARSE_MALFORMED);
	et = *(__be16 *)&eh[12];
#pragma unroll
	for (int i = 0; i < 2; i++) {
		struct vlan_hdr *vh;
		if (et != bpf_htons(0x8100) && et != bpf_htons(0x88a8))
			break;
		if (off + sizeof(*vh) > flen)
			return PARSE_MALFORMED;
		HDR_OR(vh, off, sizeof(*vh), buf, PARSE_MALFORMED);
		if (p->vlan == FP_NO_VLAN)
			p->vlan = bpf_ntohs(vh->tci) & 0x0fff;
		et = vh->encap_proto;
		off += 4;
	}
	if (et == bpf_htons(0x8100) || et == bpf_htons(0x88a8))
		return PARSE_MALFORMED;
	p->eth_type = bpf_ntohs(et);
	if (et == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip;
		__u32 ihl, total;
		__u16 fo;
		if (off + sizeof(*ip) > flen)
			return PARSE_MALFORMED;
		HDR_OR(ip, off, sizeof(*ip), buf, PARSE_MALFORMED);
		ihl = ip->ihl * 4;
		if (ip->version != 4 || ihl < 20)
			return PARSE_MALFORMED;
		total = bpf_ntohs(ip->tot_len);
		if (total < ihl || off + total > flen)
			return PARSE_MALFORMED;
		fo = bpf_ntohs(ip->frag_off);
		p->frag = (fo & 0x1fff) ? 2 : (fo & 0x2000) ? 1 : 0;
		fo_bytes = (__u32)(fo & 0x1fff) * 8;
		__builtin_memcpy(p->src, &ip->saddr, 4);
		__builtin_memcpy(p->dst, &ip->daddr, 4);
		proto = ip->protocol;
		l4 = off + ihl;
		l4end = off + total;
		if (proto == IPPROTO_AH && p->frag != 2) {
			/* RFC 4302: next header, payload length in 4-byte words minus 2. */
			__u8 *ah;
			__u32 hlen;
			int cut = p->frag == 1 ? PARSE_BAD_FRAG : PARSE_MALFORMED;
			if (l4 + 8 > l4end)
				return cut;
			HDR_OR(ah, l4, 2, buf, cut);
			hlen = ((__u32)ah[1] + 2) * 4;
			if (l4 + hlen > l4end)
				return cut;
			if (ah[0] == IPPROTO_AH)
				return PARSE_MALFORMED;
			proto = ah[0];
			l4 += hlen;
		}
	} else if (et == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6;
		__u32 o;
		__u8 nh;
		if (off + sizeof(*ip6) > flen)
			return PARSE_MALFORMED;
		HDR_OR(ip6, off, sizeof(*ip6), buf, PARSE_MALFORMED);
		if (ip6->version != 6)
			return PARSE_MALFORMED;
		l4end = off + 40 + bpf_ntohs(ip6->payload_len);
		if (l4end > flen)
			return PARSE_MALFORMED;
		__builtin_memcpy(p->src, &ip6->saddr, 16);
		__builtin_memcpy(p->dst, &ip6->daddr, 16);
		nh = ip6->nexthdr;
		o = off + 40;
		for (int i = 0; i < FP_MAX_IPV6_EXT; i++) {
			__u8 *h;
			__u32 hlen;
			int cut = p->frag == 1 ? PARSE_BAD_FRAG : PARSE_MALFORMED;
			if (!is_ipv6_ext(nh) || p->frag == 2)
				break;
			/* o < RD_MAX_OFF: keep the verifier's view of it bounded. */
			o &= 0x7fff;
			/* Every extension header is at least 8 bytes; it must also fit. */
			if (o + 8 > flen)
				return cut;
			HDR_OR(h, o, 4, buf, cut);
			if (nh == 44)
				hlen = 8;
			else if (nh == 51)
				hlen = ((__u32)h[1] + 2) * 4;
			else
				hlen = ((__u32)h[1] + 1) * 8;
			if (o + hlen > l4end)
				return cut;
			if (nh == 44) {
				__u16 fo = ((__u16)h[2] << 8) | h[3];
				__u8 st = (fo & 0xfff8) ? 2 : (fo & 1) ? 1 : 0;
				/* A nested fragment header never makes a fragment look whole again. */
				if (st > p->frag)
					p->frag = st;
				fo_bytes = fo & 0xfff8;
			}
			nh = h[0];
			o += hlen;
		}
		/* A later fragment's payload is data, not headers: its protocol is the fragment
		 * header's next header. Otherwise the chain must have ended within the bound. */
		if (p->frag != 2 && is_ipv6_ext(nh))
			return p->frag == 1 ? PARSE_BAD_FRAG : PARSE_MALFORMED;
		proto = nh;
		l4 = o;
	} else {
		return PARSE_OK;
	}
	p->proto16 = 0x100 | proto;
	if (p->frag == 2) {
		/* RFC 1858 / 3128: a later fragment that lands inside the minimal TCP header would
		 * overwrite ports or flags of the first one. IPv6 reassembly ignores a later
		 * fragment's next header, so there any protocol counts (no real IPv6 fragment starts
		 * that early: the first one carries at least 1232 bytes at the minimum MTU). */
		if (fo_bytes < 20 && (proto == IPPROTO_TCP || et == bpf_htons(ETH_P_IPV6)))
			return PARSE_BAD_FRAG;
		return PARSE_OK;
	}
	if (proto == IPPROTO_TCP || proto == IPPROTO_UDP) {
		int short_hdr = p->frag == 1 ? PARSE_BAD_FRAG : PARSE_MALFORMED;
		__u8 *l;
		if (proto == IPPROTO_TCP) {
			if (l4 + 20 > l4end)
				return short_hdr;
			HDR_OR(l, l4, 20, buf, short_hdr);
			p->flags = l[13];
		} else {
			if (l4 + 8 > l4end)
				return short_hdr;
			HDR_OR(l, l4, 8, buf, short_hdr);
		}
		p->sport = ((__u16)l[0] << 8) | l[1];
		p->dport = ((__u16)l[2] << 8) | l[3];
		p->has_ports = 1;
	}
	return PARSE_OK;
}

/* The parser over a multi-buffer frame whose headers reach past the first buffer: every header
 * through bpf_xdp_load_bytes(). A global function, verified once on its own. */
__attribute__((noinline)) int parse_slow(struct xdp_md *ctx, struct pkt *p, __u32 flen)
{
	if (!p)
		return PARSE_MALFORMED;
	return parse_any(ctx, p, flen, 1);
}

/* Fills *p: from the first buffer where every header lies there (the usual case, no copies),
 * else again from scratch with parse_slow(). */
static __always_inline int parse(struct xdp_md *ctx, struct pkt *p, __u32 flen)
{
	int r = parse_any(ctx, p, flen, 0);

	if (r != PARSE_SLOW)
		return r;
	__builtin_memset(p, 0, sizeof(*p));
	return parse_slow(ctx, p, flen);
}

static __always_inline void count(void *map, __u32 idx, __u64 bytes)
{
	struct fp_pkt_stats *st = bpf_map_lookup_elem(map, &idx);
	if (st) {
		st->packets++;
		st->bytes += bytes;
	}
}

/* 0 if the tuple's prefilter for `field` (0 src, 1 dst) says no entry has the packet's masked
 * first 16 bits of `a`; 1 if one may (or the word is missing: never skip a lookup on doubt). */
static __always_inline int may_match(__u32 set, __u32 tuple, __u32 field, const __u8 *a, const __u8 *mask)
{
	__u32 hi = (((__u32)a[0] << 8) | a[1]) & (((__u32)mask[0] << 8) | mask[1]);
	__u32 wi = ((set * FP_CLS_MAX_TUPLES + tuple) * 2 + field) * FP_CLS_PRE_WORDS + (hi >> 6);
	__u64 *w = bpf_map_lookup_elem(&cls_prefilter, &wi);

	return !w || (*w >> (hi & 63)) & 1;
}

static __always_inline __u32 class_of(void *map, __u32 idx)
{
	__u32 *c = bpf_map_lookup_elem(map, &idx);
	return c ? *c : 0;
}

/* Token-bucket arithmetic in 1/1e9 packets: refill `rate` per second for the time since
 * last_ns (at most one second), capped at one second's worth (the burst). `now` was read on
 * this CPU before another CPU may have stored a later last_ns: time that runs backwards
 * refills nothing (a wrapped difference would otherwise refill the whole bucket). */
static __always_inline __u64 refill(__u64 tokens, __u64 last_ns, __u64 now, __u64 rate)
{
	__u64 cap = rate * 1000000000ull, el;

	if (last_ns == 0)
		el = 1000000000ull;
	else if ((__s64)(now - last_ns) <= 0)
		el = 0;
	else
		el = now - last_ns;
	if (el > 1000000000ull)
		el = 1000000000ull;
	tokens += el * rate;
	return tokens > cap ? cap : tokens;
}

/* last_ns never moves backwards. */
static __always_inline __u64 later(__u64 last_ns, __u64 now)
{
	return (__s64)(now - last_ns) > 0 ? now : last_ns;
}

/* The rule's aggregate bucket (all sources, all CPUs), under its spin lock. */
static __always_inline int total_allows(__u32 ai, __u64 rate, __u64 now)
{
	struct fp_rate_total *t = bpf_map_lookup_elem(&cls_rate_total, &ai);
	__u64 tokens;
	int ok;

	if (!t)
		return 0; /* fail closed */
	bpf_spin_lock(&t->lock);
	tokens = refill(t->tokens, t->last_ns, now, rate);
	t->last_ns = later(t->last_ns, now);
	ok = tokens >= 1000000000ull;
	t->tokens = ok ? tokens - 1000000000ull : tokens;
	bpf_spin_unlock(&t->lock);
	return ok;
}

/* Rate limits of a rule: a token bucket per (rule, source address) of rate_pps (LRU, burst one
 * second), then the rule's aggregate bucket of rate_total_pps. A packet must pass both. A source
 * without a bucket gets one only if the aggregate admits the packet, so a flood from spoofed
 * addresses neither passes more than rate_total_pps nor churns the LRU. Per-source buckets are
 * updated without a lock (approximate under concurrent CPUs); the aggregate one is exact. */
static __always_inline int rate_allows(__u32 set, __u32 rule, __u32 ai, struct pkt *p, struct fp_cls_action *act)
{
	struct fp_rate_key k = {};
	struct fp_rate_bucket *b = 0, nb;
	__u64 now = bpf_ktime_get_ns(), tokens = 0;

	if (act->rate_pps) {
		k.set_rule = (set << 31) | rule;
		__builtin_memcpy(k.src, p->src, 16);
		b = bpf_map_lookup_elem(&cls_rate, &k);
		if (b) {
			tokens = refill(b->tokens, b->last_ns, now, act->rate_pps);
			b->last_ns = later(b->last_ns, now);
			if (tokens < 1000000000ull) {
				b->tokens = tokens;
				return 0;
			}
			b->tokens = tokens - 1000000000ull;
		}
	}
	if (act->rate_total_pps && !total_allows(ai, act->rate_total_pps, now))
		return 0;
	if (act->rate_pps && !b) {
		nb.tokens = act->rate_pps * 1000000000ull - 1000000000ull;
		nb.last_ns = now;
		bpf_map_update_elem(&cls_rate, &k, &nb, BPF_ANY);
	}
	return 1;
}

/* The rule index of `key` (built with `set` 0) in rule set `set`'s open-addressing table, NO_RULE
 * if absent (struct fp_cls_slot): a multiplicative hash over the key's seven words, then at most
 * FP_CLS_TABLE_PROBES inlined array reads, each compared inline; the compiler placed every key
 * within that many slots of its home, so stopping there (or at an empty slot) misses none, nor
 * does stopping at probe j on a slot whose key lies fewer than j slots past its home (`used` is
 * that distance + 1; Robin Hood placement: the key looked for would have taken the slot). The
 * slot index is masked into the set's own half: a probe never reads the other set. Sets
 * key->set. */
static __always_inline __u32 table_find(struct fp_cls_key *key, __u32 set)
{
	__u64 *w = (__u64 *)key;
	__u64 h = w[0] * FP_CLS_TABLE_MUL + w[1] * (FP_CLS_TABLE_MUL * 3) + w[2] * (FP_CLS_TABLE_MUL * 5) +
		  w[3] * (FP_CLS_TABLE_MUL * 7) + w[4] * (FP_CLS_TABLE_MUL * 9) + w[5] * (FP_CLS_TABLE_MUL * 11) +
		  w[6] * (FP_CLS_TABLE_MUL * 13);
	__u32 home = (__u32)(h >> (64 - FP_CLS_TABLE_BITS));

	key->set = set;
	for (__u32 j = 0; j < FP_CLS_TABLE_PROBES; j++) {
		__u32 si = set * FP_CLS_TABLE_SLOTS + ((home + j) & (FP_CLS_TABLE_SLOTS - 1));
		struct fp_cls_slot *s = bpf_map_lookup_elem(&cls_table, &si);
		__u64 *sw;

		/* Empty, or (Robin Hood) a key nearer its home than j: `key` would have taken
		 * this slot, so it is absent. */
		if (!s || s->used <= j)
			break;
		sw = (__u64 *)&s->k;
		if (sw[0] == w[0] && sw[1] == w[1] && sw[2] == w[2] && sw[3] == w[3] && sw[4] == w[4] &&
		    sw[5] == w[5] && sw[6] == w[6])
			return s->rule;
	}
	return NO_RULE;
}

/* The tuple search: the lowest rule index whose tuple key the packet's fields hit, NO_RULE if
 * none. A global (non-inlined) function, so the verifier checks it once for any packet rather
 * than once per path through parse(); `p` and the classes come from the caller. `ports_c` is
 * sport class << 32 | dport class. */
__attribute__((noinline)) __u32 tuple_search(const struct pkt *p, __u32 set, __u32 n_tuples, __u64 ports_c, __u32 len_c)
{
	__u32 best = NO_RULE;

	if (!p)
		return NO_RULE;
	for (__u32 i = 0; i < FP_CLS_MAX_TUPLES; i++) {
		struct fp_cls_key key __attribute__((aligned(8))) = {};
		struct fp_cls_tuple *t;
		__u32 ti = set * FP_CLS_MAX_TUPLES + i, f, *ri, r;

		if (i >= n_tuples)
			break;
		t = bpf_map_lookup_elem(&cls_tuples, &ti);
		if (!t)
			break;
		if (best != NO_RULE && best < t->best_rule)
			break;
		if ((t->prefilter & FP_PRE_SRC) && !may_match(set, i, 0, p->src, t->src_mask))
			continue;
		if ((t->prefilter & FP_PRE_DST) && !may_match(set, i, 1, p->dst, t->dst_mask))
			continue;
		f = t->fields;
		key.tuple = i;
		if (f & FP_F_PROTO)
			key.proto16 = p->proto16;
		if (f & FP_F_FRAG)
			key.frag = p->frag;
		if (f & FP_F_FLAGS)
			key.flags = p->flags & t->flags_mask;
		if (f & FP_F_VLAN)
			key.vlan = p->vlan;
		if (f & FP_F_ETH_TYPE)
			key.eth_type = p->eth_type;
		if (f & FP_F_SPORT)
			key.sport_class = ports_c >> 32;
		if (f & FP_F_DPORT)
			key.dport_class = (__u32)ports_c;
		if (f & FP_F_LEN)
			key.len_class = len_c;
		if (f & FP_F_SRC) {
			__u64 *d = (__u64 *)key.src, *a = (__u64 *)p->src, *m = (__u64 *)t->src_mask;
			d[0] = a[0] & m[0];
			d[1] = a[1] & m[1];
		}
		if (f & FP_F_DST) {
			__u64 *d = (__u64 *)key.dst, *a = (__u64 *)p->dst, *m = (__u64 *)t->dst_mask;
			d[0] = a[0] & m[0];
			d[1] = a[1] & m[1];
		}
		if (t->in_table) {
			r = table_find(&key, set);
		} else {
			key.set = set;
			ri = bpf_map_lookup_elem(&cls_rules, &key);
			r = ri ? *ri : NO_RULE;
		}
		if (r < best)
			best = r;
	}
	return best;
}

/* ---- action = "syncookie" (bpf/include/fastpath_syncookie.h has the cookie) ---- */

#define TH_FIN 0x01
#define TH_SYN 0x02
#define TH_RST 0x04
#define TH_ACK 0x10

/* Where a frame's headers lie, all in the first buffer. */
struct sc_loc {
	__u32 l3;
	__u32 l4;
	__u32 optlen;  /* TCP options, 0..40 */
	__u32 v6;
};

/* Finds the IP and TCP headers of a frame (up to two VLAN tags; IPv4 with options; IPv6
 * without extension headers), checking doff against the IP length. -1 if any of that fails:
 * a fragment, IPv6 extension headers, IPv4 AH, doff < 5 or past the IP payload, a header
 * beyond the first buffer. Only what is answered (SYNs) or cookie-checked (ACKs without a
 * connection) is located; the socket lookup uses the parser's tuple (sc_sock_tuple). */
static __always_inline int sc_locate(struct xdp_md *ctx, struct sc_loc *L)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u32 off = 14, l4end, doff;
	__u16 et;
	__u8 *th;

	if (data + 14 > end)
		return -1;
	et = *(__be16 *)(data + 12);
#pragma unroll
	for (int i = 0; i < 2; i++) {
		if (et != bpf_htons(0x8100) && et != bpf_htons(0x88a8))
			break;
		if (data + off + 4 > end)
			return -1;
		et = *(__be16 *)(data + off + 2);
		off += 4;
	}
	if (et == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = data + off;
		if ((void *)(ip + 1) > end)
			return -1;
		if (ip->ihl < 5 || (ip->frag_off & bpf_htons(0x3fff)) || ip->protocol != IPPROTO_TCP)
			return -1;
		L->l4 = off + ip->ihl * 4;
		l4end = off + bpf_ntohs(ip->tot_len);
		L->v6 = 0;
	} else if (et == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = data + off;
		if ((void *)(ip6 + 1) > end)
			return -1;
		if (ip6->nexthdr != IPPROTO_TCP)
			return -1;
		L->l4 = off + 40;
		l4end = off + 40 + bpf_ntohs(ip6->payload_len);
		L->v6 = 1;
	} else {
		return -1;
	}
	L->l3 = off;
	th = data + (L->l4 & 0x7f);
	if ((void *)(th + 20) > end)
		return -1;
	doff = (th[12] >> 4) * 4;
	if (doff < 20 || L->l4 + doff > l4end || data + L->l4 + doff > end)
		return -1;
	L->optlen = doff - 20;
	return 0;
}

static __always_inline __u16 sc_fold(__u64 cs)
{
	cs = (cs & 0xffffffff) + (cs >> 32);
	cs = (cs & 0xffff) + (cs >> 16);
	cs = (cs & 0xffff) + (cs >> 16);
	return ~(__u16)cs;
}

/* A 64-bit sum of 32-bit words folded to 32 bits (a bpf_csum_diff seed). */
static __always_inline __u32 sc_fold32(__u64 cs)
{
	cs = (cs & 0xffffffff) + (cs >> 32);
	return (__u32)((cs & 0xffffffff) + (cs >> 32));
}

/* The TCP header and options of a SYN-ACK (40 bytes) answering `tu`. */
static __always_inline void sc_write_tcp(__u8 *t, const struct sc_tuple *tu, __u32 cookie, const struct sc_opts *o, __u16 mss, __u8 wscale, __u64 now_ns)
{
	__u32 tsval = ((__u32)(now_ns / 1000000) & ~FP_SC_TS_MASK) | o->ws | (o->sack ? FP_SC_TS_SACK : 0);
	__u32 ack = tu->isn + 1;

	*(__u16 *)&t[0] = tu->dport_be;
	*(__u16 *)&t[2] = tu->sport_be;
	*(__be32 *)&t[4] = bpf_htonl(cookie);
	*(__be32 *)&t[8] = bpf_htonl(ack);
	t[12] = 10 << 4;
	t[13] = TH_SYN | TH_ACK;
	*(__be16 *)&t[14] = bpf_htons(65535);
	*(__u16 *)&t[16] = 0;
	*(__u16 *)&t[18] = 0;
	/* MSS */
	t[20] = 2; t[21] = 4; t[22] = mss >> 8; t[23] = mss & 0xff;
	if (o->ts) {
		/* SACK-permitted (or two NOPs), timestamps */
		t[24] = o->sack ? 4 : 1; t[25] = o->sack ? 2 : 1;
		t[26] = 8; t[27] = 10;
		*(__be32 *)&t[28] = bpf_htonl(tsval);
		*(__be32 *)&t[32] = bpf_htonl(o->tsval);
		/* window scale, or four NOPs */
		t[36] = 1;
		t[37] = o->ws != FP_SC_TS_WS_NONE ? 3 : 1;
		t[38] = o->ws != FP_SC_TS_WS_NONE ? 3 : 1;
		t[39] = o->ws != FP_SC_TS_WS_NONE ? wscale : 1;
	} else {
		/* Neither SACK nor window scale without timestamps to carry them back: NOPs. */
		__builtin_memset(&t[24], 1, 16);
	}
}

/* 1 if the kernel would never answer this SYN, so neither may we (a SYN-ACK would be a
 * reflection or an L2 amplification): destination MAC multicast/broadcast or, once attached,
 * not the interface's; source MAC multicast; an IPv4 source or destination in 0/8, 127/8 or
 * 224/3 (multicast, reserved, broadcast); an IPv4 destination that is a subnet broadcast
 * address of the namespace (c->bcast4, read at attach and reload: the kernel's
 * tcp_v4_conn_request drops a SYN routed as RTCF_BROADCAST); an IPv6 one that is ::, ::1 or
 * ff00::/8; source = destination address. */
static __always_inline int sc_bogus(struct xdp_md *ctx, const struct sc_loc *L, const struct fp_sc_config *c)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u8 *eth = data, *p = data + (L->l3 & 0x1f);
	__u32 zmac;

	if (data + 14 > end)
		return 1;
	if ((eth[0] & 1) || (eth[6] & 1))
		return 1;
	zmac = c->mac[0] | c->mac[1] | c->mac[2] | c->mac[3] | c->mac[4] | c->mac[5];
	if (zmac && (eth[0] != c->mac[0] || eth[1] != c->mac[1] || eth[2] != c->mac[2] ||
		     eth[3] != c->mac[3] || eth[4] != c->mac[4] || eth[5] != c->mac[5]))
		return 1;
	if (L->v6) {
		struct ipv6hdr *ip6 = (void *)p;
		__u64 s0, s1, d0, d1;
		if ((void *)(ip6 + 1) > end)
			return 1;
		__builtin_memcpy(&s0, &ip6->saddr, 8);
		__builtin_memcpy(&s1, (__u8 *)&ip6->saddr + 8, 8);
		__builtin_memcpy(&d0, &ip6->daddr, 8);
		__builtin_memcpy(&d1, (__u8 *)&ip6->daddr + 8, 8);
		if (((__u8 *)&ip6->saddr)[0] == 0xff || ((__u8 *)&ip6->daddr)[0] == 0xff)
			return 1;
		/* :: and ::1 (big-endian 1 in the last byte) */
		if (!s0 && (!s1 || s1 == bpf_cpu_to_be64(1)))
			return 1;
		if (!d0 && (!d1 || d1 == bpf_cpu_to_be64(1)))
			return 1;
		return s0 == d0 && s1 == d1;
	} else {
		struct iphdr *ip = (void *)p;
		__u8 s, d;
		if ((void *)(ip + 1) > end)
			return 1;
		s = ((__u8 *)&ip->saddr)[0];
		d = ((__u8 *)&ip->daddr)[0];
		if (s == 0 || s == 127 || s >= 224 || d == 0 || d == 127 || d >= 224)
			return 1;
#pragma unroll
		for (int i = 0; i < FP_SC_MAX_BCAST4; i++) {
			if (i >= c->n_bcast4)
				break;
			if (ip->daddr == c->bcast4[i])
				return 1;
		}
		return ip->saddr == ip->daddr;
	}
}

/* Answers the SYN located by L with a cookie SYN-ACK in place: Ethernet addresses swapped (VLAN
 * tags kept), a fresh IPv4 (no options, DF) or IPv6 header, a 40-byte TCP header; the SYN's
 * options and payload are dropped (bpf_xdp_adjust_tail). 0 on success (XDP_TX), -1 if the
 * frame cannot be answered (multi-buffer, options unreadable). */
static __always_inline int sc_synack(struct xdp_md *ctx, const struct sc_loc *L, const struct fp_sc_config *c, struct sc_scratch *sx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct sc_parse ps = {};
	struct sc_tuple *tup = &sx->tu;
	__u32 optlen = L->optlen & 63, l3 = L->l3 & 0x1f, newlen, oldlen, mss_idx, cookie;
	__u8 *th, *p;
	__u64 cs, now_ns;

	if (optlen > 40)
		return -1;
	oldlen = end - data;
	if (bpf_xdp_get_buff_len(ctx) != oldlen)
		return -1;
	p = data + l3;
	th = data + (L->l4 & 0x7f);
	if ((void *)(th + 20) > end)
		return -1;
	if (sc_copy_opts(ps.b, th + 20, end, optlen))
		return -1;
	if (L->v6) {
		struct ipv6hdr *ip6 = (void *)p;
		if ((void *)(ip6 + 1) > end)
			return -1;
		__builtin_memcpy(tup->src, &ip6->saddr, 16);
		__builtin_memcpy(tup->dst, &ip6->daddr, 16);
	} else {
		struct iphdr *ip = (void *)p;
		if ((void *)(ip + 1) > end)
			return -1;
		__builtin_memcpy(tup->src, &ip->saddr, 4);
		__builtin_memcpy(tup->dst, &ip->daddr, 4);
	}
	tup->sport_be = *(__u16 *)&th[0];
	tup->dport_be = *(__u16 *)&th[2];
	tup->isn = bpf_ntohl(*(__be32 *)&th[4]);
	ps.len = optlen;
	if (sc_parse_opts(&ps))
		return -1;
	/* Offer nothing the server's sysctls turned off (the kfunc would refuse it at tc). */
	if (c->flags & FP_SC_F_NO_TS)
		ps.o.ts = 0;
	if (c->flags & FP_SC_F_NO_SACK)
		ps.o.sack = 0;
	if (c->flags & FP_SC_F_NO_WS)
		ps.o.ws = FP_SC_TS_WS_NONE;
	mss_idx = sc_mss_index(ps.o.mss ? ps.o.mss : (L->v6 ? 1220 : 536), L->v6);
	now_ns = bpf_ktime_get_ns();
	cookie = sc_cookie(c, tup, L->v6, mss_idx, now_ns);

	newlen = l3 + (L->v6 ? 40 : 20) + 40;
	if (bpf_xdp_adjust_tail(ctx, (int)newlen - (int)oldlen))
		return -1;
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	p = data + l3;
	if ((void *)(p + 80) > end && L->v6)
		return -1;
	if ((void *)(p + 60) > end)
		return -1;
	if (data + 12 > end)
		return -1;
	/* adjust_tail moved only the end: swap the Ethernet addresses in place */
#pragma unroll
	for (int i = 0; i < 6; i++) {
		__u8 x = ((__u8 *)data)[i];
		((__u8 *)data)[i] = ((__u8 *)data)[6 + i];
		((__u8 *)data)[6 + i] = x;
	}
	if (L->v6) {
		const __u32 *a = (const __u32 *)tup->src, *b = (const __u32 *)tup->dst;
		__u8 *t;
		if ((void *)(p + 80) > end)
			return -1;
		t = p + 40;
		*(__be32 *)p = bpf_htonl(0x60000000);
		*(__be16 *)(p + 4) = bpf_htons(40);
		p[6] = IPPROTO_TCP;
		p[7] = 64;
		__builtin_memcpy(p + 8, tup->dst, 16);
		__builtin_memcpy(p + 24, tup->src, 16);
		sc_write_tcp(t, tup, cookie, &ps.o, c->mss_v6, c->wscale, now_ns);
		/* pseudo header (RFC 8200 8.1): addresses, length 40, next header TCP */
		cs = (__u64)a[0] + a[1] + a[2] + a[3] + b[0] + b[1] + b[2] + b[3] + bpf_htonl(40) + bpf_htonl(IPPROTO_TCP);
		cs = bpf_csum_diff(0, 0, (__be32 *)t, 40, sc_fold32(cs));
		*(__u16 *)&t[16] = sc_fold((__u32)cs);
	} else {
		struct iphdr *ip = (void *)p;
		__u8 *t = p + 20;
		ip->version = 4;
		ip->ihl = 5;
		ip->tos = 0;
		ip->tot_len = bpf_htons(60);
		ip->id = 0;
		ip->frag_off = bpf_htons(0x4000);
		ip->ttl = 64;
		ip->protocol = IPPROTO_TCP;
		ip->check = 0;
		__builtin_memcpy(&ip->saddr, tup->dst, 4);
		__builtin_memcpy(&ip->daddr, tup->src, 4);
		cs = bpf_csum_diff(0, 0, (__be32 *)ip, 20, 0);
		ip->check = sc_fold((__u32)cs);
		sc_write_tcp(t, tup, cookie, &ps.o, c->mss_v4, c->wscale, now_ns);
		/* pseudo header (RFC 9293 3.1): addresses, protocol, length 40 */
		cs = (__u64)*(__u32 *)tup->src + *(__u32 *)tup->dst + bpf_htonl(IPPROTO_TCP) + bpf_htonl(40);
		cs = bpf_csum_diff(0, 0, (__be32 *)t, 40, sc_fold32(cs));
		*(__u16 *)&t[16] = sc_fold((__u32)cs);
	}
	return 0;
}

/* Fills `btp` with the addresses and ports the parser found (the socket lookup's tuple, from
 * headers sc_locate may not read: IPv6 extension headers, IPv4 AH, an IPv4 first fragment, a
 * header past the first buffer); returns its size for bpf_skc_lookup_tcp, 0 for a frame
 * without ports. */
static __always_inline __u32 sc_sock_tuple(const struct pkt *p, struct bpf_sock_tuple *btp)
{
	if (!p->has_ports || p->proto16 != (0x100 | IPPROTO_TCP))
		return 0;
	if (p->eth_type == ETH_P_IPV6) {
		__builtin_memcpy(btp->ipv6.saddr, p->src, 16);
		__builtin_memcpy(btp->ipv6.daddr, p->dst, 16);
		btp->ipv6.sport = bpf_htons(p->sport);
		btp->ipv6.dport = bpf_htons(p->dport);
		return sizeof(btp->ipv6);
	}
	if (p->eth_type != ETH_P_IP)
		return 0;
	__builtin_memcpy(&btp->ipv4.saddr, p->src, 4);
	__builtin_memcpy(&btp->ipv4.daddr, p->dst, 4);
	btp->ipv4.sport = bpf_htons(p->sport);
	btp->ipv4.dport = bpf_htons(p->dport);
	return sizeof(btp->ipv4);
}

/* 1 if the kernel holds a socket for the segment's tuple (parsed into `p`) that is not a
 * listener: established, closing, TIME_WAIT (whose reuse the kernel decides), SYN_SENT, a
 * request socket. Every segment of such a connection goes to the kernel. */
static __always_inline int sc_has_conn(struct xdp_md *ctx, const struct pkt *p, struct sc_scratch *sx)
{
	struct bpf_sock_tuple *btp = &sx->bt;
	struct bpf_sock *sk;
	__u32 sz, state;

	sz = sc_sock_tuple(p, btp);
	if (!sz)
		return 0;
	sk = bpf_skc_lookup_tcp(ctx, btp, sz, BPF_F_CURRENT_NETNS, 0);
	if (!sk)
		return 0;
	state = sk->state;
	bpf_sk_release(sk);
	return state != BPF_TCP_LISTEN;
}

/* 1 if the TCP checksum of the segment at `l4` (IP header at `l3`, IPv6 without extension
 * headers, as sc_locate found it) is right: the one's complement sum over the pseudo header
 * (RFC 9293 3.1, RFC 8200 8.1), the TCP header and the payload. 0 if it is wrong or the
 * segment does not lie wholly in the first buffer or exceeds SC_CSUM_MAX_BYTES (such a SYN is
 * not answered anyway: sc_synack needs one buffer). The kernel drops a SYN with a bad
 * checksum (tcp_v4_rcv / tcp_v6_rcv, tcp_checksum_complete), so it is not answered either.
 * With `partial_ok` (FP_SC_F_PARTIAL_CSUM: the loader found a veth) also 1 when the checksum
 * field holds just the pseudo header's sum: what a sender's CHECKSUM_PARTIAL leaves for the
 * device to complete (tcp_v4_send_check), which XDP sees on a veth whose peer is the local
 * stack, and which the kernel there takes without checking (XDP cannot tell the cases apart).
 * On any other driver the frame came from a wire and such a SYN is refused, as the kernel
 * would. A global function, verified once. */
#define SC_CSUM_CHUNK 64
#define SC_CSUM_MAX_BYTES (144 * SC_CSUM_CHUNK) /* 9216: a 9000-byte MTU's segment */
__attribute__((noinline)) int sc_csum_ok(struct xdp_md *ctx, __u32 l3, __u32 l4, __u32 v6, __u32 partial_ok)
{
	void *data, *end;
	__u64 cs, pseudo;
	__u32 len, off = 0, w = 0;
	__u16 check;
	__u8 *q;

	if (!ctx)
		return 0;
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	l3 &= 0x1f;
	l4 &= 0x7f;
	if (v6) {
		struct ipv6hdr *ip6 = data + l3;
		const __u32 *a;
		if ((void *)(ip6 + 1) > end)
			return 0;
		a = (const __u32 *)&ip6->saddr;
		len = bpf_ntohs(ip6->payload_len);
		cs = (__u64)a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7] + bpf_htonl(len) + bpf_htonl(IPPROTO_TCP);
	} else {
		struct iphdr *ip = data + l3;
		__u32 hl;
		if ((void *)(ip + 1) > end)
			return 0;
		hl = (__u32)ip->ihl * 4;
		len = bpf_ntohs(ip->tot_len);
		if (len < hl || l3 + hl != l4)
			return 0;
		len -= hl;
		cs = (__u64)ip->saddr + ip->daddr + bpf_htonl(IPPROTO_TCP) + bpf_htonl(len);
	}
	if (len > SC_CSUM_MAX_BYTES || data + l4 + len > end || len < 20)
		return 0;
	q = data + l4;
	if ((void *)(q + 20) > end)
		return 0;
	check = *(__u16 *)&q[16];
	pseudo = cs;
	for (int i = 0; i < SC_CSUM_MAX_BYTES / SC_CSUM_CHUNK; i++) {
		if (off + SC_CSUM_CHUNK > len)
			break;
		q = data + l4 + (off & 0x3fff);
		if ((void *)(q + SC_CSUM_CHUNK) > end)
			return 0;
		cs = (__u32)bpf_csum_diff(0, 0, (__be32 *)q, SC_CSUM_CHUNK, sc_fold32(cs));
		off += SC_CSUM_CHUNK;
	}
	for (int i = 0; i < SC_CSUM_CHUNK / 4; i++) {
		if (off + 4 > len)
			break;
		q = data + l4 + (off & 0x3fff);
		if ((void *)(q + 4) > end)
			return 0;
		cs += *(__u32 *)q;
		off += 4;
	}
	/* The last 1..3 bytes, padded with zeros (RFC 9293: an odd byte pads to a 16-bit word). */
	for (int k = 0; k < 3; k++) {
		if (off + k >= len)
			break;
		q = data + l4 + ((off + k) & 0x3fff);
		if ((void *)(q + 1) > end)
			return 0;
		((__u8 *)&w)[k] = *q;
	}
	cs += w;
	if (sc_fold(cs) == 0)
		return 1;
	return partial_ok && check == (__u16)~sc_fold(pseudo);
}

/* What a non-SYN segment without a connection (sc_has_conn said no) gets: PASS for an ACK
 * whose cookie checks out (marked for the tc program), DROP otherwise. Counts its FP_STAT_SC_*
 * counter. */
static __always_inline int sc_segment(struct xdp_md *ctx, const struct sc_loc *L, const struct pkt *p, const struct fp_sc_config *c, __u32 sbase, __u64 bytes, struct sc_scratch *sx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct sc_tuple *tup = &sx->tu;
	__u8 *th = data + (L->l4 & 0x7f), flags;
	__u32 seq, ack;

	if ((void *)(th + 20) > end) {
		/* Unreachable after sc_locate; counted like every other drop of the action. */
		count(&cls_stats, sbase + FP_STAT_SC_INVALID, bytes);
		count(&cls_stats, sbase + FP_ACT_DROP, bytes);
		return XDP_DROP;
	}
	/* The parser's addresses: IPv4 in bytes 0..4, the rest zero. */
	__builtin_memcpy(tup->src, p->src, 16);
	__builtin_memcpy(tup->dst, p->dst, 16);
	flags = th[13];
	seq = bpf_ntohl(*(__be32 *)&th[4]);
	ack = bpf_ntohl(*(__be32 *)&th[8]);
	tup->sport_be = *(__u16 *)&th[0];
	tup->dport_be = *(__u16 *)&th[2];
	tup->isn = seq - 1;

	if (!(flags & TH_ACK) || (flags & (TH_SYN | TH_RST))) {
		count(&cls_stats, sbase + FP_STAT_SC_INVALID, bytes);
		count(&cls_stats, sbase + FP_ACT_DROP, bytes);
		return XDP_DROP;
	}
	if (!sc_check(c, tup, L->v6, ack - 1)) {
		count(&cls_stats, sbase + FP_STAT_SC_ACK_BAD, bytes);
		count(&cls_stats, sbase + FP_ACT_DROP, bytes);
		return XDP_DROP;
	}
	count(&cls_stats, sbase + FP_STAT_SC_ACK_OK, bytes);
	count(&cls_stats, sbase + FP_ACT_PASS, bytes);
	/* Mark it for the tc program, which creates the request socket. A driver without XDP
	 * metadata refuses the room: then the tc program checks every ACK that finds a listener
	 * from now on (FP_SC_F_NO_META, set here once; a lost race sets the same bit). */
	if (bpf_xdp_adjust_meta(ctx, -4) == 0) {
		__u32 *meta = (void *)(long)ctx->data_meta;
		if ((void *)(meta + 1) <= (void *)(long)ctx->data) {
			*meta = FP_SC_META_MAGIC;
			return XDP_PASS;
		}
	}
	if (!(c->flags & FP_SC_F_NO_META))
		((struct fp_sc_config *)c)->flags = c->flags | FP_SC_F_NO_META;
	return XDP_PASS;
}

/* action = "syncookie" on a matched frame of rule set `set` (`p`: what the parser found): the
 * XDP action, counted as tx, pass or drop and in its FP_STAT_SC_* counter. A global function,
 * verified once.
 *
 * Every segment whose tuple (the parser's addresses and ports, whatever headers lie between)
 * has a socket that is not a listener passes to the kernel (syncookie_conn): an IPv6
 * connection with extension headers, IPv4 with AH, a first fragment. Only what sc_locate
 * reads (no extension header, AH or fragment) is answered (a SYN) or cookie-checked (an ACK);
 * anything else without a connection is dropped (syncookie_invalid), so neither headers nor
 * fragments get an ACK past the cookie check. A later IPv4 fragment has no ports, never
 * matches the rule (its dst_port) and never gets here: the kernel reassembles only with the
 * first fragment, which is judged here. */
__attribute__((noinline)) int sc_action(struct xdp_md *ctx, const struct pkt *p, __u32 set, __u64 bytes)
{
	void *data, *end;
	__u32 zero = 0, sbase = (set & 1) * FP_STAT_COUNT;
	struct fp_sc_config *c = bpf_map_lookup_elem(&sc_config, &zero);
	struct sc_scratch *sx = bpf_map_lookup_elem(&sc_scratch, &zero);
	struct sc_loc L = {};
	__u8 *th, flags;

	if (!ctx)
		return XDP_DROP;
	if (!c || !sx || !p)
		goto invalid;
	__builtin_memset(sx, 0, sizeof(*sx));
	if (sc_locate(ctx, &L)) {
		if (sc_has_conn(ctx, p, sx))
			goto conn;
		goto invalid;
	}
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	th = data + (L.l4 & 0x7f);
	if ((void *)(th + 20) > end)
		goto invalid;
	flags = th[13];
	/* A SYN+ACK goes with the other segments: it passes only to a connection (SYN_SENT). */
	if ((flags & (TH_SYN | TH_ACK)) == TH_SYN) {
		if (flags & (TH_RST | TH_FIN))
			goto invalid;
		if (sc_bogus(ctx, &L, c))
			goto invalid;
		if (!sc_csum_ok(ctx, L.l3, L.l4, L.v6, c->flags & FP_SC_F_PARTIAL_CSUM))
			goto invalid;
		/* TIME_WAIT reuse (and a SYN of a live connection) is the kernel's to decide. */
		if (sc_has_conn(ctx, p, sx))
			goto conn;
		__builtin_memset(sx, 0, sizeof(*sx));
		if (sc_synack(ctx, &L, c, sx))
			goto invalid;
		count(&cls_stats, sbase + FP_STAT_SC_SYNACK, bytes);
		count(&cls_stats, sbase + FP_ACT_TX, bytes);
		return XDP_TX;
	}
	if (sc_has_conn(ctx, p, sx))
		goto conn;
	__builtin_memset(sx, 0, sizeof(*sx));
	return sc_segment(ctx, &L, p, c, sbase, bytes, sx);
conn:
	count(&cls_stats, sbase + FP_STAT_SC_CONN, bytes);
	count(&cls_stats, sbase + FP_ACT_PASS, bytes);
	return XDP_PASS;
invalid:
	count(&cls_stats, sbase + FP_STAT_SC_INVALID, bytes);
	count(&cls_stats, sbase + FP_ACT_DROP, bytes);
	return XDP_DROP;
}

SEC("xdp.frags")
int classifier(struct xdp_md *ctx)
{
	struct pkt p = {};
	struct fp_cls_config *cfg;
	struct fp_cls_action *act;
	__u32 zero = 0, set, best = NO_RULE, sport_c = 0, dport_c = 0, len_c = 0;
	__u32 *active;
	__u64 bytes = bpf_xdp_get_buff_len(ctx); /* all buffers; headers come from the first */
	int bad;

	active = bpf_map_lookup_elem(&cls_active, &zero);
	if (!active)
		return XDP_PASS;
	set = *active & 1;
	cfg = bpf_map_lookup_elem(&cls_config, &set);
	if (!cfg)
		return XDP_PASS;

	bad = parse(ctx, &p, bytes);
	if (bad == PARSE_BAD_FRAG) {
		count(&cls_stats, set * FP_STAT_COUNT + FP_STAT_BAD_FRAG, bytes);
		if (cfg->flags & FP_CLS_F_PASS_BAD_FRAG) {
			/* `fastpath capture EXPRESSION`: a copying default copies what the rules
			 * cannot judge (libpcap decides it after the copy). */
			if (cfg->dflt.flags & FP_ACT_F_COPY)
				cap_copy(ctx);
			count(&cls_stats, set * FP_STAT_COUNT + FP_ACT_PASS, bytes);
			return XDP_PASS;
		}
		count(&cls_stats, set * FP_STAT_COUNT + FP_ACT_DROP, bytes);
		return XDP_DROP;
	}
	if (bad) {
		count(&cls_stats, set * FP_STAT_COUNT + FP_STAT_MALFORMED, bytes);
		if (cfg->malformed == FP_MALFORMED_DEFAULT) {
			act = &cfg->dflt;
			goto do_action;
		}
		if (cfg->malformed == FP_ACT_PASS) {
			count(&cls_stats, set * FP_STAT_COUNT + FP_ACT_PASS, bytes);
			return XDP_PASS;
		}
		count(&cls_stats, set * FP_STAT_COUNT + FP_ACT_DROP, bytes);
		return XDP_DROP;
	}
	if (cfg->uses & FP_F_LEN)
		len_c = class_of(&cls_len_class, set * 65536 + p.len);

	/* Flow cache: the verdict depends only on these fields and the rule set, so a packet whose
	 * fields equal a slot's under the current generation reuses its verdict (an exact-match
	 * cache in front of the tuple search, like Open vSwitch's EMC). Under a flood of fresh
	 * flows it would only cost a random slot read and write per packet, so it switches itself
	 * off per CPU when it does not hit and probes to come back (struct fp_cache_ctl). */
	struct fp_flow_key fk __attribute__((aligned(8)));
	__builtin_memcpy(fk.src, p.src, 16);
	__builtin_memcpy(fk.dst, p.dst, 16);
	fk.vlan = p.vlan;
	fk.eth_type = p.eth_type;
	fk.proto16 = p.proto16;
	fk.sport = p.has_ports ? p.sport : 0;
	fk.dport = p.has_ports ? p.dport : 0;
	fk.frag = p.frag;
	fk.flags = p.flags;
	fk.len_class = len_c;
	__u64 *w = (__u64 *)&fk;
	__u64 hw = w[0] ^ w[1] ^ w[2] ^ w[3] ^ w[4] ^ w[5];
	__u32 slot_i = (__u32)((hw * 0x9e3779b97f4a7c15ull) >> 52) & (FP_CLS_CACHE_SLOTS - 1);
	struct fp_cache_slot *slot = 0;
	struct fp_cache_ctl *ctl = bpf_map_lookup_elem(&cls_cache_ctl, &zero);
	if (!ctl || !ctl->off || (++ctl->seen & (FP_CLS_CACHE_PROBE - 1)) == 0)
		slot = bpf_map_lookup_elem(&cls_cache, &slot_i);
	if (slot && ctl && ++ctl->lookups >= FP_CLS_CACHE_WINDOW) {
		ctl->off = ctl->hits * FP_CLS_CACHE_MIN_HIT_INV < ctl->lookups;
		ctl->lookups = 0;
		ctl->hits = 0;
	}
	if (slot && slot->gen == cfg->gen && cfg->gen != 0) {
		__u64 *sw = (__u64 *)&slot->k;
		if (sw[0] == w[0] && sw[1] == w[1] && sw[2] == w[2] && sw[3] == w[3] && sw[4] == w[4] && sw[5] == w[5]) {
			if (ctl)
				ctl->hits++;
			best = slot->rule;
			goto decided;
		}
	}

	if ((cfg->uses & FP_F_SPORT) && p.has_ports)
		sport_c = class_of(&cls_port_class, set * 131072 + p.sport);
	if ((cfg->uses & FP_F_DPORT) && p.has_ports)
		dport_c = class_of(&cls_port_class, set * 131072 + 65536 + p.dport);

	best = tuple_search(&p, set, cfg->n_tuples, (__u64)sport_c << 32 | dport_c, len_c);

	if (slot) {
		/* Invalidate, fill, then validate: a nested run on this CPU never sees a new key
		 * with the previous verdict. */
		slot->gen = 0;
		__builtin_memcpy(&slot->k, &fk, sizeof(fk));
		slot->rule = best;
		slot->gen = cfg->gen;
	}

decided:
	if (best == NO_RULE) {
		count(&cls_stats, set * FP_STAT_COUNT + FP_STAT_NO_MATCH, bytes);
		act = &cfg->dflt;
	} else {
		__u32 ai = set * FP_CLS_MAX_RULES + (best & (FP_CLS_MAX_RULES - 1));
		count(&cls_rule_stats, ai, bytes);
		act = bpf_map_lookup_elem(&cls_actions, &ai);
		if (!act)
			return XDP_PASS;
		if ((act->rate_pps || act->rate_total_pps) && !rate_allows(set, best, ai, &p, act)) {
			count(&cls_stats, set * FP_STAT_COUNT + FP_STAT_RATE_DROPPED, bytes);
			count(&cls_stats, set * FP_STAT_COUNT + FP_ACT_DROP, bytes);
			return XDP_DROP;
		}
	}

do_action:
	/* `fastpath capture` with rules: the matched frame is copied first, then its action. */
	if (act->flags & FP_ACT_F_COPY)
		cap_copy(ctx);
	if (act->code == FP_ACT_SYNCOOKIE)
		return sc_action(ctx, &p, set, bytes);
	count(&cls_stats, set * FP_STAT_COUNT + (act->code < FP_ACT_COUNT ? act->code : FP_ACT_PASS), bytes);
	switch (act->code) {
	case FP_ACT_DROP:
		return XDP_DROP;
	case FP_ACT_XSK:
		return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
	case FP_ACT_TX:
		return XDP_TX;
	case FP_ACT_CPU: {
		__u32 si = set * FP_CLS_MAX_CPU_SETS + (act->arg & (FP_CLS_MAX_CPU_SETS - 1)), h, cpu;
		struct fp_cpu_set *cs = bpf_map_lookup_elem(&cls_cpu_sets, &si);
		__u64 *sw = (__u64 *)p.src, *dw = (__u64 *)p.dst, a;
		if (!cs || cs->n == 0 || cs->n > FP_CLS_MAX_CPUS)
			return XDP_PASS;
		/* Flow hash over all 16 address bytes (IPv6 too) and the ports: symmetric, so both
		 * directions of a flow land on the same CPU. */
		a = sw[0] ^ sw[1] ^ dw[0] ^ dw[1];
		h = ((__u32)a ^ (__u32)(a >> 32) ^ ((__u32)p.sport ^ p.dport) ^ p.proto16) * 2654435761u;
		h = (h >> 16) % cs->n;
		/* Hide the value from the compiler so the bound check below stays for the verifier. */
		asm volatile("" : "+r"(h));
		if (h >= FP_CLS_MAX_CPUS)
			return XDP_PASS;
		cpu = cs->cpus[h];
		return bpf_redirect_map(&cpu_map, cpu, XDP_PASS);
	}
	case FP_ACT_REDIRECT:
		return bpf_redirect_map(&tx_ports, set * FP_CLS_MAX_PORTS + (act->arg & (FP_CLS_MAX_PORTS - 1)), XDP_PASS);
	default:
		return XDP_PASS;
	}
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
