//! The rule classifier program (`bpf/classifier.bpf.c`): load, install compiled rule sets with
//! an atomic swap, attach, read counters, pin for `fastpath filter load --detach`.
//!
//! One type in three states, so that each method exists only where it works:
//! [`LoadedClassifier`] (loaded, not attached: install rules, [`Classifier::test_run`],
//! [`Classifier::attach`]), [`AttachedClassifier`] (attached by this process, detached on drop:
//! [`Classifier::pin`]) and [`PinnedClassifier`] (opened from the pins of another process:
//! [`Classifier::reload`], [`Classifier::check_still_attached`]). Counters and the XSKMAP are
//! there in every state.
//!
//! Two rule sets ([`SetIndex`]) live side by side in every map; `cls_active[0]` names the one in
//! use. A reload writes the inactive set completely (actions, classes, tuples, hash entries,
//! config), then flips the index with one map update: a packet sees either the whole old set or
//! the whole new one. Counters of the old set stay readable until its entries are cleared after
//! the flip. Needs CAP_BPF + CAP_NET_ADMIN (or root); kernel >= 5.9 (bpf_link), batch map ops
//! >= 5.6.

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{libbpf_sys, MapCore, MapHandle};
use serde::Serialize;

use bytemuck::Zeroable;

use super::maps::{Array, HashMap, PerCpuArray};
use super::{skel, AttachOpts, Attached, BpfError, XdpLink};
use crate::abi::{
    self, bpf_cpumap_val, bpf_devmap_val, fp_cache_slot, fp_cls_action, fp_cls_config, fp_cls_key, fp_cls_slot,
    fp_cls_tuple, fp_cpu_set, fp_pkt_stats, fp_rate_bucket, fp_rate_key, fp_rate_total, fp_sc_config,
};
use crate::netdev::Iface;
use crate::rules::compile::{
    abi_key, rebuild_table, ActionEntry, Compiled, Key, Slot, Table, MAX_TUPLES, PRE_WORDS, TABLE_SLOTS,
};
use crate::rules::{MAX_CPU_SETS, MAX_REDIRECT_PORTS, MAX_RULES};
use crate::sys::SysError;

const STAT_COUNT: u32 = abi::FP_STAT_COUNT;
/// Names of the per-set totals, in the order of fp_cls_stats (fastpath_abi.h): packets per
/// action taken, then `no_match` (default action), `malformed` (the `malformed` action),
/// `rate_dropped` (over a rate limit; also in `drop`) and `bad_fragment` (tiny or overlapping
/// fragments, always dropped; also in `drop`); then `action = "syncookie"`'s, each also counted
/// in `tx`, `pass` or `drop` except the tc program's two: `syncookie_synack` (SYN answered with
/// a cookie SYN-ACK, tx), `syncookie_ack_ok` (ACK to a listener with a valid cookie, pass),
/// `syncookie_ack_bad` (ACK to a listener or to no socket, cookie wrong or expired, drop),
/// `syncookie_conn` (segment of an existing connection, pass), `syncookie_invalid` (no
/// connection and neither SYN nor ACK, a fragment, IPv6 extension headers, a SYN that cannot be
/// answered: drop), `syncookie_reqsk` (tc: request socket created) and `syncookie_tc_fail` (tc:
/// a checked ACK that got none; the kernel answers it).
pub const STAT_NAMES: [&str; STAT_COUNT as usize] = [
    "pass",
    "drop",
    "xsk",
    "cpu",
    "tx",
    "redirect",
    "no_match",
    "malformed",
    "rate_dropped",
    "bad_fragment",
    "syncookie_synack",
    "syncookie_ack_ok",
    "syncookie_ack_bad",
    "syncookie_conn",
    "syncookie_invalid",
    "syncookie_reqsk",
    "syncookie_tc_fail",
];
// The names above follow the FP_ACT_* / FP_STAT_* indexes of fastpath_abi.h.
const _: () = assert!(
    abi::FP_ACT_REDIRECT == 5
        && abi::FP_ACT_COUNT == 6
        && abi::FP_STAT_NO_MATCH == 6
        && abi::FP_STAT_MALFORMED == 7
        && abi::FP_STAT_RATE_DROPPED == 8
        && abi::FP_STAT_BAD_FRAG == 9
        && abi::FP_STAT_SC_SYNACK == 10
        && abi::FP_STAT_SC_ACK_OK == 11
        && abi::FP_STAT_SC_ACK_BAD == 12
        && abi::FP_STAT_SC_CONN == 13
        && abi::FP_STAT_SC_INVALID == 14
        && abi::FP_STAT_SC_REQSK == 15
        && abi::FP_STAT_SC_TC_FAIL == 16
        && abi::FP_STAT_COUNT == 17
);

/// One of the two rule sets every map holds side by side. Printed and serialized as 0 or 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SetIndex {
    /// Set 0.
    Zero,
    /// Set 1.
    One,
}

impl SetIndex {
    /// 0 or 1.
    pub fn index(self) -> u32 {
        self as u32
    }

    /// The other set.
    pub fn other(self) -> Self {
        match self {
            SetIndex::Zero => SetIndex::One,
            SetIndex::One => SetIndex::Zero,
        }
    }

    /// The set of `cls_active`'s value (its low bit).
    fn of(v: u32) -> Self {
        if v & 1 == 0 {
            SetIndex::Zero
        } else {
            SetIndex::One
        }
    }

    /// Index of entry `i` of this set in a map holding `per_set` entries per set, sets one after
    /// the other (`i < per_set`, checked by the caller).
    fn at(self, per_set: usize, i: usize) -> u32 {
        (self.index() as usize * per_set + i) as u32
    }
}

impl std::fmt::Display for SetIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.index())
    }
}

impl Serialize for SetIndex {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(self.index())
    }
}

/// Entries per set of `cls_port_class`: source ports, then destination ports.
const PORT_CLASSES: usize = 2 * 65536;
/// Entries per set of `cls_len_class`.
const LEN_CLASSES: usize = 65536;
/// Words per set of `cls_prefilter`.
const PREFILTER_WORDS: usize = MAX_TUPLES * 2 * PRE_WORDS;

macro_rules! cls_maps {
    ($($name:ident: $ty:ty),* $(,)?) => {
        /// Every map of the classifier, typed (key and value sizes checked when opened).
        #[derive(Debug)]
        #[allow(missing_docs)]
        pub struct ClsMaps { $(pub $name: $ty),* }
        impl ClsMaps {
            const NAMES: &'static [&'static str] = &[$(stringify!($name)),*];
            fn from_skel(s: &skel::classifier::ClassifierSkel<'_>) -> Result<Self, BpfError> {
                Ok(Self { $($name: <$ty>::new(
                    MapHandle::try_from(&s.maps.$name).map_err(|cause| BpfError::Map { map: stringify!($name), cause })?,
                    stringify!($name),
                )?),* })
            }
            /// The maps pinned under `dir`; the name of the first that is missing or of another
            /// shape (pins of another version).
            fn open_pinned(dir: &Path) -> Result<Self, &'static str> {
                Ok(Self { $($name: <$ty>::new(
                    MapHandle::from_pinned_path(dir.join(stringify!($name))).map_err(|_| stringify!($name))?,
                    stringify!($name),
                ).map_err(|_| stringify!($name))?),* })
            }
            /// Makes the skeleton `open` use these maps instead of creating its own.
            fn reuse_in(&self, open: &mut skel::classifier::OpenClassifierSkel<'_>) -> Result<(), BpfError> {
                $(open.maps.$name.reuse_fd(self.$name.handle().as_fd()).map_err(|cause| BpfError::Map { map: stringify!($name), cause })?;)*
                Ok(())
            }
            /// Each map's (type, key size, value size, max entries) as the kernel reports it.
            fn shapes(&self) -> Result<Vec<(u32, u32, u32, u32)>, SysError> {
                Ok(vec![$(crate::sys::bpf::map_info(self.$name.handle().as_fd())?),*])
            }
            fn pin(&mut self, dir: &Path) -> Result<(), BpfError> {
                $(self.$name.handle_mut().pin(dir.join(stringify!($name))).map_err(|cause| BpfError::Map { map: stringify!($name), cause })?;)*
                Ok(())
            }
        }
    };
}

cls_maps!(
    cls_active: Array<u32>,
    cls_config: Array<fp_cls_config>,
    cls_tuples: Array<fp_cls_tuple>,
    cls_rules: HashMap<fp_cls_key, u32>,
    cls_table: Array<fp_cls_slot>,
    cls_actions: Array<fp_cls_action>,
    cls_prefilter: Array<u64>,
    cls_port_class: Array<u32>,
    cls_len_class: Array<u32>,
    cls_rule_stats: PerCpuArray<fp_pkt_stats>,
    cls_stats: PerCpuArray<fp_pkt_stats>,
    cls_cache: PerCpuArray<fp_cache_slot>,
    cls_cpu_sets: Array<fp_cpu_set>,
    cls_rate: HashMap<fp_rate_key, fp_rate_bucket>,
    cls_rate_total: Array<fp_rate_total>,
    xsks: Array<u32>,
    cpu_map: Array<bpf_cpumap_val>,
    tx_ports: Array<bpf_devmap_val>,
    sc_config: Array<fp_sc_config>,
);

impl ClsMaps {
    /// The maps the syncookie tc program shares with the classifier.
    fn tc(&self) -> super::syncookie::TcMaps<'_> {
        super::syncookie::TcMaps {
            cls_active: &self.cls_active,
            cls_stats: &self.cls_stats,
            sc_config: &self.sc_config,
        }
    }
}

/// Per-set totals.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct ClsTotals {
    /// `(name, packets, bytes)` in [`STAT_NAMES`] order.
    pub counters: Vec<(&'static str, u64, u64)>,
}

impl ClsTotals {
    /// Packets of one counter by name.
    pub fn packets(&self, name: &str) -> u64 {
        self.counters.iter().find(|c| c.0 == name).map(|c| c.1).unwrap_or(0)
    }
}

/// The states of a [`Classifier`].
pub mod state {
    use std::os::fd::OwnedFd;

    use super::super::XdpLink;
    use super::PinMeta;

    /// Loaded, not attached: rules can be installed and the program test-run.
    #[derive(Debug)]
    pub struct Loaded {
        pub(super) prog: OwnedFd,
    }

    /// Attached by this process (dropping it detaches, unless pinned).
    #[derive(Debug)]
    pub struct Attached {
        pub(super) prog: OwnedFd,
        pub(super) link: XdpLink,
    }

    /// Opened from the pins another process left ([`super::Classifier::open_pinned`]).
    #[derive(Debug)]
    pub struct Pinned {
        /// The pinned link, if it could be opened.
        pub(super) link: Option<OwnedFd>,
        pub(super) dir: std::path::PathBuf,
        pub(super) meta: PinMeta,
    }

    /// One of the states; sealed.
    pub trait State: sealed::Sealed {}
    impl State for Loaded {}
    impl State for Attached {}
    impl State for Pinned {}
    mod sealed {
        pub trait Sealed {}
        impl Sealed for super::Loaded {}
        impl Sealed for super::Attached {}
        impl Sealed for super::Pinned {}
    }
}

/// The classifier program in state `S` ([`state`]); `Classifier` alone is the attached one.
///
/// # Examples
///
/// Rules from text, checked and compiled before anything is loaded; then the program loaded,
/// the set installed and the program attached, and the counters read:
///
/// ```no_run
/// use fastpath::bpf::{AttachOpts, Classifier};
/// use fastpath::netdev::Iface;
/// use fastpath::rules::{compile::compile, parse_rule_texts, Action};
///
/// let texts = ["proto=udp,dst_port=9,action=drop".to_string(), "proto=tcp,dst_port=22,action=pass".to_string()];
/// let set = parse_rule_texts("--rule", &texts, Action::Pass)?; // the rest passes
/// let compiled = compile("--rule", &set)?;
/// let iface = Iface::resolve("eth0")?;
/// let cls = Classifier::load()?;
/// cls.swap_in(&compiled)?;
/// let cls = cls.attach(&iface, AttachOpts::default())?.prog;
/// std::thread::sleep(std::time::Duration::from_secs(1));
/// let set_index = cls.active()?;
/// for (rule, (packets, bytes)) in set.rules.iter().zip(cls.rule_counters(set_index, set.rules.len())?) {
///     println!("{}: {packets} packets, {bytes} bytes", rule.text());
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Classifier<S: state::State = state::Attached> {
    /// The maps.
    pub maps: ClsMaps,
    st: S,
    /// The tc ingress link of `action = "syncookie"` (bpf/syncookie_tc.bpf.c), while the set in
    /// force has such a rule and the classifier is attached by this process.
    sc_link: std::sync::Mutex<Option<OwnedFd>>,
}

/// Loaded, not attached ([`Classifier::load`]).
pub type LoadedClassifier = Classifier<state::Loaded>;
/// Attached by this process ([`Classifier::attach`]).
pub type AttachedClassifier = Classifier<state::Attached>;
/// Opened from pins ([`Classifier::open_pinned`]).
pub type PinnedClassifier = Classifier<state::Pinned>;

/// What the library keeps beside the pins (the `rule_names` pin): the interface index at load
/// time, and of the set in force its source, rule names and rule texts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PinMeta {
    /// The interface's index when the classifier was pinned (or last reloaded), if known.
    pub ifindex: Option<u32>,
    /// Rule names by rule index (may be empty: pins of an older version).
    pub names: Vec<String>,
    /// Where the set in force came from (a file's path, or `--rule`); `None` in pins of a
    /// version that did not keep it.
    pub source: Option<String>,
    /// Rule texts by rule index, as [`crate::rules::Rule::text`] prints them; empty in pins of
    /// a version that did not keep them.
    pub texts: Vec<String>,
}

/// The rule set kept with the pins by [`Classifier::pin`] and [`Classifier::reload`]: its
/// source, and per rule (by rule index) its name and text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PinRules {
    /// Where the set came from (a file's path, or `--rule`).
    pub source: String,
    /// Rule names by rule index.
    pub names: Vec<String>,
    /// Rule texts by rule index ([`crate::rules::Rule::text`]).
    pub texts: Vec<String>,
}

impl PinRules {
    /// Source, names and texts of `set`, read from `source`.
    pub fn of(source: &str, set: &crate::rules::RuleSet) -> Self {
        Self {
            source: source.to_string(),
            names: set.rules.iter().map(|r| r.name.clone()).collect(),
            texts: set.rules.iter().map(crate::rules::Rule::text).collect(),
        }
    }
}

/// Bytes per entry of the `rule_names` map.
const NAMES_CHUNK: usize = 4096;
/// The most `rule_names` bytes read from a pin (256 MiB; a full rule set of 131,072 rules with
/// names and texts takes some tens of MB): a pin claiming more is of another version.
const MAX_NAMES_BYTES: usize = 256 << 20;
/// The pin of the rule names, and the name a new one is pinned under before it replaces it.
const NAMES_PIN: &str = "rule_names";
const NAMES_PIN_NEW: &str = "rule_names_new"; // bpffs refuses names with a dot

/// Marks the part of the `rule_names` encoding after the names (source and texts), which
/// versions that kept names only neither write nor read: "TXT1".
const TEXTS_TAG: u32 = u32::from_le_bytes(*b"TXT1");

impl PinMeta {
    /// What [`Classifier::pin`] and [`Classifier::reload`] keep for `rules` on `ifindex`.
    fn new(ifindex: Option<u32>, rules: &PinRules) -> Self {
        Self { ifindex, names: rules.names.clone(), source: Some(rules.source.clone()), texts: rules.texts.clone() }
    }

    /// Encoded: u64 length, u32 ifindex (0: unknown), u32 count, then per name u32 length and
    /// UTF-8 bytes; then (with a source) u32 [`TEXTS_TAG`], the source as u32 length and
    /// bytes, u32 count and per text u32 length and bytes; all native-endian. A decoder of the
    /// names-only encoding reads the names and skips the rest (it stops at the count); this
    /// one reads pins without the tagged part as names only.
    fn encode(&self) -> Vec<u8> {
        fn put(b: &mut Vec<u8>, s: &str) {
            b.extend((s.len() as u32).to_ne_bytes());
            b.extend(s.as_bytes());
        }
        let mut b = vec![0u8; 8];
        b.extend(self.ifindex.unwrap_or(0).to_ne_bytes());
        b.extend((self.names.len() as u32).to_ne_bytes());
        for n in &self.names {
            put(&mut b, n);
        }
        if let Some(src) = &self.source {
            b.extend(TEXTS_TAG.to_ne_bytes());
            put(&mut b, src);
            b.extend((self.texts.len() as u32).to_ne_bytes());
            for t in &self.texts {
                put(&mut b, t);
            }
        }
        let len = b.len() as u64;
        b[..8].copy_from_slice(&len.to_ne_bytes());
        b
    }

    /// The inverse of [`PinMeta::encode`] (and of the names-only encoding of older versions);
    /// `None` if truncated.
    fn decode(b: &[u8]) -> Option<Self> {
        fn get(b: &[u8], at: &mut usize) -> Option<String> {
            let l = abi::read::<u32>(b.get(*at..)?)? as usize;
            let s = String::from_utf8_lossy(b.get(*at + 4..*at + 4 + l)?).into_owned();
            *at += 4 + l;
            Some(s)
        }
        let len = usize::try_from(abi::read::<u64>(b)?).ok()?;
        let b = b.get(8..len)?;
        let ifindex = abi::read::<u32>(b)?;
        let n = abi::read::<u32>(b.get(4..)?)?;
        let mut at = 8;
        let mut names = Vec::new();
        for _ in 0..n {
            names.push(get(b, &mut at)?);
        }
        let (mut source, mut texts) = (None, Vec::new());
        if at < b.len() {
            if abi::read::<u32>(b.get(at..)?)? != TEXTS_TAG {
                return None;
            }
            at += 4;
            source = Some(get(b, &mut at)?);
            let n = abi::read::<u32>(b.get(at..)?)?;
            at += 4;
            for _ in 0..n {
                texts.push(get(b, &mut at)?);
            }
        }
        Some(Self { ifindex: (ifindex != 0).then_some(ifindex), names, source, texts })
    }

    /// Pins these under `dir` as a new ARRAY map (`rule_names`), replacing the one there with
    /// one rename.
    fn pin(&self, dir: &Path) -> Result<(), BpfError> {
        let bytes = self.encode();
        let n = bytes.len().div_ceil(NAMES_CHUNK);
        let opts = libbpf_sys::bpf_map_create_opts {
            sz: size_of::<libbpf_sys::bpf_map_create_opts>() as _,
            ..Default::default()
        };
        let err = |cause| BpfError::Map { map: NAMES_PIN, cause };
        let map = MapHandle::create(
            libbpf_rs::MapType::Array,
            Some("cls_rule_names"),
            4,
            NAMES_CHUNK as u32,
            n as u32,
            &opts,
        )
        .map_err(err)?;
        let mut padded = bytes;
        padded.resize(n * NAMES_CHUNK, 0);
        let mut arr = Array::<[u8; NAMES_CHUNK]>::new(map, NAMES_PIN)?;
        arr.set_many(0, bytemuck::cast_slice(&padded))?;
        let new = dir.join(NAMES_PIN_NEW);
        if check_entry(&new)?.is_some() {
            let _ = std::fs::remove_file(&new);
        }
        arr.handle_mut().pin(&new).map_err(err)?;
        std::fs::rename(&new, dir.join(NAMES_PIN)).map_err(|e| {
            let _ = std::fs::remove_file(&new);
            SysError { call: format!("rename({}, {NAMES_PIN})", new.display()), errno: e.raw_os_error().unwrap_or(0) }
        })?;
        Ok(())
    }

    /// Reads the `rule_names` pin under `dir`; empty if there is none (pins of an older version).
    fn open_pinned(dir: &Path) -> Result<Self, BpfError> {
        let p = dir.join(NAMES_PIN);
        if check_entry(&p)?.is_none() {
            return Ok(Self::default());
        }
        let other = || BpfError::OtherVersion { dir: dir.display().to_string(), map: NAMES_PIN };
        let map = MapHandle::from_pinned_path(&p).map_err(|_| other())?;
        let n = map.max_entries() as usize;
        let arr = Array::<[u8; NAMES_CHUNK]>::new(map, NAMES_PIN).map_err(|_| other())?;
        // Only the entries the encoded length (its first 8 bytes) covers are read, and at most
        // MAX_NAMES_BYTES: a map of a huge max_entries is never read or allocated whole.
        let first = if n == 0 { [0; NAMES_CHUNK] } else { arr.get(0)?.unwrap_or([0; NAMES_CHUNK]) };
        let len = abi::read::<u64>(&first).and_then(|l| usize::try_from(l).ok()).ok_or_else(other)?;
        if len > MAX_NAMES_BYTES || len > n.saturating_mul(NAMES_CHUNK) {
            return Err(other());
        }
        let chunks = len.div_ceil(NAMES_CHUNK);
        let mut bytes = Vec::with_capacity(chunks * NAMES_CHUNK);
        bytes.extend_from_slice(&first);
        for i in 1..chunks {
            bytes.extend_from_slice(&arr.get(i as u32)?.unwrap_or([0; NAMES_CHUNK]));
        }
        Self::decode(&bytes).ok_or_else(other)
    }
}

/// The `cls_rules` key of `k` in rule set `set` (struct fp_cls_key; padding zero).
fn cls_key(set: SetIndex, k: &Key) -> fp_cls_key {
    abi_key(k, set.index() as u8)
}

/// The `cls_table` slots of set `set` (struct fp_cls_slot): every slot of the set, empty ones
/// zero, so nothing of an earlier install survives.
/// `used` is the key's distance from its home slot plus one (the program's Robin Hood early exit).
fn cls_slots(set: SetIndex, table: &[Option<Slot>]) -> Vec<fp_cls_slot> {
    let mut out = vec![fp_cls_slot::zeroed(); TABLE_SLOTS];
    for (o, e) in out.iter_mut().zip(table) {
        if let Some(sl) = e {
            *o = fp_cls_slot { k: cls_key(set, &sl.key), rule: sl.rule, used: u32::from(sl.dist) + 1 };
        }
    }
    out
}

/// The `cls_actions` value of `a` (struct fp_cls_action; padding zero).
fn cls_action(a: &ActionEntry) -> fp_cls_action {
    fp_cls_action {
        code: a.code,
        flags: if a.copy { abi::FP_ACT_F_COPY as u8 } else { 0 },
        arg: a.arg,
        rate_pps: a.rate_pps,
        rate_total_pps: a.rate_total_pps,
        ..Zeroable::zeroed()
    }
}

fn mask16(plen: u8) -> [u8; 16] {
    crate::rules::mask_bits(&[0xff; 16], plen)
}

/// Refuses a compiled set larger than the maps hold (what [`crate::rules::compile::compile`]
/// already refuses; a hand-made [`Compiled`] may not); returns the table to install
/// ([`check_table`]).
fn check_fits(c: &Compiled) -> Result<Table, BpfError> {
    let limits = [
        ("rules", c.actions.len(), MAX_RULES),
        ("tuples", c.tuples.len(), MAX_TUPLES),
        ("CPU sets", c.cpu_sets.len(), MAX_CPU_SETS),
        ("redirect interfaces", c.redirect_ifaces.len(), MAX_REDIRECT_PORTS),
        ("prefilter words", c.prefilter_words.len(), PREFILTER_WORDS),
    ];
    for (what, n, max) in limits {
        if n > max {
            return Err(BpfError::BadValue {
                what: "compiled rule set",
                value: format!("{n} {what}"),
                accepted: format!("at most {max} {what} per set"),
            });
        }
    }
    if c.tuple_best.len() < c.tuples.len() || c.prefilter.len() < c.tuples.len() {
        return Err(BpfError::BadValue {
            what: "compiled rule set",
            value: format!(
                "{} tuples, {} best rules, {} prefilters",
                c.tuples.len(),
                c.tuple_best.len(),
                c.prefilter.len()
            ),
            accepted: "one best rule and one prefilter per tuple".into(),
        });
    }
    check_table(c)
}

/// The table to install for `c`, rebuilt from its entries and [`Compiled::in_table`] flags
/// ([`rebuild_table`]; `c.table` is not trusted, only checked against it), after refusing what
/// the program would read wrong (a hand-made [`Compiled`]): not one flag per tuple, an entry of
/// no tuple or of no rule, a key twice, a tuple whose best rule is not its lowest, a flagged
/// tuple that does not fit, or a `c.table` other than the rebuilt one.
fn check_table(c: &Compiled) -> Result<Table, BpfError> {
    let bad = |value: String, accepted: &str| BpfError::BadValue {
        what: "compiled rule table",
        value,
        accepted: accepted.into(),
    };
    if c.in_table.len() != c.tuples.len() {
        return Err(bad(format!("{} table flags for {} tuples", c.in_table.len(), c.tuples.len()), "one per tuple"));
    }
    let mut lowest = vec![u32::MAX; c.tuples.len()];
    let mut seen = std::collections::HashSet::with_capacity(c.entries.len());
    for (k, r) in &c.entries {
        let t = k.tuple as usize;
        if t >= c.tuples.len() || *r as usize >= c.actions.len() {
            return Err(bad(
                format!("an entry of tuple {t}, rule {r} ({} tuples, {} rules)", c.tuples.len(), c.actions.len()),
                "entries of existing tuples and rules",
            ));
        }
        if !seen.insert(k) {
            return Err(bad(format!("a key of tuple {t} twice"), "each key once"));
        }
        lowest[t] = lowest[t].min(*r);
    }
    for (t, (low, best)) in lowest.iter().zip(&c.tuple_best).enumerate() {
        if *low != u32::MAX && low != best {
            return Err(bad(format!("tuple {t}: best rule {best}, lowest rule of its entries {low}"), "the lowest"));
        }
    }
    let table = rebuild_table(c).map_err(|e| bad(e.to_string(), "the tuples flagged in_table fit the table"))?;
    let same = if table.is_empty() { c.table.is_empty() } else { c.table == table.clone().into_slots() };
    if !same {
        return Err(bad(
            format!("{} slots unlike the table of its entries", c.table.len()),
            "the table compile() builds from the entries and in_table flags",
        ));
    }
    Ok(table)
}

impl LoadedClassifier {
    /// Loads the program (not attached: [`Classifier::attach`]).
    ///
    /// # Errors
    ///
    /// [`BpfError::Load`] (verifier; needs root or CAP_BPF), [`BpfError::Map`],
    /// [`BpfError::MapShape`] (a skeleton out of step with [`crate::abi`]), [`BpfError::Sys`].
    pub fn load() -> Result<Self, BpfError> {
        Ok(Self::load_inner(None, None, |_| Ok(()))?.0)
    }

    /// As [`Classifier::load`], with the capture ring sized for `fastpath capture`: rules whose
    /// [`ActionEntry::copy`](crate::rules::compile::ActionEntry) is set copy each frame they match (up
    /// to `snaplen` bytes) into a ring buffer of `ring_bytes` (a power of two, at least a page),
    /// read through the returned [`CaptureMaps`](super::capture::CaptureMaps).
    ///
    /// # Errors
    ///
    /// As [`Classifier::load`]; [`BpfError::Map`] for a ring size the kernel refuses.
    pub fn load_with_capture(snaplen: u32, ring_bytes: u32) -> Result<(Self, super::capture::CaptureMaps), BpfError> {
        Self::load_inner(Some((snaplen, ring_bytes)), None, |s| {
            super::capture::CaptureMaps::new(&s.maps.cap_ring, &s.maps.cap_stats)
        })
    }

    /// Loads the program on `reuse`'s maps when given (their contents kept: rules, counters,
    /// the SYN-cookie key), else on maps of its own.
    fn load_inner<T>(
        capture: Option<(u32, u32)>,
        reuse: Option<&ClsMaps>,
        extra: impl FnOnce(&skel::classifier::ClassifierSkel<'_>) -> Result<T, BpfError>,
    ) -> Result<(Self, T), BpfError> {
        let mut storage = MaybeUninit::uninit();
        let mut open = skel::classifier::ClassifierSkelBuilder::default()
            .open(&mut storage)
            .map_err(|cause| BpfError::Load { prog: "classifier", cause })?;
        if let Some((snaplen, ring_bytes)) = capture {
            if let Some(ro) = open.maps.rodata_data.as_deref_mut() {
                ro.cap_snaplen = snaplen.clamp(1, super::capture::MAX_SNAPLEN);
            }
            open.maps.cap_ring.set_max_entries(ring_bytes).map_err(|cause| BpfError::Map { map: "cap_ring", cause })?;
        }
        if let Some(m) = reuse {
            m.reuse_in(&mut open)?;
        }
        let s = open.load().map_err(|cause| BpfError::Load { prog: "classifier", cause })?;
        let t = extra(&s)?;
        let prog = s
            .progs
            .classifier
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| SysError { call: "dup(prog fd)".into(), errno: e.raw_os_error().unwrap_or(0) })?;
        let maps = ClsMaps::from_skel(&s)?;
        if reuse.is_none() {
            maps.sc_config.set(0, &super::syncookie::new_config(1500)?)?;
        }
        Ok((Self { maps, st: state::Loaded { prog }, sc_link: Default::default() }, t))
    }

    /// Attaches to `iface` as `opts` asks: one mode, or native then skb on this same program
    /// ([`XdpLink::attach`]). Returns the attached classifier, the mode obtained and the
    /// fallback notes. Needs root, or CAP_NET_ADMIN + CAP_BPF; Linux >= 5.9.
    ///
    /// # Errors
    ///
    /// As [`XdpLink::attach`]: [`BpfError::Occupied`], [`BpfError::ModeUnsupported`],
    /// [`BpfError::MtuTooLarge`], [`BpfError::AllModesRefused`], [`BpfError::NotAttached`],
    /// [`BpfError::Sys`] (EPERM without the privileges). The program is unloaded then.
    ///
    /// With an `action = "syncookie"` rule in the set in force, the SYN-ACK's MSS follows the
    /// interface's MTU and the tc ingress program is attached too ([`super::syncookie`]); if
    /// that fails, the XDP program is detached again and the error returned. The namespace's
    /// IPv4 broadcast addresses are read for it in any case (an RTM_GETADDR dump;
    /// [`BpfError::Sys`] if that fails, before anything is attached).
    pub fn attach(self, iface: &Iface, opts: AttachOpts) -> Result<Attached<AttachedClassifier>, BpfError> {
        self.prepare_sc_config(iface)?;
        // The tc program first (sysctl checks, option flags; it does nothing without marks):
        // the XDP program answers no SYN before it is there. An XDP attach error drops it.
        let tc = if self.active_uses_syncookie()? {
            Some(super::syncookie::attach_tc(self.maps.tc(), iface.ifindex())?)
        } else {
            None
        };
        let a = XdpLink::attach(self.st.prog.as_fd(), iface, opts)?;
        // Generic XDP: the metadata mark does not reach tc (see bpf/syncookie_tc.bpf.c). The
        // bit is only ever set (the program may set it too): nothing of the program's is lost.
        if a.mode == super::XdpMode::Skb {
            let mut c = self.maps.sc_config.get(0)?.unwrap_or_else(Zeroable::zeroed);
            c.flags |= abi::FP_SC_F_NO_META as u8;
            self.maps.sc_config.set(0, &c)?;
        }
        *self.sc_link.lock().unwrap_or_else(|e| e.into_inner()) = tc;
        let Self { maps, st, sc_link } = self;
        Ok(a.map(|link| Classifier { maps, st: state::Attached { prog: st.prog, link }, sc_link }))
    }

    /// The interface's facts `action = "syncookie"` answers with, into `sc_config`.
    fn prepare_sc_config(&self, iface: &Iface) -> Result<(), BpfError> {
        // The SYN-ACK's MSS follows the MTU; SYNs not sent to the interface's MAC are not
        // answered (bpf/classifier.bpf.c, sc_bogus).
        let mut c = self.maps.sc_config.get(0)?.unwrap_or_else(Zeroable::zeroed);
        if let Ok(mtu) = crate::sys::if_mtu(iface.name()) {
            super::syncookie::set_mtu(&mut c, mtu);
        }
        if let Ok(mac) = crate::sys::if_hwaddr(iface.name()) {
            c.mac = mac;
        }
        // Nor SYNs to a subnet broadcast address (read again at each reload).
        super::syncookie::set_broadcasts(&mut c, iface.ifindex())?;
        self.maps.sc_config.set(0, &c)
    }

    /// Installs `c` into the inactive set and flips to it ([`Classifier::swap_in`] in its
    /// workings). Redirect interfaces are resolved here, in the calling thread's namespace.
    ///
    /// # Errors
    ///
    /// [`BpfError::BadValue`] for a set larger than the maps; [`BpfError::Sys`] for a redirect
    /// interface that does not exist (`if_nametoindex`); [`BpfError::Map`] / [`BpfError::Sys`]
    /// for a map update the kernel refuses (needs root or CAP_BPF; batch ops need Linux >= 5.6).
    pub fn swap_in(&self, c: &Compiled) -> Result<SetIndex, BpfError> {
        self.swap(c, None)
    }

    /// Runs the program once over `frame` with BPF_PROG_TEST_RUN (no interface needed);
    /// returns the XDP action. For tests and `fastpath filter check --frame`.
    ///
    /// # Errors
    ///
    /// The failed call ([`SysError`]; EPERM without root or CAP_BPF).
    pub fn test_run(&self, frame: &[u8]) -> Result<u32, SysError> {
        test_run(&self.st.prog, frame)
    }

    /// As [`Classifier::test_run`], also returning the frame as the program left it (the
    /// SYN-ACK of `action = "syncookie"`). Socket lookups run in the calling thread's network
    /// namespace.
    ///
    /// # Errors
    ///
    /// As [`Classifier::test_run`].
    pub fn test_run_out(&self, frame: &[u8]) -> Result<(u32, Vec<u8>), SysError> {
        test_run_out(&self.st.prog, frame)
    }
}

/// Reads the namespace's IPv4 broadcast addresses into `sc_config` again (the calling thread's
/// namespace, interface `ifindex`'s first), writing the map only if they changed: a reload
/// sees addresses added or removed since the attach.
fn refresh_sc_broadcasts(sc_config: &Array<fp_sc_config>, ifindex: u32) -> Result<(), BpfError> {
    let mut c = sc_config.get(0)?.unwrap_or_else(Zeroable::zeroed);
    if super::syncookie::set_broadcasts(&mut c, ifindex)? {
        sc_config.set(0, &c)?;
    }
    Ok(())
}

/// As [`test_run`], also returning the frame as the program left it (a SYN-ACK after
/// `action = "syncookie"`'s XDP_TX, say).
fn test_run_out(prog: &OwnedFd, frame: &[u8]) -> Result<(u32, Vec<u8>), SysError> {
    crate::sys::bpf::prog_test_run_out(prog.as_fd(), frame, || {
        format!("bpf_prog_test_run(classifier, len={}, data_out)", frame.len())
    })
}

fn test_run(prog: &OwnedFd, frame: &[u8]) -> Result<u32, SysError> {
    crate::sys::bpf::prog_test_run(prog.as_fd(), frame, 1, 0, 0, || {
        format!("bpf_prog_test_run(classifier, len={})", frame.len())
    })
}

impl AttachedClassifier {
    /// The attachment.
    pub fn link(&self) -> &XdpLink {
        &self.st.link
    }

    /// As the loaded classifier's [`Classifier::swap_in`], on the attached program. A set with
    /// an `action = "syncookie"` rule attaches the tc ingress program before the flip (if it is
    /// not attached yet); a set without one detaches it after the flip.
    ///
    /// # Errors
    ///
    /// As [`Classifier::swap_in`]; what [`super::syncookie`] refuses (tcp_syncookies 0, a
    /// kernel without bpf_sk_assign_tcp_reqsk): the set in force stays as it was.
    pub fn swap_in(&self, c: &Compiled) -> Result<SetIndex, BpfError> {
        self.swap(c, Some(self.st.link.ifindex()))
    }

    /// True while the tc ingress program of `action = "syncookie"` is attached.
    pub fn syncookie_tc_attached(&self) -> bool {
        self.sc_link.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }

    /// As the loaded classifier's [`Classifier::test_run`].
    ///
    /// # Errors
    ///
    /// As [`Classifier::test_run`].
    pub fn test_run(&self, frame: &[u8]) -> Result<u32, SysError> {
        test_run(&self.st.prog, frame)
    }

    /// Pins the maps, the link and `rules` (source, rule names and texts of the set in force)
    /// under `dir` (bpffs) so the classifier outlives this process; [`Classifier::open_pinned`]
    /// gives them back. `dir` must be a directory right under [`PIN_ROOT`] ([`pin_dir`]): the
    /// root is created mode 0700 and both are checked ([`check_trusted_dir`]) before anything
    /// is pinned. Needs root (or CAP_BPF and write access to bpffs).
    ///
    /// # Errors
    ///
    /// [`BpfError::UntrustedPinDir`], [`BpfError::Map`] (a pin already there, bpffs not
    /// mounted), [`BpfError::Sys`].
    pub fn pin(&mut self, dir: &Path, rules: &PinRules) -> Result<(), BpfError> {
        let root = dir.parent().unwrap_or(Path::new(PIN_ROOT));
        make_trusted_dir(root)?;
        make_trusted_dir(dir)?;
        self.maps.pin(dir)?;
        PinMeta::new(Some(self.st.link.ifindex()), rules).pin(dir)?;
        if let Some(l) = self.sc_link.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            crate::sys::bpf::obj_pin(l.as_fd(), &dir.join(SC_LINK_PIN), SC_LINK_PIN)?;
        }
        // The program itself: an adoption takes it back as the old program (BPF_F_REPLACE and
        // a put-back need its fd; BPF_PROG_GET_FD_BY_ID would need CAP_SYS_ADMIN).
        crate::sys::bpf::obj_pin(self.st.prog.as_fd(), &dir.join(PROG_PIN), PROG_PIN)?;
        crate::sys::bpf::obj_pin(self.st.link.fd().as_fd(), &dir.join("link"), "link")?;
        Ok(())
    }
}

impl<S: state::State> Classifier<S> {
    /// The id of the CPUMAP that `cpu` rules fill, for
    /// [`crate::bpf::MonitorFilter::cpumap_id`] (its tracepoint counters).
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`].
    pub fn cpu_map_id(&self) -> Result<u32, BpfError> {
        self.maps.cpu_map.id()
    }

    /// The rule set in use.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`].
    pub fn active(&self) -> Result<SetIndex, BpfError> {
        Ok(SetIndex::of(self.maps.cls_active.get(0)?.unwrap_or(0)))
    }

    /// Per-set totals, summed over CPUs.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`].
    pub fn totals(&self, set: SetIndex) -> Result<ClsTotals, BpfError> {
        let mut counters = Vec::new();
        for (i, name) in STAT_NAMES.iter().enumerate() {
            let (p, b) = sum_percpu(&self.maps.cls_stats, set.at(STAT_COUNT as usize, i))?;
            counters.push((*name, p, b));
        }
        Ok(ClsTotals { counters })
    }

    /// (packets, bytes) of rules `0..n` of `set` (`n` at most [`MAX_RULES`]), summed over CPUs.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`].
    pub fn rule_counters(&self, set: SetIndex, n: usize) -> Result<Vec<(u64, u64)>, BpfError> {
        (0..n.min(MAX_RULES)).map(|i| sum_percpu(&self.maps.cls_rule_stats, set.at(MAX_RULES, i))).collect()
    }

    /// The default action of `set` and the action of its frames that cannot be classified
    /// (`malformed`), by keyword ("pass", "drop", "xsk", "tx"), from the set's config.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`].
    pub fn set_actions(&self, set: SetIndex) -> Result<(&'static str, &'static str), BpfError> {
        let c = self.config(set)?;
        let name = |code: u32| match code {
            abi::FP_ACT_SYNCOOKIE => "syncookie",
            c if c < abi::FP_ACT_COUNT => STAT_NAMES[c as usize],
            _ => "unknown",
        };
        let dflt = name(u32::from(c.dflt.code));
        let malformed = if c.malformed == abi::FP_MALFORMED_DEFAULT { dflt } else { name(c.malformed) };
        Ok((dflt, malformed))
    }

    /// Number of rules in `set` (from its config).
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`].
    pub fn rule_count(&self, set: SetIndex) -> Result<usize, BpfError> {
        Ok(self.config(set)?.n_rules as usize)
    }

    /// Puts the AF_XDP socket `xsk_fd` into the program's XSKMAP slot `queue_id` (for rules
    /// with `action = "xsk"`).
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] (a queue beyond the map, a socket not bound).
    pub fn insert_xsk(&self, queue_id: u32, xsk_fd: std::os::fd::RawFd) -> Result<(), BpfError> {
        self.maps.xsks.set(queue_id, &(xsk_fd as u32))
    }

    /// A new descriptor of the XSKMAP (`xsks`, keyed by queue id) that rules with
    /// `action = "xsk"` redirect into: what `fastpath filter load --xsk-handoff` serves
    /// ([`crate::uds`]).
    ///
    /// # Errors
    ///
    /// [`BpfError::Sys`] if the descriptor cannot be duplicated (EMFILE).
    pub fn xsk_map_fd(&self) -> Result<OwnedFd, BpfError> {
        self.maps.xsks.handle().as_fd().try_clone_to_owned().map_err(|e| {
            BpfError::Sys(SysError {
                call: "fcntl(xsks, F_DUPFD_CLOEXEC)".into(),
                errno: e.raw_os_error().unwrap_or(0),
            })
        })
    }

    /// The SipHash key of `action = "syncookie"`'s cookies (`sc_config`), for tests and tools
    /// that craft or check cookies ([`super::syncookie::cookie`]).
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`].
    pub fn syncookie_key(&self) -> Result<super::syncookie::CookieKey, BpfError> {
        let c = self.maps.sc_config.get(0)?.unwrap_or_else(Zeroable::zeroed);
        Ok(super::syncookie::CookieKey { k0: c.k0, k1: c.k1 })
    }

    /// The `sc_config` in force: MSS advertised over IPv4 and IPv6, window scale.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`].
    pub fn syncookie_config(&self) -> Result<(u16, u16, u8), BpfError> {
        let c = self.maps.sc_config.get(0)?.unwrap_or_else(Zeroable::zeroed);
        Ok((c.mss_v4, c.mss_v6, c.wscale))
    }

    /// Whether the set in force has an `action = "syncookie"` rule.
    fn active_uses_syncookie(&self) -> Result<bool, BpfError> {
        let set = self.active()?;
        let n = self.rule_count(set)?.min(MAX_RULES);
        if n == 0 {
            return Ok(false);
        }
        let acts = (0..n as u32)
            .map(|i| self.maps.cls_actions.get(set.at(MAX_RULES, i as usize)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(acts.iter().flatten().any(|a| u32::from(a.code) == abi::FP_ACT_SYNCOOKIE))
    }

    /// Rule set `set`'s config; all-zero (the map's initial value) if absent.
    fn config(&self, set: SetIndex) -> Result<fp_cls_config, BpfError> {
        Ok(self.maps.cls_config.get(set.index())?.unwrap_or_else(Zeroable::zeroed))
    }

    /// Installs `c` into the inactive set and flips to it. Returns the new set. On an error
    /// before the flip the set in use is untouched.
    ///
    /// The old set is not cleared here: a packet that read the old index just before the flip
    /// may still be walking it, and there is no RCU grace period to wait for from user space.
    /// It is cleared by the next install into it (at the next reload), long after; its
    /// counters stay readable until then.
    ///
    /// `ifindex`: the interface the classifier is attached to (None: not attached). There, a
    /// set with a syncookie rule gets the tc program attached before the flip (an error clears
    /// the staged set and leaves everything as it was), and a set without one detaches it after.
    fn swap(&self, c: &Compiled, ifindex: Option<u32>) -> Result<SetIndex, BpfError> {
        let new = self.stage(c)?;
        if let (Some(ifx), true) = (ifindex, c.uses_syncookie()) {
            if let Err(e) = refresh_sc_broadcasts(&self.maps.sc_config, ifx) {
                let _ = self.clear(new);
                return Err(e);
            }
        }
        let mut sc = self.sc_link.lock().unwrap_or_else(|e| e.into_inner());
        let mut attached_now = false;
        if let (Some(ifx), true, true) = (ifindex, c.uses_syncookie(), sc.is_none()) {
            match super::syncookie::attach_tc(self.maps.tc(), ifx) {
                Ok(l) => {
                    *sc = Some(l);
                    attached_now = true;
                }
                Err(e) => {
                    let _ = self.clear(new);
                    return Err(e);
                }
            }
        }
        if let Err(e) = self.maps.cls_active.set(0, &new.index()) {
            if attached_now {
                *sc = None;
            }
            let _ = self.clear(new);
            return Err(e);
        }
        if !c.uses_syncookie() {
            *sc = None;
        }
        Ok(new)
    }

    /// Writes `c` (checked by [`check_fits`]) into the inactive set without flipping to it;
    /// on error the half-written set is cleared. Returns that set.
    fn stage(&self, c: &Compiled) -> Result<SetIndex, BpfError> {
        let table = check_fits(c)?;
        let new = self.active()?.other();
        if let Err(e) = self.install(new, c, table) {
            let _ = self.clear(new);
            return Err(e);
        }
        Ok(new)
    }

    /// Writes `c` (checked by [`check_fits`], which rebuilt its `table`) as rule set `set` (not
    /// yet in use).
    fn install(&self, set: SetIndex, c: &Compiled, table: Table) -> Result<(), BpfError> {
        // Whatever an earlier, interrupted install left in this set goes first: stale keys
        // would otherwise match under the new tuple table.
        self.clear(set)?;
        let m = &self.maps;
        let acts: Vec<fp_cls_action> = c.actions.iter().map(cls_action).collect();
        m.cls_actions.set_many(set.at(MAX_RULES, 0), &acts)?;
        // Full aggregate buckets for the rules that have one (last_ns 0 = never used).
        for (i, a) in c.actions.iter().enumerate() {
            if a.rate_total_pps != 0 {
                m.cls_rate_total.set(set.at(MAX_RULES, i), &fp_rate_total::zeroed())?;
            }
        }
        m.cls_port_class.set_many(set.at(PORT_CLASSES, 0), &c.sport.table())?;
        m.cls_port_class.set_many(set.at(PORT_CLASSES, PORT_CLASSES / 2), &c.dport.table())?;
        m.cls_len_class.set_many(set.at(LEN_CLASSES, 0), &c.len.table())?;
        self.install_targets(set, c)?;
        // The open-addressing table: every slot of the set (empty ones zeroed); the hash takes
        // the entries of the tuples not in it.
        m.cls_table.set_many(set.at(TABLE_SLOTS, 0), &cls_slots(set, &table.into_slots()))?;
        let in_hash = |k: &Key| !c.in_table.get(k.tuple as usize).copied().unwrap_or(false);
        let hashed: Vec<&(Key, u32)> = c.entries.iter().filter(|(k, _)| in_hash(k)).collect();
        let keys: Vec<fp_cls_key> = hashed.iter().map(|(k, _)| cls_key(set, k)).collect();
        let vals: Vec<u32> = hashed.iter().map(|(_, r)| *r).collect();
        m.cls_rules.set_many(&keys, &vals)?;
        // Prefilter bitmaps of the tuples in use (the others are never read).
        m.cls_prefilter.set_many(set.at(PREFILTER_WORDS, 0), &c.prefilter_words)?;
        for (i, (t, best)) in c.tuples.iter().zip(&c.tuple_best).enumerate() {
            let v = fp_cls_tuple {
                fields: t.fields,
                best_rule: *best,
                flags_mask: t.flags_mask,
                prefilter: c.prefilter[i],
                in_table: u8::from(c.in_table[i]),
                src_mask: mask16(t.src_plen),
                dst_mask: mask16(t.dst_plen),
                ..Zeroable::zeroed()
            };
            m.cls_tuples.set(set.at(MAX_TUPLES, i), &v)?;
        }
        // Zero the new set's counters (batched), then its config last.
        m.cls_rule_stats.zero(set.at(MAX_RULES, 0), c.actions.len() as u32)?;
        m.cls_stats.zero(set.at(STAT_COUNT as usize, 0), STAT_COUNT)?;
        // A generation no flow-cache entry carries yet: one above both sets' (never 0).
        let gen_of = |s: SetIndex| self.config(s).map(|c| c.gen_).unwrap_or(0);
        let cfg = fp_cls_config {
            n_tuples: c.tuples.len() as u32,
            n_rules: c.actions.len() as u32,
            uses: c.tuples.iter().fold(0, |a, t| a | t.fields),
            gen_: gen_of(SetIndex::Zero).max(gen_of(SetIndex::One)).wrapping_add(1).max(1),
            dflt: cls_action(&c.default),
            malformed: u32::from(c.malformed),
            flags: if c.pass_bad_fragments { abi::FP_CLS_F_PASS_BAD_FRAG } else { 0 },
        };
        m.cls_config.set(set.index(), &cfg)
    }

    /// The CPU sets (and their CPUMAP entries) and redirect ports of `c`, as set `set`.
    fn install_targets(&self, set: SetIndex, c: &Compiled) -> Result<(), BpfError> {
        let m = &self.maps;
        for (i, cpus) in c.cpu_sets.iter().enumerate() {
            let mut v = fp_cpu_set { n: cpus.len() as u32, ..Zeroable::zeroed() };
            for (slot, &cpu) in v.cpus.iter_mut().zip(cpus) {
                *slot = cpu;
                // A CPUMAP entry per CPU used: 2048-frame queue to that CPU's kthread, no program.
                m.cpu_map.set(cpu, &bpf_cpumap_val { qsize: 2048, ..Zeroable::zeroed() })?;
            }
            m.cls_cpu_sets.set(set.at(MAX_CPU_SETS, i), &v)?;
        }
        for (i, iface) in c.redirect_ifaces.iter().enumerate() {
            let val = bpf_devmap_val { ifindex: crate::sys::if_nametoindex(iface)?, ..Zeroable::zeroed() };
            m.tx_ports.set(set.at(MAX_REDIRECT_PORTS, i), &val)?;
        }
        Ok(())
    }

    /// Removes rule set `set`'s hash entries (after it stopped being active): keys read with
    /// BPF_MAP_LOOKUP_BATCH and deleted with BPF_MAP_DELETE_BATCH (kernel >= 5.6), 8,192 per
    /// system call; then zeroes its config, keeping the generation.
    fn clear(&self, set: SetIndex) -> Result<(), BpfError> {
        let stale: Vec<fp_cls_key> =
            self.maps.cls_rules.keys()?.into_iter().filter(|k| u32::from(k.set) == set.index()).collect();
        self.maps.cls_rules.delete_many(&stale)?;
        // Keep the generation so the next install goes above it; zero the rest.
        let empty = fp_cls_config { gen_: self.config(set)?.gen_, ..Zeroable::zeroed() };
        self.maps.cls_config.set(set.index(), &empty)
    }
}

fn sum_percpu(map: &PerCpuArray<fp_pkt_stats>, key: u32) -> Result<(u64, u64), BpfError> {
    Ok(map.get(key)?.iter().fold((0, 0), |(p, b), c| (p + c.packets, b + c.bytes)))
}

impl PinnedClassifier {
    /// Opens a classifier pinned by [`Classifier::pin`] under `dir`, with its rule names. Needs
    /// root (or CAP_BPF and read access to the pins).
    ///
    /// # Errors
    ///
    /// [`BpfError::UntrustedPinDir`] (a directory or entry a non-root user could have
    /// planted), [`BpfError::OtherVersion`] (a map missing or of another shape), [`BpfError::Map`].
    pub fn open_pinned(dir: &Path) -> Result<Self, BpfError> {
        if let Some(root) = dir.parent() {
            check_trusted_dir(root)?;
        }
        check_trusted_dir(dir)?;
        for name in ClsMaps::NAMES.iter().copied().chain(["link", NAMES_PIN]) {
            check_entry(&dir.join(name))?;
        }
        let maps =
            ClsMaps::open_pinned(dir).map_err(|map| BpfError::OtherVersion { dir: dir.display().to_string(), map })?;
        let meta = PinMeta::open_pinned(dir)?;
        let link = crate::sys::bpf::obj_get(&dir.join("link")).ok();
        check_entry(&dir.join(SC_LINK_PIN))?;
        Ok(Self { maps, st: state::Pinned { link, dir: dir.to_path_buf(), meta }, sc_link: Default::default() })
    }

    /// True if the maps pinned under this classifier's directory are no longer the ones held
    /// here: another process adopted the classifier with maps of its own
    /// ([`Classifier::upgrade_pinned`]), or unloaded and loaded it again. The kernel ids of
    /// `cls_active`'s pin and of the map held are compared; false if nothing (or a symlink) is
    /// pinned there. Reload and read counters through [`PinnedClassifier::open_pinned`] again
    /// then, under the reload lock: the maps held are no longer the program's.
    pub fn pins_replaced(&self) -> bool {
        let p = self.st.dir.join("cls_active");
        if !matches!(check_entry(&p), Ok(Some(_))) {
            return false;
        }
        let pinned = MapHandle::from_pinned_path(&p).ok().and_then(|h| h.info().ok()).map(|i| i.info.id);
        match (pinned, self.maps.cls_active.id().ok()) {
            (Some(p), Some(h)) => p != h,
            _ => false,
        }
    }

    /// The pin directory this classifier was opened from.
    pub fn dir(&self) -> &Path {
        &self.st.dir
    }

    /// The interface index at load (or last reload) time and the source, rule names and rule
    /// texts of the set in force, as kept with the pins.
    pub fn meta(&self) -> &PinMeta {
        &self.st.meta
    }

    /// Installs `c` into the inactive set, flips to it (as [`Classifier::swap_in`]) and keeps
    /// `rules` (its source, rule names and texts) with the pins, replacing the previous ones. Returns the new set.
    /// The caller serializes reloads of one classifier (two would install into the same set).
    ///
    /// # Errors
    ///
    /// As [`Classifier::swap_in`]; [`BpfError::Map`] / [`BpfError::Sys`] if the names cannot
    /// be pinned. On any error the set in force and its names stay as they were: the new set
    /// is written and its names pinned before the flip, and a failed step clears the new set.
    ///
    /// A set with an `action = "syncookie"` rule gets the tc ingress program attached and
    /// pinned (`sc_link`) before the flip if it is not there; a set without one detaches and
    /// unpins it after the flip.
    pub fn reload(&mut self, c: &Compiled, rules: &PinRules) -> Result<SetIndex, BpfError> {
        let new = self.stage(c)?;
        let ifindex = self.pinned_link_info().and_then(|r| r.ok()).map(|i| i.ifindex).or(self.st.meta.ifindex);
        let sc_pin = self.st.dir.join(SC_LINK_PIN);
        let had_sc = check_entry(&sc_pin)?.is_some();
        if let (Some(ifx), true) = (ifindex, c.uses_syncookie()) {
            if let Err(e) = refresh_sc_broadcasts(&self.maps.sc_config, ifx) {
                let _ = self.clear(new);
                return Err(e);
            }
        }
        let mut pinned_now = false;
        if c.uses_syncookie() && !had_sc {
            let r = match ifindex {
                Some(ifx) if ifx != 0 => super::syncookie::attach_tc(self.maps.tc(), ifx)
                    .and_then(|l| crate::sys::bpf::obj_pin(l.as_fd(), &sc_pin, SC_LINK_PIN).map_err(BpfError::from)),
                _ => Err(BpfError::BadValue {
                    what: "pinned classifier",
                    value: "without an interface".into(),
                    accepted: "a classifier still attached (action \"syncookie\" attaches its tc program there)".into(),
                }),
            };
            if let Err(e) = r {
                let _ = self.clear(new);
                return Err(e);
            }
            pinned_now = true;
        }
        let meta = PinMeta::new(ifindex, rules);
        if let Err(e) = meta.pin(&self.st.dir) {
            let _ = self.clear(new);
            if pinned_now {
                unpin_sc_link(&self.st.dir);
            }
            return Err(e);
        }
        self.st.meta = meta;
        if let Err(e) = self.maps.cls_active.set(0, &new.index()) {
            // The old set stays in force: the tc program pinned for the new one goes again.
            let _ = self.clear(new);
            if pinned_now {
                unpin_sc_link(&self.st.dir);
            }
            return Err(e);
        }
        if !c.uses_syncookie() && had_sc {
            unpin_sc_link(&self.st.dir);
        }
        Ok(new)
    }

    /// The pinned link as the kernel sees it; `None` if its pin could not be opened.
    pub fn pinned_link_info(&self) -> Option<Result<super::LinkInfo, SysError>> {
        self.st.link.as_ref().map(|fd| super::link_info(fd.as_fd()))
    }

    /// Checks that the classifier still runs on `iface`: its link is attached (the kernel
    /// reports a non-zero ifindex), to the interface that now has that name, and the program
    /// the kernel reports there is the link's. The interface's index at load time (kept with
    /// the pins) is used for the message.
    ///
    /// # Errors
    ///
    /// [`BpfError::Stale`] saying what happened; [`BpfError::Sys`] if the link cannot be read.
    pub fn check_still_attached(&self, iface: &str) -> Result<(), BpfError> {
        let was_ifindex = self.st.meta.ifindex;
        let stale = |what: String| BpfError::Stale { iface: iface.to_string(), what };
        let now = crate::sys::if_nametoindex(iface).ok();
        let info = match self.pinned_link_info() {
            None => return Err(stale("its link pin cannot be opened".into())),
            Some(i) => i?,
        };
        if !info.is_xdp {
            return Err(stale(format!("the pinned link id {} is not an XDP link", info.id)));
        }
        let on_now = now.and_then(|i| super::query_xdp(i).ok().flatten());
        let other = |p: Option<super::AttachedProg>| match p {
            Some(p) if p.id != info.prog_id => format!("; XDP program id {} (not ours) runs there now", p.id),
            _ => String::new(),
        };
        if info.ifindex == 0 {
            let what = match (now, was_ifindex) {
                (None, _) => "the interface was deleted".to_string(),
                (Some(n), Some(w)) if n != w => {
                    format!("the interface was deleted (ifindex {w}) and recreated (ifindex {n}){}", other(on_now))
                }
                _ => format!("its link was detached (replaced by another XDP program?){}", other(on_now)),
            };
            return Err(stale(what));
        }
        let Some(now) = now else {
            return Err(stale(format!("it is attached to ifindex {} but no interface is named {iface}", info.ifindex)));
        };
        if info.ifindex != now {
            return Err(stale(format!(
                "it is attached to ifindex {} but {iface} is now ifindex {now} (deleted and recreated)",
                info.ifindex
            )));
        }
        match on_now {
            Some(p) if p.id == info.prog_id => Ok(()),
            Some(p) => Err(stale(format!("XDP program id {} (not ours, id {}) runs on it now", p.id, info.prog_id))),
            None => Err(stale("the kernel reports no XDP program on it".into())),
        }
    }

    /// Detaches the pinned link now (BPF_LINK_DETACH; Linux >= 5.9); the pins stay.
    ///
    /// # Errors
    ///
    /// The failed call ([`SysError`]); an already detached link is no error.
    pub fn detach_pinned(&self) -> Result<(), SysError> {
        if let Some(fd) = &self.st.link {
            match crate::sys::bpf::link_detach(fd.as_fd(), "pinned classifier link") {
                Err(e) if e.errno != libc::ENOLINK => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }
}

/// The pin-directory functions, which need no classifier object.
impl Classifier {
    /// True if a classifier is pinned under `dir` (its `link` pin exists).
    ///
    /// # Errors
    ///
    /// [`BpfError::UntrustedPinDir`]: an untrusted [`PIN_ROOT`] or `dir`, or a `link` entry
    /// that is a symlink.
    pub fn is_pinned(dir: &Path) -> Result<bool, BpfError> {
        let root = dir.parent().unwrap_or(Path::new(PIN_ROOT));
        if std::fs::symlink_metadata(root).is_err() {
            return Ok(false);
        }
        check_trusted_dir(root)?;
        if std::fs::symlink_metadata(dir).is_err() {
            return Ok(false);
        }
        check_trusted_dir(dir)?;
        Ok(check_entry(&dir.join("link"))?.is_some())
    }

    /// The interface index the link pinned under `dir` is attached to as the kernel reports it:
    /// 0 once detached (its interface was deleted, or BPF_LINK_DETACH); `None` if no link is
    /// pinned there. Needs root.
    ///
    /// # Errors
    ///
    /// [`BpfError::UntrustedPinDir`]; [`BpfError::Sys`] if the pin cannot be opened or read.
    pub fn pinned_link_ifindex(dir: &Path) -> Result<Option<u32>, BpfError> {
        if let Some(root) = dir.parent() {
            check_trusted_dir(root)?;
        }
        check_trusted_dir(dir)?;
        let p = dir.join("link");
        if check_entry(&p)?.is_none() {
            return Ok(None);
        }
        let fd = crate::sys::bpf::obj_get(&p)?;
        Ok(Some(super::link_info(fd.as_fd())?.ifindex))
    }

    /// Removes the pins under `dir` (maps, link, rule names). With the link's pin gone and no
    /// process holding its fd, the kernel detaches the program. Touches nothing unless `dir`
    /// and its parent pass [`check_trusted_dir`].
    ///
    /// # Errors
    ///
    /// The failed `unlink` ([`SysError`]).
    pub fn unpin(dir: &Path) -> Result<(), SysError> {
        // Only inside trusted directories (a symlinked root would lead elsewhere); an entry
        // that is a symlink is removed itself (unlink), never followed.
        if dir.parent().is_some_and(|r| check_trusted_dir(r).is_err()) || check_trusted_dir(dir).is_err() {
            return Ok(());
        }
        unpin_sc_link(dir);
        for name in ClsMaps::NAMES.iter().copied().chain(["link", NAMES_PIN, NAMES_PIN_NEW, PROG_PIN, PROG_PIN_NEW]) {
            let p = dir.join(name);
            if std::fs::symlink_metadata(&p).is_ok() {
                std::fs::remove_file(&p).map_err(|e| SysError {
                    call: format!("unlink({})", p.display()),
                    errno: e.raw_os_error().unwrap_or(0),
                })?;
            }
        }
        let _ = std::fs::remove_dir(dir);
        Ok(())
    }

    /// Detaches the classifier pinned under `dir` (BPF_LINK_DETACH; Linux >= 5.9) and removes
    /// every pin there, without needing the maps to open (a pin directory from another build
    /// still unloads). Needs root.
    ///
    /// # Errors
    ///
    /// [`BpfError::UntrustedPinDir`]; [`BpfError::Sys`] if the detach fails.
    pub fn unload_pinned(dir: &Path) -> Result<(), BpfError> {
        if let Some(root) = dir.parent() {
            check_trusted_dir(root)?;
        }
        check_trusted_dir(dir)?;
        // A symlink is never followed: only a real pin is opened (bpf_obj_get follows links).
        let fd = if check_entry(&dir.join("link"))?.is_some() {
            crate::sys::bpf::obj_get(&dir.join("link")).ok()
        } else {
            None
        };
        if let Some(fd) = fd {
            match crate::sys::bpf::link_detach(fd.as_fd(), &dir.join("link").display().to_string()) {
                Err(e) if e.errno != libc::ENOLINK => return Err(e.into()),
                _ => {}
            }
        }
        unpin_sc_link(dir);
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                let _ = std::fs::remove_file(e.path());
            }
        }
        let _ = std::fs::remove_dir(dir);
        Classifier::remove_staging_of(dir)?;
        Ok(())
    }

    /// Removes the staging directory of the pin directory `dir` ([`staging_dir`]) an upgrade
    /// that died left (its tc link detached, its pins removed); false if there is none. Needs
    /// root.
    ///
    /// # Errors
    ///
    /// [`BpfError::UntrustedPinDir`] if it is not a root-owned directory; [`BpfError::Sys`] for
    /// a pin that cannot be removed.
    pub fn remove_staging_of(dir: &Path) -> Result<bool, BpfError> {
        let staging = staging_dir(dir);
        if std::fs::symlink_metadata(&staging).is_err() {
            return Ok(false);
        }
        check_trusted_dir(&staging)?;
        remove_staging(&staging)?;
        Ok(true)
    }
}

/// What [`Classifier::upgrade_pinned`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Upgrade {
    /// The program the pinned link ran before (kernel program id).
    pub old_prog_id: u32,
    /// The program it runs now.
    pub new_prog_id: u32,
    /// True if the new program runs on the pinned maps (counters and the SYN-cookie key carried
    /// over); false if it got maps of its own (the pinned ones were of another layout, or
    /// fresh maps were asked for), pinned in place of the old ones, counters from zero.
    pub maps_kept: bool,
    /// The rule set in force now.
    pub set: SetIndex,
    /// The attach mode the link keeps ("native", "skb", ...).
    pub mode: &'static str,
}

/// Pins `prog` as the program of the classifier pinned under `dir`, replacing the pin there
/// (pinned under a new name, then renamed over).
fn repin_prog(dir: &Path, prog: &OwnedFd) -> Result<(), BpfError> {
    let new = dir.join(PROG_PIN_NEW);
    if std::fs::symlink_metadata(&new).is_ok() {
        let _ = std::fs::remove_file(&new);
    }
    crate::sys::bpf::obj_pin(prog.as_fd(), &new, PROG_PIN_NEW)?;
    std::fs::rename(&new, dir.join(PROG_PIN)).map_err(|e| {
        let _ = std::fs::remove_file(&new);
        BpfError::from(SysError {
            call: format!("rename({}, {PROG_PIN})", new.display()),
            errno: e.raw_os_error().unwrap_or(0),
        })
    })
}

/// What ends the name of an upgrade's staging directory. A ':' is in no interface name (Linux
/// `dev_valid_name` refuses '/', ':' and whitespace), so `<netns>-<iface>:new` is never the pin
/// directory of an interface; bpffs accepts it (it refuses only a dot).
pub const STAGING_SUFFIX: &str = ":new";

/// The staging directory of an upgrade's new pins beside the pin directory `dir`
/// (`<dir>:new`): no interface's pin directory ([`STAGING_SUFFIX`]).
pub fn staging_dir(dir: &Path) -> PathBuf {
    let mut name = dir.file_name().map(|s| s.to_os_string()).unwrap_or_default();
    name.push(STAGING_SUFFIX);
    dir.with_file_name(name)
}

/// True if `name` (a directory name under [`PIN_ROOT`]) is an upgrade's staging directory, not
/// an interface's pin directory.
pub fn is_staging_name(name: &str) -> bool {
    name.ends_with(STAGING_SUFFIX)
}

/// Removes the staging directory `staging` of an upgrade (its tc link detached, its pins
/// unlinked), refusing any directory whose name does not end in [`STAGING_SUFFIX`]: an
/// interface's pins are never removed as a staging directory.
fn remove_staging(staging: &Path) -> Result<(), BpfError> {
    let name = staging.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if !is_staging_name(&name) {
        return Err(BpfError::UntrustedPinDir {
            path: staging.display().to_string(),
            reason: format!("not a staging directory (its name does not end in {STAGING_SUFFIX:?})"),
        });
    }
    Classifier::unpin(staging)?;
    // Anything else left in it (a pin of another version) goes too: the directory is ours.
    if let Ok(entries) = std::fs::read_dir(staging) {
        for e in entries.flatten() {
            let _ = std::fs::remove_file(e.path());
        }
    }
    let _ = std::fs::remove_dir(staging);
    Ok(())
}

/// Moves the pins staged under `staging` in place of those under `dir` (rename, each atomic;
/// the program pin last, so a staging directory that still has it has not been moved whole).
fn move_staged(staging: &Path, dir: &Path) -> Result<(), BpfError> {
    for name in ClsMaps::NAMES.iter().copied().chain([NAMES_PIN, SC_LINK_PIN, PROG_PIN]) {
        let (from, to) = (staging.join(name), dir.join(name));
        if std::fs::symlink_metadata(&from).is_err() {
            continue;
        }
        std::fs::rename(&from, &to).map_err(|e| SysError {
            call: format!("rename({}, {})", from.display(), to.display()),
            errno: e.raw_os_error().unwrap_or(0),
        })?;
    }
    let _ = std::fs::remove_dir(staging);
    Ok(())
}

/// A staging directory left beside `dir` by an upgrade that did not finish (the process died):
/// if the link already runs the staged program (`link_prog_id`), the move of its pins is
/// finished (the pins then name the maps that program runs on); otherwise it is removed (the
/// old program still runs, on the pins under `dir`). Returns true if it was moved in.
fn settle_staging(dir: &Path, link_prog_id: u32) -> Result<bool, BpfError> {
    let staging = staging_dir(dir);
    if std::fs::symlink_metadata(&staging).is_err() {
        return Ok(false);
    }
    check_trusted_dir(&staging)?;
    let staged_prog = match check_entry(&staging.join(PROG_PIN))? {
        Some(_) => crate::sys::bpf::obj_get(&staging.join(PROG_PIN))
            .ok()
            .and_then(|fd| crate::sys::bpf::prog_info_id(fd.as_fd()).ok()),
        None => None,
    };
    if staged_prog == Some(link_prog_id) {
        if check_entry(&staging.join(SC_LINK_PIN))?.is_some() {
            unpin_sc_link(dir);
        }
        move_staged(&staging, dir)?;
        return Ok(true);
    }
    remove_staging(&staging)?;
    Ok(false)
}

impl Classifier {
    /// Adopts the classifier pinned under `dir` on `iface` (left by an earlier run, of this or an
    /// older fastpath) with this build's program and the rule set `c` (kept with the pins as
    /// `rules`),
    /// without a moment unfiltered: the pinned XDP link is kept and only its program replaced,
    /// atomically (BPF_LINK_UPDATE with BPF_F_REPLACE, Linux >= 5.9; net/core/dev.c
    /// `bpf_xdp_link_update`), so every frame meets either the old program or the new one.
    ///
    /// - Pinned maps of this build's layout (every map's type, key and value size and max
    ///   entries as the kernel reports them) are reused: the new program runs first on the rules
    ///   in force, then `c` is flipped in as [`PinnedClassifier::reload`] does; counters, the
    ///   SYN-cookie key and the tc program's link carry over (its program is replaced too).
    /// - Otherwise, or with `fresh_maps`, the new program gets maps of its own with `c` already
    ///   in force; its maps are pinned in a staging directory beside `dir` first
    ///   ([`staging_dir`], `<dir>:new`, a name no interface has), the link is updated, then the
    ///   pins are moved in place of the old ones (rename; the program pin last). Counters
    ///   restart; the SYN-cookie key is carried if the old `sc_config` map has this layout.
    /// - A staging directory left by an upgrade that died is settled first: moved in if the
    ///   link already runs its program, removed otherwise.
    ///
    /// The old program is taken from the `prog` pin when that is the link's program, else by id
    /// (CAP_SYS_ADMIN). Without either (pins of an older fastpath, a crash between the link
    /// update and the pin, a service without CAP_SYS_ADMIN) the link is updated without
    /// BPF_F_REPLACE, and on the pinned maps the rules are tried on the fresh maps first: the
    /// old program cannot be put back then. Needs CAP_BPF, CAP_NET_ADMIN (and CAP_PERFMON for
    /// the verifier), or root. The caller serializes this with reloads of the same classifier
    /// (their lock).
    ///
    /// # Errors
    ///
    /// [`BpfError::UntrustedPinDir`]; [`BpfError::Stale`] if the pinned link no longer runs on
    /// `iface` (nothing is changed then); what [`Classifier::load`], [`Classifier::swap_in`] and
    /// [`PinnedClassifier::reload`] return (on the pinned maps the old programs are put back
    /// under their links then: the rules and program in force stay); [`BpfError::Sys`] for a
    /// failed link update (the old program keeps running) or, after it, a pin that could not be
    /// moved (the new program runs; the error names the pin).
    pub fn upgrade_pinned(
        dir: &Path,
        iface: &Iface,
        c: &Compiled,
        rules: &PinRules,
        fresh_maps: bool,
    ) -> Result<Upgrade, BpfError> {
        if let Some(root) = dir.parent() {
            check_trusted_dir(root)?;
        }
        check_trusted_dir(dir)?;
        let stale = |what: String| BpfError::Stale { iface: iface.name().to_string(), what };
        let link_pin = dir.join("link");
        if check_entry(&link_pin)?.is_none() {
            return Err(stale(format!("nothing is pinned at {}", link_pin.display())));
        }
        let link = crate::sys::bpf::obj_get(&link_pin)?;
        let info = super::link_info(link.as_fd())?;
        let ifindex = iface.ifindex();
        if !info.is_xdp || info.ifindex != ifindex {
            return Err(stale(format!(
                "the pinned link id {} is not attached to it (ifindex {}, it has {ifindex})",
                info.id, info.ifindex
            )));
        }
        let on = super::query_xdp(ifindex)?;
        let Some(on) = on.filter(|p| p.id == info.prog_id) else {
            return Err(stale(format!("the kernel does not report the pinned link's program {} on it", info.prog_id)));
        };
        // An upgrade that died half-way left its staging directory: finished or removed first.
        settle_staging(dir, info.prog_id)?;
        // The old program: its pin (this version on), or by id (CAP_SYS_ADMIN), checked to be
        // the one the link runs. Neither (pins of an older fastpath, a crash between the link
        // update and the pin, no CAP_SYS_ADMIN): the link is updated without BPF_F_REPLACE (the
        // caller's lock keeps other adopters out), the rules checked before the switch.
        let prog_pin = dir.join(PROG_PIN);
        let pinned_prog = if check_entry(&prog_pin)?.is_some() {
            crate::sys::bpf::obj_get(&prog_pin)
                .ok()
                .filter(|fd| crate::sys::bpf::prog_info_id(fd.as_fd()).ok() == Some(info.prog_id))
        } else {
            None
        };
        let old_prog = match pinned_prog {
            Some(fd) => Some(fd),
            None => match crate::sys::bpf::prog_fd_by_id(info.prog_id) {
                Ok(fd) => Some(fd),
                Err(e) if e.errno == libc::EPERM || e.errno == libc::EACCES => None,
                Err(e) => return Err(e.into()),
            },
        };
        let fresh = LoadedClassifier::load()?;
        let pinned = if fresh_maps { None } else { ClsMaps::open_pinned(dir).ok() };
        let same = match &pinned {
            Some(p) => p.shapes()? == fresh.maps.shapes()?,
            None => false,
        };
        let update = |prog: std::os::fd::BorrowedFd<'_>| {
            let replace = old_prog.as_ref().map(|p| p.as_fd());
            crate::sys::bpf::link_update(link.as_fd(), prog, replace, || {
                let flag = if replace.is_some() { ", BPF_F_REPLACE" } else { "" };
                format!("bpf_link_update(pinned classifier link id {}{flag})", info.id)
            })
        };
        let sc_pin = dir.join(SC_LINK_PIN);
        let old_sc = if check_entry(&sc_pin)?.is_some() { crate::sys::bpf::obj_get(&sc_pin).ok() } else { None };
        let new_prog_id = |fd: &OwnedFd| crate::sys::bpf::prog_info_id(fd.as_fd());
        if let (true, Some(p)) = (same, pinned) {
            if old_prog.is_none() {
                // The old program cannot be put back if the rules are refused after the
                // switch: they are tried first on the fresh maps (of the same shapes).
                if c.uses_syncookie() {
                    super::syncookie::check_sysctl()?;
                }
                fresh.prepare_sc_config(iface)?;
                fresh.swap_in(c)?;
            }
            drop(fresh);
            let (new, ()) = LoadedClassifier::load_inner(None, Some(&p), |_| Ok(()))?;
            // The tc program of the SYN cookies first (it only acts on the XDP program's marks,
            // whose format both versions share on these maps), then the XDP program. The old
            // programs are held, to be put back if the rules are refused.
            let mut old_tc = None;
            if let Some(sc) = &old_sc {
                let tc = super::syncookie::load_tc(new.maps.tc())?;
                // Put back if the rules are refused, where its fd can be had (CAP_SYS_ADMIN).
                let was = crate::sys::bpf::prog_fd_by_id(super::link_info(sc.as_fd())?.prog_id).ok();
                crate::sys::bpf::link_update(sc.as_fd(), tc.as_fd(), None, || {
                    format!("bpf_link_update({})", sc_pin.display())
                })?;
                old_tc = was;
            }
            let put_back_tc = || {
                if let (Some(sc), Some(was)) = (&old_sc, &old_tc) {
                    let _ = crate::sys::bpf::link_update(sc.as_fd(), was.as_fd(), None, String::new);
                }
            };
            if let Err(e) = update(new.st.prog.as_fd()) {
                put_back_tc();
                return Err(e.into());
            }
            let new_id = new_prog_id(&new.st.prog)?;
            // Nothing half-done: rules the new program cannot take put the old program back.
            let set = match PinnedClassifier::open_pinned(dir).and_then(|mut pc| pc.reload(c, rules)) {
                Ok(s) => s,
                Err(e) => {
                    // (Without the old program's descriptor the new one stays, on the rules in
                    // force: the reload failed before its flip.)
                    if let Some(old) = &old_prog {
                        let back = Some(new.st.prog.as_fd());
                        let _ = crate::sys::bpf::link_update(link.as_fd(), old.as_fd(), back, String::new);
                    }
                    put_back_tc();
                    return Err(e);
                }
            };
            repin_prog(dir, &new.st.prog)?;
            return Ok(Upgrade {
                old_prog_id: info.prog_id,
                new_prog_id: new_id,
                maps_kept: true,
                set,
                mode: on.mode.name(),
            });
        }
        let mut new = fresh;
        new.prepare_sc_config(iface)?;
        {
            let mut cfg = new.maps.sc_config.get(0)?.unwrap_or_else(Zeroable::zeroed);
            if on.mode == super::AttachedMode::Skb {
                cfg.flags |= abi::FP_SC_F_NO_META as u8;
            }
            // The SYN-cookie key, where the old map can be read: handshakes under way complete.
            let old_cfg = MapHandle::from_pinned_path(dir.join("sc_config"))
                .ok()
                .and_then(|h| Array::<fp_sc_config>::new(h, "sc_config").ok())
                .and_then(|a| a.get(0).ok().flatten());
            if let Some(o) = old_cfg {
                (cfg.k0, cfg.k1) = (o.k0, o.k1);
            }
            new.maps.sc_config.set(0, &cfg)?;
        }
        let set = new.swap_in(c)?;
        let new_sc = if c.uses_syncookie() { Some(super::syncookie::attach_tc(new.maps.tc(), ifindex)?) } else { None };
        let staging = staging_dir(dir);
        if std::fs::symlink_metadata(&staging).is_ok() {
            remove_staging(&staging)?;
        }
        make_trusted_dir(&staging)?;
        let staged = (|| {
            new.maps.pin(&staging)?;
            PinMeta::new(Some(ifindex), rules).pin(&staging)?;
            crate::sys::bpf::obj_pin(new.st.prog.as_fd(), &staging.join(PROG_PIN), PROG_PIN)?;
            if let Some(l) = &new_sc {
                crate::sys::bpf::obj_pin(l.as_fd(), &staging.join(SC_LINK_PIN), SC_LINK_PIN)?;
            }
            Ok::<(), BpfError>(())
        })();
        if let Err(e) = staged.and_then(|_| update(new.st.prog.as_fd()).map_err(BpfError::from)) {
            let _ = remove_staging(&staging); // the old program still runs, on its pins
            return Err(e);
        }
        // The new program runs: the old tc link goes, the new pins take the old ones' names.
        if old_sc.is_some() {
            unpin_sc_link(dir);
        }
        let new_id = new_prog_id(&new.st.prog)?;
        move_staged(&staging, dir)?;
        Ok(Upgrade { old_prog_id: info.prog_id, new_prog_id: new_id, maps_kept: false, set, mode: on.mode.name() })
    }
}

/// The pin of the XDP program the link runs (kept by adoptions), and its staging name.
const PROG_PIN: &str = "prog";
const PROG_PIN_NEW: &str = "prog_new";

/// The pin of `action = "syncookie"`'s tc link, beside the classifier's.
const SC_LINK_PIN: &str = "sc_link";

/// Detaches the tc link pinned under `dir` (if any; never through a symlink) and removes its pin.
fn unpin_sc_link(dir: &Path) {
    let p = dir.join(SC_LINK_PIN);
    if matches!(check_entry(&p), Ok(Some(_))) {
        if let Ok(fd) = crate::sys::bpf::obj_get(&p) {
            let _ = crate::sys::bpf::link_detach(fd.as_fd(), SC_LINK_PIN);
        }
    }
    if std::fs::symlink_metadata(&p).is_ok() {
        let _ = std::fs::remove_file(&p);
    }
}

/// Where fastpath pins: a directory of its own on bpffs, made mode 0700 and owned by root.
/// bpffs itself is mounted mode 1777 (anyone may create entries), so every use checks it.
pub const PIN_ROOT: &str = "/sys/fs/bpf/fastpath";

/// Refuses `p` unless it is a real directory (not a symlink), owned by root (uid 0) and not
/// writable by group or others: anything else could have been planted by another user.
///
/// # Errors
///
/// [`BpfError::UntrustedPinDir`] naming `p` and the reason (cannot stat it, a symlink, not a
/// directory, not owned by root, writable by group or others).
pub fn check_trusted_dir(p: &Path) -> Result<(), BpfError> {
    use std::os::unix::fs::MetadataExt;
    let bad = |reason: String| BpfError::UntrustedPinDir { path: p.display().to_string(), reason };
    let m = std::fs::symlink_metadata(p).map_err(|e| bad(format!("cannot stat it: {e}")))?;
    if m.file_type().is_symlink() {
        return Err(bad("it is a symlink".into()));
    }
    if !m.is_dir() {
        return Err(bad("it is not a directory".into()));
    }
    if m.uid() != 0 {
        return Err(bad(format!("it is owned by uid {}, not root", m.uid())));
    }
    if m.mode() & 0o022 != 0 {
        return Err(bad(format!("it is group/world writable (mode {:o})", m.mode() & 0o7777)));
    }
    Ok(())
}

/// `None` if nothing is at `p`; the metadata of a real entry; an error for a symlink.
fn check_entry(p: &Path) -> Result<Option<std::fs::Metadata>, BpfError> {
    match std::fs::symlink_metadata(p) {
        Err(_) => Ok(None),
        Ok(m) if m.file_type().is_symlink() => Err(BpfError::UntrustedPinDir {
            path: p.display().to_string(),
            reason: "a pin directory entry is a symlink".into(),
        }),
        Ok(m) => Ok(Some(m)),
    }
}

/// Creates `p` mode 0700 if absent (never through a symlink), then checks it.
fn make_trusted_dir(p: &Path) -> Result<(), BpfError> {
    use std::os::unix::fs::DirBuilderExt;
    if std::fs::symlink_metadata(p).is_err() {
        if let Err(e) = std::fs::DirBuilder::new().mode(0o700).create(p) {
            if e.kind() != std::io::ErrorKind::AlreadyExists {
                return Err(SysError {
                    call: format!("mkdir({}, 0700)", p.display()),
                    errno: e.raw_os_error().unwrap_or(0),
                }
                .into());
            }
        }
    }
    check_trusted_dir(p)
}

/// The id of the program that the link pinned under `dir` ([`Classifier::pin`]) holds while it
/// is attached to an interface; `None` if nothing is pinned there, the pin cannot be opened, or
/// the link is detached. Needs root (or CAP_BPF and read access to the pins).
pub fn pinned_prog_id(dir: &Path) -> Option<u32> {
    let link = crate::sys::bpf::obj_get(&dir.join("link")).ok()?;
    let info = super::link_info(link.as_fd()).ok()?;
    (info.is_xdp && info.ifindex != 0).then_some(info.prog_id)
}

/// Where `fastpath filter load --detach` pins the classifier of `iface` in the calling thread's
/// network namespace: `/sys/fs/bpf/fastpath/<netns inode>-<iface>/`. `iface` must be a valid
/// interface name (no '/', not "." or ".."), which callers check first.
pub fn pin_dir(iface: &str) -> PathBuf {
    let ns = std::fs::read_link("/proc/thread-self/ns/net")
        .ok()
        .and_then(|p| p.to_string_lossy().trim_start_matches("net:[").trim_end_matches(']').parse::<u64>().ok())
        .unwrap_or(0);
    PathBuf::from(format!("{PIN_ROOT}/{ns}-{iface}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compiled(text: &str) -> Compiled {
        let set = crate::rules::parse_toml("t", text).unwrap();
        crate::rules::compile::compile("t", &set).unwrap()
    }

    /// The refusal of `c`, one line, containing `want`.
    fn refused(c: &Compiled, want: &str) {
        let e = check_fits(c).map(|_| ()).unwrap_err().to_string();
        assert!(!e.contains('\n') && e.contains(want), "{e}");
    }

    const TWO: &str = "[[rule]]\nproto=\"udp\"\ndst_port=9\naction=\"drop\"\n[[rule]]\nsrc=\"10.0.0.1/32\"\naction=\"tx\"\n[[rule]]\nsrc=\"10.0.0.2/32\"\naction=\"pass\"\n";

    /// A compiled set passes and the table to install is the one compile() built.
    #[test]
    fn check_table_accepts_compiled_sets() {
        for text in [TWO, "default=\"pass\"\n", "[[rule]]\naction=\"tx\"\n"] {
            let c = compiled(text);
            let t = check_fits(&c).unwrap_or_else(|e| panic!("{e}"));
            if c.table.is_empty() {
                assert!(t.is_empty());
            } else {
                assert!(t.into_slots() == c.table, "{text:?}");
            }
        }
    }

    /// A hand-made set the program would read wrong is refused, one line each: flags not one per
    /// tuple, an entry of a tuple in the table missing from `table` (the hash would not hold it
    /// either: its rule would never match), a key twice, a rule number beyond the actions, an
    /// entry of no tuple, a best rule other than the tuple's lowest, flagged tuples too big for
    /// the table, a table whose slots differ from the rebuilt one.
    #[test]
    fn check_table_refuses_broken_sets() {
        let good = compiled(TWO);
        assert_eq!(good.in_table, vec![true, true]);

        let mut c = good.clone();
        c.in_table.pop();
        refused(&c, "1 table flags for 2 tuples");

        let mut c = good.clone();
        let s = c.table.iter().position(|s| s.is_some_and(|s| s.key.tuple == 1)).unwrap();
        c.table[s] = None;
        refused(&c, "unlike the table of its entries");

        let mut c = good.clone();
        c.entries.push(c.entries[1]);
        refused(&c, "a key of tuple 1 twice");

        let mut c = good.clone();
        c.entries[2].1 = 3;
        refused(&c, "rule 3 (2 tuples, 3 rules)");

        let mut c = good.clone();
        c.entries[2].0.tuple = 2;
        refused(&c, "an entry of tuple 2");

        let mut c = good.clone();
        c.tuple_best[1] = 2;
        refused(&c, "tuple 1: best rule 2, lowest rule of its entries 1");

        let mut c = good.clone();
        c.entries[2].1 = 0;
        refused(&c, "tuple 1: best rule 1, lowest rule of its entries 0");

        let mut c = good.clone();
        c.table = Vec::new();
        refused(&c, "0 slots unlike");

        let mut c = good.clone();
        c.table[0] = c.table.iter().flatten().next().copied();
        refused(&c, "unlike the table of its entries");

        // Tuple 1 flagged in the table with more keys than it holds.
        let mut c = good.clone();
        for i in 0..crate::rules::compile::TABLE_MAX_ENTRIES as u32 {
            let mut k = c.entries[1].0;
            k.src[..4].copy_from_slice(&(0x0b00_0000 + i).to_be_bytes());
            c.entries.push((k, 2));
        }
        refused(&c, "rule table full");
    }

    /// The rules kept with the pins: source, names and texts come back as written; pins of a
    /// version that kept names only come back with those names and no texts; and the names
    /// come first, where that version's decoder (which stops after the names) reads them.
    #[test]
    fn pin_meta_keeps_rule_texts_and_reads_names_only_pins() {
        let set = crate::rules::parse_toml(
            "r.toml",
            "[[rule]]\nname = \"nine\"\nproto = \"udp\"\ndst_port = 9\naction = \"drop\"\n[[rule]]\ndst = \"10.99.0.0/24\"\naction = \"pass\"\n",
        )
        .unwrap();
        let m = PinMeta::new(Some(7), &PinRules::of("r.toml", &set));
        assert_eq!(m.texts, ["proto=udp,dst_port=9,action=drop", "dst=10.99.0.0/24,action=pass"]);
        assert_eq!(PinMeta::decode(&m.encode()), Some(m.clone()));
        let old = PinMeta { source: None, texts: vec![], ..m.clone() };
        let old_bytes = old.encode();
        assert_eq!(PinMeta::decode(&old_bytes), Some(old), "names-only pins read as names only");
        assert_eq!(m.encode()[8..old_bytes.len()], old_bytes[8..], "the names where the older decoder reads them");
        // Padded to whole chunks, as pinned: the length field bounds what is read.
        let mut padded = m.encode();
        padded.resize(NAMES_CHUNK, 0);
        assert_eq!(PinMeta::decode(&padded), Some(m.clone()));
        let e = m.encode();
        for cut in [e.len() - 1, old_bytes.len() + 2] {
            let mut t = e[..cut].to_vec();
            t[..8].copy_from_slice(&(cut as u64).to_ne_bytes());
            assert_eq!(PinMeta::decode(&t), None, "truncated at {cut}");
        }
    }
}
