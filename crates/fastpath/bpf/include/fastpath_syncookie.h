/* SPDX-License-Identifier: (MIT OR Apache-2.0) */
/*
 * fastpath_syncookie.h - the SYN cookie of `action = "syncookie"`, shared by the classifier
 * (XDP: generates cookies in SYN-ACKs, checks ACKs) and bpf/syncookie_tc.bpf.c (tc ingress:
 * checks the ACK again and creates the request socket with bpf_sk_assign_tcp_reqsk). Both
 * include this file, so generation and checks cannot disagree. docs/ARCHITECTURE.md has the
 * design; crates/fastpath/src/bpf/syncookie.rs is the same arithmetic in Rust (tests).
 *
 * Cookie (the SYN-ACK's sequence number), 32 bits:
 *   | 31 ... 3: SipHash-2-4(key, client addr, server addr, ports, client ISN, t) | 2..0: MSS index |
 * t = CLOCK_MONOTONIC ns >> FP_SC_PERIOD_SHIFT (68.7 s); an ACK is accepted under t and t - 1,
 * so a cookie lives 68.7 to 137 s (the kernel's own: 2 minutes). The MSS index is not covered
 * by the hash: it only picks among the table entries, and only for a client that already holds
 * a valid cookie for its own 4-tuple.
 *
 * Options: when the client offers timestamps, the SYN-ACK's TSval carries its window scale
 * (bits 0..3, 0xf = none) and SACK-permitted (bit 4) in its low 6 bits, which the ACK echoes
 * in TSecr (as the kernel's cookie_init_timestamp does). Without timestamps the SYN-ACK offers
 * neither window scaling nor SACK (nothing would carry them back) and only the MSS is kept.
 * ECN is not negotiated.
 */
#ifndef FASTPATH_SYNCOOKIE_H
#define FASTPATH_SYNCOOKIE_H

#include "fastpath_abi.h"

#define FP_SC_PERIOD_SHIFT 36
#define FP_SC_MSS_BITS     3
#define FP_SC_TS_WS_NONE   0xf
#define FP_SC_TS_SACK      0x10
#define FP_SC_TS_MASK      0x3f

/* Client MSS classes: the largest entry <= the client's MSS is kept (index 0 below the second).
 * Computed, not a table: a const array would land in .rodata, which this header must not add. */
#define SC_MSS_V4(i) ((i) == 0 ? 536 : (i) == 1 ? 1220 : (i) == 2 ? 1300 : (i) == 3 ? 1380 : \
		      (i) == 4 ? 1400 : (i) == 5 ? 1440 : (i) == 6 ? 1460 : 8960)
#define SC_MSS_V6(i) ((i) == 0 ? 1220 : (i) == 1 ? 1280 : (i) == 2 ? 1360 : (i) == 3 ? 1380 : \
		      (i) == 4 ? 1400 : (i) == 5 ? 1420 : (i) == 6 ? 1440 : 8940)

static __always_inline __u64 sc_rotl(__u64 x, int b)
{
	return (x << b) | (x >> (64 - b));
}

#define SC_SIPROUND                                                                       \
	do {                                                                              \
		v0 += v1; v1 = sc_rotl(v1, 13); v1 ^= v0; v0 = sc_rotl(v0, 32);          \
		v2 += v3; v3 = sc_rotl(v3, 16); v3 ^= v2;                                 \
		v0 += v3; v3 = sc_rotl(v3, 21); v3 ^= v0;                                 \
		v2 += v1; v1 = sc_rotl(v1, 17); v1 ^= v2; v2 = sc_rotl(v2, 32);          \
	} while (0)

/* SipHash-2-4 (Aumasson, Bernstein 2012) of the 8 * n bytes m[0..n] (n a constant). */
static __always_inline __u64 sc_siphash(__u64 k0, __u64 k1, const __u64 *m, const int n)
{
	__u64 v0 = 0x736f6d6570736575ull ^ k0, v1 = 0x646f72616e646f6dull ^ k1;
	__u64 v2 = 0x6c7967656e657261ull ^ k0, v3 = 0x7465646279746573ull ^ k1;
	__u64 b = (__u64)(n * 8) << 56;

#pragma unroll
	for (int i = 0; i < n; i++) {
		v3 ^= m[i];
		SC_SIPROUND;
		SC_SIPROUND;
		v0 ^= m[i];
	}
	v3 ^= b;
	SC_SIPROUND;
	SC_SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SC_SIPROUND;
	SC_SIPROUND;
	SC_SIPROUND;
	SC_SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

/* The connection as the client sent it: addresses as in the packet (IPv4 in the first 4
 * bytes), ports in network order, the client's ISN in host order. */
struct sc_tuple {
	__u8 src[16];
	__u8 dst[16];
	__u16 sport_be;
	__u16 dport_be;
	__u32 isn;
} __attribute__((aligned(8)));

/* The hash of `tu` (IPv6 if v6) in period t: message words as the host reads them. */
static __always_inline __u32 sc_hash(const struct fp_sc_config *c, const struct sc_tuple *tu, int v6, __u64 t)
{
	const __u64 *s = (const __u64 *)tu->src, *d = (const __u64 *)tu->dst;
	__u64 ports = (__u64)tu->sport_be | (__u64)tu->dport_be << 16 | (__u64)tu->isn << 32;

	if (v6) {
		__u64 m[6] = { s[0], s[1], d[0], d[1], ports, t };
		return (__u32)sc_siphash(c->k0, c->k1, m, 6);
	}
	__u64 m[3] = { (__u64)*(const __u32 *)tu->src | (__u64)*(const __u32 *)tu->dst << 32, ports, t };
	return (__u32)sc_siphash(c->k0, c->k1, m, 3);
}

static __always_inline __u64 sc_period(void)
{
	return bpf_ktime_get_ns() >> FP_SC_PERIOD_SHIFT;
}

/* The MSS index for a client MSS of `mss`: the last (largest) entry <= mss, 0 below all. */
static __always_inline __u32 sc_mss_index(__u16 mss, int v6)
{
	__u32 i = 0;

#pragma unroll
	for (int k = 1; k < 8; k++) {
		if (mss >= (v6 ? SC_MSS_V6(k) : SC_MSS_V4(k)))
			i = k;
	}
	return i;
}

static __always_inline __u16 sc_mss_of(__u32 idx, int v6)
{
	idx &= 7;
	return v6 ? SC_MSS_V6(idx) : SC_MSS_V4(idx);
}

/* The cookie for `tu` at CLOCK_MONOTONIC `now_ns` (read once per SYN with the TSval). */
static __always_inline __u32 sc_cookie(const struct fp_sc_config *c, const struct sc_tuple *tu, int v6, __u32 mss_idx, __u64 now_ns)
{
	return (sc_hash(c, tu, v6, now_ns >> FP_SC_PERIOD_SHIFT) & ~7u) | (mss_idx & 7);
}

/* 1 if `cookie` (the ACK's ack_seq - 1) is valid for `tu` (isn = the ACK's seq - 1) now. */
static __always_inline int sc_check(const struct fp_sc_config *c, const struct sc_tuple *tu, int v6, __u32 cookie)
{
	__u64 t = sc_period();

	if (((sc_hash(c, tu, v6, t) ^ cookie) & ~7u) == 0)
		return 1;
	return ((sc_hash(c, tu, v6, t - 1) ^ cookie) & ~7u) == 0;
}

/* TCP options of a SYN or an ACK. */
struct sc_opts {
	__u16 mss;      /* 0: none */
	__u8 ws;        /* FP_SC_TS_WS_NONE: none; else the shift, at most 14 */
	__u8 sack;
	__u8 ts;
	__u8 _pad[3];
	__u32 tsval;
	__u32 tsecr;
};

/* sc_b(b, i), the mask kept for the verifier (the compiler would drop it where it knows i < 40,
 * and the verifier may not). */
static __always_inline __u8 sc_b(const __u8 *b, __u32 i)
{
	asm volatile("%0 &= 63" : "+r"(i));
	return b[i];
}

/* Copies the `len` (<= 40) option bytes at packet pointer `src` (before `end`) into st->b;
 * -1 if they do not all lie before `end`. Byte by byte with constant indexes: a helper read of
 * a variable length would need the verifier to see it non-zero in the very register passed. */
static __always_inline int sc_copy_opts(__u8 *dst, const __u8 *src, const void *end, __u32 len)
{
	for (int i = 0; i < 40; i++) {
		if ((__u32)i >= len)
			break;
		if ((const void *)(src + i + 1) > end)
			return -1;
		dst[i] = src[i];
	}
	return 0;
}

/* bpf_loop() state of sc_parse_opts(): the option bytes, where the walk is, what it found. */
struct sc_parse {
	__u8 b[64];
	__u32 len;
	__u32 i;
	__s32 err;
	__u32 _pad;
	struct sc_opts o;
};

static long sc_parse_step(__u64 n, void *arg)
{
	struct sc_parse *st = arg;
	__u32 i = st->i;
	__u8 kind, olen, x;

	if (i >= st->len || i >= 40)
		return 1;
	kind = sc_b(st->b, i);
	if (kind == 0)
		return 1;
	if (kind == 1) {
		st->i = i + 1;
		return 0;
	}
	if (i + 1 >= st->len) {
		st->err = -1;
		return 1;
	}
	olen = sc_b(st->b, i + 1);
	if (olen < 2 || i + olen > st->len) {
		st->err = -1;
		return 1;
	}
	if (kind == 2 && olen == 4) {
		st->o.mss = (__u16)sc_b(st->b, i + 2) << 8 | sc_b(st->b, i + 3);
	} else if (kind == 3 && olen == 3) {
		x = sc_b(st->b, i + 2);
		st->o.ws = x > 14 ? 14 : x;
	} else if (kind == 4 && olen == 2) {
		st->o.sack = 1;
	} else if (kind == 8 && olen == 10) {
		st->o.ts = 1;
		st->o.tsval = (__u32)sc_b(st->b, i + 2) << 24 | (__u32)sc_b(st->b, i + 3) << 16 |
			      (__u32)sc_b(st->b, i + 4) << 8 | sc_b(st->b, i + 5);
		st->o.tsecr = (__u32)sc_b(st->b, i + 6) << 24 | (__u32)sc_b(st->b, i + 7) << 16 |
			      (__u32)sc_b(st->b, i + 8) << 8 | sc_b(st->b, i + 9);
	}
	st->i = i + olen;
	return 0;
}

/* Parses st->len (<= 40) bytes of TCP options in st->b into st->o with bpf_loop (Linux >= 5.17;
 * its callback is verified once). A truncated option ends the parse (what was read stays);
 * returns -1 if an option's length is below 2 or runs past the end (the kernel's
 * tcp_parse_options stops there too), else 0. */
static __always_inline int sc_parse_opts(struct sc_parse *st)
{
	st->i = 0;
	st->err = 0;
	st->o.mss = 0;
	st->o.ws = FP_SC_TS_WS_NONE;
	st->o.sack = 0;
	st->o.ts = 0;
	st->o.tsval = 0;
	st->o.tsecr = 0;
	bpf_loop(40, sc_parse_step, st, 0);
	return st->err;
}

#endif /* FASTPATH_SYNCOOKIE_H */
