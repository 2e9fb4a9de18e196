// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * xdp_monitor - drop accounting from the kernel's XDP tracepoints, as xdp-bench (xdp-tools,
 * lib/util/xdp_sample.bpf.c) and the kernel's old samples/bpf/xdp_monitor do. Each program is a
 * BTF-enabled raw tracepoint (tp_btf, kernel >= 5.5 with kernel BTF); the arguments are the
 * tracepoint's TP_PROTO in include/trace/events/xdp.h. Counts go to per-CPU maps; user space sums.
 *
 * No vmlinux.h: the few kernel structs read here are declared below with
 * preserve_access_index, so libbpf relocates their field offsets against the running kernel's
 * BTF (CO-RE) and the build does not depend on the build host's kernel.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "fastpath_abi.h"

#include "fastpath_kernel.h"

/* include/net/xdp.h: the verdicts of a CPUMAP entry's XDP program (kernel >= 5.10). */
struct xdp_cpumap_stats {
	unsigned int redirect;
	unsigned int pass;
	unsigned int drop;
} __attribute__((preserve_access_index));


struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fp_mon_config);
} mon_config SEC(".maps");

/* Key: XDP action (FP_MON_ACTIONS - 1 for anything unknown). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FP_MON_ACTIONS);
	__type(key, __u32);
	__type(value, __u64);
} mon_exception SEC(".maps");

/* Key: -err (positive errno), FP_MON_ERRNOS - 1 for larger values. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FP_MON_ERRNOS);
	__type(key, __u32);
	__type(value, __u64);
} mon_redirect_err SEC(".maps");

/* Key: to_cpu. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FP_MON_MAX_CPUS);
	__type(key, __u32);
	__type(value, struct fp_mon_enqueue);
} mon_enqueue SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fp_mon_kthread);
} mon_kthread SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fp_mon_devmap);
} mon_devmap SEC(".maps");

static __always_inline struct fp_mon_config *config(void)
{
	__u32 k = 0;

	return bpf_map_lookup_elem(&mon_config, &k);
}

/* True if an event of this interface should be counted. */
static __always_inline int want_dev(const struct net_device *dev)
{
	struct fp_mon_config *c = config();

	if (!c || !c->ifindex)
		return 1;
	if (!dev || BPF_CORE_READ(dev, ifindex) != (int)c->ifindex)
		return 0;
	/* The same ifindex names a device in every namespace: compare the namespace too (without
	 * CONFIG_NET_NS there is only one). */
	if (c->netns_ino && bpf_core_field_exists(dev->nd_net.net))
		return BPF_CORE_READ(dev, nd_net.net, ns.inum) == c->netns_ino;
	return 1;
}

static __always_inline int want_map(int map_id)
{
	struct fp_mon_config *c = config();

	return !c || !c->cpumap_id || map_id == (int)c->cpumap_id;
}

static __always_inline void bump(void *map, __u32 key)
{
	__u64 *v = bpf_map_lookup_elem(map, &key);

	if (v)
		*v += 1;
}

/* trace_xdp_exception(dev, xdp, act): a program returned XDP_ABORTED or an invalid action, or
 * XDP_TX/XDP_REDIRECT failed in the driver. */
SEC("tp_btf/xdp_exception")
int BPF_PROG(tp_xdp_exception, const struct net_device *dev, const struct bpf_prog *xdp, __u32 act)
{
	if (!want_dev(dev))
		return 0;
	bump(&mon_exception, act < FP_MON_ACTIONS - 1 ? act : FP_MON_ACTIONS - 1);
	return 0;
}

static __always_inline int redirect_err(const struct net_device *dev, int err)
{
	__u32 e = err < 0 ? (__u32)-err : (__u32)err;

	if (!want_dev(dev))
		return 0;
	bump(&mon_redirect_err, e < FP_MON_ERRNOS - 1 ? e : FP_MON_ERRNOS - 1);
	return 0;
}

/* trace_xdp_redirect_err(dev, xdp, tgt, err, ...): bpf_redirect*() chose a target that then
 * failed (xdp_do_redirect / xdp_do_generic_redirect). Only the first four arguments are read:
 * they are the same in every kernel since 4.x, the later ones changed in 5.17. */
SEC("tp_btf/xdp_redirect_err")
int BPF_PROG(tp_xdp_redirect_err, const struct net_device *dev, const struct bpf_prog *xdp, const void *tgt,
	     int err)
{
	return redirect_err(dev, err);
}

/* The map variant, gone from newer kernels (absent on 6.18): loaded only where it exists. */
SEC("tp_btf/xdp_redirect_map_err")
int BPF_PROG(tp_xdp_redirect_map_err, const struct net_device *dev, const struct bpf_prog *xdp,
	     const void *tgt, int err)
{
	return redirect_err(dev, err);
}

/* trace_xdp_cpumap_enqueue(map_id, processed, drops, to_cpu): one bulk moved into the target
 * CPU's ptr_ring; `drops` frames did not fit (the ring holds qsize frames). */
SEC("tp_btf/xdp_cpumap_enqueue")
int BPF_PROG(tp_xdp_cpumap_enqueue, int map_id, unsigned int processed, unsigned int drops, int to_cpu)
{
	__u32 k = (__u32)to_cpu;
	struct fp_mon_enqueue *v;

	if (!want_map(map_id) || k >= FP_MON_MAX_CPUS)
		return 0;
	v = bpf_map_lookup_elem(&mon_enqueue, &k);
	if (v) {
		v->processed += processed;
		v->drops += drops;
		v->bulks += 1;
	}
	return 0;
}

/* trace_xdp_cpumap_kthread(map_id, processed, drops, sched, xdp_stats): one round of a CPUMAP
 * kthread on its CPU. */
SEC("tp_btf/xdp_cpumap_kthread")
int BPF_PROG(tp_xdp_cpumap_kthread, int map_id, unsigned int processed, unsigned int drops, int sched,
	     struct xdp_cpumap_stats *xdp_stats)
{
	__u32 k = 0;
	struct fp_mon_kthread *v;

	if (!want_map(map_id))
		return 0;
	v = bpf_map_lookup_elem(&mon_kthread, &k);
	if (v) {
		v->processed += processed;
		v->drops += drops;
		v->sched += sched ? 1 : 0;
		v->xdp_pass += xdp_stats->pass;
		v->xdp_drop += xdp_stats->drop;
		v->xdp_redirect += xdp_stats->redirect;
	}
	return 0;
}

/* trace_xdp_devmap_xmit(from_dev, to_dev, sent, drops, err): one ndo_xdp_xmit bulk of a
 * redirect to a device (DEVMAP or bpf_redirect). */
SEC("tp_btf/xdp_devmap_xmit")
int BPF_PROG(tp_xdp_devmap_xmit, const struct net_device *from_dev, const struct net_device *to_dev, int sent,
	     int drops, int err)
{
	__u32 k = 0;
	struct fp_mon_devmap *v;

	/* Either end: the sender of a live-frames generator's frames is the namespace's loopback. */
	if (!want_dev(from_dev) && !want_dev(to_dev))
		return 0;
	v = bpf_map_lookup_elem(&mon_devmap, &k);
	if (v) {
		v->sent += sent > 0 ? sent : 0;
		v->drops += drops > 0 ? drops : 0;
		v->err += err ? 1 : 0;
		v->calls += 1;
	}
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
