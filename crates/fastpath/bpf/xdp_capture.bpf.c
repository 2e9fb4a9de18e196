// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * xdp_capture - `fastpath capture --mode copy` without rules: copy each frame (up to the snap
 * length, all buffers of a multi-buffer frame) into the capture ring with a timestamp and its
 * queue (fastpath_capture.h), then let it go on untouched (XDP_PASS), as xdpdump does. A frame
 * that finds the ring buffer full is counted, per queue, and passed anyway: capture never
 * disturbs the traffic. Kernel: BPF ring buffer 5.8, bpf_xdp_load_bytes and xdp.frags 5.18.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "fastpath_capture.h"

SEC("xdp.frags")
int xdp_capture(struct xdp_md *ctx)
{
	cap_copy(ctx);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
