//! Compiles a [`RuleSet`] into the classifier's map entries.
//!
//! The technique is tuple space search (Srinivasan, Suri, Varghese, SIGCOMM 1999; the megaflow
//! classifier of Open vSwitch, NSDI 2015): rules that constrain the same fields with the same
//! prefix lengths and TCP-flag mask form a *tuple*; each tuple is one exact-match hash lookup on
//! the packet's fields masked the tuple's way. Per packet the program does one lookup per tuple
//! (at most [`MAX_TUPLES`], sorted so it can stop early), never a scan over rules, so its cost
//! does not grow with the rule count.
//!
//! Port and length *ranges* are turned into exact keys with per-field equivalence classes (the
//! elementary intervals between all range boundaries of the rule set): one array lookup maps a
//! packet's port or length to its class, and a rule covering k classes becomes k entries.

use std::collections::{BTreeSet, HashMap};

use super::reference::NO_VLAN;
use super::{Action, Frag, Location, Match, RuleError, RuleSet};
use crate::abi;

/// Most tuples (distinct field combinations) one rule set may use.
pub const MAX_TUPLES: usize = abi::FP_CLS_MAX_TUPLES as usize;
/// Most hash entries one rule set may compile to (half of `FP_CLS_MAX_ENTRIES`, which holds both sets).
pub const MAX_ENTRIES: usize = abi::FP_CLS_MAX_ENTRIES as usize / 2;

/// Field bits of [`Tuple::fields`] (`FP_F_*` of bpf/include/fastpath_abi.h).
pub mod field {
    /// Outer VLAN id.
    pub const VLAN: u32 = crate::abi::FP_F_VLAN;
    /// EtherType.
    pub const ETH_TYPE: u32 = crate::abi::FP_F_ETH_TYPE;
    /// Source prefix.
    pub const SRC: u32 = crate::abi::FP_F_SRC;
    /// Destination prefix.
    pub const DST: u32 = crate::abi::FP_F_DST;
    /// IP protocol.
    pub const PROTO: u32 = crate::abi::FP_F_PROTO;
    /// Fragment state.
    pub const FRAG: u32 = crate::abi::FP_F_FRAG;
    /// Source port class.
    pub const SPORT: u32 = crate::abi::FP_F_SPORT;
    /// Destination port class.
    pub const DPORT: u32 = crate::abi::FP_F_DPORT;
    /// Frame length class.
    pub const LEN: u32 = crate::abi::FP_F_LEN;
    /// TCP flags (masked).
    pub const FLAGS: u32 = crate::abi::FP_F_FLAGS;
}

/// Action codes (`FP_ACT_*` of fastpath_abi.h). 0 is PASS: a never-written config passes all.
pub mod action {
    /// XDP_PASS.
    pub const PASS: u8 = crate::abi::FP_ACT_PASS as u8;
    /// XDP_DROP.
    pub const DROP: u8 = crate::abi::FP_ACT_DROP as u8;
    /// XSKMAP.
    pub const XSK: u8 = crate::abi::FP_ACT_XSK as u8;
    /// CPUMAP.
    pub const CPU: u8 = crate::abi::FP_ACT_CPU as u8;
    /// XDP_TX.
    pub const TX: u8 = crate::abi::FP_ACT_TX as u8;
    /// DEVMAP.
    pub const REDIRECT: u8 = crate::abi::FP_ACT_REDIRECT as u8;
    /// SYN cookies (`FP_ACT_SYNCOOKIE`).
    pub const SYNCOOKIE: u8 = crate::abi::FP_ACT_SYNCOOKIE as u8;
    /// In [`super::Compiled::malformed`] only: the default action applies.
    pub const MALFORMED_DEFAULT: u8 = crate::abi::FP_MALFORMED_DEFAULT as u8;
}

/// One tuple: which fields its rules constrain, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tuple {
    /// [`field`] bits.
    pub fields: u32,
    /// Source prefix length (0 if not constrained).
    pub src_plen: u8,
    /// Destination prefix length.
    pub dst_plen: u8,
    /// TCP flag bits the tuple's rules look at.
    pub flags_mask: u8,
}

/// One exact-match key: the packet's fields as the tuple masks them. Unconstrained fields are 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Key {
    /// Index of the tuple in [`Compiled::tuples`].
    pub tuple: u8,
    /// 0x100 | IP protocol for IP packets.
    pub proto16: u16,
    /// Fragment state.
    pub frag: u8,
    /// TCP flags & tuple mask.
    pub flags: u8,
    /// Outer VLAN id ([`NO_VLAN`] untagged).
    pub vlan: u16,
    /// EtherType.
    pub eth_type: u16,
    /// Source port class (0 = no ports).
    pub sport_class: u32,
    /// Destination port class.
    pub dport_class: u32,
    /// Length class.
    pub len_class: u32,
    /// Source address, masked (IPv4 in bytes 0..4).
    pub src: [u8; 16],
    /// Destination address, masked.
    pub dst: [u8; 16],
}

/// An action as the program sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ActionEntry {
    /// [`action`] code.
    pub code: u8,
    /// CPU set index (cpu) or DEVMAP slot (redirect).
    pub arg: u32,
    /// Token-bucket rate in packets/s per source address; 0 = none.
    pub rate_pps: u64,
    /// Token-bucket rate in packets/s for the rule, all sources together; 0 = none.
    pub rate_total_pps: u64,
    /// Copy the frame to the capture ring before the action (`fastpath capture` sets it on the
    /// rules it loads; the rule language never does).
    pub copy: bool,
}

/// Range boundaries of one field: class of value v = number of boundaries <= v
/// (boundaries start at 0, so every value has a class >= 1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Classes {
    /// Sorted starts of the elementary intervals; always begins with 0.
    pub starts: Vec<u32>,
}

impl Classes {
    fn build(ranges: impl Iterator<Item = (u16, u16)>) -> Self {
        let mut b = BTreeSet::new();
        b.insert(0u32);
        for (lo, hi) in ranges {
            b.insert(lo as u32);
            b.insert(hi as u32 + 1);
        }
        b.retain(|v| *v <= 65535);
        Classes { starts: b.into_iter().collect() }
    }
    /// Class of value `v` (>= 1).
    pub fn class(&self, v: u16) -> u32 {
        self.starts.partition_point(|s| *s <= v as u32) as u32
    }
    fn covering(&self, (lo, hi): (u16, u16)) -> std::ops::RangeInclusive<u32> {
        self.class(lo)..=self.class(hi)
    }
    /// The class of every value 0..=65535, for the program's array.
    pub fn table(&self) -> Vec<u32> {
        let mut out = Vec::with_capacity(65536);
        let mut c = 0u32;
        let mut next = self.starts.iter().peekable();
        for v in 0..=65535u32 {
            while next.peek().is_some_and(|s| **s <= v) {
                next.next();
                c += 1;
            }
            out.push(c);
        }
        out
    }
}

/// A compiled rule set.
#[derive(Debug, Clone, Default)]
pub struct Compiled {
    /// Tuples, sorted by the first rule each holds.
    pub tuples: Vec<Tuple>,
    /// First (lowest) rule index in each tuple, same order.
    pub tuple_best: Vec<u32>,
    /// Exact-match entries: key -> rule index (the lowest index among rules with that key).
    pub entries: Vec<(Key, u32)>,
    /// Per-rule action, by rule index.
    pub actions: Vec<ActionEntry>,
    /// Default action (no match).
    pub default: ActionEntry,
    /// [`action`] code for frames that cannot be classified: DROP, PASS or MALFORMED_DEFAULT
    /// ([`RuleSet::malformed_action`]).
    pub malformed: u8,
    /// Tiny and overlapping fragments are counted `bad_fragment` and passed instead of dropped
    /// (`FP_CLS_F_PASS_BAD_FRAG`): for `fastpath capture`, which changes no frame's fate.
    /// With a copying [`Compiled::default`] they are copied too. `false` from [`compile`].
    pub pass_bad_fragments: bool,
    /// Source-port classes.
    pub sport: Classes,
    /// Destination-port classes.
    pub dport: Classes,
    /// Length classes.
    pub len: Classes,
    /// CPU sets by index.
    pub cpu_sets: Vec<Vec<u32>>,
    /// Redirect interfaces by DEVMAP slot.
    pub redirect_ifaces: Vec<String>,
    /// Per tuple, the [`prefilter`] bitmaps the program consults (`FP_PRE_*` bits).
    pub prefilter: Vec<u8>,
    /// Per tuple: its entries are in the open-addressing [`Compiled::table`] (`true`), or in the
    /// `cls_rules` hash (too many to fit, or a key beyond [`TABLE_PROBES`] of its home).
    pub in_table: Vec<bool>,
    /// The open-addressing table of the set: [`TABLE_SLOTS`] slots, `(key, rule)` or empty, as
    /// the program's `cls_table` holds them ([`Table`]). Empty if no tuple is in it.
    pub table: Vec<Option<Slot>>,
    /// The tuples left to the hash although the table was tried, each with why (one line,
    /// [`TableError`]): `(tuple index, reason)`.
    pub table_fallback: Vec<(usize, String)>,
    /// The bitmaps: for tuple `t` and field `f` (0 source, 1 destination), bit `h` of
    /// `prefilter_words[(t * 2 + f) * PRE_WORDS..][h / 64]` is set when some entry of the tuple
    /// has `h` as the first 16 bits of its masked address. Empty for fields not consulted.
    pub prefilter_words: Vec<u64>,
}

impl Compiled {
    /// Whether a rule has `action = "syncookie"` (the tc ingress program must be attached).
    pub fn uses_syncookie(&self) -> bool {
        self.actions.iter().any(|a| a.code == action::SYNCOOKIE)
    }
}

/// Slots per rule set of the open-addressing table (`FP_CLS_TABLE_SLOTS`, a power of two).
pub const TABLE_SLOTS: usize = abi::FP_CLS_TABLE_SLOTS as usize;
/// Most slots a lookup reads (`FP_CLS_TABLE_PROBES`): every key lies within this many of its home.
pub const TABLE_PROBES: usize = abi::FP_CLS_TABLE_PROBES as usize;
/// Most entries the table takes: half its slots (load factor 0.5 keeps probe runs short).
pub const TABLE_MAX_ENTRIES: usize = TABLE_SLOTS / 2;

// The Rust hash ([`table_home`]) and the program's share this multiplier (golden ratio * 2^64).
const _: () = assert!(abi::FP_CLS_TABLE_MUL as u64 == 0x9e37_79b9_7f4a_7c15);

/// The program's `struct fp_cls_key` of `k` in rule set `set` (0 or 1; padding zero).
pub fn abi_key(k: &Key, set: u8) -> abi::fp_cls_key {
    abi::fp_cls_key {
        src: k.src,
        dst: k.dst,
        set,
        tuple: k.tuple,
        proto16: k.proto16,
        frag: k.frag,
        flags: k.flags,
        vlan: k.vlan,
        eth_type: k.eth_type,
        sport_class: k.sport_class,
        dport_class: k.dport_class,
        len_class: k.len_class,
        ..bytemuck::Zeroable::zeroed()
    }
}

/// The home slot of `k` (`0..TABLE_SLOTS`): the top bits of `sum(word[i] * MUL * (2i + 1))` over
/// the seven native-endian u64 words of its `fp_cls_key` with set 0, as the program's
/// `table_find()` computes it (fastpath_abi.h, `FP_CLS_TABLE_MUL`).
pub fn table_home(k: &Key) -> usize {
    let ak = abi_key(k, 0);
    let b = bytemuck::bytes_of(&ak);
    let h = b.chunks_exact(8).enumerate().fold(0u64, |h, (i, w)| {
        let mut word = [0u8; 8];
        word.copy_from_slice(w);
        let w = u64::from_ne_bytes(word);
        h.wrapping_add(w.wrapping_mul((abi::FP_CLS_TABLE_MUL as u64).wrapping_mul(2 * i as u64 + 1)))
    });
    (h >> (64 - abi::FP_CLS_TABLE_BITS)) as usize
}

/// Why a tuple's entries did not go into the [`Table`] (they stay in the hash).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TableError {
    /// More entries than [`TABLE_MAX_ENTRIES`] with the ones already placed.
    Full {
        /// Entries placed before.
        placed: usize,
        /// Entries asked to be added.
        adding: usize,
    },
    /// A key would lie [`TABLE_PROBES`] or more slots past its home.
    ProbeBound {
        /// Its tuple.
        tuple: u8,
        /// Its home slot.
        home: usize,
    },
}

impl std::fmt::Display for TableError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TableError::Full { placed, adding } => write!(
                f,
                "rule table full: {placed} entries placed + {adding} would exceed {TABLE_MAX_ENTRIES} (half of {TABLE_SLOTS} slots)"
            ),
            TableError::ProbeBound { tuple, home } => write!(
                f,
                "rule table: a key of tuple {tuple} (home slot {home}) would need more than {TABLE_PROBES} probes"
            ),
        }
    }
}

impl std::error::Error for TableError {}

/// One occupied slot of the [`Table`]: the key, its rule and how far past its home slot it lies
/// (`0..TABLE_PROBES`; the program's `fp_cls_slot.used` is `dist + 1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// The key.
    pub key: Key,
    /// Its rule.
    pub rule: u32,
    /// Slots past its home.
    pub dist: u8,
}

/// An open-addressing table under construction: linear probing from [`table_home`] with Robin
/// Hood insertion (a key being placed takes the slot of one nearer its own home, which moves on),
/// at most [`TABLE_MAX_ENTRIES`] entries, every key within [`TABLE_PROBES`] slots of its home
/// with no empty slot between. A key `d` slots past its home then passed only slots whose keys
/// lie at least as far from theirs as it did there, so a lookup at probe `j` that meets a slot
/// whose key lies fewer than `j` slots from its home may stop: the key looked for would have
/// taken that slot ([`Table::find`]).
#[derive(Debug, Clone)]
pub struct Table {
    slots: Vec<Option<Slot>>,
    len: usize,
}

impl Default for Table {
    fn default() -> Self {
        Table { slots: vec![None; TABLE_SLOTS], len: 0 }
    }
}

impl Table {
    /// Adds `entries` (distinct keys, none already in the table) all or none, `home(key)`
    /// (taken modulo [`TABLE_SLOTS`]; [`table_home`] in use) giving each key's home slot.
    ///
    /// # Errors
    ///
    /// [`TableError`]; the table is then as before.
    pub fn insert_all(&mut self, entries: &[(Key, u32)], home: impl Fn(&Key) -> usize) -> Result<(), TableError> {
        if self.len + entries.len() > TABLE_MAX_ENTRIES {
            return Err(TableError::Full { placed: self.len, adding: entries.len() });
        }
        // Undo log: every slot written, with what it held before, undone in reverse on failure.
        let mut undo: Vec<(usize, Option<Slot>)> = Vec::new();
        for (k, r) in entries {
            let h = home(k) % TABLE_SLOTS;
            let mut cur = Slot { key: *k, rule: *r, dist: 0 };
            let mut p = h;
            loop {
                if cur.dist as usize >= TABLE_PROBES {
                    for (i, old) in undo.into_iter().rev() {
                        self.slots[i] = old;
                    }
                    return Err(TableError::ProbeBound { tuple: k.tuple, home: h });
                }
                undo.push((p, self.slots[p]));
                let Some(occupant) = self.slots[p] else {
                    self.slots[p] = Some(cur);
                    break;
                };
                if occupant.dist < cur.dist {
                    // Robin Hood: the occupant is nearer its home; it moves on instead.
                    self.slots[p] = Some(cur);
                    cur = occupant;
                } else {
                    undo.pop();
                }
                cur.dist += 1;
                p = (p + 1) % TABLE_SLOTS;
            }
        }
        self.len += entries.len();
        Ok(())
    }

    /// The rule of `k`, reading as the program's `table_find()` does: from its home slot `home`,
    /// up to [`TABLE_PROBES`] slots, stopping at an empty one or, at probe `j`, at a slot whose
    /// key lies fewer than `j` slots from its home (Robin Hood: `k` would have taken it). A hit
    /// at distance `d` reads `d + 1` slots; a miss at most [`Table::max_dist`] + 2 (and never
    /// more than [`TABLE_PROBES`]).
    pub fn find(slots: &[Option<Slot>], k: &Key, home: usize) -> Option<u32> {
        if slots.len() != TABLE_SLOTS {
            return None;
        }
        for j in 0..TABLE_PROBES {
            match &slots[(home + j) % TABLE_SLOTS] {
                None => return None,
                Some(s) if (s.dist as usize) < j => return None,
                Some(s) if s.key == *k => return Some(s.rule),
                Some(_) => {}
            }
        }
        None
    }

    /// Entries placed.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if no entry is placed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The slots.
    pub fn into_slots(self) -> Vec<Option<Slot>> {
        self.slots
    }

    /// The longest distance of a key from its home (0 if empty).
    pub fn max_dist(&self) -> usize {
        self.slots.iter().flatten().map(|s| s.dist as usize).max().unwrap_or(0)
    }
}

/// The entries of `entries`, tuple by tuple in index order, grouped for [`Table::insert_all`].
fn by_tuple(entries: &[(Key, u32)], n_tuples: usize) -> Vec<Vec<(Key, u32)>> {
    let mut by_tuple: Vec<Vec<(Key, u32)>> = vec![Vec::new(); n_tuples];
    for e in entries {
        if let Some(v) = by_tuple.get_mut(e.0.tuple as usize) {
            v.push(*e);
        }
    }
    by_tuple
}

/// Fills [`Compiled::in_table`] and [`Compiled::table`]: tuples in search order (the first is
/// looked up by every packet), each whole into the table if it fits ([`Table::insert_all`]),
/// else left to the hash (why: [`Compiled::table_fallback`]).
fn build_table(c: &mut Compiled) {
    let mut t = Table::default();
    let results: Vec<Result<(), TableError>> =
        by_tuple(&c.entries, c.tuples.len()).iter().map(|es| t.insert_all(es, table_home)).collect();
    c.in_table = results.iter().map(|r| r.is_ok()).collect();
    c.table_fallback =
        results.into_iter().enumerate().filter_map(|(i, r)| r.err().map(|e| (i, e.to_string()))).collect();
    c.table = if t.is_empty() { Vec::new() } else { t.into_slots() };
}

/// The table of a compiled set rebuilt from its entries and [`Compiled::in_table`] flags (the
/// tuples flagged, in index order, as [`compile`] placed them): what the classifier installs,
/// whatever [`Compiled::table`] holds.
///
/// # Errors
///
/// [`TableError`] if the flagged tuples' entries do not fit.
pub fn rebuild_table(c: &Compiled) -> Result<Table, TableError> {
    let mut t = Table::default();
    for (es, _) in by_tuple(&c.entries, c.tuples.len()).iter().zip(&c.in_table).filter(|(_, f)| **f) {
        t.insert_all(es, table_home)?;
    }
    Ok(t)
}

/// u64 words of one prefilter bitmap (65536 bits).
pub const PRE_WORDS: usize = abi::FP_CLS_PRE_WORDS as usize;

/// Prefilter bits (`FP_PRE_*` of fastpath_abi.h).
pub mod prefilter {
    /// The source-address bitmap is consulted.
    pub const SRC: u8 = crate::abi::FP_PRE_SRC as u8;
    /// The destination-address bitmap is consulted.
    pub const DST: u8 = crate::abi::FP_PRE_DST as u8;
}

/// The first 16 bits of an address (IPv4 in bytes 0..4), as the prefilter indexes them.
fn hi16(a: &[u8; 16]) -> usize {
    (a[0] as usize) << 8 | a[1] as usize
}

/// Builds [`Compiled::prefilter`]: a tuple's bitmap is consulted for a field it constrains with
/// at least 8 bits in the first 16 of the address, when its entries cover at most half of the
/// masked values there (a denser bitmap would rarely skip a lookup and cost a read each time).
fn build_prefilter(c: &mut Compiled) {
    c.prefilter = vec![0; c.tuples.len()];
    c.prefilter_words = vec![0; c.tuples.len() * 2 * PRE_WORDS];
    for (k, _) in &c.entries {
        let t = k.tuple as usize;
        for (f, a) in [(0, &k.src), (1, &k.dst)] {
            let h = hi16(a);
            c.prefilter_words[(t * 2 + f) * PRE_WORDS + h / 64] |= 1 << (h % 64);
        }
    }
    for (ti, t) in c.tuples.iter().enumerate() {
        for (f, bit, on, plen) in
            [(0, prefilter::SRC, field::SRC, t.src_plen), (1, prefilter::DST, field::DST, t.dst_plen)]
        {
            let words = &c.prefilter_words[(ti * 2 + f) * PRE_WORDS..][..PRE_WORDS];
            let set: u32 = words.iter().map(|w| w.count_ones()).sum();
            let values = 1u32 << plen.min(16);
            if t.fields & on != 0 && plen >= 8 && set * 2 <= values {
                c.prefilter[ti] |= bit;
            }
        }
    }
}

/// Whether tuple `ti`'s prefilter lets a packet with (unmasked) addresses `src`, `dst` through
/// to the hash lookup; what the program's `may_match` computes.
pub fn prefilter_admits(c: &Compiled, ti: usize, src: &[u8; 16], dst: &[u8; 16]) -> bool {
    let t = &c.tuples[ti];
    [(0, prefilter::SRC, src, t.src_plen), (1, prefilter::DST, dst, t.dst_plen)].into_iter().all(|(f, bit, a, plen)| {
        if c.prefilter[ti] & bit == 0 {
            return true;
        }
        let h = hi16(&super::mask_bits(a, plen));
        c.prefilter_words[(ti * 2 + f) * PRE_WORDS + h / 64] >> (h % 64) & 1 == 1
    })
}

fn addr_bytes(a: &std::net::IpAddr) -> [u8; 16] {
    match a {
        std::net::IpAddr::V4(v) => {
            let mut b = [0u8; 16];
            b[..4].copy_from_slice(&v.octets());
            b
        }
        std::net::IpAddr::V6(v) => v.octets(),
    }
}

/// Compiles `set`. `source` names the rule file in errors.
///
/// # Errors
///
/// A [`RuleError`] naming the rule if the set needs more than [`MAX_TUPLES`] tuples or
/// [`MAX_ENTRIES`] entries.
pub fn compile(source: &str, set: &RuleSet) -> Result<Compiled, RuleError> {
    let mut c = Compiled {
        sport: Classes::build(set.rules.iter().filter_map(|r| r.m.src_port)),
        dport: Classes::build(set.rules.iter().filter_map(|r| r.m.dst_port)),
        len: Classes::build(set.rules.iter().filter_map(|r| r.m.len)),
        ..Default::default()
    };
    let mut targets = Targets::default();
    c.default = targets.entry(&set.default, None, None, &mut c);
    // malformed_action() is drop, pass, or the default action (any other action: the program
    // applies the default).
    c.malformed = match set.malformed_action() {
        Action::Drop => action::DROP,
        Action::Pass => action::PASS,
        _ => action::MALFORMED_DEFAULT,
    };
    let mut tuple_index: HashMap<Tuple, usize> = HashMap::new();
    let mut entries: HashMap<Key, u32> = HashMap::new();
    for (ri, r) in set.rules.iter().enumerate() {
        let e = targets.entry(&r.action, r.rate_pps, r.rate_total_pps, &mut c);
        c.actions.push(e);
        let shape = Shape::of(&r.m, &c);
        let at = || Location::Rule { source: source.to_string(), rule: r.name.clone() };
        shape.insert(ri as u32, at, &mut tuple_index, &mut entries)?;
    }
    order_tuples(&mut c, tuple_index, entries);
    build_prefilter(&mut c);
    build_table(&mut c);
    let _ = NO_VLAN;
    Ok(c)
}

/// The CPU sets and redirect interfaces handed out so far: one index per distinct set or
/// interface, in order of first use.
#[derive(Default)]
struct Targets {
    cpu_index: HashMap<Vec<u32>, u32>,
    port_index: HashMap<String, u32>,
}

impl Targets {
    /// The [`ActionEntry`] of `a` with its rates; a new CPU set or interface is appended to
    /// [`Compiled::cpu_sets`] or [`Compiled::redirect_ifaces`].
    fn entry(&mut self, a: &Action, rate: Option<u64>, rate_total: Option<u64>, c: &mut Compiled) -> ActionEntry {
        let (code, arg) = match a {
            Action::Drop => (action::DROP, 0),
            Action::Pass => (action::PASS, 0),
            Action::Xsk => (action::XSK, 0),
            Action::Tx => (action::TX, 0),
            Action::Syncookie => (action::SYNCOOKIE, 0),
            Action::Cpu(cpus) => {
                let n = self.cpu_index.len() as u32;
                let i = *self.cpu_index.entry(cpus.clone()).or_insert_with(|| {
                    c.cpu_sets.push(cpus.clone());
                    n
                });
                (action::CPU, i)
            }
            Action::Redirect(iface) => {
                let n = self.port_index.len() as u32;
                let i = *self.port_index.entry(iface.clone()).or_insert_with(|| {
                    c.redirect_ifaces.push(iface.clone());
                    n
                });
                (action::REDIRECT, i)
            }
        };
        ActionEntry { code, arg, rate_pps: rate.unwrap_or(0), rate_total_pps: rate_total.unwrap_or(0), copy: false }
    }
}

/// What one rule compiles to before it is placed: its tuple, the key fields it fixes, and the
/// values each expanded field takes (empty: the field is not constrained).
struct Shape {
    t: Tuple,
    base: Key,
    protos: Vec<u8>,
    frags: Vec<u8>,
    sports: Vec<u32>,
    dports: Vec<u32>,
    lens: Vec<u32>,
}

impl Shape {
    /// The shape of a rule matching `m`, with ranges as the classes of `c`.
    fn of(m: &Match, c: &Compiled) -> Shape {
        let mut t = Tuple { fields: 0, src_plen: 0, dst_plen: 0, flags_mask: 0 };
        let mut base = Key::default();
        if let Some(v) = m.vlan {
            t.fields |= field::VLAN;
            base.vlan = v;
        }
        if let Some(v) = m.eth_type {
            t.fields |= field::ETH_TYPE;
            base.eth_type = v;
        }
        if let Some(p) = m.src {
            t.fields |= field::SRC;
            t.src_plen = p.len;
            base.src = super::mask_bits(&addr_bytes(&p.addr), p.len);
        }
        if let Some(p) = m.dst {
            t.fields |= field::DST;
            t.dst_plen = p.len;
            base.dst = super::mask_bits(&addr_bytes(&p.addr), p.len);
        }
        let has_ports = m.src_port.is_some() || m.dst_port.is_some();
        // Protocols: given, or implied by ports (tcp, udp) or flags (tcp).
        let protos: Vec<u8> = match (m.proto, m.tcp_flags.is_some(), has_ports) {
            (Some(p), _, _) => vec![p],
            (None, true, _) => vec![6],
            (None, false, true) => vec![6, 17],
            (None, false, false) => vec![],
        };
        if !protos.is_empty() {
            t.fields |= field::PROTO;
        }
        // Fragment states: given, or "has an L4 header" for flag rules (ports use class 0).
        let frags: Vec<u8> = match (m.frag, m.tcp_flags.is_some()) {
            (Some(f), _) => vec![f as u8],
            (None, true) => vec![Frag::None as u8, Frag::First as u8],
            (None, false) => vec![],
        };
        if !frags.is_empty() {
            t.fields |= field::FRAG;
        }
        if let Some((mask, value)) = m.tcp_flags {
            t.fields |= field::FLAGS;
            t.flags_mask = mask;
            base.flags = value;
        }
        let sports: Vec<u32> = m.src_port.map(|r| c.sport.covering(r).collect()).unwrap_or_default();
        let dports: Vec<u32> = m.dst_port.map(|r| c.dport.covering(r).collect()).unwrap_or_default();
        let lens: Vec<u32> = m.len.map(|r| c.len.covering(r).collect()).unwrap_or_default();
        if m.src_port.is_some() {
            t.fields |= field::SPORT;
        }
        if m.dst_port.is_some() {
            t.fields |= field::DPORT;
        }
        if m.len.is_some() {
            t.fields |= field::LEN;
        }
        Shape { t, base, protos, frags, sports, dports, lens }
    }

    /// Places rule `ri` (at `at`, for errors): its tuple (a new one if no earlier rule has it)
    /// and one entry per combination of its expanded fields, keeping an earlier rule's entry
    /// where keys collide.
    fn insert(
        &self,
        ri: u32,
        at: impl Fn() -> Location,
        tuple_index: &mut HashMap<Tuple, usize>,
        entries: &mut HashMap<Key, u32>,
    ) -> Result<(), RuleError> {
        let (protos, frags, sports, dports, lens) = (&self.protos, &self.frags, &self.sports, &self.dports, &self.lens);
        let n_tuples = tuple_index.len();
        let ti = *tuple_index.entry(self.t).or_insert(n_tuples);
        if ti >= MAX_TUPLES {
            return Err(RuleError {
                at: at(),
                msg: format!(
                    "this rule needs a {}th distinct field combination; the classifier holds {MAX_TUPLES}",
                    ti + 1
                ),
            });
        }
        let one = |v: Vec<u32>| if v.is_empty() { vec![0] } else { v };
        let count =
            protos.len().max(1) * frags.len().max(1) * sports.len().max(1) * dports.len().max(1) * lens.len().max(1);
        if entries.len() + count > MAX_ENTRIES {
            return Err(RuleError {
                at: at(),
                msg: format!("the rule set needs more than {MAX_ENTRIES} classifier entries here (this rule alone expands to {count}: narrow its port or length ranges)"),
            });
        }
        let base = Key { tuple: ti as u8, ..self.base };
        let protos16: Vec<u32> =
            if protos.is_empty() { vec![0] } else { protos.iter().map(|p| 0x100 | *p as u32).collect() };
        let frags: Vec<u32> = one(frags.iter().map(|f| *f as u32).collect());
        for &p in &protos16 {
            for &f in &frags {
                for &sp in &one(sports.clone()) {
                    for &dp in &one(dports.clone()) {
                        for &l in &one(lens.clone()) {
                            let k = Key {
                                proto16: p as u16,
                                frag: f as u8,
                                sport_class: sp,
                                dport_class: dp,
                                len_class: l,
                                ..base
                            };
                            entries.entry(k).or_insert(ri);
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// Fills [`Compiled::tuples`], [`Compiled::tuple_best`] and [`Compiled::entries`]: tuples
/// ordered by their first rule, so the program can stop once it holds a better match, and the
/// entries' tuple indexes renumbered to that order.
fn order_tuples(c: &mut Compiled, tuple_index: HashMap<Tuple, usize>, entries: HashMap<Key, u32>) {
    let mut tuples: Vec<(Tuple, usize)> = tuple_index.into_iter().collect();
    let mut best = vec![u32::MAX; tuples.len()];
    for (k, ri) in &entries {
        let b = &mut best[k.tuple as usize];
        *b = (*b).min(*ri);
    }
    tuples.sort_by_key(|(_, i)| best[*i]);
    let mut remap = vec![0u8; tuples.len()];
    for (new, (_, old)) in tuples.iter().enumerate() {
        remap[*old] = new as u8;
    }
    c.tuple_best = tuples.iter().map(|(_, i)| best[*i]).collect();
    c.tuples = tuples.into_iter().map(|(t, _)| t).collect();
    c.entries = entries
        .into_iter()
        .map(|(mut k, ri)| {
            k.tuple = remap[k.tuple as usize];
            (k, ri)
        })
        .collect();
    c.entries.sort_by_key(|(k, r)| (*r, k.tuple));
}

/// The classifier's lookup, in Rust, over compiled tables: what the BPF program computes.
/// Used by tests to check the compiler against [`super::reference`].
pub fn lookup(c: &Compiled, p: &super::reference::Packet) -> Option<usize> {
    let map: HashMap<Key, u32> = c.entries.iter().copied().collect();
    lookup_in(c, &map, p)
}

/// [`lookup`] with a prepared entry map (read for the tuples not in [`Compiled::table`]; the
/// others are read from the table, as the program reads them).
pub fn lookup_in(c: &Compiled, map: &HashMap<Key, u32>, p: &super::reference::Packet) -> Option<usize> {
    let (sp, dp) = p.ports.map(|(s, d)| (c.sport.class(s), c.dport.class(d))).unwrap_or((0, 0));
    let mut best: Option<u32> = None;
    let src = p.src.map(|a| addr_bytes(&a)).unwrap_or([0; 16]);
    let dst = p.dst.map(|a| addr_bytes(&a)).unwrap_or([0; 16]);
    for (ti, t) in c.tuples.iter().enumerate() {
        if best.is_some_and(|b| b < c.tuple_best[ti]) {
            break;
        }
        if !prefilter_admits(c, ti, &src, &dst) {
            continue;
        }
        let f = t.fields;
        let k = Key {
            tuple: ti as u8,
            proto16: if f & field::PROTO != 0 { p.proto.map(|x| 0x100 | x as u16).unwrap_or(0) } else { 0 },
            frag: if f & field::FRAG != 0 { p.frag as u8 } else { 0 },
            flags: if f & field::FLAGS != 0 { p.tcp_flags.unwrap_or(0) & t.flags_mask } else { 0 },
            vlan: if f & field::VLAN != 0 { p.vlan } else { 0 },
            eth_type: if f & field::ETH_TYPE != 0 { p.eth_type } else { 0 },
            sport_class: if f & field::SPORT != 0 { sp } else { 0 },
            dport_class: if f & field::DPORT != 0 { dp } else { 0 },
            len_class: if f & field::LEN != 0 { c.len.class(p.len) } else { 0 },
            src: if f & field::SRC != 0 { super::mask_bits(&src, t.src_plen) } else { [0; 16] },
            dst: if f & field::DST != 0 { super::mask_bits(&dst, t.dst_plen) } else { [0; 16] },
        };
        let found = if c.in_table.get(ti).copied().unwrap_or(false) {
            Table::find(&c.table, &k, table_home(&k))
        } else {
            map.get(&k).copied()
        };
        if let Some(ri) = found {
            if best.is_none_or(|b| ri < b) {
                best = Some(ri);
            }
        }
    }
    best.map(|b| b as usize)
}
