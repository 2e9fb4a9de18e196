/* SPDX-License-Identifier: (MIT OR Apache-2.0) */
/*
 * fastpath_abi.h - the ONE definition of every struct and constant shared by
 * the BPF programs in bpf/ and the Rust library (crates/fastpath). The Rust side is
 * generated from this file by bindgen (crates/fastpath/build.rs -> src/abi.rs): never
 * write a layout by hand there. The sizes below are checked on both sides: here with
 * _Static_assert (clang -target bpf), in src/abi.rs with const assertions, so a change
 * that moves a field is a build error, and pins of another layout are refused at open.
 */
#ifndef FASTPATH_ABI_H
#define FASTPATH_ABI_H

#include <linux/types.h>
#include <linux/bpf.h>   /* struct bpf_spin_lock */

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


/*
 * RX metadata (bpf/xsk_redirect_meta.bpf.c): what the driver's XDP metadata kfuncs
 * (bpf_xdp_metadata_rx_timestamp / _rx_hash / _rx_vlan_tag, Linux >= 6.3, VLAN tag >= 6.8;
 * Documentation/networking/xdp-rx-metadata.rst) returned for one frame, put in front of it with
 * bpf_xdp_adjust_meta: user space reads it at the frame's address - sizeof(struct fp_rx_meta).
 * `valid` says which fields the driver filled (FP_RX_META_*); the others are 0.
 */
#define FP_RX_META_TIMESTAMP 1
#define FP_RX_META_HASH      2
#define FP_RX_META_VLAN      4
/* Bits 8..15, 16..23 and 24..31 of `valid`: what the timestamp, hash and VLAN kfunc returned,
 * as a positive errno: 0 the driver answered (a timestamp of 0 is still no timestamp), ENODATA
 * (61) nothing for this frame, EOPNOTSUPP (95) the driver (or, for the VLAN tag, the kernel)
 * does not implement it. */
#define FP_RX_META_ERRNO_TIMESTAMP_SHIFT 8
#define FP_RX_META_ERRNO_HASH_SHIFT      16
#define FP_RX_META_ERRNO_VLAN_SHIFT      24

struct fp_rx_meta {
	__u64 rx_timestamp_ns;  /* the driver's RX timestamp (hardware clock), ns */
	__u32 rx_hash;          /* the RSS hash */
	__u32 rx_hash_type;     /* enum xdp_rss_hash_type: L3/L4 bits (include/net/xdp.h) */
	__u16 vlan_proto;       /* network order, e.g. 0x8100 */
	__u16 vlan_tci;         /* host order: PCP 3 bits, DEI 1, VID 12 */
	__u32 valid;            /* FP_RX_META_* bits, each kfunc's errno (FP_RX_META_ERRNO_*) */
};
_Static_assert(sizeof(struct fp_rx_meta) == 24, "fp_rx_meta is 24 bytes");

/* ---- classifier (bpf/classifier.bpf.c; Rust side: crates/fastpath/src/rules/compile.rs) ---- */

#define FP_CLS_MAX_RULES     131072  /* per rule set */
#define FP_CLS_MAX_TUPLES    32
#define FP_CLS_MAX_ENTRIES   (2 * 1048576)  /* both rule sets */
#define FP_CLS_MAX_CPU_SETS  64
#define FP_CLS_MAX_CPUS      16
#define FP_CLS_MAX_PORTS     64
#define FP_CLS_RATE_BUCKETS  65536
#define FP_NO_VLAN           0xffff
/* IPv6 extension headers walked before the chain is declared too long (malformed). The kernel
 * walks any number; a longer chain is counted `malformed`, never `no_match`. */
#define FP_MAX_IPV6_EXT      8
/* A rule with `rate` and no `rate_total` gets rate_total = rate * this many sources. */
#define FP_RATE_TOTAL_SOURCES 64

/* Field bits of struct fp_cls_tuple.fields. */
#define FP_F_VLAN     (1 << 0)
#define FP_F_ETH_TYPE (1 << 1)
#define FP_F_SRC      (1 << 2)
#define FP_F_DST      (1 << 3)
#define FP_F_PROTO    (1 << 4)
#define FP_F_FRAG     (1 << 5)
#define FP_F_SPORT    (1 << 6)
#define FP_F_DPORT    (1 << 7)
#define FP_F_LEN      (1 << 8)
#define FP_F_FLAGS    (1 << 9)

/* Action codes. 0 is PASS so an all-zero (never written) config passes everything. */
#define FP_ACT_PASS     0
#define FP_ACT_DROP     1
#define FP_ACT_XSK      2
#define FP_ACT_CPU      3
#define FP_ACT_TX       4
#define FP_ACT_REDIRECT 5
#define FP_ACT_COUNT    6
/* SYN cookies at the driver (bpf/include/fastpath_syncookie.h): a SYN is answered with a
 * SYN-ACK carrying a cookie (XDP_TX), an ACK to a listener passes only with a valid cookie.
 * Not a total of its own: counted by outcome as tx / pass / drop, and in FP_STAT_SC_*. */
#define FP_ACT_SYNCOOKIE 16
#define FP_MALFORMED_DEFAULT 0xff

/* Indexes of fp_cls_stats after the FP_ACT_* totals. */
#define FP_STAT_NO_MATCH     6
#define FP_STAT_MALFORMED    7   /* cannot be classified: the `malformed` policy applies */
#define FP_STAT_RATE_DROPPED 8
#define FP_STAT_BAD_FRAG     9   /* tiny/overlapping fragment (RFC 1858, 3128, 7112): always dropped */
/* action = "syncookie" (each also counted in tx, pass or drop): */
#define FP_STAT_SC_SYNACK    10  /* SYN answered with a cookie SYN-ACK (XDP_TX) */
#define FP_STAT_SC_ACK_OK    11  /* ACK to a listener with a valid cookie: passed */
#define FP_STAT_SC_ACK_BAD   12  /* ACK to a listener (or to no socket) whose cookie fails: dropped */
#define FP_STAT_SC_CONN      13  /* segment of an existing connection: passed */
#define FP_STAT_SC_INVALID   14  /* no connection and not a SYN or ACK (RST, FIN, SYN+RST, SYN+ACK, ...),
                                  * a fragment, IPv6 extension headers, or a SYN that cannot be
                                  * answered (beyond the first buffer, options unreadable): dropped */
#define FP_STAT_SC_REQSK     15  /* tc: request socket created (bpf_sk_assign_tcp_reqsk) */
#define FP_STAT_SC_TC_FAIL   16  /* tc: a marked ACK that got no request socket (no listener, cookie
                                  * expired in between, the kfunc refused): the kernel answers it */
#define FP_STAT_COUNT        17

/* Shared by the classifier and the tc program (map `sc_config`, one entry): the cookie's
 * SipHash-2-4 key, written once at load from getrandom(2), and what the SYN-ACK advertises. */
/* fp_sc_config.bcast4 entries: further broadcast addresses are not checked. */
#define FP_SC_MAX_BCAST4 16
struct fp_sc_config {
	__u64 k0;
	__u64 k1;
	__u16 mss_v4;     /* MSS option of a SYN-ACK over IPv4 (interface MTU - 40) */
	__u16 mss_v6;     /* over IPv6 (MTU - 60) */
	__u8  wscale;     /* window scale advertised; the request socket's rcv_wscale */
	__u8  flags;      /* FP_SC_F_* */
	__u8  _pad[2];
	__u8  mac[6];     /* the interface's MAC (set at attach; 0 while not attached) */
	__u8  n_bcast4;   /* entries of bcast4 in use, 0..FP_SC_MAX_BCAST4 */
	__u8  _pad2;
	/* IPv4 subnet broadcast addresses of the namespace's interfaces, the receiving interface's
	 * first (each address's IFA_BROADCAST and, for a prefix of at most /30, address | ~mask:
	 * what the kernel's fib_add_ifaddr makes broadcast routes of). A SYN to one is not
	 * answered. Read at attach and whenever a set with a syncookie rule is swapped in or
	 * reloaded on the attached interface. */
	__be32 bcast4[FP_SC_MAX_BCAST4];
};
/* fp_sc_config.flags: the classifier runs in generic (skb) mode, where the XDP metadata does not
 * reach tc where the program looks for it (set by the loader), or the driver has no XDP
 * metadata room (set by the classifier on the first ACK it cannot mark): the tc program checks
 * every ACK that finds a listener instead of the marked ones only. */
#define FP_SC_F_NO_META 1
/* fp_sc_config.flags, set by the loader from the interface's network namespace when the tc
 * program is attached: net.ipv4.tcp_sack, tcp_timestamps, tcp_window_scaling is 0 there. The
 * kfunc refuses (-EINVAL) a request socket with an option its sysctl turned off, so the
 * SYN-ACK does not offer it and the tc program does not ask for it. A later change of these
 * sysctls (or of tcp_syncookies) is seen only after a reload of the classifier. */
#define FP_SC_F_NO_SACK 2
#define FP_SC_F_NO_TS   4
#define FP_SC_F_NO_WS   8
/* fp_sc_config.flags, set by the loader when the tc program is attached to a veth: a SYN whose
 * TCP checksum field holds only the pseudo header's sum is taken as a right one. That is what a
 * local sender's CHECKSUM_PARTIAL leaves for the device to finish (tcp_v4_send_check), which
 * XDP on a veth whose peer is the local stack sees and the kernel there takes unchecked. On
 * any other driver the frame came from a wire, the kernel would drop it, and so does the
 * classifier. */
#define FP_SC_F_PARTIAL_CSUM 16
/* The classifier marks an ACK whose cookie it checked with this in the XDP metadata area
 * (bpf_xdp_adjust_meta); the tc program acts only on marked ACKs. */
#define FP_SC_META_MAGIC 0x5c00c1e5u

/* Exact-match key of one tuple (56 bytes); unconstrained fields are 0. */
struct fp_cls_key {
	__u8  src[16];    /* masked source address (IPv4 in bytes 0..4); first for alignment */
	__u8  dst[16];
	__u8  set;        /* rule set 0 or 1 */
	__u8  tuple;
	__u16 proto16;    /* 0x100 | IP protocol, 0 if not constrained */
	__u8  frag;
	__u8  flags;      /* TCP flags & tuple mask */
	__u16 vlan;
	__u16 eth_type;
	__u16 _pad;
	__u32 sport_class;
	__u32 dport_class;
	__u32 len_class;
};

/* Open-addressing rule table (`cls_table`, an ARRAY map: its lookups are inlined by the
 * verifier): FP_CLS_TABLE_SLOTS slots per rule set, set s at s * FP_CLS_TABLE_SLOTS. A key's home
 * slot is the top FP_CLS_TABLE_BITS bits of sum(word[i] * FP_CLS_TABLE_MUL * (2i + 1)) over the
 * 7 native-endian u64 words of its struct fp_cls_key with `set` 0; collisions probe the next
 * slots (linear probing, wrapping within the set). The compiler (rules/compile.rs) fills the
 * table to at most half and places every key (Robin Hood insertion) within FP_CLS_TABLE_PROBES
 * slots of its home, no empty slot between; a
 * tuple whose keys do not fit stays in `cls_rules`. A lookup stops at an empty slot, at probe j
 * on a slot whose `used` <= j (its key lies nearer its home: Robin Hood early exit) or after
 * FP_CLS_TABLE_PROBES slots, whatever the packet. */
#define FP_CLS_TABLE_BITS   16
#define FP_CLS_TABLE_SLOTS  (1 << FP_CLS_TABLE_BITS)
#define FP_CLS_TABLE_PROBES 16
#define FP_CLS_TABLE_MUL    0x9e3779b97f4a7c15ull
struct fp_cls_slot {
	struct fp_cls_key k;  /* with `set` = the slot's rule set */
	__u32 rule;           /* lowest rule index with this key */
	__u32 used;           /* 0: empty (ends a probe run); else the key's distance from its home + 1 */
};

/* Per-tuple prefilter (struct fp_cls_tuple.prefilter): a bitmap over the first 16 bits of the
 * masked source (destination) address of every entry of the tuple, in `cls_prefilter`. A packet
 * whose masked first 16 bits are not in it cannot match the tuple, so its hash lookup is skipped
 * (one inlined array read instead of a helper call and a hash over the 56-byte key). */
#define FP_PRE_SRC 1
#define FP_PRE_DST 2
#define FP_CLS_PRE_WORDS 1024   /* 65536 bits per (set, tuple, field), as u64 words */

struct fp_cls_tuple {
	__u32 fields;
	__u32 best_rule;  /* smallest rule index in the tuple */
	__u8  flags_mask;
	__u8  prefilter;  /* FP_PRE_* bits: which bitmaps of this tuple the program consults */
	__u8  in_table;   /* 1: the tuple's entries are in cls_table (open addressing), not cls_rules */
	__u8  _pad[5];
	__u8  src_mask[16];
	__u8  dst_mask[16];
};

#define FP_ACT_F_COPY 1  /* fp_cls_action.flags: copy the frame to the capture ring first */
struct fp_cls_action {
	__u8  code;
	__u8  flags;          /* FP_ACT_F_* (`fastpath capture` only; 0 from the rule language) */
	__u8  _pad[2];
	__u32 arg;            /* cpu set index or DEVMAP slot */
	__u64 rate_pps;       /* per source address; 0 = no per-source limit */
	__u64 rate_total_pps; /* per rule, all sources together; 0 = no aggregate limit */
};

/* Per rule set. */
struct fp_cls_config {
	__u32 n_tuples;
	__u32 n_rules;
	__u32 uses;       /* OR of all tuple fields */
	__u32 gen;        /* generation: unique per install, never 0; tags flow-cache entries */
	struct fp_cls_action dflt;
	__u32 malformed;  /* FP_ACT_DROP, FP_ACT_PASS or FP_MALFORMED_DEFAULT (the dflt action):
	                   * what a frame that cannot be classified gets */
	__u32 flags;      /* FP_CLS_F_* */
};
/* fp_cls_config.flags: tiny and overlapping fragments are counted `bad_fragment` and passed
 * instead of dropped (`fastpath capture`, which promises to change no frame's fate); copied
 * first when `dflt` has FP_ACT_F_COPY (a capture expression's superset). */
#define FP_CLS_F_PASS_BAD_FRAG 1

/* Flow cache (per CPU, direct-mapped, FP_CLS_CACHE_SLOTS): the packet fields every tuple may
 * look at, unmasked, and the verdict for them under rule-set generation `gen`. */
#define FP_CLS_CACHE_SLOTS 4096
#define FP_CLS_CACHE_MISS  0xfffffffeu   /* cached "no rule matched" is NO_RULE */
struct fp_flow_key {
	__u8  src[16];
	__u8  dst[16];
	__u16 vlan;
	__u16 eth_type;
	__u16 proto16;
	__u16 sport;
	__u16 dport;
	__u8  frag;
	__u8  flags;
	__u32 len_class;
};

struct fp_cache_slot {
	struct fp_flow_key k;
	__u32 gen;
	__u32 rule;       /* rule index, or 0xffffffff for no match */
};

/* The flow cache switches itself off on a CPU where it does not pay (a flood of fresh flows:
 * every lookup misses a random slot and fills it): per window of FP_CLS_CACHE_WINDOW lookups,
 * fewer than one hit in FP_CLS_CACHE_MIN_HIT_INV turns it off; while off, one packet in
 * FP_CLS_CACHE_PROBE still looks up and fills, and the next window's hits turn it back on. */
#define FP_CLS_CACHE_WINDOW      1024
#define FP_CLS_CACHE_MIN_HIT_INV 8
#define FP_CLS_CACHE_PROBE       64
struct fp_cache_ctl {
	__u32 lookups;    /* in this window */
	__u32 hits;
	__u32 off;        /* 1: only probes use the cache */
	__u32 seen;       /* packets, for picking probes */
};

struct fp_cpu_set {
	__u32 n;
	__u32 cpus[FP_CLS_MAX_CPUS];
};

struct fp_rate_key {
	__u32 set_rule;   /* set << 31 | rule index */
	__u8  src[16];
};

struct fp_rate_bucket {
	__u64 tokens;     /* in 1/1e9 packets */
	__u64 last_ns;
};

/* Aggregate token bucket of one rule (all sources), shared by all CPUs under its lock.
 * last_ns == 0: never used (full bucket). */
struct fp_rate_total {
	struct bpf_spin_lock lock;
	__u32 _pad;
	__u64 tokens;     /* in 1/1e9 packets */
	__u64 last_ns;
};

/* ---- XDP tracepoint monitor (bpf/xdp_monitor.bpf.c; Rust side: crates/fastpath/src/bpf/monitor.rs) ----
 * Counts what the kernel's XDP tracepoints (include/trace/events/xdp.h) report, per CPU. */

#define FP_MON_ACTIONS    6    /* XDP_ABORTED..XDP_REDIRECT, then one slot for unknown actions */
#define FP_MON_ERRNOS     256  /* redirect errors by -err; errno >= 255 lands in slot 255 */
#define FP_MON_MAX_CPUS   256  /* cpumap enqueue counters by target CPU */

/* What the monitor counts; 0 = everything. Key 0 of mon_config. */
struct fp_mon_config {
	__u32 ifindex;    /* xdp_exception / xdp_redirect_err: dev; xdp_devmap_xmit: from_dev or to_dev */
	__u32 cpumap_id;  /* xdp_cpumap_enqueue / xdp_cpumap_kthread: map_id */
	__u32 netns_ino;  /* the device's network namespace (inode of /proc/PID/ns/net): ifindexes
	                   * are per namespace */
	__u32 _pad;
};

/* xdp_cpumap_enqueue, key = to_cpu. `processed` includes `drops` (kernel/bpf/cpumap.c
 * bq_flush_to_queue); `bulks` counts the tracepoint's firings (one per bulk flushed). */
struct fp_mon_enqueue {
	__u64 processed;
	__u64 drops;
	__u64 bulks;
	__u64 _pad[5];
} __attribute__((aligned(64)));

/* xdp_cpumap_kthread, key 0, per CPU: the kthread runs on its target CPU. */
struct fp_mon_kthread {
	__u64 processed;
	__u64 drops;       /* skb allocation failures */
	__u64 sched;       /* times the kthread yielded the CPU */
	__u64 xdp_pass;    /* verdicts of the CPUMAP entry's own XDP program */
	__u64 xdp_drop;
	__u64 xdp_redirect;
	__u64 _pad[2];
} __attribute__((aligned(64)));

/* xdp_devmap_xmit (ndo_xdp_xmit of a redirect to a device), key 0. */
struct fp_mon_devmap {
	__u64 sent;
	__u64 drops;
	__u64 err;         /* calls that returned an error */
	__u64 calls;
	__u64 _pad[4];
} __attribute__((aligned(64)));

/* ---- xdp-live generator pacing (bpf/xdp_gen.bpf.c; Rust side: crates/fastpath/src/bench.rs gen_live) ---- */

#define FP_GEN_MAX_CPUS      256     /* gen_pace entries: key = CPU number */
#define FP_GEN_PACE_SLACK_NS 200000  /* frames owed after a stall are caught up to 0.2 ms worth, no more */

/* One CPU's pacing: user space writes interval_ns (0 = unpaced) and zeroes the rest before a
 * run; the program sends a frame when now >= next_ns and XDP_DROPs the run otherwise, and
 * counts whole 1 ms windows and those within 20% of 1e6 / interval_ns frames. */
struct fp_gen_pace {
	__u64 interval_ns;
	__u64 next_ns;
	__u64 win_ms;        /* the current window: CLOCK_MONOTONIC ms, 0 before the first frame */
	__u64 win_count;     /* frames sent in it */
	__u64 windows;       /* whole windows closed (empty ones included; not the first, partial one) */
	__u64 within_20pct;  /* of those, windows within 20% of the nominal rate */
	__u64 first_ms;      /* the first window (partial, not scored) */
};

#define FP_GEN_TCP_MAX 96 /* bytes of a TCP frame's template the generator puts back */

/* The header bytes a forwarder downstream may rewrite (both MACs, the IPv4 TTL or IPv6 hop
 * limit), as the frame passed to BPF_PROG_RUN had them: live-frames pages keep the bytes of
 * their previous use, and a page that went through `fastpath fwd` comes back rewritten. */
struct fp_gen_hdr {
	__u8 macs[12];       /* destination, then source */
	__u8 ttl;            /* IPv4 TTL or IPv6 hop limit */
	__u8 set;            /* 0: restore nothing */
	__u8 tcp_len;        /* TCP frames: bytes of tcp[] to put back (0: none) */
	__u8 _pad;
	/* A TCP frame's first bytes (headers, no payload): a receiver may rewrite the page in
	 * place (a SYN answered with a cookie SYN-ACK), so the whole template goes back. */
	__u8 tcp[FP_GEN_TCP_MAX];
};

/* Windows are scored only at >= 5 frames per ms (interval <= 200 us): below that a whole
 * number of frames cannot land within 20% of the nominal count. */
#define FP_GEN_PACE_SCORED_MAX_INTERVAL_NS 200000

/* ---- pcap replay (bpf/xdp_replay.bpf.c; Rust side: crates/fastpath/src/bpf/replay.rs) ---- */

/* Bytes of one frame slot of map replay_frames: the most data_in BPF_PROG_RUN takes for XDP
 * (4096 - XDP_PACKET_HEADROOM 256 - the aligned skb_shared_info 320, bpf_prog_test_run_xdp in
 * net/bpf/test_run.c). NOT the longest frame sent: in live-frames mode the page also holds
 * struct xdp_page_head (112), so bpf_xdp_adjust_tail grows a frame to at most
 * 4096 - (256 + 112) - 320 = 3408 bytes (max_frame_len in crates/fastpath/src/bpf/replay.rs). */
#define FP_REPLAY_FRAME_MAX 3520

/* Timing of a replay (fp_replay_state.mode). */
#define FP_REPLAY_FILE 0   /* frame i of pass p due at p * span_ns + its at_ns */
#define FP_REPLAY_RATE 1   /* send k due at k * interval_ns */
#define FP_REPLAY_TOP  2   /* every send due at once */

/* The head of a replay_frames value; FP_REPLAY_FRAME_MAX bytes of frame follow it. */
struct fp_replay_frame_hdr {
	__u32 len;           /* frame bytes, 14..=FP_REPLAY_FRAME_MAX */
	__u32 _pad;
	__u64 at_ns;         /* time from the file's first frame */
};

/* The state of a replay (map replay_state, one entry): user space writes mode, total,
 * interval_ns, span_ns and zeroes the rest before the first run; the program counts. */
struct fp_replay_state {
	__u64 next;          /* sends done: send k = frame k % nframes of pass k / nframes */
	__u64 total;         /* sends in all (0: forever); runs after the last are XDP_DROPped */
	__u64 start_ns;      /* bpf_ktime_get_ns() of the first send, 0 before it */
	__u64 interval_ns;   /* FP_REPLAY_RATE */
	__u64 span_ns;       /* FP_REPLAY_FILE: one pass (the last frame's at_ns) */
	__u64 bytes;         /* frame bytes sent */
	__u64 errors;        /* runs whose frame the page could not take (XDP_ABORTED) */
	__u32 mode;          /* FP_REPLAY_* */
	__u32 err_frame;     /* index of the frame of the first error */
};

/* ---- CPUMAP redirect (bpf/xdp_redirect_cpu.bpf.c; Rust side: crates/fastpath/src/bpf/cpumap.rs) ---- */

#define FP_RCPU_MAX_CPUS  64   /* CPUs in the --cpus list */
#define FP_RCPU_MAP_SIZE  256  /* CPUMAP entries: key = CPU number */
#define FP_DIST_ROUND_ROBIN 0
#define FP_DIST_HASH        1
#define FP_DIST_PROTO       2  /* TCP -> list[0], UDP -> list[1 % n], anything else -> list[2 % n] */

/* Sizes both sides rely on (map value sizes; src/abi.rs repeats them). */
_Static_assert(sizeof(struct fp_pkt_stats) == 64, "fp_pkt_stats: one cache line per CPU");
_Static_assert(sizeof(struct fp_payload) == FP_PAYLOAD_LEN, "fp_payload: FP_PAYLOAD_LEN bytes");
_Static_assert(sizeof(struct fp_cls_key) == 56, "fp_cls_key: 56 bytes, no hole");
_Static_assert(sizeof(struct fp_cls_tuple) == 48, "fp_cls_tuple: 48 bytes");
_Static_assert(sizeof(struct fp_cls_slot) == 64, "fp_cls_slot: one cache line");
_Static_assert(sizeof(struct fp_cls_action) == 24, "fp_cls_action: 24 bytes");
_Static_assert(sizeof(struct fp_gen_pace) == 56, "fp_gen_pace: 56 bytes");
_Static_assert(sizeof(struct fp_gen_hdr) == 112, "fp_gen_hdr: 112 bytes");
_Static_assert(sizeof(struct fp_replay_frame_hdr) == 16, "fp_replay_frame_hdr: 16 bytes");
_Static_assert(sizeof(struct fp_replay_state) == 64, "fp_replay_state: 64 bytes");
_Static_assert(sizeof(struct fp_sc_config) == 32 + 4 * FP_SC_MAX_BCAST4, "fp_sc_config: 32 bytes and bcast4");
_Static_assert(sizeof(struct fp_cls_config) == 48, "fp_cls_config: 48 bytes");
_Static_assert(sizeof(struct fp_flow_key) == 48, "fp_flow_key: 48 bytes");
_Static_assert(sizeof(struct fp_cache_slot) == 56, "fp_cache_slot: 56 bytes");
_Static_assert(sizeof(struct fp_cache_ctl) == 16, "fp_cache_ctl: 16 bytes");
_Static_assert(sizeof(struct fp_cpu_set) == 4 + 4 * FP_CLS_MAX_CPUS, "fp_cpu_set: n + cpus");
_Static_assert(sizeof(struct fp_rate_key) == 20, "fp_rate_key: 20 bytes");
_Static_assert(sizeof(struct fp_rate_bucket) == 16, "fp_rate_bucket: 16 bytes");
_Static_assert(sizeof(struct fp_rate_total) == 24, "fp_rate_total: 24 bytes");
_Static_assert(sizeof(struct fp_mon_config) == 16, "fp_mon_config: 16 bytes");
_Static_assert(sizeof(struct fp_mon_enqueue) == 64, "fp_mon_enqueue: one cache line");
_Static_assert(sizeof(struct fp_mon_kthread) == 64, "fp_mon_kthread: one cache line");
_Static_assert(sizeof(struct fp_mon_devmap) == 64, "fp_mon_devmap: one cache line");

/* xdp_fwd (bpf/xdp_fwd.bpf.c): forwarding between ports. */
#define FP_FWD_L2 0
#define FP_FWD_L3 1
#define FP_FWD_MAX_PORTS 64   /* power of two */
struct fp_fwd_port {
	__u32 slot;           /* index of the port's counters in fwd_stats */
	__u32 peer_ifindex;   /* L2: where its frames go */
	__u8  mac[6];         /* L3: frames addressed to another MAC go to the kernel */
	__u8  rp_filter;      /* L3, IPv4: the source check, FP_FWD_RP_* */
	__u8  _pad;
	__u32 peer_max_bytes; /* L2: the largest frame the peer port takes (its MTU + 14 + 4, as
	                       * xdp_ok_fwd_dev() checks); 0: no limit known */
};
/* Reasons, per ingress port: every frame is counted under exactly one. */
#define FP_FWD_FORWARDED         0   /* XDP_REDIRECT through fwd_ports */
#define FP_FWD_DROP_PEER_DOWN    1   /* L2: the peer port is paused (down or gone): XDP_DROP */
#define FP_FWD_PASS_NOT_IP       2   /* L3 from here on: XDP_PASS to the kernel */
#define FP_FWD_PASS_NOT_FOR_US   3   /* destination MAC is not the port's */
#define FP_FWD_PASS_TTL          4   /* TTL / hop limit <= 1: the kernel sends ICMP time exceeded */
#define FP_FWD_PASS_NO_NEIGH     5   /* no neighbour entry yet: the kernel resolves it */
#define FP_FWD_PASS_FRAG_NEEDED  6   /* larger than the egress MTU: the kernel sends ICMP */
#define FP_FWD_PASS_FIB          7   /* any other FIB verdict (local, unreachable, blackhole, prohibit,
                                      * forwarding off), or back out of the ingress port (the kernel
                                      * also sends an ICMP redirect) */
#define FP_FWD_PASS_NO_PORT      8   /* the egress interface is not a port (or is paused) */
#define FP_FWD_PASS_MALFORMED    9   /* truncated or invalid header: IP version, IHL < 5, a total /
                                      * payload length the frame does not hold */
#define FP_FWD_DROP_MTU          10  /* L2: larger than the peer's MTU allows: XDP_DROP */
#define FP_FWD_PASS_BAD_CSUM     11  /* IPv4 header checksum wrong (the kernel drops it) */
#define FP_FWD_PASS_IP_OPTIONS   12  /* IPv4 options (IHL > 5), IPv6 hop-by-hop header */
#define FP_FWD_PASS_MARTIAN      13  /* martian source or destination (loopback, multicast,
                                      * broadcast, zero network, one of our own addresses; IPv6
                                      * also link-local, unspecified) */
#define FP_FWD_PASS_RP_FILTER    14  /* IPv4 source fails the reverse-path check rp_filter asks */
#define FP_FWD_COUNT             15
/* fp_fwd_port.rp_filter: the IPv4 source check made before forwarding */
#define FP_FWD_RP_OFF     0   /* rp_filter 0: only martians and our own addresses */
#define FP_FWD_RP_STRICT  1   /* rp_filter 1: the route back to the source leaves by the ingress */
#define FP_FWD_RP_LOOSE   2   /* rp_filter 2 (or custom rules): a unicast route back exists */
#define FP_FWD_RP_KERNEL  3   /* cannot be judged here (rules on iif): every IPv4 frame to the kernel */
/* Most IPv4 addresses of the namespace `fwd_local4` holds */
#define FP_FWD_MAX_LOCAL4 1024
_Static_assert(sizeof(struct fp_fwd_port) == 20, "fp_fwd_port: 20 bytes");
/* What happened to forwarded frames after the program returned XDP_REDIRECT, per port, from
 * the kernel's XDP tracepoints (native mode; a generic-mode redirect fires neither). */
struct fp_fwd_after {
	__u64 redirect_err;   /* by ingress port: the redirect failed at enqueue (xdp_redirect_err) */
	__u64 xmit_sent;      /* by egress port: frames its driver took (xdp_devmap_xmit sent) */
	__u64 xmit_drops;     /* by egress port: frames its driver refused (xdp_devmap_xmit drops) */
};
_Static_assert(sizeof(struct fp_fwd_after) == 24, "fp_fwd_after: 24 bytes");
/* L3: a per-CPU direct-mapped cache of bpf_fib_lookup answers (`fwd_fib_cache`), valid while
 * its generation equals `fwd_gen[0]` (user space bumps it on every rtnetlink route, neighbour,
 * address or link change; 0 = cache off). */
#define FP_FWD_FIB_SLOTS 4096     /* power of two */
struct fp_fwd_fib_entry {
	__u32 gen;            /* fwd_gen when filled; 0 = empty */
	__u32 in_ifindex;     /* ingress port (the FIB lookup's input) */
	__u32 out_ifindex;    /* egress port */
	__u16 max_tot_len;    /* the largest tot_len the kernel said fits (bigger: ask again) */
	__u8  family;         /* AF_INET / AF_INET6 */
	__u8  _pad;
	__u32 dst[4];         /* destination address (IPv4 in dst[0]) */
	__u8  smac[6];
	__u8  dmac[6];
};
_Static_assert(sizeof(struct fp_fwd_fib_entry) == 44, "fp_fwd_fib_entry: 44 bytes");
/* L3, IPv4: a per-CPU direct-mapped cache of the reverse-path lookups (`fwd_rp_cache`, the
 * rp_filter check), under the same generation as `fwd_fib_cache`. */
struct fp_fwd_rp_entry {
	__u32 gen;            /* fwd_gen when filled; 0 = empty */
	__u32 src;            /* the frame's source address (the reverse lookup's destination) */
	__u32 in_ifindex;     /* ingress port */
	__u32 out_ifindex;    /* where the route back to src leaves (valid if ok) */
	__u8  tos;
	__u8  ok;             /* the FIB found a unicast route back */
	__u8  _pad[2];
};
_Static_assert(sizeof(struct fp_fwd_rp_entry) == 20, "fp_fwd_rp_entry: 20 bytes");

/* xdp_capture: each captured frame is one ring-buffer record, this header then `caplen` bytes
 * of the frame (all buffers of a multi-buffer frame, up to the snap length). */
#define FP_CAP_MAX_BYTES 16384   /* longest caplen (power of two) */
#define FP_CAP_MAX_QUEUES 64     /* per-queue counters for queue ids below this */
struct fp_cap_hdr {
	__u64 tstamp_ns;   /* bpf_ktime_get_ns (CLOCK_MONOTONIC) when the program ran */
	__u32 queue;       /* rx_queue_index */
	__u32 len;         /* the frame's length on the wire (every buffer) */
	__u32 caplen;      /* bytes that follow */
	__u32 _pad;
};
_Static_assert(sizeof(struct fp_cap_hdr) == 24, "fp_cap_hdr: 24 bytes");
/* Per queue (last slot: queue ids >= FP_CAP_MAX_QUEUES - 1), per CPU. */
struct fp_cap_stats {
	__u64 seen;          /* frames the program ran on */
	__u64 captured;      /* frames written to the ring buffer */
	__u64 ringbuf_full;  /* frames not captured: the ring buffer had no room */
	__u64 _pad;
};
_Static_assert(sizeof(struct fp_cap_stats) == 32, "fp_cap_stats: 32 bytes");

#endif /* FASTPATH_ABI_H */
