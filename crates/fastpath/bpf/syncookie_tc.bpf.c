// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * syncookie_tc - tc ingress (tcx, Linux >= 6.6) half of `action = "syncookie"`.
 *
 * The classifier (XDP) answers SYNs with cookie SYN-ACKs the kernel never sent, and passes an
 * ACK to a listener only if its cookie checks out, marking it with FP_SC_META_MAGIC in the
 * XDP metadata area. The kernel would refuse that ACK (cookie_v4_check / cookie_v6_check in
 * net/ipv4/syncookies.c, net/ipv6/syncookies.c: a listener that did not recently overflow takes
 * no cookie, and the kernel's cookie is another one). So for a marked ACK this program checks
 * the cookie again (the same code, bpf/include/fastpath_syncookie.h), decodes MSS, window scale,
 * SACK and timestamps from it and from TSecr, and creates the request socket with the
 * bpf_sk_assign_tcp_reqsk kfunc (net/core/filter.c, Linux >= 6.9); the kernel's cookie check
 * then takes it (cookie_bpf_check) and the connection is established. That path needs
 * net.ipv4.tcp_syncookies != 0 (cookie_v4_check returns early otherwise); the loader checks.
 *
 * The program returns TCX_NEXT for every packet (never TC_ACT_OK = TCX_PASS, which would end the
 * tcx chain and skip the device's other tcx programs and clsact filters).
 *
 * Unmarked packets are passed untouched after one metadata read, except where the classifier
 * runs in generic (skb) mode (FP_SC_F_NO_META: the metadata does not reach tc there): then every
 * ACK costs a socket lookup, and one that finds a listener a cookie check. Counters: FP_STAT_SC_REQSK and
 * FP_STAT_SC_TC_FAIL in the classifier's cls_stats (shared map, the active rule set's half).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/in.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "fastpath_abi.h"
#include "fastpath_syncookie.h"

/* Defined (not merely declared) so that libbpf finds the kfunc's prototype compatible with the
 * kernel's: a forward declaration is another BTF kind than the kernel's struct. */
struct sock {
	int __opaque;
} __attribute__((preserve_access_index));
struct tcp_sock;

/* struct bpf_tcp_req_attrs of include/net/tcp.h (Linux >= 6.9): the kfunc's argument. */
struct bpf_tcp_req_attrs {
	__u32 rcv_tsval;
	__u32 rcv_tsecr;
	__u16 mss;
	__u8 rcv_wscale;
	__u8 snd_wscale;
	__u8 ecn_ok;
	__u8 wscale_ok;
	__u8 sack_ok;
	__u8 tstamp_ok;
	__u8 usec_ts_ok;
	__u8 reserved[3];
};

/* tcx verdicts (include/uapi/linux/bpf.h, Linux >= 6.6). TC_ACT_OK is TCX_PASS, a final
 * verdict: tcx_run stops there and neither later tcx programs nor the legacy clsact filters of
 * the device would run. This program never decides a packet's fate: TCX_NEXT on every path. */
#ifndef TCX_NEXT
#define TCX_NEXT -1
#endif

extern int bpf_sk_assign_tcp_reqsk(struct __sk_buff *skb, struct sock *sk, struct bpf_tcp_req_attrs *attrs, int attrs__sz) __ksym;

/* The classifier's maps, shared (the loader reuses their descriptors). */
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); __type(key, __u32); __type(value, __u32); } cls_active SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, 2 * FP_STAT_COUNT); __type(key, __u32); __type(value, struct fp_pkt_stats); } cls_stats SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); __type(key, __u32); __type(value, struct fp_sc_config); } sc_config SEC(".maps");

static __always_inline void sc_count(__u32 idx, __u64 bytes)
{
	__u32 zero = 0, *active = bpf_map_lookup_elem(&cls_active, &zero), i;
	struct fp_pkt_stats *st;

	i = (active ? (*active & 1) : 0) * FP_STAT_COUNT + idx;
	st = bpf_map_lookup_elem(&cls_stats, &i);
	if (st) {
		st->packets++;
		st->bytes += bytes;
	}
}

/* The request socket for an ACK: 0 if created, -1 if not; 1 if an unmarked (`marked` 0) ACK is
 * not one of ours (no listener, or no valid cookie): nothing to count. */
static __always_inline int sc_reqsk(struct __sk_buff *skb, int marked)
{
	__u32 zero = 0, l4, optlen, sz, v6;
	struct fp_sc_config *c = bpf_map_lookup_elem(&sc_config, &zero);
	struct bpf_tcp_req_attrs attrs = {};
	struct bpf_sock_tuple bt = {};
	struct sc_tuple tu = {};
	struct bpf_sock *skc;
	struct tcp_sock *tp;
	struct sc_parse ps = {};
	__u32 cookie, seq, ack;
	__u8 th[20];
	int err, fail = marked ? -1 : 1;

	/* Headers are read relative to the network header (bpf_skb_load_bytes_relative, Linux
	 * >= 4.18): where skb->data points at tc differs between native and generic XDP, and VLAN
	 * tags are already off (skb->vlan_tci) when tc runs. */
	if (!c)
		return fail;
	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		struct iphdr ip;
		if (bpf_skb_load_bytes_relative(skb, 0, &ip, sizeof(ip), BPF_HDR_START_NET))
			return fail;
		if (ip.ihl < 5 || ip.protocol != IPPROTO_TCP || (ip.frag_off & bpf_htons(0x3fff)))
			return fail;
		__builtin_memcpy(tu.src, &ip.saddr, 4);
		__builtin_memcpy(tu.dst, &ip.daddr, 4);
		bt.ipv4.saddr = ip.saddr;
		bt.ipv4.daddr = ip.daddr;
		sz = sizeof(bt.ipv4);
		l4 = ip.ihl * 4;
		v6 = 0;
	} else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr ip6;
		if (bpf_skb_load_bytes_relative(skb, 0, &ip6, sizeof(ip6), BPF_HDR_START_NET))
			return fail;
		if (ip6.nexthdr != IPPROTO_TCP)
			return fail;
		__builtin_memcpy(tu.src, &ip6.saddr, 16);
		__builtin_memcpy(tu.dst, &ip6.daddr, 16);
		__builtin_memcpy(bt.ipv6.saddr, &ip6.saddr, 16);
		__builtin_memcpy(bt.ipv6.daddr, &ip6.daddr, 16);
		sz = sizeof(bt.ipv6);
		l4 = 40;
		v6 = 1;
	} else {
		return fail;
	}
	if (bpf_skb_load_bytes_relative(skb, l4, th, 20, BPF_HDR_START_NET))
		return fail;
	optlen = ((th[12] >> 4) * 4);
	if (optlen < 20 || optlen > 60)
		return fail;
	optlen -= 20;
	/* ACK, neither SYN nor RST */
	if (th[13] & (0x02 | 0x04) || !(th[13] & 0x10))
		return fail;
	tu.sport_be = *(__u16 *)&th[0];
	tu.dport_be = *(__u16 *)&th[2];
	seq = bpf_ntohl(*(__be32 *)&th[4]);
	ack = bpf_ntohl(*(__be32 *)&th[8]);
	tu.isn = seq - 1;
	cookie = ack - 1;
	if (v6) {
		bt.ipv6.sport = tu.sport_be;
		bt.ipv6.dport = tu.dport_be;
	} else {
		bt.ipv4.sport = tu.sport_be;
		bt.ipv4.dport = tu.dport_be;
	}
	/* Options in 4-byte words (doff counts words): constant-size reads. */
#pragma unroll
	for (int w = 0; w < 10; w++) {
		if ((__u32)w * 4 >= optlen)
			break;
		if (bpf_skb_load_bytes_relative(skb, l4 + 20 + w * 4, &ps.b[w * 4], 4, BPF_HDR_START_NET))
			return fail;
	}
	ps.len = optlen;
	if (sc_parse_opts(&ps))
		return fail;

	attrs.mss = sc_mss_of(cookie & 7, v6);
	if (ps.o.ts && ps.o.tsecr) {
		__u32 ws = ps.o.tsecr & 0xf;
		attrs.tstamp_ok = 1;
		attrs.rcv_tsval = ps.o.tsval;
		attrs.rcv_tsecr = ps.o.tsecr;
		attrs.sack_ok = !!(ps.o.tsecr & FP_SC_TS_SACK);
		if (ws != FP_SC_TS_WS_NONE) {
			attrs.wscale_ok = 1;
			attrs.snd_wscale = ws > 14 ? 14 : ws;
			attrs.rcv_wscale = c->wscale;
		}
	}

	/* What the server's sysctls turned off (the loader's flags): the kfunc returns -EINVAL
	 * for sack_ok with tcp_sack 0, tstamp_ok with tcp_timestamps 0, wscale_ok with
	 * tcp_window_scaling 0. The SYN-ACK did not offer them; a client echoing them anyway
	 * does not get them. */
	if (c->flags & FP_SC_F_NO_SACK)
		attrs.sack_ok = 0;
	if (c->flags & FP_SC_F_NO_WS) {
		attrs.wscale_ok = 0;
		attrs.snd_wscale = 0;
		attrs.rcv_wscale = 0;
	}
	if (c->flags & FP_SC_F_NO_TS) {
		attrs.tstamp_ok = 0;
		attrs.rcv_tsval = 0;
		attrs.rcv_tsecr = 0;
	}

	/* A segment of a connection (the common case when unmarked) leaves after one lookup. */
	skc = bpf_skc_lookup_tcp(skb, &bt, sz, BPF_F_CURRENT_NETNS, 0);
	if (!skc)
		return fail;
	if (skc->state != BPF_TCP_LISTEN) {
		bpf_sk_release(skc);
		return fail;
	}
	if (!sc_check(c, &tu, v6, cookie)) {
		bpf_sk_release(skc);
		return fail;
	}
	tp = bpf_skc_to_tcp_sock(skc);
	if (!tp) {
		bpf_sk_release(skc);
		return -1;
	}
	err = bpf_sk_assign_tcp_reqsk(skb, (struct sock *)tp, &attrs, sizeof(attrs));
	bpf_sk_release(skc);
	return err ? -1 : 0;
}

SEC("tc")
int syncookie_tc(struct __sk_buff *skb)
{
	__u32 *meta = (void *)(long)skb->data_meta, zero = 0;
	struct fp_sc_config *c;
	int marked, r;

	marked = (void *)(meta + 1) <= (void *)(long)skb->data && *meta == FP_SC_META_MAGIC;
	if (!marked) {
		c = bpf_map_lookup_elem(&sc_config, &zero);
		if (!c || !(c->flags & FP_SC_F_NO_META))
			return TCX_NEXT;
	}
	r = sc_reqsk(skb, marked);
	if (r < 0)
		sc_count(FP_STAT_SC_TC_FAIL, skb->len);
	else if (r == 0)
		sc_count(FP_STAT_SC_REQSK, skb->len);
	return TCX_NEXT;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
