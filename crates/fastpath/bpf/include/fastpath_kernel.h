/* SPDX-License-Identifier: (MIT OR Apache-2.0) */
/*
 * Kernel types the tracepoint programs read (tp_btf arguments), CO-RE style: only the fields
 * read are declared; their offsets come from the running kernel's BTF at load
 * (preserve_access_index). Used by bpf/xdp_monitor.bpf.c and bpf/xdp_fwd.bpf.c.
 */
#ifndef FASTPATH_KERNEL_H
#define FASTPATH_KERNEL_H

struct ns_common {
	unsigned int inum;
} __attribute__((preserve_access_index));

struct net {
	struct ns_common ns;
} __attribute__((preserve_access_index));

typedef struct {
	struct net *net;
} possible_net_t;

struct net_device {
	int ifindex;
	possible_net_t nd_net;
} __attribute__((preserve_access_index));

struct bpf_prog;

#endif /* FASTPATH_KERNEL_H */
