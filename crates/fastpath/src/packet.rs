//! The generator's test frames: Ethernet / IPv4 / UDP with the fastpath payload
//! (bpf/include/fastpath_abi.h: magic, stream, seq, tstamp_ns at byte 42), correct IPv4 and UDP
//! checksums, and the checks a receiver applies to prove a frame arrived intact.

use std::net::Ipv4Addr;

use crate::abi::{self, fp_payload};

/// Offset of the fastpath payload in the frame (14 Ethernet + 20 IPv4 + 8 UDP; `FP_PAYLOAD_OFF`).
pub const PAYLOAD_OFF: usize = abi::FP_PAYLOAD_OFF as usize;
/// Length of the fastpath payload (`FP_PAYLOAD_LEN`, the size of `struct fp_payload`).
pub const PAYLOAD_LEN: usize = abi::FP_PAYLOAD_LEN as usize;
/// Payload magic (`FP_PAYLOAD_MAGIC`).
pub const PAYLOAD_MAGIC: u16 = abi::FP_PAYLOAD_MAGIC as u16;
const _: () =
    assert!(PAYLOAD_MAGIC as u32 == abi::FP_PAYLOAD_MAGIC && std::mem::size_of::<fp_payload>() == PAYLOAD_LEN);
/// Smallest frame that holds the payload.
pub const MIN_FRAME_LEN: usize = PAYLOAD_OFF + PAYLOAD_LEN;
/// Largest frame we build (a 1500-byte MTU plus the Ethernet header).
pub const MAX_FRAME_LEN: usize = 1514;
const UDP_CSUM_OFF: usize = 40;

/// What a generated frame looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpFrameSpec {
    /// Ethernet source.
    pub src_mac: [u8; 6],
    /// Ethernet destination.
    pub dst_mac: [u8; 6],
    /// IPv4 source.
    pub src_ip: Ipv4Addr,
    /// IPv4 destination.
    pub dst_ip: Ipv4Addr,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
    /// Frame length in bytes without FCS, MIN_FRAME_LEN..=MAX_FRAME_LEN (64 = the classic "64-byte frame").
    pub frame_len: usize,
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
pub enum FrameError {
    /// Shorter than MIN_FRAME_LEN.
    #[error("frame of {0} bytes is shorter than {MIN_FRAME_LEN}")]
    Short(usize),
    /// Not IPv4/UDP.
    #[error("not an IPv4/UDP frame")]
    NotUdp4,
    /// IPv4 header checksum wrong.
    #[error("IPv4 header checksum mismatch")]
    IpChecksum,
    /// IPv4 total length disagrees with the frame.
    #[error("IPv4 total length disagrees with the frame length")]
    Length,
    /// UDP checksum wrong.
    #[error("UDP checksum mismatch")]
    UdpChecksum,
    /// Payload magic missing.
    #[error("payload magic missing")]
    Magic,
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

fn udp_checksum(frame: &[u8]) -> u16 {
    let ip = &frame[14..34];
    let udp_len = u16::from_be_bytes([frame[38], frame[39]]) as usize;
    let mut acc = sum16(&ip[12..20], 0);
    acc += 17 + udp_len as u64;
    let end = (34 + udp_len).min(frame.len());
    // checksum field counts as zero
    acc = sum16(&frame[34..40], acc);
    acc = sum16(&frame[42..end], acc);
    let c = !fold(acc);
    if c == 0 {
        0xffff
    } else {
        c
    }
}

/// Writes the template frame for `spec` into `out[..spec.frame_len]`: payload with stream 0,
/// seq 0, tstamp 0, and correct checksums. Panics if `out` is shorter or the length is out of range.
pub fn build_udp_frame(spec: &UdpFrameSpec, out: &mut [u8]) {
    assert!((MIN_FRAME_LEN..=MAX_FRAME_LEN).contains(&spec.frame_len), "frame length out of range");
    let f = &mut out[..spec.frame_len];
    f.fill(0);
    f[0..6].copy_from_slice(&spec.dst_mac);
    f[6..12].copy_from_slice(&spec.src_mac);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip_len = (spec.frame_len - 14) as u16;
    f[14] = 0x45;
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    f[20..22].copy_from_slice(&0x4000u16.to_be_bytes()); // DF
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&spec.src_ip.octets());
    f[30..34].copy_from_slice(&spec.dst_ip.octets());
    let c = inet_checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f[34..36].copy_from_slice(&spec.src_port.to_be_bytes());
    f[36..38].copy_from_slice(&spec.dst_port.to_be_bytes());
    f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    f[PAYLOAD_OFF..PAYLOAD_OFF + 2].copy_from_slice(&PAYLOAD_MAGIC.to_le_bytes());
    let c = udp_checksum(f);
    f[UDP_CSUM_OFF..UDP_CSUM_OFF + 2].copy_from_slice(&c.to_be_bytes());
}

/// Stamps `p` into a frame built by [`build_udp_frame`] and updates the UDP checksum
/// incrementally from the bytes it replaces (RFC 1624: HC' = ~(~HC + ~m + m')).
/// Costs the same for every frame length.
#[inline]
pub fn stamp(frame: &mut [u8], p: &Payload) {
    // struct fp_payload, little-endian on the wire.
    let wire = fp_payload {
        magic: PAYLOAD_MAGIC.to_le(),
        stream: p.stream.to_le(),
        seq: p.seq.to_le(),
        tstamp_ns: p.tstamp_ns.to_le(),
    };
    let new: [u8; PAYLOAD_LEN] = bytemuck::cast(wire);
    let old = &frame[PAYLOAD_OFF..PAYLOAD_OFF + PAYLOAD_LEN];
    let hc = u16::from_be_bytes([frame[UDP_CSUM_OFF], frame[UDP_CSUM_OFF + 1]]);
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
    frame[PAYLOAD_OFF..PAYLOAD_OFF + PAYLOAD_LEN].copy_from_slice(&new);
    frame[UDP_CSUM_OFF..UDP_CSUM_OFF + 2].copy_from_slice(&c.to_be_bytes());
}

/// Reads the payload of a frame without checking anything else (hot path).
#[inline]
pub fn payload(frame: &[u8]) -> Option<Payload> {
    let p = abi::read::<fp_payload>(frame.get(PAYLOAD_OFF..)?)?;
    if u16::from_le(p.magic) != PAYLOAD_MAGIC {
        return None;
    }
    Some(Payload { stream: u16::from_le(p.stream), seq: u64::from_le(p.seq), tstamp_ns: u64::from_le(p.tstamp_ns) })
}

/// Checks a received frame completely: IPv4/UDP, both checksums, lengths, payload magic.
pub fn verify(frame: &[u8]) -> Result<Payload, FrameError> {
    if frame.len() < MIN_FRAME_LEN {
        return Err(FrameError::Short(frame.len()));
    }
    if frame[12..14] != [0x08, 0x00] || frame[14] != 0x45 || frame[23] != 17 {
        return Err(FrameError::NotUdp4);
    }
    if inet_checksum(&frame[14..34]) != 0 {
        return Err(FrameError::IpChecksum);
    }
    let ip_len = u16::from_be_bytes([frame[16], frame[17]]) as usize;
    if 14 + ip_len > frame.len() || u16::from_be_bytes([frame[38], frame[39]]) as usize != ip_len - 20 {
        return Err(FrameError::Length);
    }
    let got = u16::from_be_bytes([frame[UDP_CSUM_OFF], frame[UDP_CSUM_OFF + 1]]);
    if got != 0 && got != udp_checksum(frame) {
        return Err(FrameError::UdpChecksum);
    }
    payload(frame).ok_or(FrameError::Magic)
}

/// Swaps Ethernet source and destination in place (l2fwd).
#[inline]
pub fn swap_macs(frame: &mut [u8]) {
    let (dst, rest) = frame.split_at_mut(6);
    dst.swap_with_slice(&mut rest[..6]);
}

/// Most sequence-number bits a [`SeqTracker`] keeps, over all streams: 2^28 (32 MiB), an
/// hour of 64-byte frames at 70 kpps or a minute at 4 Mpps.
pub const SEQ_WINDOW: u64 = 1 << 28;

/// Counts, per stream, which sequence numbers arrived: exactly-once accounting for tests and
/// `--verify` runs. Memory: one bit per sequence number up to the highest seen, at most
/// [`SEQ_WINDOW`] bits over all streams; a frame whose (stream, seq) would need more (a
/// sequence number far ahead, read off the wire) is counted in `out_of_window`, not stored.
#[derive(Debug, Default, Clone)]
pub struct SeqTracker {
    streams: std::collections::BTreeMap<u16, Vec<u64>>,
    /// 64-bit words allocated over all streams.
    words: u64,
    /// Intact fastpath frames whose sequence number lies beyond the window: not tracked.
    pub out_of_window: u64,
    /// Frames seen (including duplicates).
    pub frames: u64,
    /// Frames whose (stream, seq) was already seen.
    pub duplicates: u64,
    /// fastpath frames (magic present) that failed [`verify`]: damaged in transit.
    pub corrupt: u64,
    /// Frames that are not fastpath frames at all (e.g. the kernel's own IPv6 MLD reports).
    pub foreign: u64,
}

impl SeqTracker {
    /// Records one received frame (verifying it fully).
    pub fn record(&mut self, frame: &[u8]) {
        self.frames += 1;
        let p = match verify(frame) {
            Ok(p) => p,
            Err(_) if payload(frame).is_none() || frame.get(12..14) != Some(&[0x08, 0x00]) => {
                self.foreign += 1;
                return;
            }
            Err(_) => {
                self.corrupt += 1;
                return;
            }
        };
        let (w, b) = (p.seq / 64, p.seq % 64);
        let have = self.streams.get(&p.stream).map_or(0, |v| v.len() as u64);
        if have <= w {
            let grow = w + 1 - have;
            if grow > SEQ_WINDOW / 64 - self.words {
                self.out_of_window += 1;
                return;
            }
            self.words += grow;
        }
        let w = w as usize;
        let bits = self.streams.entry(p.stream).or_default();
        if bits.len() <= w {
            bits.resize(w + 1, 0);
        }
        if bits[w] & (1 << b) != 0 {
            self.duplicates += 1;
        }
        bits[w] |= 1 << b;
    }

    /// Adds what `other` saw (e.g. another queue's receiver of the same streams): a
    /// (stream, seq) seen by both counts as a duplicate.
    pub fn merge(&mut self, other: &SeqTracker) {
        self.frames += other.frames;
        self.out_of_window += other.out_of_window;
        self.corrupt += other.corrupt;
        self.foreign += other.foreign;
        self.duplicates += other.duplicates;
        for (s, v) in &other.streams {
            let mine = self.streams.entry(*s).or_default();
            if mine.len() < v.len() {
                self.words += (v.len() - mine.len()) as u64;
                mine.resize(v.len(), 0);
            }
            for (a, b) in mine.iter_mut().zip(v) {
                self.duplicates += (*a & *b).count_ones() as u64;
                *a |= *b;
            }
        }
    }

    /// Distinct (stream, seq) pairs received.
    pub fn unique(&self) -> u64 {
        self.streams.values().flat_map(|v| v.iter()).map(|w| w.count_ones() as u64).sum()
    }

    /// Streams seen, with the number of distinct and the highest sequence number of each.
    pub fn per_stream(&self) -> Vec<(u16, u64, u64)> {
        self.streams
            .iter()
            .map(|(s, v)| {
                let n = v.iter().map(|w| w.count_ones() as u64).sum();
                let max = v
                    .iter()
                    .enumerate()
                    .rev()
                    .find(|(_, w)| **w != 0)
                    .map(|(i, w)| i as u64 * 64 + 63 - w.leading_zeros() as u64)
                    .unwrap_or(0);
                (*s, n, max)
            })
            .collect()
    }

    /// Sequence numbers 1..=max missing in `stream`.
    pub fn missing(&self, stream: u16, max: u64) -> u64 {
        let bits = self.streams.get(&stream).map(|v| v.as_slice()).unwrap_or(&[]);
        (1..=max).filter(|s| bits.get((s / 64) as usize).is_none_or(|w| w & (1 << (s % 64)) == 0)).count() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(len: usize) -> UdpFrameSpec {
        UdpFrameSpec {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src_ip: Ipv4Addr::new(10, 99, 0, 1),
            dst_ip: Ipv4Addr::new(10, 99, 0, 2),
            src_port: 9000,
            dst_port: 9,
            frame_len: len,
        }
    }

    #[test]
    fn template_parses_with_etherparse_and_checksums_hold() {
        for len in [62usize, 64, 65, 128, 1514] {
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
    fn tracker_counts_duplicates_and_missing() {
        let mut t = SeqTracker::default();
        let mut buf = vec![0u8; 64];
        build_udp_frame(&spec(64), &mut buf);
        for seq in [1u64, 2, 2, 4, 130] {
            stamp(&mut buf, &Payload { stream: 3, seq, tstamp_ns: 0 });
            t.record(&buf);
        }
        assert_eq!((t.frames, t.unique(), t.duplicates), (5, 4, 1));
        assert_eq!(t.missing(3, 130), 126);
        assert_eq!(t.per_stream(), vec![(3, 4, 130)]);
    }

    #[test]
    fn tracker_bounds_memory_for_seqs_off_the_wire() {
        let mut t = SeqTracker::default();
        let mut buf = vec![0u8; 64];
        build_udp_frame(&spec(64), &mut buf);
        for seq in [1u64, 1 << 40, u64::MAX, u64::MAX - 63, SEQ_WINDOW, 2] {
            stamp(&mut buf, &Payload { stream: 1, seq, tstamp_ns: 0 });
            t.record(&buf);
        }
        assert_eq!((t.frames, t.unique(), t.out_of_window), (6, 2, 4), "{t:?}");
        assert_eq!(t.per_stream(), vec![(1, 2, 2)]);
        assert_eq!(t.missing(1, 2), 0);
        // The window is shared by all streams: the budget cannot be multiplied by stream ids.
        for stream in 2..100u16 {
            stamp(&mut buf, &Payload { stream, seq: SEQ_WINDOW - 1, tstamp_ns: 0 });
            t.record(&buf);
        }
        assert!(t.out_of_window >= 4 + 98, "{}", t.out_of_window);
        assert!(t.words <= SEQ_WINDOW / 64);
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
