//! Floods from many sources: a spread of spoofed source addresses for the in-kernel generator
//! ([`XdpGen::load_spread`](crate::bpf::XdpGen::load_spread), `fastpath bench ddos
//! --flood-sources N`).
//!
//! [`Flows`] varies only the last byte of the source address (at most 256 sources), which
//! flatters every per-source rate limiter: each source carries 1/256 of the flood. A
//! [`SourceSpread`] varies the last 32 bits of the address (the whole IPv4 address, the last
//! 32 bits of an IPv6 one) over `sources` consecutive addresses from a base, and the source
//! port, so that a flood of `flows` distinct 5-tuples comes from `sources` distinct addresses,
//! each carrying `1/sources` of it. The arithmetic here is the one bpf/xdp_gen.bpf.c
//! (`spread_apply`) runs per frame; tests hold the two to each other.

use crate::packet::{Flows, MAX_FLOWS};

/// Most sources a spread holds: 2^23 = 8,388,608 (an IPv4 /9, such as 10.128.0.0/9).
pub const MAX_SOURCES: u32 = 1 << 23;

/// The stride of the source order: a prime above [`MAX_SOURCES`], so `i -> i * STRIDE mod
/// sources` is a bijection of the residues mod `sources` (bpf/xdp_gen.bpf.c SPREAD_STRIDE).
const STRIDE: u64 = 2_654_435_761;

/// `sources` spoofed source addresses carrying `flows` distinct 5-tuples, drawn with a seed.
///
/// Flow `i` (0..flows) comes from source index `s = (i * STRIDE + k0) mod sources` (address
/// `base + s` in the last 32 bits) and source port `(i / sources * 0x9e37 + k1) mod 2^16`;
/// `k0` and `k1` are the seed's [`Flows::keys`]. So any `sources` consecutive flows come from
/// `sources` distinct addresses (each once, in an order the seed scrambles), and distinct flows
/// are distinct 5-tuples (`i mod sources` and `i / sources` are recovered from the address and
/// the port). Frame `seq` (from 1) of a stream carries flow `(seq - 1) % flows`, as with
/// [`Flows`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceSpread {
    sources: u32,
    base: u32,
    flows: Flows,
}

impl SourceSpread {
    /// A spread of `sources` addresses from `base` (the last 32 bits of the first one, host
    /// order) carrying `flows` 5-tuples, drawn with `seed` (any u64; the same seed gives the
    /// same tuples in the same order).
    ///
    /// None unless `1 <= sources <= MAX_SOURCES`, `sources <= flows <= min(MAX_FLOWS,
    /// sources * 65536)` (every source carries a flow, and a source's flows differ by port) and
    /// `base + sources - 1` fits in 32 bits.
    pub fn new(sources: u32, flows: u32, base: u32, seed: u64) -> Option<SourceSpread> {
        let most_flows = u64::from(sources).saturating_mul(65_536).min(u64::from(MAX_FLOWS));
        if !(1..=MAX_SOURCES).contains(&sources)
            || u64::from(flows) < u64::from(sources)
            || u64::from(flows) > most_flows
            || base.checked_add(sources - 1).is_none()
        {
            return None;
        }
        Some(SourceSpread { sources, base, flows: Flows::new(flows, seed)? })
    }

    /// Number of source addresses.
    pub fn sources(&self) -> u32 {
        self.sources
    }

    /// The first address's last 32 bits (host order).
    pub fn base(&self) -> u32 {
        self.base
    }

    /// The flows (their number and the keys the BPF generator is loaded with).
    pub fn flows(&self) -> &Flows {
        &self.flows
    }

    /// Source index (0..sources) of flow `i`.
    #[inline]
    pub fn source_of(&self, i: u32) -> u32 {
        let k0 = u64::from(self.flows.keys()[0]);
        ((u64::from(i) * STRIDE + k0) % u64::from(self.sources)) as u32
    }

    /// Last 32 bits of flow `i`'s source address (host order): `base + source_of(i)`.
    #[inline]
    pub fn address_of(&self, i: u32) -> u32 {
        self.base + self.source_of(i)
    }

    /// Source port of flow `i`.
    #[inline]
    pub fn port_of(&self, i: u32) -> u16 {
        let k1 = self.flows.keys()[1];
        ((i / self.sources).wrapping_mul(0x9e37).wrapping_add(k1)) as u16
    }

    /// Flow of the frame with sequence number `seq` (from 1) of a stream.
    #[inline]
    pub fn flow_of_seq(&self, seq: u64) -> u32 {
        self.flows.flow_of_seq(seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn bounds_are_refused() {
        assert!(SourceSpread::new(0, 1, 0, 1).is_none(), "no sources");
        assert!(SourceSpread::new(MAX_SOURCES + 1, MAX_SOURCES + 1, 0, 1).is_none(), "too many sources");
        assert!(SourceSpread::new(256, 255, 0, 1).is_none(), "fewer flows than sources");
        assert!(SourceSpread::new(1, 65_537, 0, 1).is_none(), "two flows of one source on one port");
        assert!(SourceSpread::new(2, 2, u32::MAX, 1).is_none(), "addresses past 32 bits");
        assert!(SourceSpread::new(1, 65_536, u32::MAX, 1).is_some());
        assert!(SourceSpread::new(MAX_SOURCES, MAX_FLOWS, 0x0a80_0000, 1).is_some());
    }

    /// Any `sources` consecutive flows come from every source once; all flows are distinct
    /// (address, port) pairs; every address lies in base..base + sources.
    #[test]
    fn every_source_once_per_round_and_flows_distinct() {
        for (sources, flows, seed) in [(256, 1_000_000, 1), (65_536, 1_000_000, 7), (7, 70, 3), (1, 65_536, 9)] {
            let s = SourceSpread::new(sources, flows, 0x0a80_0000, seed).unwrap();
            let mut tuples = HashSet::new();
            let mut round = HashSet::new();
            for i in 0..flows {
                let a = s.address_of(i);
                assert!((0x0a80_0000..0x0a80_0000 + sources).contains(&a), "{sources}: flow {i} from {a:#x}");
                assert!(tuples.insert((a, s.port_of(i))), "{sources}/{flows}: flow {i} repeats a 5-tuple");
                // A window of `sources` flows starting anywhere (here: at i).
                if i % 9973 == 0 && i + sources <= flows {
                    round.clear();
                    round.extend((i..i + sources).map(|j| s.source_of(j)));
                    assert_eq!(round.len() as u32, sources, "{sources}: the window from flow {i}");
                }
            }
            assert_eq!(tuples.len() as u32, flows);
        }
    }

    #[test]
    fn seeds_reorder_the_sources() {
        let a = SourceSpread::new(65_536, 65_536, 0, 1).unwrap();
        let b = SourceSpread::new(65_536, 65_536, 0, 2).unwrap();
        assert!((0..100).any(|i| a.source_of(i) != b.source_of(i)));
    }
}
