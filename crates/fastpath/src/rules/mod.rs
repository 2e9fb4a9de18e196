//! The rule language of the classifier: parse (TOML file or `--rule 'k=v,...'`), validate in full
//! before anything touches an interface, compile to map entries ([`compile`]), and the reference
//! classifier ([`reference`](mod@reference)) that the BPF program is tested against.
//!
//! ```toml
//! default = "pass"            # action for packets no rule matches
//! malformed = "drop"          # drop | pass: frames that cannot be classified (see below)
//!
//! [[rule]]
//! name = "ssh"                # optional; errors name it
//! priority = 10               # lower first; ties keep file order; default 0
//! proto = "tcp"               # tcp | udp | icmp | icmpv6 | 0..=255
//! dst_port = 22               # a port or "a-b"
//! action = "pass"             # drop | pass | xsk | cpu | tx | redirect | syncookie
//!
//! [[rule]]
//! src = "10.0.0.0/8"          # IPv4 or IPv6 prefix (or one address)
//! proto = "udp"
//! dst_port = "5000-5999"
//! action = "xsk"              # the AF_XDP socket of the packet's rx queue
//!
//! [[rule]]
//! tcp_flags = "syn,!ack"      # fin syn rst psh ack urg ece cwr, ! = must be clear
//! action = "drop"
//! rate = 1000                 # packets/s per source address; excess dropped
//! rate_total = 20000          # packets/s for the rule, all sources together (default 64 * rate)
//!
//! [[rule]]
//! vlan = 100                  # outermost tag id (802.1Q or 802.1ad)
//! eth_type = "ipv4"           # ipv4 | ipv6 | arp | 0x0800-style number
//! len = "64-128"              # frame length in bytes
//! frag = "later"              # none | first | later
//! action = "cpu"
//! cpus = [0, 1]               # spread by flow hash (CPUMAP)
//!
//! [[rule]]
//! dst = "fd99::/64"
//! action = "redirect"
//! iface = "veth1"             # DEVMAP to this interface
//!
//! [[rule]]
//! proto = "tcp"               # syncookie: tcp and a dst_port, nothing about flags,
//! dst_port = 80               # fragments or length, no rate
//! action = "syncookie"        # SYN cookies at the driver (Linux >= 6.9)
//! ```
//!
//! An absent field matches anything. A port or TCP-flag rule matches only packets that carry
//! ports (TCP/UDP, not a later fragment) or TCP flags.
//!
//! ## Frames that cannot be classified, and fragments
//!
//! The policy is written out in [`reference::parse`]; in short:
//!
//! - A frame whose headers cannot be read with certainty (truncated, lengths that lie, more than
//!   two VLAN tags, an IPv6 extension chain longer than [`reference::MAX_IPV6_EXT`]) is counted
//!   `malformed` and gets the `malformed` action, never a rule's verdict or the default by
//!   accident. `malformed` is `drop` or `pass`; when absent it is **drop** if any rule drops,
//!   has a rate limit, or looks at `proto`, `src_port`, `dst_port`, `tcp_flags` or `frag`
//!   (fields a crafted header chain could hide), otherwise the `default` action (a set that only
//!   steers or passes).
//! - Tiny and overlapping fragments are counted `bad_fragment` and always dropped, as routers
//!   and Open vSwitch do: a first fragment without its whole TCP/UDP header (RFC 3128) or, for
//!   IPv6, without its whole extension chain (RFC 7112), and a later TCP fragment at offset 8
//!   or 16 bytes, inside the minimal TCP header (RFC 1858, RFC 3128).
//! - Later fragments (offset > 0) carry no ports or flags, so port and flag rules never match
//!   them (iptables without conntrack and OVS's `frag=normal` do the same). They get what rules
//!   on L3 fields, a `frag = "later"` rule, or the default decide. This is safe for a drop
//!   rule: the first fragment carries the whole L4 header and is judged by the port rule, and
//!   without it the receiver cannot reassemble the datagram (the later fragments expire in its
//!   reassembly queue). Add `frag = "later", action = "drop"` to drop all later fragments.
//! - `proto` is the protocol after IPv6 extension headers and after an IPv4 or IPv6
//!   Authentication Header (RFC 4302), which is walked: AH-wrapped UDP matches UDP port rules.
//!   So `proto` may not name a walked header (0, 43, 44, 51, 60: refused with an error); ESP
//!   cannot be looked into, and `proto = 50` matches it. An IPv4 later fragment of an AH packet
//!   is judged by the fragment rules for its protocol 51 only: the overlap checks (RFC 1858)
//!   cannot know where the inner TCP header lay, and rely on the receiver discarding
//!   overlapping fragments (Linux does, since 4.19) and on AH's integrity check.
//! - A multi-buffer frame (jumbo MTU, native XDP) is judged exactly as a single-buffer one:
//!   lengths and `len` on the whole frame, headers read across its buffers.
//! - Tunnels (IPIP, GRE, VXLAN, Geneve, ...) are judged on their outer headers only: a rule on
//!   ports or inner addresses does not see inside them. Match the tunnel itself (for example
//!   `proto = 47` for GRE, `proto = "udp", dst_port = 4789` for VXLAN) and drop or steer it
//!   whole, or attach the classifier to the interface where the tunnel ends (the GRE or VXLAN
//!   device), where its frames arrive decapsulated.

pub mod compile;
pub mod reference;

use std::fmt;
use std::net::IpAddr;

use serde::Deserialize;

/// IP protocol numbers the parser walks past (IPv6 Hop-by-Hop 0, Routing 43, Fragment 44,
/// Destination Options 60; the Authentication Header 51 of IPv4 and IPv6): refused as `proto`.
pub const WALKED_PROTOS: [u8; 5] = [0, 43, 44, 51, 60];

/// Most rules one rule set may hold (the size of the per-set action and counter arrays).
/// `FP_CLS_MAX_RULES` (bpf/include/fastpath_abi.h).
pub const MAX_RULES: usize = crate::abi::FP_CLS_MAX_RULES as usize;
/// Most distinct CPU sets (`action = "cpu"`) in one rule set (`FP_CLS_MAX_CPU_SETS`).
pub const MAX_CPU_SETS: usize = crate::abi::FP_CLS_MAX_CPU_SETS as usize;
/// Most CPUs in one CPU set (`FP_CLS_MAX_CPUS`).
pub const MAX_CPUS_PER_SET: usize = crate::abi::FP_CLS_MAX_CPUS as usize;
/// Most distinct `redirect` interfaces in one rule set (`FP_CLS_MAX_PORTS`).
pub const MAX_REDIRECT_PORTS: usize = crate::abi::FP_CLS_MAX_PORTS as usize;

/// What happens to a matching packet.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Action {
    /// XDP_DROP.
    Drop,
    /// XDP_PASS: to the kernel stack.
    Pass,
    /// XDP_REDIRECT into the XSKMAP slot of the packet's rx queue (XDP_PASS if no socket).
    Xsk,
    /// XDP_REDIRECT into the CPUMAP, to one of these CPUs chosen by flow hash.
    Cpu(Vec<u32>),
    /// XDP_TX: back out of the interface it came in on.
    Tx,
    /// XDP_REDIRECT into the DEVMAP, out of this interface.
    Redirect(String),
    /// SYN cookies at the driver (`proto = "tcp"` with a `dst_port` only): a SYN is answered
    /// with a SYN-ACK carrying a cookie (XDP_TX), a segment of an existing connection passes, an
    /// ACK that finds only the listener passes if its cookie checks out (a tc ingress program
    /// then creates the request socket) and is dropped otherwise, anything else is dropped.
    /// Linux >= 6.9 (bpf_sk_assign_tcp_reqsk) and `net.ipv4.tcp_syncookies` != 0. Design:
    /// docs/ARCHITECTURE.md, "SYN cookies at the driver".
    Syncookie,
}

impl Action {
    /// The action's keyword.
    pub fn name(&self) -> &'static str {
        match self {
            Action::Drop => "drop",
            Action::Pass => "pass",
            Action::Xsk => "xsk",
            Action::Cpu(_) => "cpu",
            Action::Tx => "tx",
            Action::Redirect(_) => "redirect",
            Action::Syncookie => "syncookie",
        }
    }
}

/// An IPv4 or IPv6 prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    /// Address with host bits zeroed.
    pub addr: IpAddr,
    /// Prefix length.
    pub len: u8,
}

impl Prefix {
    /// True if `a` is inside the prefix.
    pub fn contains(&self, a: &IpAddr) -> bool {
        match (self.addr, a) {
            (IpAddr::V4(p), IpAddr::V4(x)) => mask_bits(&p.octets(), self.len) == mask_bits(&x.octets(), self.len),
            (IpAddr::V6(p), IpAddr::V6(x)) => mask_bits(&p.octets(), self.len) == mask_bits(&x.octets(), self.len),
            _ => false,
        }
    }
    /// Whether it is IPv4.
    pub fn is_v4(&self) -> bool {
        self.addr.is_ipv4()
    }
}

/// The first `len` bits of `b`, the rest zero, in a 16-byte array.
pub fn mask_bits(b: &[u8], len: u8) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (i, (o, v)) in out.iter_mut().zip(b).enumerate() {
        let bits = (len as usize).saturating_sub(i * 8).min(8);
        *o = if bits == 0 { 0 } else { v & (0xffu8 << (8 - bits)) };
    }
    out
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// Fragment state of an IP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Frag {
    /// Not a fragment (or not IP).
    None = 0,
    /// First fragment (offset 0, more fragments).
    First = 1,
    /// A later fragment (offset > 0): carries no L4 header.
    Later = 2,
}

/// TCP flag bits (RFC 9293 order in the flags byte).
pub const TCP_FLAGS: [(&str, u8); 8] = [
    ("fin", 0x01),
    ("syn", 0x02),
    ("rst", 0x04),
    ("psh", 0x08),
    ("ack", 0x10),
    ("urg", 0x20),
    ("ece", 0x40),
    ("cwr", 0x80),
];

/// What a rule matches; `None` = anything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Match {
    /// Outermost VLAN id.
    pub vlan: Option<u16>,
    /// EtherType after the VLAN tags.
    pub eth_type: Option<u16>,
    /// Source prefix.
    pub src: Option<Prefix>,
    /// Destination prefix.
    pub dst: Option<Prefix>,
    /// IP protocol.
    pub proto: Option<u8>,
    /// Source port range (inclusive).
    pub src_port: Option<(u16, u16)>,
    /// Destination port range (inclusive).
    pub dst_port: Option<(u16, u16)>,
    /// TCP flags: (mask, value): `flags & mask == value`.
    pub tcp_flags: Option<(u8, u8)>,
    /// Frame length range in bytes (inclusive).
    pub len: Option<(u16, u16)>,
    /// Fragment state.
    pub frag: Option<Frag>,
}

/// One validated rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Name (given, or `rule N` with N from 1 in file order).
    pub name: String,
    /// Priority: lower first.
    pub priority: i64,
    /// The match.
    pub m: Match,
    /// The action.
    pub action: Action,
    /// Packets per second per source address (token bucket of one second); excess dropped.
    pub rate_pps: Option<u64>,
    /// Packets per second for the rule, all sources together (one token bucket of one second,
    /// shared by all CPUs); excess dropped. With `rate_pps` and no explicit value it is
    /// [`RATE_TOTAL_SOURCES`] times `rate_pps`, so a flood from spoofed sources stays bounded.
    pub rate_total_pps: Option<u64>,
}

impl Rule {
    /// The rule's match and action in the `--rule` form, `key=value` pairs joined by `,` in the
    /// order of the TOML keys (`priority` when not 0, `vlan`, `eth_type` when no prefix implies
    /// it, `src`, `dst`, `proto`, `src_port`, `dst_port`, `tcp_flags`, `len`, `frag`, `action`
    /// with its `cpus` or `iface`, `rate`, and `rate_total` when it is not the default for
    /// `rate`): what `fastpath filter show` prints, and what [`parse_rule_texts`] parses back into
    /// the same rule (its name aside). `tcp_flags` and `cpus` list their items with `+`
    /// (`tcp_flags=syn+!ack`, `cpus=0+1`); a port or length range is `a-b`.
    pub fn text(&self) -> String {
        let m = &self.m;
        let mut kv: Vec<String> = Vec::new();
        let range = |(a, b): (u16, u16)| if a == b { a.to_string() } else { format!("{a}-{b}") };
        if self.priority != 0 {
            kv.push(format!("priority={}", self.priority));
        }
        if let Some(v) = m.vlan {
            kv.push(format!("vlan={v}"));
        }
        if let (Some(t), None) = (m.eth_type, m.src.or(m.dst)) {
            kv.push(match t {
                0x0800 => "eth_type=ipv4".to_string(),
                0x86dd => "eth_type=ipv6".to_string(),
                0x0806 => "eth_type=arp".to_string(),
                t => format!("eth_type={t:#06x}"),
            });
        }
        if let Some(p) = m.src {
            kv.push(format!("src={p}"));
        }
        if let Some(p) = m.dst {
            kv.push(format!("dst={p}"));
        }
        if let Some(p) = m.proto {
            kv.push(match p {
                6 => "proto=tcp".to_string(),
                17 => "proto=udp".to_string(),
                1 => "proto=icmp".to_string(),
                58 => "proto=icmpv6".to_string(),
                p => format!("proto={p}"),
            });
        }
        if let Some(r) = m.src_port {
            kv.push(format!("src_port={}", range(r)));
        }
        if let Some(r) = m.dst_port {
            kv.push(format!("dst_port={}", range(r)));
        }
        if let Some((mask, value)) = m.tcp_flags {
            let items: Vec<String> = TCP_FLAGS
                .iter()
                .filter(|(_, b)| mask & b != 0)
                .map(|(n, b)| if value & b != 0 { (*n).to_string() } else { format!("!{n}") })
                .collect();
            kv.push(format!("tcp_flags={}", items.join("+")));
        }
        if let Some(r) = m.len {
            kv.push(format!("len={}", range(r)));
        }
        if let Some(f) = m.frag {
            kv.push(format!(
                "frag={}",
                match f {
                    Frag::None => "none",
                    Frag::First => "first",
                    Frag::Later => "later",
                }
            ));
        }
        kv.push(format!("action={}", self.action.name()));
        match &self.action {
            Action::Cpu(c) => kv.push(format!("cpus={}", c.iter().map(u32::to_string).collect::<Vec<_>>().join("+"))),
            Action::Redirect(i) => kv.push(format!("iface={i}")),
            _ => {}
        }
        if let Some(r) = self.rate_pps {
            kv.push(format!("rate={r}"));
        }
        let implied = self.rate_pps.map(|r| (r * RATE_TOTAL_SOURCES).min(1_000_000_000));
        if let Some(t) = self.rate_total_pps.filter(|t| Some(*t) != implied) {
            kv.push(format!("rate_total={t}"));
        }
        kv.join(",")
    }
}

/// With a per-source `rate` and no `rate_total`, the aggregate limit is this many sources' worth
/// (`FP_RATE_TOTAL_SOURCES` in bpf/include/fastpath_abi.h).
pub const RATE_TOTAL_SOURCES: u64 = crate::abi::FP_RATE_TOTAL_SOURCES as u64;

/// A validated rule set: rules in evaluation order (sorted by priority, file order for ties).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSet {
    /// Rules, first match wins.
    pub rules: Vec<Rule>,
    /// Action for packets no rule matches.
    pub default: Action,
    /// The `malformed` action as written (drop or pass); `None`: chosen by
    /// [`RuleSet::malformed_action`].
    pub malformed: Option<Action>,
}

impl RuleSet {
    /// What a frame that cannot be classified gets: the `malformed` setting if given, else
    /// [`Action::Drop`] if any rule guards something (drops, rate-limits) or looks at a field a
    /// crafted header chain could hide (proto, ports, TCP flags, fragment state), else the
    /// default action. A frame with extra VLAN tags or a long IPv6 chain still reaches the
    /// kernel's stack, so an address drop rule must not let it through as "unknown".
    pub fn malformed_action(&self) -> Action {
        if let Some(a) = &self.malformed {
            return a.clone();
        }
        let guards = self.rules.iter().any(|r| {
            r.action == Action::Drop
                || r.rate_pps.is_some()
                || r.rate_total_pps.is_some()
                || r.m.proto.is_some()
                || r.m.src_port.is_some()
                || r.m.dst_port.is_some()
                || r.m.tcp_flags.is_some()
                || r.m.frag.is_some()
        });
        if guards {
            Action::Drop
        } else {
            self.default.clone()
        }
    }
}

/// Where in the input an error is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// File (or `--rule N`), line and column, 1-based.
    At {
        /// File name or `--rule N`.
        source: String,
        /// Line.
        line: usize,
        /// Column.
        col: usize,
    },
    /// A rule by name, in a file.
    Rule {
        /// File name.
        source: String,
        /// Rule name.
        rule: String,
    },
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::At { source, line, col } => write!(f, "{source}:{line}:{col}"),
            Location::Rule { source, rule } => write!(f, "{source}: rule {rule:?}"),
        }
    }
}

/// A rule-set error: where, and what is wrong and accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{at}: {msg}")]
#[non_exhaustive]
pub struct RuleError {
    /// Where.
    pub at: Location,
    /// What is wrong, and what is accepted.
    pub msg: String,
}

// ---- raw TOML ----

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    default: Option<toml::Spanned<String>>,
    malformed: Option<toml::Spanned<String>>,
    #[serde(default)]
    rule: Vec<toml::Spanned<RawRule>>,
}

#[derive(Debug, Deserialize, Clone)]
#[serde(untagged)]
enum IntOrStr {
    Int(i64),
    Str(String),
}

impl fmt::Display for IntOrStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IntOrStr::Int(i) => write!(f, "{i}"),
            IntOrStr::Str(s) => write!(f, "{s:?}"),
        }
    }
}

type S<T> = Option<toml::Spanned<T>>;

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct RawRule {
    name: Option<String>,
    priority: Option<i64>,
    vlan: S<i64>,
    eth_type: S<IntOrStr>,
    src: S<String>,
    dst: S<String>,
    proto: S<IntOrStr>,
    src_port: S<IntOrStr>,
    dst_port: S<IntOrStr>,
    tcp_flags: S<String>,
    len: S<IntOrStr>,
    frag: S<String>,
    action: toml::Spanned<String>,
    cpus: S<Vec<i64>>,
    iface: S<String>,
    rate: S<i64>,
    rate_total: S<i64>,
}

/// Byte offset -> (line, column), 1-based.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map(|l| l.chars().count()).unwrap_or(0) + 1;
    (line, col)
}

struct Ctx<'a> {
    source: &'a str,
    text: &'a str,
}

impl Ctx<'_> {
    fn at(&self, span: std::ops::Range<usize>, msg: impl Into<String>) -> RuleError {
        let (line, col) = line_col(self.text, span.start);
        RuleError { at: Location::At { source: self.source.to_string(), line, col }, msg: msg.into() }
    }
}

/// A synthetic rule file for benchmarks and tests: `default = "pass"` and `n` rules that no
/// test-bed flood matches (as scripts/bench_classifier.py writes them): source /32 + UDP port
/// drops (172.16.0.0/12, ports 1000..51000) and destination /24 passes (192.168.0.0/13),
/// alternating, shifted by `salt` so that two files differ in every rule. The caller appends
/// the rules that should match. TOML text for [`parse_toml`].
pub fn mixed_rules_toml(n: usize, salt: usize) -> String {
    use std::fmt::Write;
    let mut t = String::from("default = \"pass\"\n");
    for j in 0..n {
        let i = j + salt;
        if j % 2 == 0 {
            let _ = write!(
                t,
                "[[rule]]\nsrc = \"172.{}.{}.{}/32\"\nproto = \"udp\"\ndst_port = {}\naction = \"drop\"\n",
                16 + (i >> 16) % 16,
                (i >> 8) & 255,
                i & 255,
                1000 + i % 50000
            );
        } else {
            let _ = write!(
                t,
                "[[rule]]\ndst = \"192.{}.{}.0/24\"\naction = \"pass\"\n",
                168 + (i >> 16) % 8,
                (i >> 8) & 255
            );
        }
    }
    t
}

/// Parses and validates a TOML rule file. `source` names it in errors (usually the path).
///
/// # Errors
///
/// A [`RuleError`] at the first problem: TOML syntax, an unknown key, a value not accepted, or a
/// rule-set limit ([`finish`]).
///
/// # Examples
///
/// ```
/// use fastpath::rules::{parse_toml, Action};
///
/// let text = r#"
/// default = "drop"
///
/// [[rule]]
/// name = "ssh"
/// proto = "tcp"
/// dst_port = 22
/// action = "pass"
///
/// [[rule]]
/// priority = -1
/// src = "10.0.0.0/8"
/// proto = "udp"
/// dst_port = "5000-5999"
/// action = "xsk"
/// "#;
/// let set = parse_toml("rules.toml", text)?;
/// assert_eq!(set.default, Action::Drop);
/// // Lower priority first; an unnamed rule is named by its place in the file.
/// let names: Vec<&str> = set.rules.iter().map(|r| r.name.as_str()).collect();
/// assert_eq!(names, ["rule 2", "ssh"]);
/// let udp = &set.rules[0];
/// assert_eq!((udp.m.proto, udp.m.dst_port, &udp.action), (Some(17), Some((5000, 5999)), &Action::Xsk));
/// assert_eq!(udp.text(), "priority=-1,src=10.0.0.0/8,proto=udp,dst_port=5000-5999,action=xsk");
/// // Refused, with the place and what is accepted.
/// let e = parse_toml("bad.toml", "[[rule]]\ndst_port = 70000\naction = \"drop\"\n").unwrap_err();
/// assert!(e.to_string().starts_with("bad.toml:2:"), "{e}");
/// # Ok::<(), fastpath::rules::RuleError>(())
/// ```
pub fn parse_toml(source: &str, text: &str) -> Result<RuleSet, RuleError> {
    let ctx = Ctx { source, text };
    let raw: RawFile = toml::from_str(text).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        let msg = e.message().replace('\n', " ");
        ctx.at(span, msg)
    })?;
    let default = match &raw.default {
        None => Action::Pass,
        Some(d) => match d.get_ref().as_str() {
            "drop" => Action::Drop,
            "pass" => Action::Pass,
            "xsk" => Action::Xsk,
            "tx" => Action::Tx,
            other => {
                return Err(ctx.at(d.span(), format!("default {other:?} is not accepted: use drop, pass, xsk or tx")))
            }
        },
    };
    let malformed = match &raw.malformed {
        None => None,
        Some(m) => Some(match m.get_ref().as_str() {
            "drop" => Action::Drop,
            "pass" => Action::Pass,
            other => return Err(ctx.at(m.span(), format!("malformed {other:?} is not accepted: use drop or pass"))),
        }),
    };
    let mut rules = Vec::with_capacity(raw.rule.len());
    for (i, r) in raw.rule.iter().enumerate() {
        rules.push(rule_from_raw(&ctx, i, r.get_ref())?);
    }
    let mut set = finish(source, rules, default)?;
    set.malformed = malformed;
    Ok(set)
}

/// Parses one-off rules given as `k=v,k=v` (e.g. `proto=udp,dst_port=9,action=drop`), each a
/// rule; `tcp_flags` and `cpus` values use `+` between items (`tcp_flags=syn+!ack`, `cpus=0+1`).
///
/// # Errors
///
/// A [`RuleError`] at the first problem (an item that is not `key=value`, or what
/// [`parse_toml`] refuses), located at the `key=value` pair in `LABEL N`.
///
/// `label` names where the texts came from (the set's source; rule N is named `LABEL N`), e.g.
/// the command-line option that gave them.
///
/// # Examples
///
/// ```
/// use fastpath::rules::{parse_rule_texts, Action};
///
/// let texts = ["proto=tcp,tcp_flags=syn+!ack,action=drop,rate=100".to_string()];
/// let set = parse_rule_texts("--rule", &texts, Action::Pass)?;
/// let r = &set.rules[0];
/// assert_eq!(r.name, "--rule 1");
/// assert_eq!(r.m.tcp_flags, Some((0x12, 0x02))); // (mask, value): SYN set, ACK clear
/// assert_eq!((r.action.clone(), r.rate_pps), (Action::Drop, Some(100)));
/// // What `fastpath filter show` prints parses back into the same rule.
/// let again = parse_rule_texts("--rule", &[r.text()], Action::Pass)?;
/// assert_eq!(again.rules[0], *r);
/// # Ok::<(), fastpath::rules::RuleError>(())
/// ```
pub fn parse_rule_texts(label: &str, rules: &[String], default: Action) -> Result<RuleSet, RuleError> {
    let mut out = Vec::new();
    for (i, r) in rules.iter().enumerate() {
        let source = format!("{label} {}", i + 1);
        let mut toml_text = String::from("[[rule]]\n");
        for kv in r.split(',').filter(|s| !s.trim().is_empty()) {
            let Some((k, v)) = kv.split_once('=') else {
                return Err(RuleError {
                    at: Location::At { source, line: 1, col: r.find(kv).unwrap_or(0) + 1 },
                    msg: format!("{kv:?} is not key=value (e.g. proto=udp,dst_port=9,action=drop)"),
                });
            };
            let (k, v) = (k.trim(), v.trim());
            let value = match k {
                "cpus" => format!("[{}]", v.split('+').collect::<Vec<_>>().join(",")),
                "tcp_flags" => format!("{:?}", v.replace('+', ",")),
                _ if v.parse::<i64>().is_ok() => v.to_string(),
                _ => format!("{v:?}"),
            };
            toml_text.push_str(&format!("{k} = {value}\n"));
        }
        let set = parse_toml(&source, &toml_text).map_err(|mut e| {
            // Lines of the generated TOML are key=value pairs: point at the pair instead.
            if let Location::At { line, .. } = e.at {
                let kv = r.split(',').filter(|s| !s.trim().is_empty()).nth(line.saturating_sub(2));
                e.at = Location::At {
                    source: source.clone(),
                    line: 1,
                    col: kv.and_then(|kv| r.find(kv)).unwrap_or(0) + 1,
                };
            }
            e
        })?;
        out.extend(set.rules.into_iter().map(|mut rule| {
            rule.name = source.clone();
            rule
        }));
    }
    finish(label, out, default)
}

/// Sorts `rules` by priority (stable) and checks the rule-set limits (rules, CPU sets,
/// redirect interfaces): what a merged set (file + `--rule`) must pass again. The result has no
/// explicit `malformed` setting; set [`RuleSet::malformed`] afterwards to keep one.
///
/// # Errors
///
/// A [`RuleError`] if the set has more than [`MAX_RULES`] rules, [`MAX_CPU_SETS`] CPU sets or
/// [`MAX_REDIRECT_PORTS`] redirect interfaces.
pub fn finish(source: &str, mut rules: Vec<Rule>, default: Action) -> Result<RuleSet, RuleError> {
    if rules.len() > MAX_RULES {
        return Err(RuleError {
            at: Location::At { source: source.to_string(), line: 1, col: 1 },
            msg: format!("{} rules: a rule set holds at most {MAX_RULES}", rules.len()),
        });
    }
    // Stable: ties keep file order.
    rules.sort_by_key(|r| r.priority);
    let set = RuleSet { rules, default, malformed: None };
    let cpu_sets: std::collections::HashSet<&Vec<u32>> =
        set.rules.iter().filter_map(|r| if let Action::Cpu(c) = &r.action { Some(c) } else { None }).collect();
    if cpu_sets.len() > MAX_CPU_SETS {
        return Err(RuleError {
            at: Location::At { source: source.to_string(), line: 1, col: 1 },
            msg: format!("{} distinct cpu sets: at most {MAX_CPU_SETS}", cpu_sets.len()),
        });
    }
    let ports: std::collections::HashSet<&String> =
        set.rules.iter().filter_map(|r| if let Action::Redirect(i) = &r.action { Some(i) } else { None }).collect();
    if ports.len() > MAX_REDIRECT_PORTS {
        return Err(RuleError {
            at: Location::At { source: source.to_string(), line: 1, col: 1 },
            msg: format!("{} distinct redirect interfaces: at most {MAX_REDIRECT_PORTS}", ports.len()),
        });
    }
    Ok(set)
}

fn range(ctx: &Ctx<'_>, what: &str, v: &toml::Spanned<IntOrStr>, max: u32) -> Result<(u16, u16), RuleError> {
    let bad = |msg: String| ctx.at(v.span(), msg);
    let accepted = format!("use a number 0..={max} or a range \"a-b\" with a <= b");
    let num = |s: &str| -> Option<u32> { s.trim().parse::<u32>().ok().filter(|n| *n <= max) };
    match v.get_ref() {
        IntOrStr::Int(i) if (0..=max as i64).contains(i) => Ok((*i as u16, *i as u16)),
        IntOrStr::Int(i) => Err(bad(format!("{what} {i} is not accepted: {accepted}"))),
        IntOrStr::Str(s) => {
            let (a, b) = match s.split_once('-') {
                Some((a, b)) => (num(a), num(b)),
                None => (num(s), num(s)),
            };
            match (a, b) {
                (Some(a), Some(b)) if a <= b => Ok((a as u16, b as u16)),
                (Some(a), Some(b)) => Err(bad(format!("{what} {s:?} is upside down ({a} > {b}): {accepted}"))),
                _ => Err(bad(format!("{what} {s:?} is not accepted: {accepted}"))),
            }
        }
    }
}

fn prefix(ctx: &Ctx<'_>, what: &str, v: &toml::Spanned<String>) -> Result<Prefix, RuleError> {
    let s = v.get_ref().trim();
    let bad = || {
        ctx.at(
            v.span(),
            format!(
                "{what} {s:?} is not accepted: use an IPv4 or IPv6 prefix like 10.0.0.0/8 or fd99::/64, or one address"
            ),
        )
    };
    let (a, l) = match s.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (s, None),
    };
    let addr: IpAddr = a.parse().map_err(|_| bad())?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len = match l {
        None => max,
        Some(l) => l.parse::<u8>().ok().filter(|l| *l <= max).ok_or_else(bad)?,
    };
    let masked = match addr {
        IpAddr::V4(a) => {
            let m = mask_bits(&a.octets(), len);
            IpAddr::from([m[0], m[1], m[2], m[3]])
        }
        IpAddr::V6(a) => IpAddr::from(mask_bits(&a.octets(), len)),
    };
    if masked != addr {
        return Err(ctx.at(v.span(), format!("{what} {s:?} has host bits set: did you mean {masked}/{len}?")));
    }
    Ok(Prefix { addr, len })
}

/// Validates one raw rule into a [`Rule`], field group by field group in a fixed order (so the
/// first error reported is always the same one): layer 2, addresses, protocol, ports, TCP
/// flags, length, fragment state, action, rate limits.
fn rule_from_raw(ctx: &Ctx<'_>, index: usize, r: &RawRule) -> Result<Rule, RuleError> {
    let name = r.name.clone().unwrap_or_else(|| format!("rule {}", index + 1));
    let mut m = Match::default();
    if let Some(v) = &r.vlan {
        m.vlan = Some(vlan_id(ctx, v)?);
    }
    if let Some(v) = &r.eth_type {
        m.eth_type = Some(eth_type(ctx, v)?);
    }
    addresses(ctx, r, &mut m)?;
    if let Some(v) = &r.proto {
        m.proto = Some(protocol(ctx, v)?);
    }
    (m.src_port, m.dst_port) = ports(ctx, r, m.proto)?;
    if let Some(v) = &r.tcp_flags {
        m.tcp_flags = Some(tcp_flags(ctx, r, v, m.proto)?);
    }
    if let Some(v) = &r.len {
        m.len = Some(range(ctx, "len", v, 65535)?);
    }
    if let Some(v) = &r.frag {
        m.frag = Some(frag(ctx, v, &m)?);
    }
    let action = rule_action(ctx, r)?;
    if action == Action::Syncookie {
        syncookie_fits(ctx, r, &m)?;
    }
    let (rate_pps, rate_total_pps) = rates(ctx, r)?;
    Ok(Rule { name, priority: r.priority.unwrap_or(0), m, action, rate_pps, rate_total_pps })
}

/// `vlan`: a VLAN id 0..=4095.
fn vlan_id(ctx: &Ctx<'_>, v: &toml::Spanned<i64>) -> Result<u16, RuleError> {
    let id = *v.get_ref();
    if !(0..=4095).contains(&id) {
        return Err(ctx.at(v.span(), format!("vlan {id} is not accepted: use a VLAN id 0..=4095")));
    }
    Ok(id as u16)
}

/// `eth_type`: a keyword (ipv4, ipv6, arp), a `0x` hex string or a number, as an EtherType.
fn eth_type(ctx: &Ctx<'_>, v: &toml::Spanned<IntOrStr>) -> Result<u16, RuleError> {
    let t = match v.get_ref() {
        IntOrStr::Str(s) if s == "ipv4" => Some(0x0800),
        IntOrStr::Str(s) if s == "ipv6" => Some(0x86dd),
        IntOrStr::Str(s) if s == "arp" => Some(0x0806),
        IntOrStr::Str(s) => s.strip_prefix("0x").and_then(|h| u16::from_str_radix(h, 16).ok()),
        IntOrStr::Int(i) => u16::try_from(*i).ok(),
    };
    t.ok_or_else(|| {
        ctx.at(
            v.span(),
            format!("eth_type {} is not accepted: use ipv4, ipv6, arp or a number like 0x88cc", v.get_ref()),
        )
    })
}

/// `src` and `dst` into `m`: one IP version for both, and the EtherType they imply (an
/// explicit `eth_type` in `m` must agree with it).
fn addresses(ctx: &Ctx<'_>, r: &RawRule, m: &mut Match) -> Result<(), RuleError> {
    if let Some(v) = &r.src {
        m.src = Some(prefix(ctx, "src", v)?);
    }
    if let Some(v) = &r.dst {
        m.dst = Some(prefix(ctx, "dst", v)?);
    }
    if let (Some(s), Some(d), Some(dv)) = (m.src, m.dst, &r.dst) {
        if s.is_v4() != d.is_v4() {
            return Err(ctx.at(
                dv.span(),
                format!("src {s} and dst {d} are of different IP versions: a packet cannot match both"),
            ));
        }
    }
    if let Some(p) = m.src.or(m.dst) {
        let want = if p.is_v4() { 0x0800 } else { 0x86dd };
        match m.eth_type {
            Some(t) if t != want => {
                let span = r.eth_type.as_ref().map(|v| v.span()).unwrap_or(0..0);
                return Err(ctx.at(
                    span,
                    format!("eth_type {t:#06x} contradicts the {} prefix {p}", if p.is_v4() { "IPv4" } else { "IPv6" }),
                ));
            }
            _ => m.eth_type = Some(want),
        }
    }
    Ok(())
}

/// `proto`: a keyword (tcp, udp, icmp, icmpv6) or 0..=255, never a header the parser walks.
fn protocol(ctx: &Ctx<'_>, v: &toml::Spanned<IntOrStr>) -> Result<u8, RuleError> {
    let p = match v.get_ref() {
        IntOrStr::Str(s) if s == "tcp" => Some(6),
        IntOrStr::Str(s) if s == "udp" => Some(17),
        IntOrStr::Str(s) if s == "icmp" => Some(1),
        IntOrStr::Str(s) if s == "icmpv6" => Some(58),
        IntOrStr::Int(i) => u8::try_from(*i).ok(),
        IntOrStr::Str(_) => None,
    };
    let p = p.ok_or_else(|| {
        ctx.at(v.span(), format!("proto {} is not accepted: use tcp, udp, icmp, icmpv6 or 0..=255", v.get_ref()))
    })?;
    // Headers the parser walks past: `proto` names the header after them, so a rule on one
    // of these could only ever match later fragments, never the packets it was written for.
    if WALKED_PROTOS.contains(&p) {
        return Err(ctx.at(
            v.span(),
            format!(
                "proto {p} is not accepted: it is an IPv6 extension header or an Authentication Header (0, 43, 44, 51, 60), which the classifier walks, and `proto` names the header after it; match such traffic by address, or with frag = \"later\""
            ),
        ));
    }
    Ok(p)
}

/// A port range pair.
type PortRanges = (Option<(u16, u16)>, Option<(u16, u16)>);

/// `src_port` and `dst_port`: ranges, only with a protocol that has ports (`proto`, already
/// validated, is tcp, udp or absent).
fn ports(ctx: &Ctx<'_>, r: &RawRule, proto: Option<u8>) -> Result<PortRanges, RuleError> {
    let src_port = r.src_port.as_ref().map(|v| range(ctx, "src_port", v, 65535)).transpose()?;
    let dst_port = r.dst_port.as_ref().map(|v| range(ctx, "dst_port", v, 65535)).transpose()?;
    if src_port.is_some() || dst_port.is_some() {
        if let Some(p) = proto.filter(|p| *p != 6 && *p != 17) {
            let span = r.proto.as_ref().map(|v| v.span()).unwrap_or(0..0);
            return Err(ctx.at(span, format!("proto {p} has no ports: port fields need tcp or udp")));
        }
    }
    Ok((src_port, dst_port))
}

/// `tcp_flags` (`v`, from `r`): comma-separated flag names, `!` for must-be-clear, as
/// (mask, value); only with `proto` tcp or absent.
fn tcp_flags(ctx: &Ctx<'_>, r: &RawRule, v: &toml::Spanned<String>, proto: Option<u8>) -> Result<(u8, u8), RuleError> {
    let mut mask = 0u8;
    let mut value = 0u8;
    for item in v.get_ref().split(',').map(str::trim) {
        let (neg, flag) = match item.strip_prefix('!') {
            Some(f) => (true, f),
            None => (false, item),
        };
        let bit = TCP_FLAGS.iter().find(|(n, _)| *n == flag).map(|(_, b)| *b).ok_or_else(|| {
            ctx.at(v.span(), format!("tcp_flags {:?}: {item:?} is not accepted: use fin, syn, rst, psh, ack, urg, ece, cwr, each optionally with !", v.get_ref()))
        })?;
        mask |= bit;
        if !neg {
            value |= bit;
        }
    }
    if let Some(p) = proto.filter(|p| *p != 6) {
        let span = r.proto.as_ref().map(|v| v.span()).unwrap_or(0..0);
        return Err(ctx.at(span, format!("proto {p} has no TCP flags: tcp_flags needs tcp")));
    }
    Ok((mask, value))
}

/// `frag`: none, first or later; `later` only in a rule `m` that looks at no L4 field.
fn frag(ctx: &Ctx<'_>, v: &toml::Spanned<String>, m: &Match) -> Result<Frag, RuleError> {
    let f = match v.get_ref().as_str() {
        "none" => Frag::None,
        "first" => Frag::First,
        "later" => Frag::Later,
        other => return Err(ctx.at(v.span(), format!("frag {other:?} is not accepted: use none, first or later"))),
    };
    if f == Frag::Later && (m.src_port.is_some() || m.dst_port.is_some() || m.tcp_flags.is_some()) {
        return Err(ctx.at(v.span(), "frag \"later\" has no L4 header: it cannot match ports or tcp_flags"));
    }
    Ok(f)
}

/// `action` with its arguments (`cpus`, `iface`), which no other action may carry.
fn rule_action(ctx: &Ctx<'_>, r: &RawRule) -> Result<Action, RuleError> {
    let a = &r.action;
    let action = match a.get_ref().as_str() {
        "drop" => Action::Drop,
        "pass" => Action::Pass,
        "xsk" => Action::Xsk,
        "tx" => Action::Tx,
        "cpu" => cpu_action(ctx, a, r)?,
        "redirect" => redirect_action(ctx, a, r)?,
        "syncookie" => Action::Syncookie,
        other => {
            return Err(ctx.at(
                a.span(),
                format!("action {other:?} is not accepted: use drop, pass, xsk, cpu, tx, redirect or syncookie"),
            ))
        }
    };
    if let (Some(c), false) = (&r.cpus, matches!(action, Action::Cpu(_))) {
        return Err(ctx.at(c.span(), "cpus is only for action \"cpu\""));
    }
    if let (Some(i), false) = (&r.iface, matches!(action, Action::Redirect(_))) {
        return Err(ctx.at(i.span(), "iface is only for action \"redirect\""));
    }
    Ok(action)
}

/// `action = "syncookie"` is for one TCP service: `proto = "tcp"` and a `dst_port`, and no field
/// that would split a handshake between rules (`tcp_flags`, `frag`, `len`) or drop part of it
/// (`rate`, `rate_total`).
fn syncookie_fits(ctx: &Ctx<'_>, r: &RawRule, m: &Match) -> Result<(), RuleError> {
    let a = r.action.span();
    if m.proto != Some(6) {
        return Err(ctx.at(a, "action \"syncookie\" needs proto = \"tcp\""));
    }
    if m.dst_port.is_none() {
        return Err(ctx.at(a, "action \"syncookie\" needs a dst_port (the TCP service it answers for)"));
    }
    let refused = [
        ("tcp_flags", r.tcp_flags.as_ref().map(|v| v.span())),
        ("frag", r.frag.as_ref().map(|v| v.span())),
        ("len", r.len.as_ref().map(|v| v.span())),
        ("rate", r.rate.as_ref().map(|v| v.span())),
        ("rate_total", r.rate_total.as_ref().map(|v| v.span())),
    ];
    if let Some((what, Some(span))) = refused.into_iter().find(|(_, s)| s.is_some()) {
        return Err(ctx.at(
            span,
            format!(
                "{what} is not accepted with action \"syncookie\": the rule must see every segment of the handshake"
            ),
        ));
    }
    Ok(())
}

/// `action = "cpu"` (at `a`): its `cpus`, 1 to [`MAX_CPUS_PER_SET`] CPUs this machine has.
fn cpu_action(ctx: &Ctx<'_>, a: &toml::Spanned<String>, r: &RawRule) -> Result<Action, RuleError> {
    let c = r.cpus.as_ref().ok_or_else(|| ctx.at(a.span(), "action \"cpu\" needs cpus = [..], e.g. cpus = [0, 1]"))?;
    let n = crate::sys::online_cpus() as i64;
    if c.get_ref().is_empty() || c.get_ref().len() > MAX_CPUS_PER_SET {
        return Err(ctx.at(c.span(), format!("cpus: give 1 to {MAX_CPUS_PER_SET} CPUs")));
    }
    let mut cpus = Vec::new();
    for &cpu in c.get_ref() {
        if !(0..n).contains(&cpu) {
            return Err(ctx.at(c.span(), format!("cpu {cpu} is not accepted: this machine has CPUs 0..={}", n - 1)));
        }
        cpus.push(cpu as u32);
    }
    Ok(Action::Cpu(cpus))
}

/// `action = "redirect"` (at `a`): its `iface`, an interface of this network namespace.
fn redirect_action(ctx: &Ctx<'_>, a: &toml::Spanned<String>, r: &RawRule) -> Result<Action, RuleError> {
    let i = r.iface.as_ref().ok_or_else(|| ctx.at(a.span(), "action \"redirect\" needs iface = \"NAME\""))?;
    if crate::sys::if_nametoindex(i.get_ref()).is_err() {
        return Err(
            ctx.at(i.span(), format!("redirect to {:?}: no such interface in this network namespace", i.get_ref()))
        );
    }
    Ok(Action::Redirect(i.get_ref().clone()))
}

/// One rate field (`rate` or `rate_total`, named `what`): packets per second 1..=10^9.
fn pps(ctx: &Ctx<'_>, what: &str, v: &S<i64>) -> Result<Option<u64>, RuleError> {
    match v {
        None => Ok(None),
        Some(v) if *v.get_ref() >= 1 && *v.get_ref() <= 1_000_000_000 => Ok(Some(*v.get_ref() as u64)),
        Some(v) => {
            Err(ctx
                .at(v.span(), format!("{what} {} is not accepted: use packets per second 1..=1000000000", v.get_ref())))
        }
    }
}

/// `rate` and `rate_total` as (per source, aggregate): the aggregate defaults to
/// [`RATE_TOTAL_SOURCES`] times the per-source rate and may not be below it.
fn rates(ctx: &Ctx<'_>, r: &RawRule) -> Result<(Option<u64>, Option<u64>), RuleError> {
    let rate_pps = pps(ctx, "rate", &r.rate)?;
    let rate_total_pps = match (pps(ctx, "rate_total", &r.rate_total)?, rate_pps) {
        (Some(t), _) => Some(t),
        (None, Some(r)) => Some((r * RATE_TOTAL_SOURCES).min(1_000_000_000)),
        (None, None) => None,
    };
    if let (Some(t), Some(r), Some(v)) = (rate_total_pps, rate_pps, &r.rate_total) {
        if t < r {
            return Err(ctx.at(
                v.span(),
                format!("rate_total {t} is below rate {r}: the aggregate limit must be >= the per-source one"),
            ));
        }
    }
    Ok((rate_pps, rate_total_pps))
}

#[cfg(test)]
mod tests;
