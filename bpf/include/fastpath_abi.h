/* SPDX-License-Identifier: (MIT OR Apache-2.0) */
/*
 * fastpath_abi.h - the ONE definition of every struct and constant shared by
 * the BPF programs in bpf/ and the Rust library (crates/fastpath). The Rust side
 * mirrors these in crates/fastpath/src/abi.rs; a unit test there checks sizes
 * and offsets against the values below.
 */
#ifndef FASTPATH_ABI_H
#define FASTPATH_ABI_H

#include <linux/types.h>

/* Number of XSKMAP entries: one per queue id. */
#define FP_MAX_QUEUES 64

/* Per-CPU counter record of xdp_drop (and any program that counts packets):
 * one cache line per CPU so CPUs never share a line. */
struct fp_pkt_stats {
	__u64 packets;
	__u64 bytes;
	__u64 _pad[6];
} __attribute__((aligned(64)));

/*
 * Payload stamped into every generated frame (fastpath gen / bench txonly),
 * little-endian, at FP_PAYLOAD_OFF bytes from the start of the Ethernet frame
 * (14 Ethernet + 20 IPv4 + 8 UDP = 42). 20 bytes, so a 62-byte frame holds it;
 * the default 64-byte frame has 2 bytes to spare.
 *   magic      u16  FP_PAYLOAD_MAGIC
 *   stream     u16  sender stream: CPU of the xdp-live thread, or the xsk sender id
 *   seq        u64  per-stream sequence number, starting at 1
 *   tstamp_ns  u64  CLOCK_MONOTONIC at send time
 */
#define FP_PAYLOAD_OFF   42
#define FP_PAYLOAD_LEN   20
#define FP_PAYLOAD_MAGIC 0xFA57

struct fp_payload {
	__u16 magic;
	__u16 stream;
	__u64 seq;
	__u64 tstamp_ns;
} __attribute__((packed));

#endif /* FASTPATH_ABI_H */
