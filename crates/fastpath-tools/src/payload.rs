//! A receiver's side of the generator's test frames ([`fastpath::packet`]): exactly-once
//! accounting of the (stream, sequence number) pairs that arrived ([`SeqTracker`]), and a
//! frame's 5-tuple for counting flows ([`five_tuple`]).

use std::net::IpAddr;

use fastpath::packet::{payload, verify};

/// A frame's 5-tuple: (source, destination, protocol, source port, destination port).
pub type FiveTuple = (IpAddr, IpAddr, u8, u16, u16);

/// The 5-tuple of an IPv4 (option-less or not) or IPv6 (no extension header) UDP or TCP frame
/// without VLAN tags; None for anything else. For receivers counting flows.
pub fn five_tuple(frame: &[u8]) -> Option<FiveTuple> {
    let (src, dst, proto, l4): (IpAddr, IpAddr, u8, usize) = match frame.get(12..14)? {
        [0x08, 0x00] => {
            let ihl = (*frame.get(14)? & 0x0f) as usize * 4;
            let a: [u8; 4] = frame.get(26..30)?.try_into().ok()?;
            let b: [u8; 4] = frame.get(30..34)?.try_into().ok()?;
            (a.into(), b.into(), *frame.get(23)?, 14 + ihl)
        }
        [0x86, 0xdd] => {
            let a: [u8; 16] = frame.get(22..38)?.try_into().ok()?;
            let b: [u8; 16] = frame.get(38..54)?.try_into().ok()?;
            (a.into(), b.into(), *frame.get(20)?, 54)
        }
        _ => return None,
    };
    if proto != 17 && proto != 6 {
        return None;
    }
    let p = frame.get(l4..l4 + 4)?;
    Some((src, dst, proto, u16::from_be_bytes([p[0], p[1]]), u16::from_be_bytes([p[2], p[3]])))
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
            Err(_)
                if payload(frame).is_none()
                    || !matches!(frame.get(12..14), Some(&[0x08, 0x00]) | Some(&[0x86, 0xdd])) =>
            {
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
    use fastpath::packet::{build_udp_frame, stamp, Payload, UdpFrameSpec};
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
    fn five_tuple_of_ipv4_and_ipv6_frames() {
        let mut buf = vec![0u8; 64];
        build_udp_frame(&spec(64), &mut buf);
        let want: FiveTuple = (Ipv4Addr::new(10, 99, 0, 1).into(), Ipv4Addr::new(10, 99, 0, 2).into(), 17, 9000, 9);
        assert_eq!(five_tuple(&buf), Some(want));
        let s6 = UdpFrameSpec {
            src_ip: "fd99::1".parse::<Ipv6Addr>().unwrap().into(),
            dst_ip: "fd99::2".parse::<Ipv6Addr>().unwrap().into(),
            src_port: 4000,
            dst_port: 53,
            frame_len: 128,
            ..spec(128)
        };
        let mut buf6 = vec![0u8; 128];
        build_udp_frame(&s6, &mut buf6);
        assert_eq!(five_tuple(&buf6), Some((s6.src_ip, s6.dst_ip, 17, 4000, 53)));
        // Neither IPv4 nor IPv6 (an ARP EtherType): no tuple.
        buf[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(five_tuple(&buf), None);
    }
}
