//! `fastpath capture EXPRESSION`: the part of a pcap-filter expression (tcpdump's language) that
//! the classifier can run at the driver, as classifier rules that select a **superset** of the
//! frames libpcap accepts. libpcap itself ([`fastpath::pcapfilter`]) then decides every copied
//! frame in user space, so the file holds exactly what `tcpdump -r ... EXPRESSION` would keep.
//!
//! Each subterm is translated into two first-match rule lists over the classifier's fields
//! ([`List`]): `over`, whose selected frames include every frame libpcap accepts, and `under`,
//! whose selected frames libpcap all accepts. `and`/`or` combine lists exactly (a product of
//! first-match lists); `not` swaps them (`over(not e) = not under(e)`), so a negated subterm the
//! classifier cannot decide selects everything rather than nothing. A primitive outside the
//! subset (`tcp[13] & 2 != 0`, `len > 100`, `ether host ...`, names to resolve, ...) is "every
//! frame" over and "no frame" under. `over == under` (every primitive exact) is an exact
//! translation, which `--mode divert` requires.
//!
//! What the classifier sees differently from libpcap, and so where a primitive is not exact:
//! its protocol is the one after IPv6 extension headers and an Authentication Header (libpcap's
//! `tcp` looks at the IP header's own protocol field); it sees neither ARP addresses (libpcap's
//! `host` also matches ARP and RARP) nor SCTP ports (libpcap's `port` also means SCTP); its VLAN
//! is the outer 802.1Q/802.1ad tag (libpcap's `vlan` also takes the 0x9100 tag). libpcap reads
//! the headers of an untagged frame for `ip`, `tcp`, `host`, ... (after `vlan`, `mpls`,
//! `pppoes`, `geneve` or `vxlan` it reads past them; every later primitive is then undecided
//! here). Frames the classifier cannot parse (malformed, tiny fragments) follow the rule set's
//! default: copied in copy mode, left to the kernel in divert mode.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use fastpath::rules::reference::NO_VLAN;
use fastpath::rules::{Match, Prefix};

/// Most rules one list may hold; a larger translation is "every frame" instead.
pub const MAX_LIST_RULES: usize = 64;

/// A first-match list: the first rule whose match covers the frame decides (true: selected).
/// Its last rule matches every frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct List(pub Vec<(Match, bool)>);

const ETH_IPV4: u16 = 0x0800;
const ETH_IPV6: u16 = 0x86dd;
const ETH_ARP: u16 = 0x0806;
const ETH_RARP: u16 = 0x8035;
/// The tag libpcap's `vlan` takes besides 802.1Q and 802.1ad (the classifier does not walk it).
const ETH_QINQ_9100: u16 = 0x9100;

impl List {
    /// Every frame.
    pub fn all() -> List {
        List(vec![(Match::default(), true)])
    }
    /// No frame.
    pub fn none() -> List {
        List(vec![(Match::default(), false)])
    }
    /// The frames any of `boxes` matches.
    fn any_of(boxes: Vec<Match>) -> List {
        let mut v: Vec<(Match, bool)> = boxes.into_iter().map(|b| (b, true)).collect();
        v.push((Match::default(), false));
        List(v).simplify()
    }
    /// Whether it selects every frame.
    pub fn is_all(&self) -> bool {
        self.0.iter().all(|(_, y)| *y)
    }
    /// The complement.
    fn not(&self) -> List {
        List(self.0.iter().map(|(m, y)| (m.clone(), !y)).collect())
    }
    /// The frames both select: each of self's selecting rules refined by `o`'s rules.
    fn and(&self, o: &List) -> List {
        self.product(o, false)
    }
    /// The frames either selects.
    fn or(&self, o: &List) -> List {
        self.product(o, true)
    }
    /// First-match product: a frame first matched by self's rule i takes rule i's outcome when
    /// that outcome is `settled`, else the outcome of `o`'s first rule matching it (rule i
    /// intersected with each of `o`'s rules, in order; `o` ends with a catch-all).
    fn product(&self, o: &List, settled: bool) -> List {
        let mut v = Vec::new();
        for (a, y) in &self.0 {
            if *y == settled {
                v.push((a.clone(), *y));
            } else {
                for (b, z) in &o.0 {
                    if let Some(m) = intersect(a, b) {
                        v.push((m, *z));
                    }
                }
            }
        }
        List(v).simplify()
    }
    /// The same selection in fewer rules: nothing after a catch-all, no rule covered by an
    /// earlier one, no rule just before the catch-all with the catch-all's outcome.
    fn simplify(self) -> List {
        let mut out: Vec<(Match, bool)> = Vec::new();
        for (m, y) in self.0 {
            if out.iter().any(|(e, _)| covers(e, &m)) {
                continue;
            }
            let last = m == Match::default();
            out.push((m, y));
            if last {
                break;
            }
        }
        while out.len() >= 2 && out[out.len() - 2].1 == out[out.len() - 1].1 {
            out.remove(out.len() - 2);
        }
        List(out)
    }
}

fn range_meet(a: Option<(u16, u16)>, b: Option<(u16, u16)>) -> Option<Option<(u16, u16)>> {
    match (a, b) {
        (None, x) | (x, None) => Some(x),
        (Some((a0, a1)), Some((b0, b1))) => {
            let (lo, hi) = (a0.max(b0), a1.min(b1));
            (lo <= hi).then_some(Some((lo, hi)))
        }
    }
}

fn eq_meet<T: PartialEq + Copy>(a: Option<T>, b: Option<T>) -> Option<Option<T>> {
    match (a, b) {
        (None, x) | (x, None) => Some(x),
        (Some(x), Some(y)) => (x == y).then_some(Some(x)),
    }
}

fn prefix_meet(a: Option<Prefix>, b: Option<Prefix>) -> Option<Option<Prefix>> {
    match (a, b) {
        (None, x) | (x, None) => Some(x),
        (Some(x), Some(y)) => {
            let (short, long) = if x.len <= y.len { (x, y) } else { (y, x) };
            short.contains(&long.addr).then_some(Some(long))
        }
    }
}

/// The frames both `a` and `b` match, as one match (every field of the classifier is a
/// conjunct), or `None` if no frame can match both.
fn intersect(a: &Match, b: &Match) -> Option<Match> {
    let m = Match {
        vlan: eq_meet(a.vlan, b.vlan)?,
        eth_type: eq_meet(a.eth_type, b.eth_type)?,
        src: prefix_meet(a.src, b.src)?,
        dst: prefix_meet(a.dst, b.dst)?,
        proto: eq_meet(a.proto, b.proto)?,
        src_port: range_meet(a.src_port, b.src_port)?,
        dst_port: range_meet(a.dst_port, b.dst_port)?,
        tcp_flags: match (a.tcp_flags, b.tcp_flags) {
            (None, x) | (x, None) => x,
            (Some((ma, va)), Some((mb, vb))) => {
                if (va ^ vb) & ma & mb != 0 {
                    return None;
                }
                Some((ma | mb, va | vb))
            }
        },
        len: range_meet(a.len, b.len)?,
        frag: eq_meet(a.frag, b.frag)?,
    };
    // Addresses and protocols exist only on IP frames of their own family.
    let ip = |t: u16| t == ETH_IPV4 || t == ETH_IPV6;
    if let Some(t) = m.eth_type {
        let fam_ok = |p: Option<Prefix>| p.is_none_or(|p| p.is_v4() == (t == ETH_IPV4));
        if (!ip(t) && (m.src.is_some() || m.dst.is_some() || m.proto.is_some())) || !fam_ok(m.src) || !fam_ok(m.dst) {
            return None;
        }
    }
    Some(m)
}

/// Whether every frame `b` matches is matched by `a` (field by field).
fn covers(a: &Match, b: &Match) -> bool {
    fn eq<T: PartialEq>(a: &Option<T>, b: &Option<T>) -> bool {
        a.is_none() || a == b
    }
    fn rng(a: Option<(u16, u16)>, b: Option<(u16, u16)>) -> bool {
        match (a, b) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some((a0, a1)), Some((b0, b1))) => a0 <= b0 && b1 <= a1,
        }
    }
    fn pre(a: Option<Prefix>, b: Option<Prefix>) -> bool {
        match (a, b) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(x), Some(y)) => x.len <= y.len && x.contains(&y.addr),
        }
    }
    let flags = match (a.tcp_flags, b.tcp_flags) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some((ma, va)), Some((mb, vb))) => ma & mb == ma && vb & ma == va,
    };
    eq(&a.vlan, &b.vlan)
        && eq(&a.eth_type, &b.eth_type)
        && pre(a.src, b.src)
        && pre(a.dst, b.dst)
        && eq(&a.proto, &b.proto)
        && rng(a.src_port, b.src_port)
        && rng(a.dst_port, b.dst_port)
        && flags
        && rng(a.len, b.len)
        && eq(&a.frag, &b.frag)
}

/// A subterm translated: its over- and under-approximation, and why it is not exact (the
/// first primitive that is not, with the reason), if it is not.
#[derive(Debug, Clone)]
pub struct Translation {
    /// Selects every frame libpcap accepts (and maybe more).
    pub over: List,
    /// Selects only frames libpcap accepts.
    pub under: List,
    /// `None`: `over` and `under` select the same frames (on frames the classifier parses).
    pub inexact: Option<String>,
}

impl Translation {
    fn exact(l: List) -> Translation {
        Translation { under: l.clone(), over: l, inexact: None }
    }
    fn undecided(why: String) -> Translation {
        Translation { over: List::all(), under: List::none(), inexact: Some(why) }
    }
    fn not(self) -> Translation {
        Translation { over: self.under.not(), under: self.over.not(), inexact: self.inexact }
    }
    fn join(self, o: Translation, or: bool) -> Translation {
        let (over, under) = if or {
            (self.over.or(&o.over), self.under.or(&o.under))
        } else {
            (self.over.and(&o.over), self.under.and(&o.under))
        };
        let mut t = Translation { over, under, inexact: self.inexact.or(o.inexact) };
        if t.over.0.len() > MAX_LIST_RULES {
            t.over = List::all();
            t.inexact.get_or_insert_with(|| format!("it needs more than {MAX_LIST_RULES} classifier rules"));
        }
        if t.under.0.len() > MAX_LIST_RULES {
            t.under = List::none();
            t.inexact.get_or_insert_with(|| format!("it needs more than {MAX_LIST_RULES} classifier rules"));
        }
        t
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Open,
    Close,
    And,
    Or,
    Not,
    Word(String),
}

/// libpcap's tokens, as far as the structure goes: parentheses, `and`/`&&`, `or`/`||`,
/// `not`/`!`, words; `src or dst` and `src and dst` (either order) merged into one word.
fn tokens(s: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut w = String::new();
    let c: Vec<char> = s.chars().collect();
    let flush = |w: &mut String, out: &mut Vec<Tok>| {
        if !w.is_empty() {
            out.push(match w.as_str() {
                "and" => Tok::And,
                "or" => Tok::Or,
                "not" => Tok::Not,
                _ => Tok::Word(w.clone()),
            });
            w.clear();
        }
    };
    let mut i = 0;
    while i < c.len() {
        let next = c.get(i + 1).copied();
        match c[i] {
            x if x.is_whitespace() => flush(&mut w, &mut out),
            '(' | ')' => {
                flush(&mut w, &mut out);
                out.push(if c[i] == '(' { Tok::Open } else { Tok::Close });
            }
            '&' if next == Some('&') => {
                flush(&mut w, &mut out);
                out.push(Tok::And);
                i += 1;
            }
            '|' if next == Some('|') => {
                flush(&mut w, &mut out);
                out.push(Tok::Or);
                i += 1;
            }
            '!' if next != Some('=') && w.is_empty() => out.push(Tok::Not),
            x => w.push(x),
        }
        i += 1;
    }
    flush(&mut w, &mut out);
    let mut merged: Vec<Tok> = Vec::new();
    let mut k = 0;
    while k < out.len() {
        if let (Some(Tok::Word(a)), Some(op @ (Tok::And | Tok::Or)), Some(Tok::Word(b))) =
            (out.get(k), out.get(k + 1), out.get(k + 2))
        {
            if (a == "src" && b == "dst") || (a == "dst" && b == "src") {
                merged.push(Tok::Word(if *op == Tok::Or { "src_or_dst" } else { "src_and_dst" }.into()));
                k += 3;
                continue;
            }
        }
        merged.push(out[k].clone());
        k += 1;
    }
    merged
}

/// A word as the user wrote it (`src or dst` for the merged `src_or_dst`).
fn shown(w: &str) -> String {
    match w {
        "src_or_dst" => "src or dst".into(),
        "src_and_dst" => "src and dst".into(),
        w => w.into(),
    }
}

/// Keywords after which libpcap reads the following headers further in (pcap-filter(7)).
const SHIFTING: [&str; 5] = ["vlan", "mpls", "pppoes", "geneve", "vxlan"];

/// Qualifiers of a `host`/`net`/`port`/`portrange` primitive, inherited by a bare id after
/// `and`/`or` (`host a or b` is `host a or host b`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Q {
    proto: Option<&'static str>,
    dir: Dir,
    kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    Src,
    Dst,
    SrcOrDst,
    SrcAndDst,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Host,
    Net,
    Port,
    PortRange,
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
    /// A header-shifting keyword was seen: later primitives read other offsets.
    shifted: bool,
    last_q: Option<Q>,
}

/// Why the structure could not be followed (the expression is then "every frame").
struct Unfollowed;

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    /// expr := term ((and|or) (term | id))*, `and` and `or` of equal precedence, left to right.
    fn expr(&mut self) -> Result<Translation, Unfollowed> {
        let mut t = self.term()?;
        while let Some(op @ (Tok::And | Tok::Or)) = self.peek().cloned() {
            self.pos += 1;
            let r = self.term_or_id()?;
            t = t.join(r, op == Tok::Or);
        }
        Ok(t)
    }

    fn term(&mut self) -> Result<Translation, Unfollowed> {
        match self.peek().cloned() {
            Some(Tok::Not) => {
                self.pos += 1;
                Ok(self.term()?.not())
            }
            Some(Tok::Open) => {
                let start = self.pos;
                self.pos += 1;
                let t = self.expr()?;
                if self.peek() != Some(&Tok::Close) {
                    return Err(Unfollowed);
                }
                self.pos += 1;
                if let Some(Tok::Word(_)) = self.peek() {
                    // `(tcp[13] & 2) != 0`: the group was the left side of a relation.
                    self.pos = start;
                    let mut parts = vec![self.group()];
                    while let Some(Tok::Word(w)) = self.peek() {
                        parts.push(shown(w));
                        self.pos += 1;
                    }
                    while let Some(Tok::Open) = self.peek() {
                        parts.push(self.group());
                        while let Some(Tok::Word(w)) = self.peek() {
                            parts.push(shown(w));
                            self.pos += 1;
                        }
                    }
                    self.shifted |= parts.iter().any(|w| SHIFTING.iter().any(|k| w.contains(k)));
                    self.last_q = None;
                    return Ok(Translation::undecided(format!(
                        "`{}`: not a primitive the classifier can match",
                        parts.join(" ")
                    )));
                }
                Ok(t)
            }
            Some(Tok::Word(_)) => Ok(self.primitive(false)),
            _ => Err(Unfollowed),
        }
    }

    /// A balanced parenthesized group starting at the current `(`, as text; the position moves
    /// past it (or to the end, unbalanced).
    fn group(&mut self) -> String {
        let mut depth = 0usize;
        let mut parts: Vec<String> = Vec::new();
        while let Some(t) = self.peek().cloned() {
            self.pos += 1;
            parts.push(match &t {
                Tok::Open => {
                    depth += 1;
                    "(".into()
                }
                Tok::Close => {
                    depth = depth.saturating_sub(1);
                    ")".into()
                }
                Tok::And => "and".into(),
                Tok::Or => "or".into(),
                Tok::Not => "not".into(),
                Tok::Word(w) => shown(w),
            });
            if depth == 0 {
                break;
            }
        }
        parts.join(" ")
    }

    fn term_or_id(&mut self) -> Result<Translation, Unfollowed> {
        match self.peek() {
            Some(Tok::Word(_)) => Ok(self.primitive(true)),
            _ => self.term(),
        }
    }

    /// A maximal run of words; `after_op`: right after `and`/`or`, where a bare id takes the
    /// last primitive's qualifiers.
    fn primitive(&mut self, after_op: bool) -> Translation {
        let mut words = Vec::new();
        let mut grouped = false;
        loop {
            match self.peek() {
                Some(Tok::Word(w)) => {
                    words.push(w.clone());
                    self.pos += 1;
                }
                // `tcp[13] & (2|16) != 0`, `host (a or b)`: a parenthesized group inside a
                // primitive, taken whole (such a primitive is undecided here).
                Some(Tok::Open) if !words.is_empty() => {
                    words.push(self.group());
                    grouped = true;
                }
                _ => break,
            }
        }
        let text = words.iter().map(|w| shown(w)).collect::<Vec<_>>().join(" ");
        let shifted_before = self.shifted;
        if words.iter().any(|w| SHIFTING.contains(&w.as_str())) {
            self.shifted = true;
        }
        let undecided = |why: &str| Translation::undecided(format!("`{text}`: {why}"));
        if shifted_before {
            self.last_q = None;
            return undecided(
                "it follows vlan/mpls/pppoes/geneve/vxlan, after which libpcap reads further into the frame",
            );
        }
        if grouped {
            self.last_q = None;
            if words.iter().any(|w| SHIFTING.iter().any(|k| w.contains(k))) {
                self.shifted = true;
            }
            return undecided("not a primitive the classifier can match");
        }
        let keyword = abbreviation(&words).is_some();
        let inherited = if after_op && words.len() == 1 && !keyword { self.last_q } else { None };
        let parsed = match inherited {
            Some(q) => Some((q, words[0].as_str())),
            None => qualifiers(&words),
        };
        self.last_q = None;
        if let Some((q, id)) = parsed {
            self.last_q = Some(q);
            return match addressed(q, id, &text) {
                Some(t) => t,
                None => undecided("not a host, net, port or portrange the classifier can match (a name to resolve, or a form fastpath does not translate)"),
            };
        }
        if let Some(t) = abbreviation(&words) {
            return t;
        }
        undecided("not a primitive the classifier can match")
    }
}

/// `[proto] [dir] [kind] id` with at least one qualifier: the qualifiers and the id.
fn qualifiers(words: &[String]) -> Option<(Q, &str)> {
    let (id, quals) = words.split_last()?;
    let mut q = Q { proto: None, dir: Dir::SrcOrDst, kind: Kind::Host };
    let mut it = quals.iter().map(String::as_str).peekable();
    if let Some(p) = it.peek().and_then(|w| ["ip", "ip6", "arp", "rarp", "tcp", "udp", "sctp"].iter().find(|x| *x == w))
    {
        q.proto = Some(p);
        it.next();
    }
    if let Some(d) = it.peek().and_then(|w| match *w {
        "src" => Some(Dir::Src),
        "dst" => Some(Dir::Dst),
        "src_or_dst" => Some(Dir::SrcOrDst),
        "src_and_dst" => Some(Dir::SrcAndDst),
        _ => None,
    }) {
        q.dir = d;
        it.next();
    }
    let mut kinded = false;
    if let Some(k) = it.peek().and_then(|w| match *w {
        "host" => Some(Kind::Host),
        "net" => Some(Kind::Net),
        "port" => Some(Kind::Port),
        "portrange" => Some(Kind::PortRange),
        _ => None,
    }) {
        q.kind = k;
        kinded = true;
        it.next();
    }
    if it.next().is_some() || quals.is_empty() {
        return None;
    }
    // `tcp 80` or `ip 10.0.0.1` without a kind is not this form.
    if !kinded && !matches!(q.dir, Dir::Src | Dir::Dst) && q.proto.is_some() {
        return None;
    }
    Some((q, id.as_str()))
}

/// A decimal number without leading zeros (libpcap reads `010` as octal).
fn decimal<T: std::str::FromStr>(s: &str) -> Option<T> {
    (s == "0" || (!s.starts_with('0') && s.bytes().all(|b| b.is_ascii_digit()) && !s.is_empty()))
        .then(|| s.parse().ok())
        .flatten()
}

fn untagged(eth: u16) -> Match {
    Match { vlan: Some(NO_VLAN), eth_type: Some(eth), ..Default::default() }
}

/// The (src, dst) conjunctions of one direction, each a (src?, dst?) pair.
fn directed<T: Copy>(dir: Dir, v: T) -> Vec<(Option<T>, Option<T>)> {
    match dir {
        Dir::Src => vec![(Some(v), None)],
        Dir::Dst => vec![(None, Some(v))],
        Dir::SrcOrDst => vec![(Some(v), None), (None, Some(v))],
        Dir::SrcAndDst => vec![(Some(v), Some(v))],
    }
}

/// `host`, `net`, `port`, `portrange` with their qualifiers; `None` outside the subset.
fn addressed(q: Q, id: &str, text: &str) -> Option<Translation> {
    match q.kind {
        Kind::Host | Kind::Net => {
            let p = if q.kind == Kind::Host {
                let a: IpAddr =
                    id.parse::<Ipv4Addr>().map(IpAddr::V4).or_else(|_| id.parse::<Ipv6Addr>().map(IpAddr::V6)).ok()?;
                Prefix { addr: a, len: if a.is_ipv4() { 32 } else { 128 } }
            } else {
                let (a, l) = id.split_once('/')?;
                let addr: IpAddr =
                    a.parse::<Ipv4Addr>().map(IpAddr::V4).or_else(|_| a.parse::<Ipv6Addr>().map(IpAddr::V6)).ok()?;
                let len: u8 = decimal(l)?;
                if len > if addr.is_ipv4() { 32 } else { 128 } {
                    return None;
                }
                let p = Prefix { addr, len };
                // Host bits set: libpcap refuses it; nothing to translate.
                if !p.contains(&addr) || fastpath::rules::mask_bits(&bytes(&addr), len) != bytes16(&addr) {
                    return None;
                }
                p
            };
            let eth = if p.is_v4() { ETH_IPV4 } else { ETH_IPV6 };
            let ip_part: Vec<Match> =
                directed(q.dir, p).into_iter().map(|(src, dst)| Match { src, dst, ..untagged(eth) }).collect();
            match (q.proto, p.is_v4()) {
                (Some("ip"), true) | (Some("ip6"), false) | (None, false) => {
                    Some(Translation::exact(List::any_of(ip_part)))
                }
                (None, true) => {
                    let mut over = ip_part.clone();
                    over.extend([untagged(ETH_ARP), untagged(ETH_RARP)]);
                    Some(Translation {
                        over: List::any_of(over),
                        under: List::any_of(ip_part),
                        inexact: Some(format!(
                            "`{text}`: libpcap also matches the addresses of ARP and RARP frames, which the classifier does not see"
                        )),
                    })
                }
                (Some(pr @ ("arp" | "rarp")), true) => Some(Translation {
                    over: List::any_of(vec![untagged(if pr == "arp" { ETH_ARP } else { ETH_RARP })]),
                    under: List::none(),
                    inexact: Some(format!("`{text}`: the classifier does not see ARP addresses")),
                }),
                _ => None,
            }
        }
        Kind::Port | Kind::PortRange => {
            let r: (u16, u16) = if q.kind == Kind::Port {
                let p = decimal(id)?;
                (p, p)
            } else {
                let (a, b) = id.split_once('-')?;
                let (a, b): (u16, u16) = (decimal(a)?, decimal(b)?);
                (a.min(b), a.max(b))
            };
            let (protos, sctp): (&[u8], bool) = match q.proto {
                None => (&[6, 17], true),
                Some("tcp") => (&[6], false),
                Some("udp") => (&[17], false),
                Some("sctp") => (&[], true),
                _ => return None,
            };
            let mut over = Vec::new();
            for eth in [ETH_IPV4, ETH_IPV6] {
                for &proto in protos {
                    for (src_port, dst_port) in directed(q.dir, r) {
                        over.push(Match { proto: Some(proto), src_port, dst_port, ..untagged(eth) });
                    }
                }
                if sctp {
                    over.push(Match { proto: Some(132), ..untagged(eth) });
                }
            }
            let why = if sctp {
                "libpcap also matches SCTP ports, which the classifier does not see, and reads the IP header's own protocol field, where the classifier walks IPv6 extension headers and an Authentication Header"
            } else {
                "libpcap reads the IP header's own protocol field, where the classifier walks IPv6 extension headers and an Authentication Header"
            };
            Some(Translation {
                over: List::any_of(over),
                under: List::none(),
                inexact: Some(format!("`{text}`: {why}")),
            })
        }
    }
}

fn bytes(a: &IpAddr) -> Vec<u8> {
    match a {
        IpAddr::V4(v) => v.octets().to_vec(),
        IpAddr::V6(v) => v.octets().to_vec(),
    }
}

fn bytes16(a: &IpAddr) -> [u8; 16] {
    let mut o = [0u8; 16];
    let b = bytes(a);
    o[..b.len()].copy_from_slice(&b);
    o
}

/// `ip`, `ip6`, `arp`, `rarp`, `tcp`, `udp`, `sctp`, `icmp`, `icmp6`, `vlan`, `vlan N`.
fn abbreviation(words: &[String]) -> Option<Translation> {
    let text = words.join(" ");
    let w: Vec<&str> = words.iter().map(String::as_str).collect();
    let proto = |v4: Option<u8>, v6: Option<u8>| {
        let mut m = Vec::new();
        if let Some(p) = v4 {
            m.push(Match { proto: Some(p), ..untagged(ETH_IPV4) });
        }
        if let Some(p) = v6 {
            m.push(Match { proto: Some(p), ..untagged(ETH_IPV6) });
        }
        Translation {
            over: List::any_of(m),
            under: List::none(),
            inexact: Some(format!(
                "`{text}`: libpcap reads the IP header's own protocol field, where the classifier walks IPv6 extension headers and an Authentication Header"
            )),
        }
    };
    Some(match w.as_slice() {
        ["ip"] => Translation::exact(List::any_of(vec![untagged(ETH_IPV4)])),
        ["ip6"] => Translation::exact(List::any_of(vec![untagged(ETH_IPV6)])),
        ["arp"] => Translation::exact(List::any_of(vec![untagged(ETH_ARP)])),
        ["rarp"] => Translation::exact(List::any_of(vec![untagged(ETH_RARP)])),
        ["tcp"] => proto(Some(6), Some(6)),
        ["udp"] => proto(Some(17), Some(17)),
        ["sctp"] => proto(Some(132), Some(132)),
        ["icmp"] => proto(Some(1), None),
        ["icmp6"] => proto(None, Some(58)),
        ["vlan"] => {
            // Tagged: the outer tag is 802.1Q or 802.1ad (the classifier's VLAN), or 0x9100.
            let over = List(vec![
                (untagged(ETH_QINQ_9100), true),
                (Match { vlan: Some(NO_VLAN), ..Default::default() }, false),
                (Match::default(), true),
            ]);
            let under =
                List(vec![(Match { vlan: Some(NO_VLAN), ..Default::default() }, false), (Match::default(), true)]);
            Translation {
                over,
                under,
                inexact: Some(format!(
                    "`{text}`: libpcap also takes the 0x9100 tag, which the classifier does not walk"
                )),
            }
        }
        ["vlan", id] => {
            let v: u16 = decimal(id).filter(|v| *v < 4096)?;
            let tag = Match { vlan: Some(v), ..Default::default() };
            Translation {
                over: List::any_of(vec![tag.clone(), untagged(ETH_QINQ_9100)]),
                under: List::any_of(vec![tag]),
                inexact: Some(format!(
                    "`{text}`: libpcap also takes the 0x9100 tag, which the classifier does not walk"
                )),
            }
        }
        _ => return None,
    })
}

/// The translation of `expr` (an expression libpcap compiled). An expression whose structure
/// is not followed here is "every frame" at the driver.
pub fn translate(expr: &str) -> Translation {
    let mut p = Parser { toks: tokens(expr), pos: 0, shifted: false, last_q: None };
    match p.expr() {
        Ok(t) if p.pos == p.toks.len() => t,
        _ => Translation::undecided(format!("`{expr}`: its structure is not one fastpath's translation follows")),
    }
}

/// A rule's match as `k=v` text (the rule language's keys; `vlan=untagged` for
/// [`NO_VLAN`]), `*` for a match of every frame.
pub fn match_text(m: &Match) -> String {
    let r = fastpath::rules::Rule {
        name: String::new(),
        priority: 0,
        m: Match { vlan: m.vlan.filter(|v| *v != NO_VLAN), ..m.clone() },
        action: fastpath::rules::Action::Pass,
        rate_pps: None,
        rate_total_pps: None,
    };
    let t = r.text();
    let t = t.strip_suffix("action=pass").unwrap_or(&t).trim_end_matches(',');
    let t = if m.vlan == Some(NO_VLAN) {
        if t.is_empty() {
            "untagged".to_string()
        } else {
            format!("untagged,{t}")
        }
    } else {
        t.to_string()
    };
    if t.is_empty() {
        "*".into()
    } else {
        t
    }
}

/// The list as text: `every frame`, or its rules `MATCH -> copy|skip` joined by `; `.
pub fn list_text(l: &List) -> String {
    if l.is_all() {
        return "every frame".into();
    }
    l.0.iter()
        .map(|(m, y)| format!("{} -> {}", match_text(m), if *y { "copy" } else { "skip" }))
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
#[path = "../tests/common/pcapfilter_frames.rs"]
mod frames;

#[cfg(test)]
mod tests {
    use fastpath::pcapfilter::PcapFilter;
    use fastpath::rules::reference::{matches, parse};

    use super::*;

    /// What the driver selects with list `l` (copy mode): parsed frames by the list's first
    /// matching rule, frames the classifier cannot parse by the default (copied).
    fn driver(l: &List, f: &[u8]) -> bool {
        match parse(f) {
            Ok(p) => l.0.iter().find(|(m, _)| matches(m, &p)).is_none_or(|(_, y)| *y),
            Err(_) => true,
        }
    }

    /// For every expression and sample frame: `over` selects each frame libpcap accepts,
    /// `under` only frames libpcap accepts, and an exact translation exactly libpcap's frames
    /// (among those the classifier parses); a few translations are asserted by shape too.
    #[test]
    fn translation_is_a_superset_of_libpcap_on_every_sample_frame() {
        let fr = frames::sample_frames();
        assert!(fr.len() >= 20);
        let mut narrowed = 0;
        for expr in frames::EXPRESSIONS.iter().chain(frames::UNIT_EXPRESSIONS) {
            let f = PcapFilter::compile(expr, 16384).unwrap_or_else(|e| panic!("{expr}: {e}"));
            let t = translate(expr);
            for (i, (name, fb)) in fr.iter().enumerate() {
                let want = f.matches(fb, fb.len() as u32);
                let over = driver(&t.over, fb);
                assert!(
                    !want || over,
                    "`{expr}`: frame {i} ({name}) accepted by libpcap, not selected at the driver: {}",
                    list_text(&t.over)
                );
                if parse(fb).is_ok() {
                    let under = driver(&t.under, fb);
                    assert!(
                        !under || want,
                        "`{expr}`: frame {i} ({name}) in the under-approximation, refused by libpcap"
                    );
                    if t.inexact.is_none() {
                        assert_eq!(over, want, "`{expr}` (exact): frame {i} ({name})");
                    }
                }
                narrowed += usize::from(!over);
            }
        }
        assert!(narrowed > 100, "the driver leaves out frames ({narrowed}), it does not select all");
        // Shapes a user reads in the ready line.
        assert!(translate("tcp[tcpflags] & tcp-syn != 0").over.is_all());
        assert!(translate("not tcp[13] & 2 != 0").over.is_all(), "not(undecided) is every frame, not none");
        assert!(translate("ip6 and not ip6").over.0.iter().all(|(_, y)| !y));
        assert!(translate("ip or arp").inexact.is_none());
        assert!(translate("udp port 53").inexact.unwrap().contains("`udp port 53`"));
        assert!(translate("vlan 100 and udp").inexact.unwrap().contains("`vlan 100`"));
        let t = translate("tcp port 80 and tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn");
        assert!(!t.over.is_all() && t.inexact.is_some(), "tcp port 80 runs at the driver: {}", list_text(&t.over));
        assert!(
            translate("(tcp[13] & 2) != 0 and ip").over.0.len() == 2,
            "{}",
            list_text(&translate("(tcp[13] & 2) != 0 and ip").over)
        );
        assert!(translate("host (10.99.0.1 or 10.99.0.2)").over.is_all());
        assert!(translate("src and dst host 10.99.0.4").inexact.unwrap().contains("`src and dst host 10.99.0.4`"));
    }
}
