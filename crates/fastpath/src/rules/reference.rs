//! The reference classifier: a plain parser and a first-match linear scan over the rules, written
//! for clarity, not speed. `bpf/classifier.bpf.c` must agree with it on every frame (the
//! differential test), including which frames are malformed.

use std::net::IpAddr;

use super::{Frag, Match, RuleSet};

/// Outer VLAN id of an untagged frame.
pub const NO_VLAN: u16 = 0xffff;
/// Extension headers the parser walks before giving up on finding the L4 header.
pub const MAX_IPV6_EXT: usize = 4;

/// The fields of a frame the rules can match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet {
    /// Outermost VLAN id, or [`NO_VLAN`].
    pub vlan: u16,
    /// EtherType after at most two VLAN tags.
    pub eth_type: u16,
    /// Source and destination address, for IPv4 and IPv6 frames.
    pub src: Option<IpAddr>,
    /// Destination address.
    pub dst: Option<IpAddr>,
    /// IP protocol (IPv6: the first header after the extension headers walked).
    pub proto: Option<u8>,
    /// Fragment state.
    pub frag: Frag,
    /// Source and destination ports (TCP/UDP with its header present).
    pub ports: Option<(u16, u16)>,
    /// TCP flags (TCP with its header present).
    pub tcp_flags: Option<u8>,
    /// Frame length in bytes.
    pub len: u16,
}

fn be16(b: &[u8], o: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(o)?, *b.get(o + 1)?]))
}

/// Parses a frame. `None` = malformed: truncated at a header boundary, IPv4 IHL < 5 or version
/// != 4, IPv4 total length below its header or beyond the frame, IPv6 version != 6 or payload
/// length beyond the frame, an extension header or TCP (20 bytes) / UDP (8 bytes) header that
/// does not fit in the IP packet.
pub fn parse(f: &[u8]) -> Option<Packet> {
    let len = u16::try_from(f.len()).unwrap_or(u16::MAX);
    let mut off = 12;
    let mut eth_type = be16(f, off)?;
    off += 2;
    let mut vlan = NO_VLAN;
    for _ in 0..2 {
        if eth_type != 0x8100 && eth_type != 0x88a8 {
            break;
        }
        let tci = be16(f, off)?;
        if vlan == NO_VLAN {
            vlan = tci & 0x0fff;
        }
        eth_type = be16(f, off + 2)?;
        off += 4;
    }
    let mut p = Packet {
        vlan,
        eth_type,
        src: None,
        dst: None,
        proto: None,
        frag: Frag::None,
        ports: None,
        tcp_flags: None,
        len,
    };
    let (l4_off, l4_end, proto) = match eth_type {
        0x0800 => {
            let h = f.get(off..off + 20)?;
            let ihl = (h[0] & 0x0f) as usize * 4;
            if h[0] >> 4 != 4 || ihl < 20 {
                return None;
            }
            let total = u16::from_be_bytes([h[2], h[3]]) as usize;
            if f.len() < off + ihl || total < ihl || off + total > f.len() {
                return None;
            }
            let fo = u16::from_be_bytes([h[6], h[7]]);
            p.frag = if fo & 0x1fff != 0 {
                Frag::Later
            } else if fo & 0x2000 != 0 {
                Frag::First
            } else {
                Frag::None
            };
            p.src = Some(IpAddr::from([h[12], h[13], h[14], h[15]]));
            p.dst = Some(IpAddr::from([h[16], h[17], h[18], h[19]]));
            p.proto = Some(h[9]);
            (off + ihl, off + total, h[9])
        }
        0x86dd => {
            let h = f.get(off..off + 40)?;
            if h[0] >> 4 != 6 {
                return None;
            }
            let end = off + 40 + u16::from_be_bytes([h[4], h[5]]) as usize;
            if end > f.len() {
                return None;
            }
            let a: [u8; 16] = h[8..24].try_into().ok()?;
            let b: [u8; 16] = h[24..40].try_into().ok()?;
            p.src = Some(IpAddr::from(a));
            p.dst = Some(IpAddr::from(b));
            let mut nh = h[6];
            let mut o = off + 40;
            for _ in 0..MAX_IPV6_EXT {
                let hlen = match nh {
                    0 | 43 | 60 => (*f.get(o + 1)? as usize + 1) * 8,
                    51 => (*f.get(o + 1)? as usize + 2) * 4,
                    44 => 8,
                    _ => break,
                };
                if o + hlen > end {
                    return None;
                }
                if nh == 44 {
                    let fo = be16(f, o + 2)?;
                    p.frag = if fo & 0xfff8 != 0 {
                        Frag::Later
                    } else if fo & 1 != 0 {
                        Frag::First
                    } else {
                        Frag::None
                    };
                }
                nh = f[o];
                o += hlen;
            }
            p.proto = Some(nh);
            (o, end, nh)
        }
        _ => return Some(p),
    };
    if p.frag == Frag::Later {
        return Some(p);
    }
    match proto {
        6 => {
            if l4_off + 20 > l4_end {
                return None;
            }
            p.ports = Some((be16(f, l4_off)?, be16(f, l4_off + 2)?));
            p.tcp_flags = Some(f[l4_off + 13]);
        }
        17 => {
            if l4_off + 8 > l4_end {
                return None;
            }
            p.ports = Some((be16(f, l4_off)?, be16(f, l4_off + 2)?));
        }
        _ => {}
    }
    Some(p)
}

fn in_range(v: u16, r: Option<(u16, u16)>) -> bool {
    r.is_none_or(|(a, b)| a <= v && v <= b)
}

/// True if `m` matches `p` (the semantics the rule language documents).
pub fn matches(m: &Match, p: &Packet) -> bool {
    if m.vlan.is_some_and(|v| v != p.vlan) || m.eth_type.is_some_and(|t| t != p.eth_type) {
        return false;
    }
    if let Some(pre) = m.src {
        if !p.src.is_some_and(|a| pre.contains(&a)) {
            return false;
        }
    }
    if let Some(pre) = m.dst {
        if !p.dst.is_some_and(|a| pre.contains(&a)) {
            return false;
        }
    }
    if m.proto.is_some() && m.proto != p.proto {
        return false;
    }
    if m.src_port.is_some() || m.dst_port.is_some() {
        match p.ports {
            Some((s, d)) if in_range(s, m.src_port) && in_range(d, m.dst_port) => {}
            _ => return false,
        }
    }
    if let Some((mask, value)) = m.tcp_flags {
        if p.proto != Some(6) || p.tcp_flags.is_none_or(|f| f & mask != value) {
            return false;
        }
    }
    if !in_range(p.len, m.len) {
        return false;
    }
    m.frag.is_none_or(|f| f == p.frag)
}

/// What the classifier decides for one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Rule `i` (index in evaluation order) matched.
    Rule(usize),
    /// Well-formed, no rule matched: the default action.
    NoMatch,
    /// Malformed: the default action and the `malformed` counter.
    Malformed,
}

/// First-match classification of a raw frame.
pub fn classify(set: &RuleSet, frame: &[u8]) -> Verdict {
    match parse(frame) {
        None => Verdict::Malformed,
        Some(p) => set.rules.iter().position(|r| matches(&r.m, &p)).map_or(Verdict::NoMatch, Verdict::Rule),
    }
}
