//! The reference classifier: a plain parser and a first-match linear scan over the rules, written
//! for clarity, not speed. `bpf/classifier.bpf.c` must agree with it on every frame (the
//! differential test), including which frames are malformed.

use std::net::IpAddr;

use super::{Frag, Match, RuleSet};

/// Outer VLAN id of an untagged frame.
pub const NO_VLAN: u16 = crate::abi::FP_NO_VLAN as u16;
/// IPv6 extension headers the parser walks (`FP_MAX_IPV6_EXT`). A chain still going after this
/// many is [`Reject::Malformed`]: the kernel walks any number, so its protocol is unknown here.
pub const MAX_IPV6_EXT: usize = crate::abi::FP_MAX_IPV6_EXT as usize;

/// Why a frame cannot be classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reject {
    /// Its headers cannot be read with certainty: the rule set's `malformed` action applies.
    Malformed,
    /// A tiny or overlapping fragment (RFC 1858, RFC 3128) or an IPv6 first fragment without
    /// its whole header chain (RFC 7112): always dropped.
    BadFragment,
}

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

/// Extension headers of the kernel's `ipv6_ext_hdr()` (include/net/ipv6.h), less NEXTHDR_NONE.
fn is_ipv6_ext(nh: u8) -> bool {
    matches!(nh, 0 | 43 | 44 | 51 | 60)
}

/// Smallest TCP header: a later fragment that starts inside it overlaps ports or flags.
const TCP_MIN: usize = 20;
/// UDP header.
const UDP_LEN: usize = 8;
/// IP protocol number of the Authentication Header (RFC 4302).
const AH: u8 = 51;

/// Parses a frame, deciding what the classifier may know about it. The policy:
///
/// - **Malformed** ([`Reject::Malformed`]): truncated at a header boundary; IPv4 version != 4,
///   IHL < 5, total length below its header or beyond the frame; IPv6 version != 6 or payload
///   length beyond the frame; an extension header or TCP (20 bytes) / UDP (8 bytes) header that
///   does not fit in the IP packet; more than two VLAN tags; an IPv6 chain of more than
///   [`MAX_IPV6_EXT`] extension headers.
/// - **IPv4 Authentication Header** (RFC 4302): walked as IPv6's is; the header after it is
///   the protocol and carries the ports. A second AH right after the first is malformed; an AH
///   that does not fit is malformed (in a first fragment: a bad fragment).
/// - **Multi-buffer frames** are judged as single-buffer ones: `f` is the whole frame, and the
///   BPF program measures lengths with `bpf_xdp_get_buff_len()` and reads headers across
///   buffers with `bpf_xdp_load_bytes()`.
/// - **Bad fragment** ([`Reject::BadFragment`]): a first fragment (offset 0, more fragments)
///   whose TCP or UDP header is not all there, or (IPv6) whose extension chain does not end
///   inside it (RFC 7112); a later TCP fragment whose offset is 8 or 16 bytes, i.e. inside the
///   minimal TCP header (RFC 1858 "tiny fragment", RFC 3128 "overlapping fragment"); for IPv6
///   any later fragment at offset 8 or 16, since reassembly ignores its next header (RFC 8200).
///   A nested fragment header never turns a fragment back into a whole packet.
/// - **Later fragments** (offset > 0) carry no L4 header: no ports, no TCP flags; an IPv6
///   later fragment's protocol is its fragment header's next header (the rest is data).
///   Port and flag rules therefore never match them, as in iptables and Open vSwitch; the
///   first fragment, which must carry the whole L4 header, is the one the rules judge, and
///   without it the datagram cannot be reassembled.
///
/// # Errors
///
/// [`Reject::Malformed`] or [`Reject::BadFragment`] as above.
pub fn parse(f: &[u8]) -> Result<Packet, Reject> {
    let len = u16::try_from(f.len()).unwrap_or(u16::MAX);
    let (off, vlan, eth_type) = ethernet(f)?;
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
    let l3 = match eth_type {
        0x0800 => ipv4(f, off, &mut p)?,
        0x86dd => ipv6(f, off, &mut p)?,
        _ => return Ok(p),
    };
    transport(f, &l3, &mut p)?;
    Ok(p)
}

/// The Ethernet header and at most two VLAN tags: (offset of the L3 header, outer VLAN id or
/// [`NO_VLAN`], EtherType). A third tag is malformed.
fn ethernet(f: &[u8]) -> Result<(usize, u16, u16), Reject> {
    use Reject::Malformed;
    let mut off = 12;
    let mut eth_type = be16(f, off).ok_or(Malformed)?;
    off += 2;
    let mut vlan = NO_VLAN;
    for _ in 0..2 {
        if eth_type != 0x8100 && eth_type != 0x88a8 {
            break;
        }
        let tci = be16(f, off).ok_or(Malformed)?;
        if vlan == NO_VLAN {
            vlan = tci & 0x0fff;
        }
        eth_type = be16(f, off + 2).ok_or(Malformed)?;
        off += 4;
    }
    if eth_type == 0x8100 || eth_type == 0x88a8 {
        return Err(Malformed);
    }
    Ok((off, vlan, eth_type))
}

/// Where an IP header leaves the L4 header: what [`transport`] reads.
#[derive(Clone, Copy)]
struct L3 {
    /// Offset of the L4 header (after the IPv4 options, AH, IPv6 extension headers).
    l4_off: usize,
    /// End of the IP packet.
    l4_end: usize,
    /// The protocol after the walked headers.
    proto: u8,
    /// Fragment offset in bytes (0 if not a fragment).
    frag_off_bytes: usize,
}

/// The IPv4 header at `off` (and an Authentication Header after it): addresses, protocol and
/// fragment state into `p`.
fn ipv4(f: &[u8], off: usize, p: &mut Packet) -> Result<L3, Reject> {
    use Reject::{BadFragment, Malformed};
    let h = f.get(off..off + 20).ok_or(Malformed)?;
    let ihl = (h[0] & 0x0f) as usize * 4;
    if h[0] >> 4 != 4 || ihl < 20 {
        return Err(Malformed);
    }
    let total = u16::from_be_bytes([h[2], h[3]]) as usize;
    if f.len() < off + ihl || total < ihl || off + total > f.len() {
        return Err(Malformed);
    }
    let fo = u16::from_be_bytes([h[6], h[7]]);
    p.frag = if fo & 0x1fff != 0 {
        Frag::Later
    } else if fo & 0x2000 != 0 {
        Frag::First
    } else {
        Frag::None
    };
    let frag_off_bytes = (fo & 0x1fff) as usize * 8;
    p.src = Some(IpAddr::from([h[12], h[13], h[14], h[15]]));
    p.dst = Some(IpAddr::from([h[16], h[17], h[18], h[19]]));
    let (mut l4_off, l4_end, mut proto) = (off + ihl, off + total, h[9]);
    if proto == AH && p.frag != Frag::Later {
        // RFC 4302: next header, then the header's length in 4-byte words minus 2.
        let cut = if p.frag == Frag::First { BadFragment } else { Malformed };
        if l4_off + 8 > l4_end {
            return Err(cut);
        }
        let hlen = (f[l4_off + 1] as usize + 2) * 4;
        if l4_off + hlen > l4_end {
            return Err(cut);
        }
        if f[l4_off] == AH {
            return Err(Malformed);
        }
        proto = f[l4_off];
        l4_off += hlen;
    }
    p.proto = Some(proto);
    Ok(L3 { l4_off, l4_end, proto, frag_off_bytes })
}

/// The IPv6 header at `off` and up to [`MAX_IPV6_EXT`] extension headers: addresses, protocol
/// and fragment state into `p`.
fn ipv6(f: &[u8], off: usize, p: &mut Packet) -> Result<L3, Reject> {
    use Reject::{BadFragment, Malformed};
    let h = f.get(off..off + 40).ok_or(Malformed)?;
    if h[0] >> 4 != 6 {
        return Err(Malformed);
    }
    let end = off + 40 + u16::from_be_bytes([h[4], h[5]]) as usize;
    if end > f.len() {
        return Err(Malformed);
    }
    let a: [u8; 16] = h[8..24].try_into().map_err(|_| Malformed)?;
    let b: [u8; 16] = h[24..40].try_into().map_err(|_| Malformed)?;
    p.src = Some(IpAddr::from(a));
    p.dst = Some(IpAddr::from(b));
    let mut frag_off_bytes = 0usize;
    let mut nh = h[6];
    let mut o = off + 40;
    for _ in 0..MAX_IPV6_EXT {
        if !is_ipv6_ext(nh) || p.frag == Frag::Later {
            break;
        }
        // What a header that does not fit is: part of a first fragment's chain, or not.
        let cut = if p.frag == Frag::First { BadFragment } else { Malformed };
        if o + 8 > f.len() {
            return Err(cut);
        }
        let hlen = match nh {
            44 => 8,
            51 => (f[o + 1] as usize + 2) * 4,
            _ => (f[o + 1] as usize + 1) * 8,
        };
        if o + hlen > end {
            return Err(cut);
        }
        if nh == 44 {
            frag_off_bytes = ipv6_fragment(f, o, p);
        }
        nh = f[o];
        o += hlen;
    }
    if p.frag != Frag::Later && is_ipv6_ext(nh) {
        // The chain goes on past the bound: its protocol is unknown.
        return Err(if p.frag == Frag::First { BadFragment } else { Malformed });
    }
    p.proto = Some(nh);
    Ok(L3 { l4_off: o, l4_end: end, proto: nh, frag_off_bytes })
}

/// An IPv6 Fragment header at `o` (known to fit): raises `p.frag` to its state, never
/// lowers it; returns its fragment offset in bytes.
fn ipv6_fragment(f: &[u8], o: usize, p: &mut Packet) -> usize {
    let fo = u16::from_be_bytes([f[o + 2], f[o + 3]]);
    let st = if fo & 0xfff8 != 0 {
        Frag::Later
    } else if fo & 1 != 0 {
        Frag::First
    } else {
        Frag::None
    };
    // A nested fragment header never makes a fragment look whole again.
    if st as u8 > p.frag as u8 {
        p.frag = st;
    }
    (fo & 0xfff8) as usize
}

/// After the IP header: the fragment checks of a later fragment, else the TCP or UDP header
/// (ports, TCP flags into `p`), which must be all there.
fn transport(f: &[u8], l3: &L3, p: &mut Packet) -> Result<(), Reject> {
    use Reject::{BadFragment, Malformed};
    let L3 { l4_off, l4_end, proto, frag_off_bytes } = *l3;
    if p.frag == Frag::Later {
        // IPv6 reassembly ignores a later fragment's next header: any protocol counts there.
        if frag_off_bytes < TCP_MIN && (proto == 6 || p.eth_type == 0x86dd) {
            return Err(BadFragment);
        }
        return Ok(());
    }
    let short = if p.frag == Frag::First { BadFragment } else { Malformed };
    match proto {
        6 => {
            if l4_off + TCP_MIN > l4_end {
                return Err(short);
            }
            p.ports = Some((be16(f, l4_off).ok_or(short)?, be16(f, l4_off + 2).ok_or(short)?));
            p.tcp_flags = Some(f[l4_off + 13]);
        }
        17 => {
            if l4_off + UDP_LEN > l4_end {
                return Err(short);
            }
            p.ports = Some((be16(f, l4_off).ok_or(short)?, be16(f, l4_off + 2).ok_or(short)?));
        }
        _ => {}
    }
    Ok(())
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
    /// Cannot be classified: the rule set's `malformed` action and the `malformed` counter.
    Malformed,
    /// A tiny or overlapping fragment: dropped, the `bad_fragment` counter.
    BadFragment,
}

/// First-match classification of a raw frame.
pub fn classify(set: &RuleSet, frame: &[u8]) -> Verdict {
    match parse(frame) {
        Err(Reject::Malformed) => Verdict::Malformed,
        Err(Reject::BadFragment) => Verdict::BadFragment,
        Ok(p) => set.rules.iter().position(|r| matches(&r.m, &p)).map_or(Verdict::NoMatch, Verdict::Rule),
    }
}
