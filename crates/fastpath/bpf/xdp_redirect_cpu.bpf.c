// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * xdp_redirect_cpu - `fastpath bench redirect-cpu`: every frame of the interface goes through a
 * CPUMAP (kernel/bpf/cpumap.c, kernel >= 4.15; programs on its entries >= 5.9) to one CPU of a
 * list, as xdp-tools' xdp-bench redirect-cpu does. The CPU is chosen by
 *   round robin   a per-CPU index walking the list,
 *   hash          a hash of the 5-tuple (IPv4/IPv6 addresses, protocol, TCP/UDP ports),
 *   proto         TCP -> list[0], UDP -> list[1 % n], anything else -> list[2 % n].
 * On the target CPU the CPUMAP's kthread runs cpumap_remote (SEC("xdp.frags/cpumap")) on each frame:
 * it counts the frame on the CPU it runs on and returns remote_action (XDP_DROP or XDP_PASS).
 * Both programs are frags-aware (kernel >= 5.18): native mode at any MTU, all buffers counted.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "fastpath_abi.h"

/* Set before load. */
const volatile __u32 cpu_dist = FP_DIST_ROUND_ROBIN;
const volatile __u32 n_cpus = 1;
const volatile __u32 remote_action = XDP_DROP;

/* The --cpus list: position -> CPU number. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FP_RCPU_MAX_CPUS);
	__type(key, __u32);
	__type(value, __u32);
} cpus_available SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_CPUMAP);
	__uint(max_entries, FP_RCPU_MAP_SIZE);
	__type(key, __u32);
	__type(value, struct bpf_cpumap_val);
} cpu_map SEC(".maps");

/* Frames the interface program redirected (and failed to, when the CPU slot was empty). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fp_pkt_stats);
} rx_stats SEC(".maps");

/* Frames the CPUMAP program saw, on the CPU it ran on (= the target CPU). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fp_pkt_stats);
} remote_stats SEC(".maps");

/* Round-robin position, per receiving CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} rr_pos SEC(".maps");

static __always_inline void count(void *map, __u64 bytes)
{
	__u32 k = 0;
	struct fp_pkt_stats *st = bpf_map_lookup_elem(map, &k);

	if (st) {
		st->packets++;
		st->bytes += bytes;
	}
}

/* Hash of the 5-tuple and the L4 protocol; *proto = IP protocol, 0 if not IP.
 * Reads the first buffer only, on purpose: a multi-buffer frame's headers lie there unless an
 * IPv6 extension header pushes them out, and then the frame hashes without its ports. That
 * changes only which CPU gets the frame, never whether it is passed; bytes are counted over
 * every buffer (bpf_xdp_get_buff_len()). */
static __always_inline __u32 flow_hash(struct xdp_md *ctx, __u8 *proto)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u32 h = 0, ports = 0;
	void *l4;
	__u16 type;

	*proto = 0;
	if ((void *)(eth + 1) > end)
		return 0;
	type = eth->h_proto;
	if (type == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);

		if ((void *)(ip + 1) > end || ip->ihl < 5)
			return 0;
		*proto = ip->protocol;
		h = ip->saddr ^ ip->daddr;
		if (ip->frag_off & bpf_htons(0x1fff))
			goto out; /* later fragments carry no ports */
		l4 = (void *)ip + ip->ihl * 4;
	} else if (type == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);

		if ((void *)(ip6 + 1) > end)
			return 0;
		*proto = ip6->nexthdr;
		h = ip6->saddr.in6_u.u6_addr32[0] ^ ip6->saddr.in6_u.u6_addr32[1] ^ ip6->saddr.in6_u.u6_addr32[2] ^
		    ip6->saddr.in6_u.u6_addr32[3] ^ ip6->daddr.in6_u.u6_addr32[0] ^ ip6->daddr.in6_u.u6_addr32[1] ^
		    ip6->daddr.in6_u.u6_addr32[2] ^ ip6->daddr.in6_u.u6_addr32[3];
		l4 = ip6 + 1;
	} else {
		return 0;
	}
	if ((*proto == IPPROTO_TCP || *proto == IPPROTO_UDP) && l4 + 4 <= end)
		ports = *(__u32 *)l4;
out:
	/* Symmetric (both directions of a flow hash alike), then mixed (Knuth's multiplier). */
	h ^= (ports >> 16) ^ (ports & 0xffff) ^ *proto;
	h *= 2654435761u;
	return h ^ (h >> 16);
}

SEC("xdp.frags")
int xdp_redirect_cpu(struct xdp_md *ctx)
{
	__u32 zero = 0, pos = 0, *cpu, *rr, h;
	__u8 proto;

	count(&rx_stats, bpf_xdp_get_buff_len(ctx));
	if (n_cpus == 0 || n_cpus > FP_RCPU_MAX_CPUS)
		return XDP_PASS;
	switch (cpu_dist) {
	case FP_DIST_HASH:
		h = flow_hash(ctx, &proto);
		pos = h % n_cpus;
		break;
	case FP_DIST_PROTO:
		flow_hash(ctx, &proto);
		pos = proto == IPPROTO_TCP ? 0 : proto == IPPROTO_UDP ? 1 : 2;
		pos %= n_cpus;
		break;
	default:
		rr = bpf_map_lookup_elem(&rr_pos, &zero);
		if (!rr)
			return XDP_PASS;
		pos = *rr;
		*rr = pos + 1 >= n_cpus ? 0 : pos + 1;
		break;
	}
	cpu = bpf_map_lookup_elem(&cpus_available, &pos);
	if (!cpu)
		return XDP_PASS;
	/* The CPU's entry missing or refusing shows as an xdp_redirect_err (flags 0: abort). */
	return bpf_redirect_map(&cpu_map, *cpu, 0);
}

SEC("xdp.frags/cpumap")
int cpumap_remote(struct xdp_md *ctx)
{
	count(&remote_stats, bpf_xdp_get_buff_len(ctx));
	return remote_action;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
