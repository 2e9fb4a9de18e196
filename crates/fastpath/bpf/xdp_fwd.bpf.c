// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * xdp_fwd - forwarding between interfaces at the driver (`fastpath fwd`, docs/ARCHITECTURE.md §13).
 *
 * One program, attached to every port. Per frame it finds its ingress port in `fwd_in` and
 *  - L2 mode: redirects the frame unchanged through the DEVMAP `fwd_ports` to the port's peer
 *    (a bridge port pair); a peer that is paused (down, deleted) is not in `fwd_ports` and the
 *    frame is dropped and counted `drop_peer_down`; a frame larger than the peer's MTU allows
 *    is dropped and counted `drop_mtu` (the peer's driver would drop it uncounted);
 *  - L3 mode: asks the kernel's FIB (bpf_fib_lookup, kernel >= 4.18; flags 0: the policy rules,
 *    the tables and the neighbour table, include/uapi/linux/bpf.h) for the egress port and next
 *    hop, decrements the TTL / hop limit as ip_forward()/ip6_forward() do, rewrites both MACs and
 *    redirects through `fwd_ports`. It forwards only what the kernel's forwarding would: all
 *    else goes to the kernel with XDP_PASS, untouched, each under its own counter (not IP, not
 *    addressed to the port's MAC, malformed, bad IPv4 header checksum, IP options, martian
 *    addresses, a failed rp_filter check, TTL <= 1, no neighbour entry yet, fragmentation
 *    needed, a FIB verdict other than success, an egress that is not a port of this forwarder;
 *    docs/ARCHITECTURE.md §13 has the table).
 * Every frame is counted exactly once per ingress port (struct fp_fwd_stats), so
 * rx = forwarded + each named pass or drop.
 *
 * Loaded as frags-aware (SEC "xdp.frags", BPF_F_XDP_HAS_FRAGS, kernel >= 5.18): headers are
 * read from the first buffer only, which the kernel guarantees to hold at least the linear
 * part (include/net/xdp.h: struct xdp_buff, the frags in its skb_shared_info); headers that are
 * not all there go to the kernel (pass_malformed). Every length (IP total / payload length, the
 * L2 MTU limit, the counters' bytes) is judged against bpf_xdp_get_buff_len(), the whole frame.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "fastpath_abi.h"

#include "fastpath_kernel.h"

#ifndef AF_INET
#define AF_INET 2
#endif
#ifndef AF_INET6
#define AF_INET6 10
#endif

const volatile __u32 fwd_mode = FP_FWD_L2;
/* The ports' network namespace (inode number): ifindexes are per namespace. */
const volatile __u32 fwd_netns_ino = 0;

/* ingress ifindex -> its slot, MAC and (L2) peer */
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, FP_FWD_MAX_PORTS); __type(key, __u32); __type(value, struct fp_fwd_port); } fwd_in SEC(".maps");
/* egress ifindex -> itself: the ports frames may leave by (paused ports are absent) */
struct { __uint(type, BPF_MAP_TYPE_DEVMAP_HASH); __uint(max_entries, FP_FWD_MAX_PORTS); __type(key, __u32); __type(value, struct bpf_devmap_val); } fwd_ports SEC(".maps");
/* slot * FP_FWD_COUNT + reason -> packets, bytes (per CPU) */
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, FP_FWD_MAX_PORTS * FP_FWD_COUNT); __type(key, __u32); __type(value, struct fp_pkt_stats); } fwd_stats SEC(".maps");
/* L3: cached bpf_fib_lookup answers (per CPU) and their generation */
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, FP_FWD_FIB_SLOTS); __type(key, __u32); __type(value, struct fp_fwd_fib_entry); } fwd_fib_cache SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); __type(key, __u32); __type(value, __u32); } fwd_gen SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, FP_FWD_FIB_SLOTS); __type(key, __u32); __type(value, struct fp_fwd_rp_entry); } fwd_rp_cache SEC(".maps");
/* L3: the namespace's IPv4 addresses (network order) -> 1: a frame from one is a martian */
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, FP_FWD_MAX_LOCAL4); __type(key, __u32); __type(value, __u8); } fwd_local4 SEC(".maps");
/* slot -> what became of redirected frames (per CPU) */
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, FP_FWD_MAX_PORTS); __type(key, __u32); __type(value, struct fp_fwd_after); } fwd_after SEC(".maps");

static __always_inline int count(__u32 slot, __u32 reason, __u64 bytes, int action)
{
	__u32 k = slot * FP_FWD_COUNT + reason;
	struct fp_pkt_stats *st = bpf_map_lookup_elem(&fwd_stats, &k);

	if (st) {
		st->packets++;
		st->bytes += bytes;
	}
	return action;
}

/* RFC 1624 incremental update of the IPv4 header checksum for TTL - 1 (as the kernel's
 * ip_decrease_ttl() in include/net/ip.h). */
static __always_inline void ipv4_decrease_ttl(struct iphdr *ip)
{
	__u32 check = ip->check;

	check += bpf_htons(0x0100);
	ip->check = (__u16)(check + (check >= 0xffff));
	ip->ttl--;
}

/* The first 4 bytes after the IP header (source and destination port of TCP, UDP, SCTP, DCCP,
 * UDP-Lite; the SPI of ESP; AH's at offset 4), as the flow dissector gives them to
 * fib_multipath_hash() (proto_ports_offset(), include/linux/skbuff.h). Read from the first buffer
 * only; absent there (never in practice), the ports stay 0 and only the multipath hash of
 * policy 1 can differ from the kernel's. */
static __always_inline void l4_ports(struct bpf_fib_lookup *fib, void *l4, void *end)
{
	__u32 off;

	switch (fib->l4_protocol) {
	case IPPROTO_TCP:
	case IPPROTO_UDP:
	case IPPROTO_SCTP:
	case IPPROTO_DCCP:
	case IPPROTO_UDPLITE:
	case IPPROTO_ESP:
		off = 0;
		break;
	case IPPROTO_AH:
		off = 4;
		break;
	default:
		return;
	}
	if (l4 + off + 4 > end)
		return;
	__builtin_memcpy(&fib->sport, l4 + off, 2);
	__builtin_memcpy(&fib->dport, l4 + off + 2, 2);
}

/* :: or ::1 */
static __always_inline int ipv6_any_or_loopback(const struct in6_addr *a)
{
	return (a->in6_u.u6_addr32[0] | a->in6_u.u6_addr32[1] | a->in6_u.u6_addr32[2]) == 0 &&
	       (a->in6_u.u6_addr32[3] == 0 || a->in6_u.u6_addr32[3] == bpf_htonl(1));
}

static __always_inline int same_mac(const __u8 *a, const __u8 *b)
{
	return ((a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]) | (a[3] ^ b[3]) | (a[4] ^ b[4]) | (a[5] ^ b[5])) == 0;
}

SEC("xdp.frags")
int xdp_fwd(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u32 in = ctx->ingress_ifindex;
	struct fp_fwd_port *port = bpf_map_lookup_elem(&fwd_in, &in);
	__u64 bytes = bpf_xdp_get_buff_len(ctx);
	struct bpf_fib_lookup fib = {};
	__u32 slot, zero = 0, g = 0, *gen;
	long rc;
	int act;

	if (!port)
		return XDP_PASS; /* not (or no longer) a port: the kernel's frame */
	slot = port->slot & (FP_FWD_MAX_PORTS - 1);

	if (fwd_mode == FP_FWD_L2) {
		/* The redirect would drop it after we counted it forwarded (xdp_ok_fwd_dev()). */
		if (port->peer_max_bytes && bytes > port->peer_max_bytes)
			return count(slot, FP_FWD_DROP_MTU, bytes, XDP_DROP);
		act = bpf_redirect_map(&fwd_ports, port->peer_ifindex, XDP_DROP);
		return count(slot, act == XDP_REDIRECT ? FP_FWD_FORWARDED : FP_FWD_DROP_PEER_DOWN, bytes, act);
	}

	if ((void *)(eth + 1) > end)
		return count(slot, FP_FWD_PASS_MALFORMED, bytes, XDP_PASS);
	if (!same_mac(eth->h_dest, port->mac))
		return count(slot, FP_FWD_PASS_NOT_FOR_US, bytes, XDP_PASS);
	/* The caches' generation, read once, before any lookup: an answer is never filed under a
	 * generation newer than the tables it was computed from. 0: the caches are off. */
	gen = bpf_map_lookup_elem(&fwd_gen, &zero);
	if (gen)
		g = *(volatile __u32 *)gen;
	/* Headers (Ethernet, IP, the first 4 bytes of L4) are read from the first buffer, which
	 * holds at least the linear part; every length is judged against `bytes`, the whole frame
	 * over all buffers (bpf_xdp_get_buff_len()). Headers that do not fit in the first buffer
	 * go to the kernel as pass_malformed (a driver never splits them in practice). */
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		__u32 s, d, sum = 0;
		__u16 *w = (void *)ip;
		__u16 tot;

		if ((void *)(ip + 1) > end)
			return count(slot, FP_FWD_PASS_MALFORMED, bytes, XDP_PASS);
		tot = bpf_ntohs(ip->tot_len);
		/* ip_rcv_core() (net/ipv4/ip_input.c): version 4, IHL >= 5, tot_len within the frame
		 * and at least the header; then the header checksum. */
		if (ip->version != 4 || ip->ihl < 5 || tot < ip->ihl * 4 || tot > bytes - sizeof(*eth))
			return count(slot, FP_FWD_PASS_MALFORMED, bytes, XDP_PASS);
		/* A frame longer than its packet (beyond the 60-byte minimum's padding): the kernel
		 * trims it (pskb_trim_rcsum()) before forwarding; redirected whole it could exceed
		 * the egress MTU that tot_len was judged against. */
		if (bytes > 60 && bytes > sizeof(*eth) + tot)
			return count(slot, FP_FWD_PASS_MALFORMED, bytes, XDP_PASS);
		if (ip->ihl != 5) /* options: the kernel processes them (ip_forward_options()) */
			return count(slot, FP_FWD_PASS_IP_OPTIONS, bytes, XDP_PASS);
#pragma unroll
		for (int i = 0; i < 10; i++)
			sum += w[i];
		sum = (sum & 0xffff) + (sum >> 16);
		sum = (sum & 0xffff) + (sum >> 16);
		if (sum != 0xffff)
			return count(slot, FP_FWD_PASS_BAD_CSUM, bytes, XDP_PASS);
		/* Martians, as ip_route_input_slow() (net/ipv4/route.c) refuses them: a source that
		 * is multicast, limited broadcast, zero network or loopback; a destination that is
		 * zero network or loopback; multicast and limited-broadcast destinations are the
		 * kernel's (ip_route_input_mc(), broadcast input), never forwarded here. */
		s = bpf_ntohl(ip->saddr);
		d = bpf_ntohl(ip->daddr);
		if ((s >> 28) == 0xe || s == 0xffffffff || (s >> 24) == 0 || (s >> 24) == 127 || (d >> 28) == 0xe ||
		    d == 0xffffffff || (d >> 24) == 0 || (d >> 24) == 127)
			return count(slot, FP_FWD_PASS_MARTIAN, bytes, XDP_PASS);
		/* A source that is one of our addresses (fib_validate_source(): inet_lookup_ifaddr_rcu()).
		 * With a reverse-path check that lookup fails for it (its route back is local), so
		 * the address map is read only then, to name the reason: no hash lookup per frame. */
		if (port->rp_filter == FP_FWD_RP_OFF && bpf_map_lookup_elem(&fwd_local4, &ip->saddr))
			return count(slot, FP_FWD_PASS_MARTIAN, bytes, XDP_PASS);
		if (ip->ttl <= 1)
			return count(slot, FP_FWD_PASS_TTL, bytes, XDP_PASS);
		fib.family = AF_INET;
		fib.tos = ip->tos;
		fib.l4_protocol = ip->protocol;
		fib.tot_len = tot;
		fib.ipv4_src = ip->saddr;
		fib.ipv4_dst = ip->daddr;
		/* Ports for a multipath hash (fib_multipath_hash() policy 1): none for fragments, as
		 * the kernel's flow dissector gives none. */
		if (!(ip->frag_off & bpf_htons(0x3fff)))
			l4_ports(&fib, (void *)(ip + 1), end);
		if (port->rp_filter != FP_FWD_RP_OFF) {
			/* The reverse-path check of fib_validate_source() (net/ipv4/fib_frontend.c): the
			 * route back to the source must be unicast (loose, 2) and leave by the ingress
			 * port (strict, 1). Neighbours are not asked for (BPF_FIB_LOOKUP_SKIP_NEIGH,
			 * kernel >= 6.3). A multipath route back is judged by one path: a frame the kernel
			 * would take by another path goes to the kernel, which takes it. */
			struct bpf_fib_lookup rev = {};
			struct fp_fwd_rp_entry *re = 0;
			__u32 ri, back;
			int ok;

			if (port->rp_filter == FP_FWD_RP_KERNEL) {
				if (bpf_map_lookup_elem(&fwd_local4, &ip->saddr))
					return count(slot, FP_FWD_PASS_MARTIAN, bytes, XDP_PASS);
				return count(slot, FP_FWD_PASS_RP_FILTER, bytes, XDP_PASS);
			}
			/* The answer depends on (source, ingress, TOS) while the FIB cache is exact
			 * (user space turns both off otherwise): cached per CPU like the forward one. */
			ri = ((ip->saddr ^ in ^ ((__u32)ip->tos << 24)) * 2654435761u) >> 20;
			ri &= FP_FWD_FIB_SLOTS - 1;
			if (g)
				re = bpf_map_lookup_elem(&fwd_rp_cache, &ri);
			if (re && re->gen == g && re->src == ip->saddr && re->in_ifindex == in && re->tos == ip->tos) {
				ok = re->ok;
				back = re->out_ifindex;
			} else {
				rev.family = AF_INET;
				rev.tos = ip->tos;
				rev.ipv4_src = ip->daddr;
				rev.ipv4_dst = ip->saddr;
				rev.ifindex = in;
				rc = bpf_fib_lookup(ctx, &rev, sizeof(rev), BPF_FIB_LOOKUP_SKIP_NEIGH);
				ok = rc == BPF_FIB_LKUP_RET_SUCCESS;
				back = rev.ifindex;
				if (re) {
					/* Invalidate, fill, then validate (a nested run on this CPU never sees
					 * a new key with the old verdict). */
					re->gen = 0;
					re->src = ip->saddr;
					re->in_ifindex = in;
					re->tos = ip->tos;
					re->ok = ok;
					re->out_ifindex = back;
					re->gen = g;
				}
			}
			if (!ok || (port->rp_filter == FP_FWD_RP_STRICT && back != in)) {
				if (bpf_map_lookup_elem(&fwd_local4, &ip->saddr))
					return count(slot, FP_FWD_PASS_MARTIAN, bytes, XDP_PASS);
				return count(slot, FP_FWD_PASS_RP_FILTER, bytes, XDP_PASS);
			}
		}
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		__u32 s0, d0, plen;

		if ((void *)(ip6 + 1) > end)
			return count(slot, FP_FWD_PASS_MALFORMED, bytes, XDP_PASS);
		plen = bpf_ntohs(ip6->payload_len);
		/* ip6_rcv_core() (net/ipv6/ip6_input.c): version 6, the payload within the frame; a
		 * zero payload length is a jumbogram (hop-by-hop option). */
		if (ip6->version != 6 || sizeof(*eth) + sizeof(*ip6) + plen > bytes)
			return count(slot, FP_FWD_PASS_MALFORMED, bytes, XDP_PASS);
		/* Longer than its packet: the kernel trims it (see IPv4 above). */
		if (bytes > 60 && bytes > sizeof(*eth) + sizeof(*ip6) + plen && plen != 0)
			return count(slot, FP_FWD_PASS_MALFORMED, bytes, XDP_PASS);
		if (ip6->nexthdr == 0 || plen == 0) /* hop-by-hop options: the kernel's (ip6_forward()) */
			return count(slot, FP_FWD_PASS_IP_OPTIONS, bytes, XDP_PASS);
		/* tot_len below is 16 bits: a packet longer than 65,535 bytes (no link's MTU) is
		 * the kernel's to refuse. */
		if (sizeof(*ip6) + plen > 0xffff)
			return count(slot, FP_FWD_PASS_FRAG_NEEDED, bytes, XDP_PASS);
		/* Martians: ip6_rcv_core() (net/ipv6/ip6_input.c) drops a multicast source and a
		 * loopback source or destination; ip6_forward() (net/ipv6/ip6_output.c) refuses an
		 * unspecified or link-local source or destination (ICMP "beyond scope");
		 * multicast destinations are the kernel's. */
		s0 = bpf_ntohl(ip6->saddr.in6_u.u6_addr32[0]);
		d0 = bpf_ntohl(ip6->daddr.in6_u.u6_addr32[0]);
		if ((s0 >> 24) == 0xff || (d0 >> 24) == 0xff || (s0 >> 22) == (0xfe80 >> 6) ||
		    (d0 >> 22) == (0xfe80 >> 6))
			return count(slot, FP_FWD_PASS_MARTIAN, bytes, XDP_PASS);
		if (ipv6_any_or_loopback(&ip6->saddr) || ipv6_any_or_loopback(&ip6->daddr))
			return count(slot, FP_FWD_PASS_MARTIAN, bytes, XDP_PASS);
		if (ip6->hop_limit <= 1)
			return count(slot, FP_FWD_PASS_TTL, bytes, XDP_PASS);
		fib.family = AF_INET6;
		fib.flowinfo = *(__be32 *)ip6 & bpf_htonl(0x0fffffff);
		fib.l4_protocol = ip6->nexthdr;
		/* The whole packet, header included, as ip6_forward() compares with the MTU. */
		fib.tot_len = sizeof(*ip6) + plen;
		__builtin_memcpy(fib.ipv6_src, &ip6->saddr, 16);
		__builtin_memcpy(fib.ipv6_dst, &ip6->daddr, 16);
		l4_ports(&fib, (void *)(ip6 + 1), end);
	} else {
		return count(slot, FP_FWD_PASS_NOT_IP, bytes, XDP_PASS);
	}
	fib.ifindex = in;
	{
		/* The cache: one inlined per-CPU array read instead of the FIB and neighbour lookups.
		 * Exact only where the FIB answer depends on (destination, ingress) alone: user space
		 * turns it off (generation 0) while policy rules other than the defaults, multipath
		 * routes, nexthop objects, TOS or source-prefix routes exist. */
		__u32 d0 = fib.ipv6_dst[0], d1 = fib.ipv6_dst[1], d2 = fib.ipv6_dst[2], d3 = fib.ipv6_dst[3];
		__u32 idx;
		struct fp_fwd_fib_entry *e;

		if (fib.family == AF_INET)
			d1 = d2 = d3 = 0; /* ipv4_dst shares ipv6_dst[0] */
		idx = ((d0 ^ d1 ^ d2 ^ d3 ^ in) * 2654435761u) >> 20;
		idx &= FP_FWD_FIB_SLOTS - 1;
		e = bpf_map_lookup_elem(&fwd_fib_cache, &idx);
		if (e && g && e->gen == g && e->family == fib.family && e->in_ifindex == in && e->dst[0] == d0 &&
		    e->dst[1] == d1 && e->dst[2] == d2 && e->dst[3] == d3 && fib.tot_len <= e->max_tot_len) {
			fib.ifindex = e->out_ifindex;
			__builtin_memcpy(fib.smac, e->smac, 6);
			__builtin_memcpy(fib.dmac, e->dmac, 6);
			goto redirect;
		}
		rc = bpf_fib_lookup(ctx, &fib, sizeof(fib), 0);
		if (rc == BPF_FIB_LKUP_RET_NO_NEIGH)
			return count(slot, FP_FWD_PASS_NO_NEIGH, bytes, XDP_PASS);
		if (rc == BPF_FIB_LKUP_RET_FRAG_NEEDED)
			return count(slot, FP_FWD_PASS_FRAG_NEEDED, bytes, XDP_PASS);
		if (rc != BPF_FIB_LKUP_RET_SUCCESS)
			return count(slot, FP_FWD_PASS_FIB, bytes, XDP_PASS);
		if (e && g) {
			__u16 fits = fib.tot_len; /* bpf_fib_lookup leaves tot_len as it was on success */
			if (e->gen == g && e->family == fib.family && e->in_ifindex == in && e->dst[0] == d0 &&
			    e->dst[1] == d1 && e->dst[2] == d2 && e->dst[3] == d3 && e->out_ifindex == fib.ifindex &&
			    e->max_tot_len > fits)
				fits = e->max_tot_len;
			e->gen = g;
			e->in_ifindex = in;
			e->out_ifindex = fib.ifindex;
			e->max_tot_len = fits;
			e->family = fib.family;
			e->dst[0] = d0;
			e->dst[1] = d1;
			e->dst[2] = d2;
			e->dst[3] = d3;
			__builtin_memcpy(e->smac, fib.smac, 6);
			__builtin_memcpy(e->dmac, fib.dmac, 6);
		}
	}
redirect:
	/* Back out of the ingress port: the kernel forwards it too, and sends an ICMP redirect
	 * (ip_forward(), net/ipv4/ip_forward.c; ip6_forward()). */
	if (fib.ifindex == in)
		return count(slot, FP_FWD_PASS_FIB, bytes, XDP_PASS);
	/* Redirect first: only a frame that leaves by a port of ours is rewritten; any other
	 * goes to the kernel untouched (it forwards it, decrementing the TTL once). */
	act = bpf_redirect_map(&fwd_ports, fib.ifindex, XDP_PASS);
	if (act != XDP_REDIRECT)
		return count(slot, FP_FWD_PASS_NO_PORT, bytes, XDP_PASS);
	/* The headers were bounds-checked above; re-derive them after the helper calls. */
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	eth = data;
	if ((void *)(eth + 1) > end)
		return count(slot, FP_FWD_PASS_MALFORMED, bytes, XDP_PASS);
	if (fib.family == AF_INET) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > end)
			return count(slot, FP_FWD_PASS_MALFORMED, bytes, XDP_PASS);
		ipv4_decrease_ttl(ip);
	} else {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > end)
			return count(slot, FP_FWD_PASS_MALFORMED, bytes, XDP_PASS);
		ip6->hop_limit--;
	}
	__builtin_memcpy(eth->h_dest, fib.dmac, 6);
	__builtin_memcpy(eth->h_source, fib.smac, 6);
	return count(slot, FP_FWD_FORWARDED, bytes, XDP_REDIRECT);
}

/* The port a device is, if it is one of ours (same ifindex, same network namespace). */
static __always_inline struct fp_fwd_after *after_of(const struct net_device *dev)
{
	__u32 ifindex = BPF_CORE_READ(dev, ifindex);
	struct fp_fwd_port *p;
	__u32 slot;

	if (BPF_CORE_READ(dev, nd_net.net, ns.inum) != fwd_netns_ino)
		return NULL;
	p = bpf_map_lookup_elem(&fwd_in, &ifindex);
	if (!p)
		return NULL;
	slot = p->slot & (FP_FWD_MAX_PORTS - 1);
	return bpf_map_lookup_elem(&fwd_after, &slot);
}

/* trace_xdp_redirect_err(dev, xdp, tgt, err, ...): a frame the program redirected (and counted
 * forwarded) could not be enqueued (egress down, too long for it: xdp_ok_fwd_dev()). Only the
 * first four arguments are read; they are the same since 4.x (kernel >= 5.5 for tp_btf). */
SEC("tp_btf/xdp_redirect_err")
int BPF_PROG(fwd_redirect_err, const struct net_device *dev, const struct bpf_prog *xdp, const void *tgt, int err)
{
	struct fp_fwd_after *a = after_of(dev);

	if (a)
		a->redirect_err++;
	return 0;
}

/* trace_xdp_devmap_xmit(from_dev, to_dev, sent, drops, err): one bulk handed to the egress
 * driver's ndo_xdp_xmit (kernel/bpf/devmap.c bq_xmit_all()). */
SEC("tp_btf/xdp_devmap_xmit")
int BPF_PROG(fwd_devmap_xmit, const struct net_device *from_dev, const struct net_device *to_dev, int sent, int drops,
	     int err)
{
	struct fp_fwd_after *a = after_of(to_dev);

	if (a) {
		a->xmit_sent += sent > 0 ? sent : 0;
		a->xmit_drops += drops > 0 ? drops : 0;
	}
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
