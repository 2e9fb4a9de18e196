//! The generator's test frames: Ethernet / IPv4 or IPv6 / UDP with the fastpath payload
//! (bpf/include/fastpath_abi.h: magic, stream, seq, tstamp_ns at byte 42 after IPv4, 62 after
//! IPv6), correct IPv4 and UDP checksums, the checks a receiver applies to prove a frame arrived
//! intact, and [`Flows`]: many distinct 5-tuples from one template. (A receiver's
//! exactly-once accounting of these frames is fastpath-tools' `payload::SeqTracker`.)

use std::net::IpAddr;

use crate::abi::{self, fp_payload};

/// Offset of the fastpath payload in an IPv4 frame (14 Ethernet + 20 IPv4 + 8 UDP; `FP_PAYLOAD_OFF`).
pub const PAYLOAD_OFF: usize = abi::FP_PAYLOAD_OFF as usize;
/// Offset of the fastpath payload in an IPv6 frame (14 Ethernet + 40 IPv6 + 8 UDP).
pub const PAYLOAD_OFF6: usize = PAYLOAD_OFF + IP6_EXTRA;
/// Length of the fastpath payload (`FP_PAYLOAD_LEN`, the size of `struct fp_payload`).
pub const PAYLOAD_LEN: usize = abi::FP_PAYLOAD_LEN as usize;
/// Payload magic (`FP_PAYLOAD_MAGIC`).
pub const PAYLOAD_MAGIC: u16 = abi::FP_PAYLOAD_MAGIC as u16;
const _: () =
    assert!(PAYLOAD_MAGIC as u32 == abi::FP_PAYLOAD_MAGIC && std::mem::size_of::<fp_payload>() == PAYLOAD_LEN);
/// Smallest IPv4 frame that holds the payload (62 bytes).
pub const MIN_FRAME_LEN: usize = PAYLOAD_OFF + PAYLOAD_LEN;
/// Smallest IPv6 frame that holds the payload (82 bytes).
pub const MIN_FRAME_LEN6: usize = PAYLOAD_OFF6 + PAYLOAD_LEN;
/// Largest frame we build: a 9000-byte (jumbo) MTU plus the Ethernet header.
pub const MAX_FRAME_LEN: usize = 9014;
/// An IPv6 header is 20 bytes longer than an option-less IPv4 header.
const IP6_EXTRA: usize = 20;

/// Where the fields of a generated frame are, per IP version.
#[derive(Debug, Clone, Copy)]
struct Layout {
    /// Offset of the UDP header.
    udp: usize,
    /// Offset of the last 16-bit word of the source address.
    src_last_word: usize,
    /// Offset of the IPv4 header checksum (None for IPv6).
    ip_csum: Option<usize>,
}

const V4: Layout = Layout { udp: 34, src_last_word: 28, ip_csum: Some(24) };
const V6: Layout = Layout { udp: 54, src_last_word: 36, ip_csum: None };

impl Layout {
    /// The layout of `frame` by its EtherType (IPv6 if 0x86dd, else IPv4).
    #[inline]
    fn of(frame: &[u8]) -> Layout {
        if frame.get(12..14) == Some(&[0x86, 0xdd]) {
            V6
        } else {
            V4
        }
    }
    #[inline]
    fn udp_csum(self) -> usize {
        self.udp + 6
    }
    #[inline]
    fn payload(self) -> usize {
        self.udp + 8
    }
}

/// What a generated frame looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpFrameSpec {
    /// Ethernet source.
    pub src_mac: [u8; 6],
    /// Ethernet destination.
    pub dst_mac: [u8; 6],
    /// IP source, IPv4 or IPv6 (the same family as `dst_ip`).
    pub src_ip: IpAddr,
    /// IP destination.
    pub dst_ip: IpAddr,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
    /// Frame length in bytes without FCS: MIN_FRAME_LEN..=MAX_FRAME_LEN for IPv4 (64 = the
    /// classic "64-byte frame"), MIN_FRAME_LEN6..=MAX_FRAME_LEN for IPv6.
    pub frame_len: usize,
}

impl UdpFrameSpec {
    /// The smallest frame length for this spec's IP version.
    pub fn min_frame_len(&self) -> usize {
        if self.src_ip.is_ipv6() {
            MIN_FRAME_LEN6
        } else {
            MIN_FRAME_LEN
        }
    }
}

/// The payload fields of one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Payload {
    /// Sender stream (CPU of an xdp-live thread, or the xsk sender's id).
    pub stream: u16,
    /// Per-stream sequence number, from 1.
    pub seq: u64,
    /// CLOCK_MONOTONIC at send, ns.
    pub tstamp_ns: u64,
}

/// Why a received frame is not an intact fastpath frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// Shorter than MIN_FRAME_LEN (IPv4) or MIN_FRAME_LEN6 (IPv6).
    #[error("frame of {0} bytes is too short for a fastpath frame")]
    Short(usize),
    /// Not IPv4/UDP or IPv6/UDP.
    #[error("not an IPv4/UDP or IPv6/UDP frame")]
    NotUdp4,
    /// IPv4 header checksum wrong.
    #[error("IPv4 header checksum mismatch")]
    IpChecksum,
    /// IP total (payload) length disagrees with the frame.
    #[error("IP length disagrees with the frame length")]
    Length,
    /// UDP checksum wrong.
    #[error("UDP checksum mismatch")]
    UdpChecksum,
    /// Payload magic missing.
    #[error("payload magic missing")]
    Magic,
    /// A byte after the stamp differs from the template's fill pattern ([`fill_byte`]).
    #[error("payload byte at frame offset {0} differs from the template")]
    Fill(usize),
}

/// The template's byte at frame offset `i` after the payload stamp: `i mod 251` (a prime, so
/// that a frame whose buffers were reordered or shifted differs even where the one's complement
/// checksum, blind to swapped 16-bit words, does not).
#[inline]
pub fn fill_byte(i: usize) -> u8 {
    (i % 251) as u8
}

/// One's complement sum of 16-bit big-endian words (RFC 1071), unfolded.
fn sum16(data: &[u8], mut acc: u64) -> u64 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u16::from_be_bytes([c[0], c[1]]) as u64;
    }
    if let [last] = chunks.remainder() {
        acc += (*last as u64) << 8;
    }
    acc
}

fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The Internet checksum (RFC 1071) of `data`.
pub fn inet_checksum(data: &[u8]) -> u16 {
    !fold(sum16(data, 0))
}

/// The UDP checksum a frame of layout `l` should carry (its checksum field counted as zero).
fn udp_checksum_l(frame: &[u8], l: Layout) -> u16 {
    let udp_len = u16::from_be_bytes([frame[l.udp + 4], frame[l.udp + 5]]) as usize;
    // Pseudo-header: addresses, protocol, UDP length (RFC 768, RFC 8200 8.1).
    let mut acc = match l.ip_csum {
        Some(_) => sum16(&frame[26..34], 0),
        None => sum16(&frame[22..54], 0),
    };
    acc += 17 + udp_len as u64;
    let end = (l.udp + udp_len).min(frame.len());
    acc = sum16(&frame[l.udp..l.udp + 6], acc);
    acc = sum16(&frame[l.udp + 8..end], acc);
    let c = !fold(acc);
    if c == 0 {
        0xffff
    } else {
        c
    }
}

/// The pseudo-header sum of a UDP frame of layout `l` (addresses, protocol, UDP length),
/// folded, not complemented.
fn udp_pseudo_sum(frame: &[u8], l: Layout) -> u16 {
    let udp_len = u16::from_be_bytes([frame[l.udp + 4], frame[l.udp + 5]]) as u64;
    let acc = match l.ip_csum {
        Some(_) => sum16(&frame[26..34], 0),
        None => sum16(&frame[22..54], 0),
    };
    fold(acc + 17 + udp_len)
}

/// Where the UDP checksum of a frame built by [`build_udp_frame`] starts and lies, as a TX
/// checksum offload request gives them (`csum_start`, `csum_offset`: the UDP header's offset,
/// 34 for IPv4 or 54 for IPv6, and 6; [`crate::xsk::TxCsum`]).
pub fn udp_csum_request(frame: &[u8]) -> (u16, u16) {
    (Layout::of(frame).udp as u16, 6)
}

/// Writes into the UDP checksum field of a frame built by [`build_udp_frame`] the sum of its
/// pseudo-header only (addresses, protocol, UDP length; folded, not complemented): a partial
/// checksum, what a packet sent with a checksum offload request carries (the kernel's
/// `CHECKSUM_PARTIAL`, `~csum_tcpudp_magic(..)`), for the device to add the UDP header and
/// payload from `csum_start` and complement. Returns ([`udp_csum_request`]) where it lies.
/// Constant cost: the payload is not read.
#[inline]
pub fn udp_csum_partial(frame: &mut [u8]) -> (u16, u16) {
    let l = Layout::of(frame);
    let c = udp_pseudo_sum(frame, l);
    frame[l.udp_csum()..l.udp_csum() + 2].copy_from_slice(&c.to_be_bytes());
    (l.udp as u16, 6)
}

#[cfg(test)]
fn udp_checksum(frame: &[u8]) -> u16 {
    udp_checksum_l(frame, Layout::of(frame))
}

/// Writes the template frame for `spec` into `out[..spec.frame_len]`: payload with stream 0,
/// seq 0, tstamp 0, and correct checksums. IPv6 frames have hop limit 64 and no extension
/// header.
///
/// # Panics
///
/// If `spec.frame_len` is not from [`UdpFrameSpec::min_frame_len`] to [`MAX_FRAME_LEN`], `out`
/// is shorter than `spec.frame_len`, or the two addresses are of different IP versions.
pub fn build_udp_frame(spec: &UdpFrameSpec, out: &mut [u8]) {
    assert!((spec.min_frame_len()..=MAX_FRAME_LEN).contains(&spec.frame_len), "frame length out of range");
    let f = &mut out[..spec.frame_len];
    f.fill(0);
    f[0..6].copy_from_slice(&spec.dst_mac);
    f[6..12].copy_from_slice(&spec.src_mac);
    let l = match (spec.src_ip, spec.dst_ip) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => {
            f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
            let ip_len = (spec.frame_len - 14) as u16;
            f[14] = 0x45;
            f[16..18].copy_from_slice(&ip_len.to_be_bytes());
            f[20..22].copy_from_slice(&0x4000u16.to_be_bytes()); // DF
            f[22] = 64;
            f[23] = 17;
            f[26..30].copy_from_slice(&src.octets());
            f[30..34].copy_from_slice(&dst.octets());
            let c = inet_checksum(&f[14..34]);
            f[24..26].copy_from_slice(&c.to_be_bytes());
            V4
        }
        (IpAddr::V6(src), IpAddr::V6(dst)) => {
            f[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
            f[14] = 0x60;
            f[18..20].copy_from_slice(&((spec.frame_len - V6.udp) as u16).to_be_bytes());
            f[20] = 17;
            f[21] = 64;
            f[22..38].copy_from_slice(&src.octets());
            f[38..54].copy_from_slice(&dst.octets());
            V6
        }
        _ => panic!("source and destination addresses of different IP versions"),
    };
    f[l.udp..l.udp + 2].copy_from_slice(&spec.src_port.to_be_bytes());
    f[l.udp + 2..l.udp + 4].copy_from_slice(&spec.dst_port.to_be_bytes());
    f[l.udp + 4..l.udp + 6].copy_from_slice(&((spec.frame_len - l.udp) as u16).to_be_bytes());
    f[l.payload()..l.payload() + 2].copy_from_slice(&PAYLOAD_MAGIC.to_le_bytes());
    let fill_from = l.payload() + PAYLOAD_LEN;
    for (i, b) in f.iter_mut().enumerate().skip(fill_from) {
        *b = fill_byte(i);
    }
    let c = udp_checksum_l(f, l);
    f[l.udp_csum()..l.udp_csum() + 2].copy_from_slice(&c.to_be_bytes());
}

/// RFC 1624 eqn. 3: the checksum `hc` after one 16-bit word of the data it covers changed from
/// `old` to `new`: HC' = ~(~HC + ~m + m'). Byte order does not matter as long as it is the same
/// for all three.
#[inline]
fn csum_replace(hc: u16, old: u16, new: u16) -> u16 {
    !fold((!hc) as u64 + (!old) as u64 + new as u64)
}

/// Stamps `p` into a frame built by [`build_udp_frame`] (IPv4 or IPv6) and updates the UDP
/// checksum incrementally from the bytes it replaces (RFC 1624: HC' = ~(~HC + ~m + m')).
/// Costs the same for every frame length.
#[inline]
pub fn stamp(frame: &mut [u8], p: &Payload) {
    let l = Layout::of(frame);
    let (po, co) = (l.payload(), l.udp_csum());
    // struct fp_payload, little-endian on the wire.
    let wire = fp_payload {
        magic: PAYLOAD_MAGIC.to_le(),
        stream: p.stream.to_le(),
        seq: p.seq.to_le(),
        tstamp_ns: p.tstamp_ns.to_le(),
    };
    let new: [u8; PAYLOAD_LEN] = bytemuck::cast(wire);
    let old = &frame[po..po + PAYLOAD_LEN];
    let hc = u16::from_be_bytes([frame[co], frame[co + 1]]);
    // ~m as the one's complement sum of the inverted old words.
    let mut acc = (!hc) as u64;
    for c in old.chunks_exact(2) {
        acc += (!u16::from_be_bytes([c[0], c[1]])) as u64;
    }
    acc = sum16(&new, acc);
    let mut c = !fold(acc);
    if c == 0 {
        c = 0xffff;
    }
    frame[po..po + PAYLOAD_LEN].copy_from_slice(&new);
    frame[co..co + 2].copy_from_slice(&c.to_be_bytes());
}

/// Reads the payload of a frame (IPv4 or IPv6) without checking anything else (hot path).
#[inline]
pub fn payload(frame: &[u8]) -> Option<Payload> {
    let p = abi::read::<fp_payload>(frame.get(Layout::of(frame).payload()..)?)?;
    if u16::from_le(p.magic) != PAYLOAD_MAGIC {
        return None;
    }
    Some(Payload { stream: u16::from_le(p.stream), seq: u64::from_le(p.seq), tstamp_ns: u64::from_le(p.tstamp_ns) })
}

/// Checks a received frame completely: IPv4/UDP (option-less) or IPv6/UDP (no extension
/// header), checksums, lengths, payload magic, and every byte after the stamp against the
/// template's fill pattern ([`fill_byte`]; bytes beyond the IP length are not checked).
///
/// # Errors
///
/// The first check that fails, in this order: [`FrameError::Short`], [`FrameError::NotUdp4`] (not
/// option-less IPv4/UDP or extension-less IPv6/UDP), [`FrameError::IpChecksum`],
/// [`FrameError::Length`], [`FrameError::UdpChecksum`], [`FrameError::Magic`], [`FrameError::Fill`]
/// with the offset of the first differing byte.
pub fn verify(frame: &[u8]) -> Result<Payload, FrameError> {
    let l = Layout::of(frame);
    let min = if l.ip_csum.is_some() { MIN_FRAME_LEN } else { MIN_FRAME_LEN6 };
    if frame.len() < min {
        return Err(FrameError::Short(frame.len()));
    }
    let udp_len = u16::from_be_bytes([frame[l.udp + 4], frame[l.udp + 5]]) as usize;
    if l.ip_csum.is_some() {
        if frame[12..14] != [0x08, 0x00] || frame[14] != 0x45 || frame[23] != 17 {
            return Err(FrameError::NotUdp4);
        }
        if inet_checksum(&frame[14..34]) != 0 {
            return Err(FrameError::IpChecksum);
        }
        let ip_len = u16::from_be_bytes([frame[16], frame[17]]) as usize;
        if 14 + ip_len > frame.len() || udp_len != ip_len - 20 {
            return Err(FrameError::Length);
        }
    } else {
        if frame[14] >> 4 != 6 || frame[20] != 17 {
            return Err(FrameError::NotUdp4);
        }
        let pl = u16::from_be_bytes([frame[18], frame[19]]) as usize;
        if V6.udp + pl > frame.len() || udp_len != pl {
            return Err(FrameError::Length);
        }
    }
    let co = l.udp_csum();
    let got = u16::from_be_bytes([frame[co], frame[co + 1]]);
    // IPv6 forbids a zero UDP checksum (RFC 8200 8.1).
    if (got != 0 || l.ip_csum.is_none()) && got != udp_checksum_l(frame, l) {
        return Err(FrameError::UdpChecksum);
    }
    let p = payload(frame).ok_or(FrameError::Magic)?;
    let end = l.udp + udp_len;
    let from = l.payload() + PAYLOAD_LEN;
    if let Some(off) = frame.get(from..end).and_then(|b| b.iter().zip(from..).position(|(&b, i)| b != fill_byte(i))) {
        return Err(FrameError::Fill(from + off));
    }
    Ok(p)
}

/// Most flows `gen --flows` accepts: 2^24 = 16,777,216, every (last byte of the source
/// address, source port) pair: 256 x 65,536.
pub const MAX_FLOWS: u32 = 1 << 24;
const M24: u32 = MAX_FLOWS - 1;

/// Many distinct 5-tuples from one template frame (`fastpath gen --flows N --seed S`).
///
/// Flow `i` (0..n) gets the 24-bit value `t = mix(i)`, a bijection of 0..2^24 keyed by the seed,
/// and the template's source address with its last byte replaced by `t >> 16` and source port
/// `t & 0xffff`: n flows are n distinct 5-tuples (protocol, destination address and port stay
/// the template's), their sources within the /24 (IPv4) or /120 (IPv6) of the template's source.
/// Frame `seq` (from 1) of a stream carries flow `(seq - 1) % n`, so each stream visits every
/// flow in turn: a cache smaller than n misses on every frame, as under a real flood, and each
/// flow gets `count / n` frames of a stream that sent `count` (a multiple of n).
///
/// The same mix runs in bpf/xdp_gen.bpf.c (`flow_mix`) with the keys of [`Flows::keys`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flows {
    n: u32,
    keys: [u32; 3],
}

/// SplitMix64's output function (Steele, Lea, Flood 2014): the seed's key derivation.
fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Flows {
    /// `n` flows (1..=[`MAX_FLOWS`]) drawn with `seed` (any u64; the same seed gives the same
    /// tuples in the same order). None if `n` is out of range.
    pub fn new(n: u32, seed: u64) -> Option<Flows> {
        if !(1..=MAX_FLOWS).contains(&n) {
            return None;
        }
        let k = |j: u64| (splitmix64(seed.wrapping_add(j)) as u32) & M24;
        Some(Flows { n, keys: [k(0), k(1), k(2)] })
    }

    /// Number of flows.
    pub fn n(&self) -> u32 {
        self.n
    }

    /// The three 24-bit keys of the mix (what the BPF generator is loaded with).
    pub fn keys(&self) -> [u32; 3] {
        self.keys
    }

    /// The 24-bit (address last byte << 16 | source port) of flow `i`: a bijection of
    /// 0..2^24 (xor, add and multiply by an odd constant mod 2^24, and xorshifts, each
    /// invertible), so distinct flows never collide.
    #[inline]
    pub fn mix(&self, i: u32) -> u32 {
        let [k0, k1, k2] = self.keys;
        let mut x = (i ^ k0) & M24;
        x = x.wrapping_mul(0x9e_3779) & M24; // odd multiplier
        x ^= x >> 12;
        x = x.wrapping_add(k1) & M24;
        x = x.wrapping_mul(0x85_ebcb) & M24; // odd multiplier
        x ^= x >> 11;
        (x ^ k2) & M24
    }

    /// Flow of the frame with sequence number `seq` (from 1) of a stream.
    #[inline]
    pub fn flow_of_seq(&self, seq: u64) -> u32 {
        (seq.wrapping_sub(1) % self.n as u64) as u32
    }

    /// Rewrites the source address's last byte and the source port of `frame` (built by
    /// [`build_udp_frame`], IPv4 or IPv6) to flow `i`'s, fixing the IPv4 header and UDP
    /// checksums incrementally (RFC 1624) from the bytes actually in the frame.
    #[inline]
    pub fn apply(&self, frame: &mut [u8], i: u32) {
        let t = self.mix(i);
        let l = Layout::of(frame);
        let rd = |f: &[u8], o: usize| u16::from_be_bytes([f[o], f[o + 1]]);
        let wa = l.src_last_word;
        let (old_a, old_p) = (rd(frame, wa), rd(frame, l.udp));
        let new_a = (old_a & 0xff00) | (t >> 16) as u16;
        let new_p = t as u16;
        if let Some(ic) = l.ip_csum {
            let c = csum_replace(rd(frame, ic), old_a, new_a);
            frame[ic..ic + 2].copy_from_slice(&c.to_be_bytes());
        }
        let co = l.udp_csum();
        let hc = rd(frame, co);
        if hc != 0 || l.ip_csum.is_none() {
            let mut c = csum_replace(csum_replace(hc, old_a, new_a), old_p, new_p);
            if c == 0 {
                c = 0xffff;
            }
            frame[co..co + 2].copy_from_slice(&c.to_be_bytes());
        }
        frame[wa..wa + 2].copy_from_slice(&new_a.to_be_bytes());
        frame[l.udp..l.udp + 2].copy_from_slice(&new_p.to_be_bytes());
    }
}

/// Swaps Ethernet source and destination in place (l2fwd).
#[inline]
pub fn swap_macs(frame: &mut [u8]) {
    let (dst, rest) = frame.split_at_mut(6);
    dst.swap_with_slice(&mut rest[..6]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn spec(len: usize) -> UdpFrameSpec {
        UdpFrameSpec {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src_ip: Ipv4Addr::new(10, 99, 0, 1).into(),
            dst_ip: Ipv4Addr::new(10, 99, 0, 2).into(),
            src_port: 9000,
            dst_port: 9,
            frame_len: len,
        }
    }

    fn spec6(len: usize) -> UdpFrameSpec {
        UdpFrameSpec {
            src_ip: "fd99::1".parse::<Ipv6Addr>().unwrap().into(),
            dst_ip: "fd99::2".parse::<Ipv6Addr>().unwrap().into(),
            ..spec(len)
        }
    }

    /// A partial checksum is the pseudo-header sum; completing it as the kernel does for
    /// CHECKSUM_PARTIAL (skb_checksum_help: sum from csum_start to the end, field included,
    /// fold, complement, 0 sent as 0xffff) gives the full checksum.
    #[test]
    fn a_partial_udp_checksum_completes_to_the_full_one() {
        for sp in [spec(64), spec(65), spec(1514), spec6(120), spec6(1001)] {
            let mut f = vec![0u8; sp.frame_len];
            build_udp_frame(&sp, &mut f);
            stamp(&mut f, &Payload { stream: 3, seq: 77, tstamp_ns: 123_456 });
            let full = f.clone();
            let (start, off) = udp_csum_partial(&mut f);
            assert_eq!((start, off), udp_csum_request(&full));
            let l = Layout::of(&f);
            assert_eq!(start as usize, l.udp);
            assert_eq!(
                u16::from_be_bytes([f[l.udp_csum()], f[l.udp_csum() + 1]]),
                udp_pseudo_sum(&f, l),
                "the field holds the pseudo-header sum"
            );
            assert!(matches!(verify(&f), Err(FrameError::UdpChecksum)), "a partial checksum is not a valid one");
            let co = start as usize + off as usize;
            let c = !fold(sum16(&f[start as usize..], 0));
            f[co..co + 2].copy_from_slice(&(if c == 0 { 0xffff } else { c }).to_be_bytes());
            assert_eq!(f, full, "completed: the frame as build_udp_frame + stamp made it");
            assert!(verify(&f).is_ok());
            etherparse_ok(&f);
        }
    }

    /// Full checks of a frame with etherparse: IPv4 header checksum, UDP checksum.
    fn etherparse_ok(buf: &[u8]) -> (IpAddr, IpAddr, u8, u16, u16) {
        let p = etherparse::SlicedPacket::from_ethernet(buf).expect("etherparse accepts it");
        let Some(etherparse::TransportSlice::Udp(udp)) = p.transport else { panic!("not UDP") };
        let (want, src, dst): (u16, IpAddr, IpAddr) = match p.net {
            Some(etherparse::NetSlice::Ipv4(ip)) => {
                assert_eq!(ip.header().to_header().calc_header_checksum(), ip.header().header_checksum());
                let c = udp.to_header().calc_checksum_ipv4(&ip.header().to_header(), udp.payload()).unwrap();
                (c, ip.header().source_addr().into(), ip.header().destination_addr().into())
            }
            Some(etherparse::NetSlice::Ipv6(ip)) => {
                let c = udp.to_header().calc_checksum_ipv6(&ip.header().to_header(), udp.payload()).unwrap();
                (c, ip.header().source_addr().into(), ip.header().destination_addr().into())
            }
            _ => panic!("not IP"),
        };
        assert_eq!(udp.checksum(), want);
        (src, dst, 17, udp.source_port(), udp.destination_port())
    }

    #[test]
    fn ipv6_template_stamps_and_verifies() {
        for len in [MIN_FRAME_LEN6, 128, 1514] {
            let mut buf = vec![0u8; len];
            build_udp_frame(&spec6(len), &mut buf);
            let t = etherparse_ok(&buf);
            assert_eq!(t, (spec6(len).src_ip, spec6(len).dst_ip, 17, 9000, 9));
            let p = Payload { stream: 7, seq: 0x1234_5678_9abc, tstamp_ns: 99 };
            stamp(&mut buf, &p);
            etherparse_ok(&buf);
            assert_eq!(verify(&buf), Ok(p));
            let mut b = buf.clone();
            b[len - 1] ^= 1;
            assert_eq!(verify(&b), Err(FrameError::UdpChecksum));
        }
        let mut short = vec![0u8; 70];
        short[12..14].copy_from_slice(&[0x86, 0xdd]);
        assert_eq!(verify(&short), Err(FrameError::Short(70)));
    }

    #[test]
    fn flows_are_distinct_seeded_and_keep_checksums() {
        assert!(Flows::new(0, 1).is_none() && Flows::new(MAX_FLOWS + 1, 1).is_none());
        // The mix is a bijection of 0..2^24: every value once.
        let f = Flows::new(MAX_FLOWS, 42).unwrap();
        let mut seen = vec![0u64; (MAX_FLOWS / 64) as usize];
        for i in 0..MAX_FLOWS {
            let t = f.mix(i);
            assert!(t <= M24);
            assert_eq!(seen[(t / 64) as usize] & (1 << (t % 64)), 0, "flow {i} collides");
            seen[(t / 64) as usize] |= 1 << (t % 64);
        }
        // Another seed, other tuples; the same seed, the same ones.
        let (a, b) = (Flows::new(1000, 1).unwrap(), Flows::new(1000, 2).unwrap());
        assert_ne!((0..1000).map(|i| a.mix(i)).collect::<Vec<_>>(), (0..1000).map(|i| b.mix(i)).collect::<Vec<_>>());
        assert_eq!(a, Flows::new(1000, 1).unwrap());
        assert_eq!((a.flow_of_seq(1), a.flow_of_seq(1000), a.flow_of_seq(1001)), (0, 999, 0));
        for sp in [spec(64), spec6(82)] {
            let mut buf = vec![0u8; sp.frame_len];
            build_udp_frame(&sp, &mut buf);
            let mut tuples = std::collections::HashSet::new();
            for seq in 1..=3000u64 {
                a.apply(&mut buf, a.flow_of_seq(seq));
                stamp(&mut buf, &Payload { stream: 1, seq, tstamp_ns: seq * 3 });
                let t = etherparse_ok(&buf);
                assert_eq!(verify(&buf).map(|p| p.seq), Ok(seq));
                let want = a.mix(a.flow_of_seq(seq));
                assert_eq!(t.3, want as u16);
                let last = match t.0 {
                    IpAddr::V4(x) => x.octets()[3],
                    IpAddr::V6(x) => x.octets()[15],
                };
                assert_eq!(last as u32, want >> 16);
                assert_eq!((t.1, t.2, t.4), (sp.dst_ip, 17, 9));
                tuples.insert(t);
            }
            assert_eq!(tuples.len(), 1000);
        }
    }

    /// A jumbo frame whose buffers came back in the wrong order keeps its UDP checksum (the one's
    /// complement sum cannot see swapped 16-bit words) but not its fill pattern: verify refuses it.
    #[test]
    fn verify_catches_reordered_buffers_the_checksum_misses() {
        let mut buf = vec![0u8; 9014];
        build_udp_frame(&spec(9014), &mut buf);
        stamp(&mut buf, &Payload { stream: 0, seq: 7, tstamp_ns: 1 });
        assert_eq!(verify(&buf).map(|p| p.seq), Ok(7));
        let mut swapped = buf.clone();
        // The second and third 4096-byte UMEM frames (at even offsets) exchanged in part.
        let (a, b) = swapped.split_at_mut(8192);
        a[4096..4096 + 822].swap_with_slice(&mut b[..822]);
        assert_eq!(udp_checksum(&swapped), udp_checksum(&buf), "the checksum is blind to the swap");
        assert_eq!(verify(&swapped), Err(FrameError::Fill(4096)));
        // A truncated frame (a lost last buffer) fails on its length.
        assert_eq!(verify(&buf[..8192]), Err(FrameError::Length));
    }

    #[test]
    fn template_parses_with_etherparse_and_checksums_hold() {
        for len in [62usize, 64, 65, 128, 1514, 9014] {
            let mut buf = vec![0u8; len];
            build_udp_frame(&spec(len), &mut buf);
            let p = etherparse::SlicedPacket::from_ethernet(&buf).expect("etherparse accepts it");
            let Some(etherparse::NetSlice::Ipv4(ip)) = p.net else { panic!("not IPv4") };
            assert_eq!(ip.header().source_addr(), Ipv4Addr::new(10, 99, 0, 1));
            assert_eq!(ip.header().to_header().calc_header_checksum(), ip.header().header_checksum());
            let Some(etherparse::TransportSlice::Udp(udp)) = p.transport else { panic!("not UDP") };
            let want = udp.to_header().calc_checksum_ipv4(&ip.header().to_header(), udp.payload()).unwrap();
            assert_eq!(udp.checksum(), want, "len {len}");
            assert_eq!(verify(&buf).unwrap().seq, 0);
        }
    }

    #[test]
    fn stamp_keeps_udp_checksum_correct() {
        let mut buf = vec![0u8; 64];
        build_udp_frame(&spec(64), &mut buf);
        for (i, seq) in [1u64, 2, u64::MAX, 0x1234_5678_9abc_def0, 0].into_iter().enumerate() {
            let p = Payload { stream: i as u16 * 77, seq, tstamp_ns: seq.wrapping_mul(31) };
            stamp(&mut buf, &p);
            let mut copy = buf.clone();
            copy[40] = 0;
            copy[41] = 0;
            let full = udp_checksum(&copy);
            assert_eq!(u16::from_be_bytes([buf[40], buf[41]]), full, "seq {seq}");
            assert_eq!(verify(&buf), Ok(p));
        }
    }

    #[test]
    fn verify_rejects_damage() {
        let mut buf = vec![0u8; 64];
        build_udp_frame(&spec(64), &mut buf);
        stamp(&mut buf, &Payload { stream: 1, seq: 5, tstamp_ns: 9 });
        let mut b = buf.clone();
        b[50] ^= 1;
        assert_eq!(verify(&b), Err(FrameError::UdpChecksum));
        let mut b = buf.clone();
        b[22] ^= 1;
        assert_eq!(verify(&b), Err(FrameError::IpChecksum));
        assert_eq!(verify(&buf[..40]), Err(FrameError::Short(40)));
    }

    #[test]
    fn swap_macs_swaps() {
        let mut buf = vec![0u8; 64];
        build_udp_frame(&spec(64), &mut buf);
        swap_macs(&mut buf);
        assert_eq!(&buf[0..6], &[2, 0, 0, 0, 0, 1]);
        assert_eq!(&buf[6..12], &[2, 0, 0, 0, 0, 2]);
    }
}
