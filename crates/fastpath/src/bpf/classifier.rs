//! The rule classifier program (`bpf/classifier.bpf.c`): load, attach, install compiled rule
//! sets with an atomic swap, read counters, pin for `fastpath filter load --detach`.
//!
//! Two rule sets live side by side in every map; `cls_active[0]` names the one in use. A reload
//! writes the inactive set completely (actions, classes, tuples, hash entries, config), then
//! flips the index with one map update: a packet sees either the whole old set or the whole new
//! one. Counters of the old set stay readable until its entries are cleared after the flip.
//! Needs CAP_BPF + CAP_NET_ADMIN; kernel >= 5.9 (bpf_link), batch map ops >= 5.6.

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use serde::Serialize;

use bytemuck::{bytes_of, cast_slice, Zeroable};

use super::{skel, AttachOpts, Attached, BpfError, XdpLink};
use crate::abi::{
    self, bpf_cpumap_val, bpf_devmap_val, fp_cls_action, fp_cls_config, fp_cls_key, fp_cls_tuple, fp_cpu_set,
    fp_pkt_stats, fp_rate_total,
};
use crate::netdev::Iface;
use crate::rules::compile::{ActionEntry, Compiled, Key, MAX_TUPLES, PRE_WORDS};
use crate::rules::{MAX_CPU_SETS, MAX_REDIRECT_PORTS, MAX_RULES};
use crate::sys::SysError;

const STAT_COUNT: u32 = abi::FP_STAT_COUNT;
/// Names of the per-set totals, in the order of fp_cls_stats (fastpath_abi.h): packets per
/// action taken, then `no_match` (default action), `malformed` (the `malformed` action),
/// `rate_dropped` (over a rate limit; also in `drop`) and `bad_fragment` (tiny or overlapping
/// fragments, always dropped; also in `drop`).
pub const STAT_NAMES: [&str; STAT_COUNT as usize] =
    ["pass", "drop", "xsk", "cpu", "tx", "redirect", "no_match", "malformed", "rate_dropped", "bad_fragment"];
// The names above follow the FP_ACT_* / FP_STAT_* indexes of fastpath_abi.h.
const _: () = assert!(
    abi::FP_ACT_REDIRECT == 5
        && abi::FP_ACT_COUNT == 6
        && abi::FP_STAT_NO_MATCH == 6
        && abi::FP_STAT_MALFORMED == 7
        && abi::FP_STAT_RATE_DROPPED == 8
        && abi::FP_STAT_BAD_FRAG == 9
);
/// Size of struct fp_cls_action (the value of `cls_actions`).
const ACTION_SIZE: usize = size_of::<fp_cls_action>();
/// Size of struct fp_cls_config (the value of `cls_config`).
const CONFIG_SIZE: usize = size_of::<fp_cls_config>();

macro_rules! cls_maps {
    ($($name:ident),*) => {
        /// Handles of every map of the classifier.
        #[derive(Debug)]
        #[allow(missing_docs)]
        pub struct ClsMaps { $(pub $name: MapHandle),* }
        impl ClsMaps {
            const NAMES: &'static [&'static str] = &[$(stringify!($name)),*];
            fn from_skel(s: &skel::classifier::ClassifierSkel<'_>) -> Result<Self, BpfError> {
                Ok(Self { $($name: MapHandle::try_from(&s.maps.$name).map_err(|cause| BpfError::Map { map: stringify!($name), cause })?),* })
            }
            fn open_pinned(dir: &Path) -> Result<Self, BpfError> {
                Ok(Self { $($name: MapHandle::from_pinned_path(dir.join(stringify!($name))).map_err(|cause| BpfError::Map { map: stringify!($name), cause })?),* })
            }
            /// The first map whose value size is not this program's (pins of another version).
            /// Key and value sizes come from the generated ABI structs (crate::abi).
            fn check_shapes(&self) -> Result<(), &'static str> {
                let want: &[(&'static str, usize, usize)] = &[
                    ("cls_actions", 4, ACTION_SIZE),
                    ("cls_config", 4, CONFIG_SIZE),
                    ("cls_tuples", 4, size_of::<fp_cls_tuple>()),
                    ("cls_rules", size_of::<fp_cls_key>(), 4),
                    ("cls_cpu_sets", 4, size_of::<fp_cpu_set>()),
                    ("cls_rate_total", 4, size_of::<fp_rate_total>()),
                    ("cls_rate", size_of::<abi::fp_rate_key>(), size_of::<abi::fp_rate_bucket>()),
                    ("cls_cache", 4, size_of::<abi::fp_cache_slot>()),
                    ("cls_prefilter", 4, 8),
                    ("cls_stats", 4, size_of::<fp_pkt_stats>()),
                    ("cls_rule_stats", 4, size_of::<fp_pkt_stats>()),
                ];
                $(
                    if let Some((_, key, value)) = want.iter().find(|(n, _, _)| *n == stringify!($name)) {
                        let info = libbpf_rs::MapInfo::new(self.$name.as_fd()).map_err(|_| stringify!($name))?;
                        if info.info.key_size as usize != *key || info.info.value_size as usize != *value {
                            return Err(stringify!($name));
                        }
                    }
                )*
                Ok(())
            }
            fn pin(&mut self, dir: &Path) -> Result<(), BpfError> {
                $(self.$name.pin(dir.join(stringify!($name))).map_err(|cause| BpfError::Map { map: stringify!($name), cause })?;)*
                Ok(())
            }
        }
    };
}

cls_maps!(
    cls_active,
    cls_config,
    cls_tuples,
    cls_rules,
    cls_actions,
    cls_prefilter,
    cls_port_class,
    cls_len_class,
    cls_rule_stats,
    cls_stats,
    cls_cache,
    cls_cpu_sets,
    cls_rate,
    cls_rate_total,
    xsks,
    cpu_map,
    tx_ports
);

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

/// The classifier program, loaded; attached to an interface once [`Classifier::attach`]ed.
#[derive(Debug)]
pub struct Classifier {
    /// The maps.
    pub maps: ClsMaps,
    prog: Option<OwnedFd>,
    link: Option<XdpLink>,
    link_fd_pinned: Option<OwnedFd>,
}

fn map_err(map: &'static str) -> impl Fn(libbpf_rs::Error) -> BpfError {
    move |cause| BpfError::Map { map, cause }
}

/// The `cls_rules` key of `k` in rule set `set` (struct fp_cls_key; padding zero).
fn cls_key(set: u8, k: &Key) -> fp_cls_key {
    fp_cls_key {
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
        ..Zeroable::zeroed()
    }
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

/// Reads rule set `set`'s config; all-zero (the map's initial value) if absent.
fn read_config(map: &MapHandle, set: u32) -> Result<fp_cls_config, BpfError> {
    let v = map.lookup(&set.to_ne_bytes(), MapFlags::ANY).map_err(map_err("cls_config"))?;
    Ok(v.and_then(|v| abi::read::<fp_cls_config>(&v)).unwrap_or_else(Zeroable::zeroed))
}

fn mask16(plen: u8) -> [u8; 16] {
    crate::rules::mask_bits(&[0xff; 16], plen)
}

/// Writes `values` at consecutive u32 keys from `first`, in batches.
fn write_array<T: bytemuck::Pod>(
    map: &MapHandle,
    name: &'static str,
    first: u32,
    values: &[T],
) -> Result<(), BpfError> {
    let n = values.len();
    let vsize = size_of::<T>();
    let values: &[u8] = cast_slice(values);
    const CHUNK: usize = 16384;
    for start in (0..n).step_by(CHUNK) {
        let end = (start + CHUNK).min(n);
        let keys: Vec<u8> = (start..end).flat_map(|i| (first + i as u32).to_ne_bytes()).collect();
        map.update_batch(
            &keys,
            &values[start * vsize..end * vsize],
            (end - start) as u32,
            MapFlags::ANY,
            MapFlags::ANY,
        )
        .map_err(map_err(name))?;
    }
    Ok(())
}

/// Zeroes the per-CPU `fp_pkt_stats` of keys `first..first + n` of `map` with
/// BPF_MAP_UPDATE_BATCH (kernel >= 5.6), one system call per 8,192 keys instead of one per key.
fn zero_percpu_stats(map: &MapHandle, name: &'static str, first: u32, n: u32) -> Result<(), BpfError> {
    if n == 0 {
        return Ok(());
    }
    // The kernel copies one value per possible CPU: a wrong count would make it read past the
    // buffer, so no fallback here.
    let ncpu = libbpf_rs::num_possible_cpus().map_err(map_err(name))?;
    let vlen = size_of::<fp_pkt_stats>().next_multiple_of(8) * ncpu;
    const CHUNK: u32 = 8192;
    let zeros = vec![0u8; vlen * CHUNK.min(n) as usize];
    for start in (0..n).step_by(CHUNK as usize) {
        let end = (start + CHUNK).min(n);
        let keys: Vec<u8> = (start..end).flat_map(|i| (first + i).to_ne_bytes()).collect();
        crate::sys::bpf::map_update_batch(map.as_fd(), &keys, 4, &zeros, vlen, end - start, || {
            format!("{name}, keys {}..{}", first + start, first + end)
        })?;
    }
    Ok(())
}

impl Classifier {
    /// Loads the program (not attached).
    pub fn load() -> Result<Self, BpfError> {
        Ok(Self::load_inner(None)?.0)
    }

    /// As [`Classifier::load`], with the capture ring sized for `fastpath capture`: rules whose
    /// [`ActionEntry::copy`](crate::rules::compile::ActionEntry) is set copy each frame they match (up
    /// to `snaplen` bytes) into a ring buffer of `ring_bytes` (a power of two, at least a page),
    /// read through the returned [`CaptureMaps`](super::capture::CaptureMaps).
    pub fn load_with_capture(snaplen: u32, ring_bytes: u32) -> Result<(Self, super::capture::CaptureMaps), BpfError> {
        let (c, m) = Self::load_inner(Some((snaplen, ring_bytes)))?;
        Ok((c, m.expect("loaded with a capture ring")))
    }

    fn load_inner(capture: Option<(u32, u32)>) -> Result<(Self, Option<super::capture::CaptureMaps>), BpfError> {
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
        let s = open.load().map_err(|cause| BpfError::Load { prog: "classifier", cause })?;
        let cap = match capture {
            Some(_) => Some(super::capture::CaptureMaps::new(&s.maps.cap_ring, &s.maps.cap_stats)?),
            None => None,
        };
        let prog = s
            .progs
            .classifier
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| SysError { call: "dup(prog fd)".into(), errno: e.raw_os_error().unwrap_or(0) })?;
        let maps = ClsMaps::from_skel(&s)?;
        Ok((Self { maps, prog: Some(prog), link: None, link_fd_pinned: None }, cap))
    }

    /// Attaches to `iface` as `opts` asks (must have been loaded with [`Classifier::load`]):
    /// one mode, or native then skb on this same program ([`XdpLink::attach`]). Returns the
    /// mode obtained and the fallback notes. Needs root, or CAP_NET_ADMIN + CAP_BPF; Linux >= 5.9.
    ///
    /// # Errors
    ///
    /// As [`XdpLink::attach`] ([`BpfError::Occupied`], [`BpfError::AllModesRefused`], ...).
    pub fn attach(&mut self, iface: &Iface, opts: AttachOpts) -> Result<Attached<()>, BpfError> {
        let prog = self.prog.as_ref().expect("loaded, not opened from pins");
        let a = XdpLink::attach(prog.as_fd(), iface, opts)?;
        self.link = Some(a.prog);
        Ok(Attached { prog: (), mode: a.mode, notes: a.notes })
    }

    /// The attachment, if attached by this object.
    pub fn link(&self) -> Option<&XdpLink> {
        self.link.as_ref()
    }

    /// The id of the CPUMAP that `cpu` rules fill, for
    /// [`crate::bpf::MonitorFilter::cpumap_id`] (its tracepoint counters).
    pub fn cpu_map_id(&self) -> Result<u32, BpfError> {
        Ok(self.maps.cpu_map.info().map_err(map_err("cpu_map"))?.info.id)
    }

    /// The rule set in use (0 or 1).
    pub fn active(&self) -> Result<u32, BpfError> {
        let v = self
            .maps
            .cls_active
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(map_err("cls_active"))?
            .unwrap_or_default();
        Ok(abi::read::<u32>(&v).unwrap_or(0) & 1)
    }

    /// Writes `c` as rule set `set` (not yet in use). `ifindex_of` resolves redirect interfaces.
    pub fn install(
        &self,
        set: u32,
        c: &Compiled,
        ifindex_of: &dyn Fn(&str) -> Result<u32, SysError>,
    ) -> Result<(), BpfError> {
        // Whatever an earlier, interrupted install left in this set goes first: stale keys
        // would otherwise match under the new tuple table.
        self.clear(set)?;
        let m = &self.maps;
        assert!(c.actions.len() <= MAX_RULES && c.tuples.len() <= MAX_TUPLES);
        assert!(c.cpu_sets.len() <= MAX_CPU_SETS && c.redirect_ifaces.len() <= MAX_REDIRECT_PORTS);
        // Actions, classes, CPU sets, redirect ports: arrays indexed by set.
        let acts: Vec<fp_cls_action> = c.actions.iter().map(cls_action).collect();
        if !acts.is_empty() {
            write_array(&m.cls_actions, "cls_actions", set * MAX_RULES as u32, &acts)?;
        }
        // Full aggregate buckets for the rules that have one (last_ns 0 = never used).
        for (i, a) in c.actions.iter().enumerate() {
            if a.rate_total_pps != 0 {
                m.cls_rate_total
                    .update(
                        &(set * MAX_RULES as u32 + i as u32).to_ne_bytes(),
                        bytes_of(&fp_rate_total::zeroed()),
                        MapFlags::ANY,
                    )
                    .map_err(map_err("cls_rate_total"))?;
            }
        }
        write_array(&m.cls_port_class, "cls_port_class", set * 131072, &c.sport.table())?;
        write_array(&m.cls_port_class, "cls_port_class", set * 131072 + 65536, &c.dport.table())?;
        write_array(&m.cls_len_class, "cls_len_class", set * 65536, &c.len.table())?;
        for (i, cpus) in c.cpu_sets.iter().enumerate() {
            let mut v = fp_cpu_set { n: cpus.len() as u32, ..Zeroable::zeroed() };
            for (slot, &cpu) in v.cpus.iter_mut().zip(cpus) {
                *slot = cpu;
                // A CPUMAP entry per CPU used: 2048-frame queue to that CPU's kthread, no program.
                let val = bpf_cpumap_val { qsize: 2048, ..Zeroable::zeroed() };
                m.cpu_map.update(&cpu.to_ne_bytes(), bytes_of(&val), MapFlags::ANY).map_err(map_err("cpu_map"))?;
            }
            m.cls_cpu_sets
                .update(&(set * MAX_CPU_SETS as u32 + i as u32).to_ne_bytes(), bytes_of(&v), MapFlags::ANY)
                .map_err(map_err("cls_cpu_sets"))?;
        }
        for (i, iface) in c.redirect_ifaces.iter().enumerate() {
            let val = bpf_devmap_val { ifindex: ifindex_of(iface)?, ..Zeroable::zeroed() };
            m.tx_ports
                .update(&(set * MAX_REDIRECT_PORTS as u32 + i as u32).to_ne_bytes(), bytes_of(&val), MapFlags::ANY)
                .map_err(map_err("tx_ports"))?;
        }
        // Hash entries.
        const CHUNK: usize = 8192;
        for chunk in c.entries.chunks(CHUNK) {
            let keys: Vec<fp_cls_key> = chunk.iter().map(|(k, _)| cls_key(set as u8, k)).collect();
            let vals: Vec<u32> = chunk.iter().map(|(_, r)| *r).collect();
            m.cls_rules
                .update_batch(cast_slice(&keys), cast_slice(&vals), chunk.len() as u32, MapFlags::ANY, MapFlags::ANY)
                .map_err(map_err("cls_rules"))?;
        }
        // Prefilter bitmaps of the tuples in use (the others are never read).
        if !c.prefilter_words.is_empty() {
            write_array(
                &m.cls_prefilter,
                "cls_prefilter",
                set * (MAX_TUPLES * 2 * PRE_WORDS) as u32,
                &c.prefilter_words,
            )?;
        }
        // Tuples.
        for (i, (t, best)) in c.tuples.iter().zip(&c.tuple_best).enumerate() {
            let v = fp_cls_tuple {
                fields: t.fields,
                best_rule: *best,
                flags_mask: t.flags_mask,
                prefilter: c.prefilter[i],
                src_mask: mask16(t.src_plen),
                dst_mask: mask16(t.dst_plen),
                ..Zeroable::zeroed()
            };
            m.cls_tuples
                .update(&(set * MAX_TUPLES as u32 + i as u32).to_ne_bytes(), bytes_of(&v), MapFlags::ANY)
                .map_err(map_err("cls_tuples"))?;
        }
        // Zero the new set's counters (batched), then its config last.
        zero_percpu_stats(&m.cls_rule_stats, "cls_rule_stats", set * MAX_RULES as u32, c.actions.len() as u32)?;
        zero_percpu_stats(&m.cls_stats, "cls_stats", set * STAT_COUNT, STAT_COUNT)?;
        let uses = c.tuples.iter().fold(0, |a, t| a | t.fields);
        // A generation no flow-cache entry carries yet: one above both sets' (never 0).
        let gen_of = |s: u32| read_config(&self.maps.cls_config, s).map(|c| c.gen_).unwrap_or(0);
        let gen = gen_of(0).max(gen_of(1)).wrapping_add(1).max(1);
        let cfg = fp_cls_config {
            n_tuples: c.tuples.len() as u32,
            n_rules: c.actions.len() as u32,
            uses,
            gen_: gen,
            dflt: cls_action(&c.default),
            malformed: u32::from(c.malformed),
            flags: if c.pass_bad_fragments { abi::FP_CLS_F_PASS_BAD_FRAG } else { 0 },
        };
        m.cls_config.update(&set.to_ne_bytes(), bytes_of(&cfg), MapFlags::ANY).map_err(map_err("cls_config"))?;
        Ok(())
    }

    /// Makes `set` the one in use: one map update.
    pub fn activate(&self, set: u32) -> Result<(), BpfError> {
        self.maps
            .cls_active
            .update(&0u32.to_ne_bytes(), &(set & 1).to_ne_bytes(), MapFlags::ANY)
            .map_err(map_err("cls_active"))
    }

    /// Removes rule set `set`'s hash entries (after it stopped being active): keys read with
    /// BPF_MAP_LOOKUP_BATCH and deleted with BPF_MAP_DELETE_BATCH (kernel >= 5.6), 8,192 per
    /// system call.
    pub fn clear(&self, set: u32) -> Result<(), BpfError> {
        const CHUNK: usize = 8192;
        let ksize = size_of::<fp_cls_key>();
        let rules = &self.maps.cls_rules;
        let mut stale: Vec<u8> = Vec::new();
        for (k, _) in rules.lookup_batch(CHUNK as u32, MapFlags::ANY, MapFlags::ANY).map_err(map_err("cls_rules"))? {
            if abi::read::<fp_cls_key>(&k).is_some_and(|k| u32::from(k.set) == set) {
                stale.extend_from_slice(&k[..ksize]);
            }
        }
        for chunk in stale.chunks(CHUNK * ksize) {
            let n = (chunk.len() / ksize) as u32;
            if let Err(cause) = rules.delete_batch(chunk, n, MapFlags::ANY, MapFlags::ANY) {
                if cause.kind() != libbpf_rs::ErrorKind::NotFound {
                    return Err(BpfError::Map { map: "cls_rules", cause });
                }
                // A key already gone stops the batch: finish this chunk one key at a time.
                for k in chunk.chunks(ksize) {
                    match rules.delete(k) {
                        Err(cause) if cause.kind() != libbpf_rs::ErrorKind::NotFound => {
                            return Err(BpfError::Map { map: "cls_rules", cause })
                        }
                        _ => {}
                    }
                }
            }
        }
        // Keep the generation so the next install goes above it; zero the rest.
        let empty = fp_cls_config { gen_: read_config(&self.maps.cls_config, set)?.gen_, ..Zeroable::zeroed() };
        self.maps.cls_config.update(&set.to_ne_bytes(), bytes_of(&empty), MapFlags::ANY).map_err(map_err("cls_config"))
    }

    /// Installs `c` into the inactive set and flips to it. Returns the new set. On an error
    /// before the flip the set in use is untouched.
    ///
    /// The old set is not cleared here: a packet that read the old index just before the flip
    /// may still be walking it, and there is no RCU grace period to wait for from user space.
    /// It is cleared by the next install into it (at the next reload), long after; its
    /// counters stay readable until then.
    pub fn swap_in(&self, c: &Compiled, ifindex_of: &dyn Fn(&str) -> Result<u32, SysError>) -> Result<u32, BpfError> {
        let old = self.active()?;
        let new = old ^ 1;
        if let Err(e) = self.install(new, c, ifindex_of) {
            let _ = self.clear(new);
            return Err(e);
        }
        self.activate(new)?;
        Ok(new)
    }

    /// Per-set totals, summed over CPUs.
    pub fn totals(&self, set: u32) -> Result<ClsTotals, BpfError> {
        let mut counters = Vec::new();
        for (i, name) in STAT_NAMES.iter().enumerate() {
            let (p, b) = self.sum_percpu(&self.maps.cls_stats, "cls_stats", set * STAT_COUNT + i as u32)?;
            counters.push((*name, p, b));
        }
        Ok(ClsTotals { counters })
    }

    /// (packets, bytes) of rules `0..n` of `set`, summed over CPUs.
    pub fn rule_counters(&self, set: u32, n: usize) -> Result<Vec<(u64, u64)>, BpfError> {
        (0..n as u32)
            .map(|i| self.sum_percpu(&self.maps.cls_rule_stats, "cls_rule_stats", set * MAX_RULES as u32 + i))
            .collect()
    }

    /// Number of rules in `set` (from its config).
    pub fn rule_count(&self, set: u32) -> Result<usize, BpfError> {
        Ok(read_config(&self.maps.cls_config, set)?.n_rules as usize)
    }

    fn sum_percpu(&self, map: &MapHandle, name: &'static str, key: u32) -> Result<(u64, u64), BpfError> {
        let v = map.lookup_percpu(&key.to_ne_bytes(), MapFlags::ANY).map_err(map_err(name))?.unwrap_or_default();
        Ok(v.iter().filter_map(|c| abi::read::<fp_pkt_stats>(c)).fold((0, 0), |(p, b), c| (p + c.packets, b + c.bytes)))
    }

    /// Runs the program once over `frame` with BPF_PROG_TEST_RUN (no interface needed);
    /// returns the XDP action. For tests and `fastpath filter check --frame`.
    pub fn test_run(&self, frame: &[u8]) -> Result<u32, SysError> {
        let prog = self.prog.as_ref().expect("loaded");
        crate::sys::bpf::prog_test_run(prog.as_fd(), frame, 1, 0, 0, || {
            format!("bpf_prog_test_run(classifier, len={})", frame.len())
        })
    }

    /// Pins the maps and the link under `dir` (bpffs) so the classifier outlives this process.
    /// `dir` must be a directory right under [`PIN_ROOT`] ([`pin_dir`]): the root is created
    /// mode 0700 and both are checked ([`check_trusted_dir`]) before anything is pinned.
    pub fn pin(&mut self, dir: &Path) -> Result<(), BpfError> {
        let root = dir.parent().unwrap_or(Path::new(PIN_ROOT));
        make_trusted_dir(root)?;
        make_trusted_dir(dir)?;
        self.maps.pin(dir)?;
        let link = self.link.as_ref().expect("attached");
        crate::sys::bpf::obj_pin(link.fd().as_fd(), &dir.join("link"), "link")?;
        Ok(())
    }

    /// True if a classifier is pinned under `dir` (its `link` pin exists). Refuses an
    /// untrusted [`PIN_ROOT`] or `dir`, and a `link` entry that is a symlink.
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

    /// The pinned link as the kernel sees it, if this object was opened from pins.
    pub fn pinned_link_info(&self) -> Option<Result<super::LinkInfo, SysError>> {
        self.link_fd_pinned.as_ref().map(|fd| super::link_info(fd.as_fd()))
    }

    /// Checks that the classifier opened from pins still runs on `iface`: its link is attached
    /// (the kernel reports a non-zero ifindex), to the interface that now has that name, and the
    /// program the kernel reports there is the link's. `was_ifindex` is the interface's index at
    /// load time, if known (for the message). Error: [`BpfError::Stale`] saying what happened.
    pub fn check_still_attached(&self, iface: &str, was_ifindex: Option<u32>) -> Result<(), BpfError> {
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

    /// Puts the AF_XDP socket `xsk_fd` into the program's XSKMAP slot `queue_id` (for rules
    /// with `action = "xsk"`).
    pub fn insert_xsk(&self, queue_id: u32, xsk_fd: std::os::fd::RawFd) -> Result<(), BpfError> {
        self.maps
            .xsks
            .update(&queue_id.to_ne_bytes(), &(xsk_fd as u32).to_ne_bytes(), MapFlags::ANY)
            .map_err(map_err("xsks"))
    }

    /// Opens a classifier pinned by [`Classifier::pin`] under `dir`.
    pub fn open_pinned(dir: &Path) -> Result<Self, BpfError> {
        if let Some(root) = dir.parent() {
            check_trusted_dir(root)?;
        }
        check_trusted_dir(dir)?;
        for name in ClsMaps::NAMES.iter().copied().chain(std::iter::once("link")) {
            check_entry(&dir.join(name))?;
        }
        let maps = ClsMaps::open_pinned(dir).map_err(|e| match e {
            BpfError::Map { map, .. } => BpfError::OtherVersion { dir: dir.display().to_string(), map },
            other => other,
        })?;
        maps.check_shapes().map_err(|map| BpfError::OtherVersion { dir: dir.display().to_string(), map })?;
        let link_fd_pinned = crate::sys::bpf::obj_get(&dir.join("link")).ok();
        Ok(Self { maps, prog: None, link: None, link_fd_pinned })
    }

    /// Removes the pins under `dir` (maps and link). With the link's pin gone and no process
    /// holding its fd, the kernel detaches the program. Touches nothing unless `dir` and its
    /// parent pass [`check_trusted_dir`].
    pub fn unpin(dir: &Path) -> Result<(), SysError> {
        // Only inside trusted directories (a symlinked root would lead elsewhere); an entry
        // that is a symlink is removed itself (unlink), never followed.
        if dir.parent().is_some_and(|r| check_trusted_dir(r).is_err()) || check_trusted_dir(dir).is_err() {
            return Ok(());
        }
        for name in ClsMaps::NAMES.iter().copied().chain(std::iter::once("link")) {
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

    /// Detaches the classifier pinned under `dir` and removes every pin there, without needing
    /// the maps to open (a pin directory from another build still unloads).
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
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                let _ = std::fs::remove_file(e.path());
            }
        }
        let _ = std::fs::remove_dir(dir);
        Ok(())
    }

    /// Detaches a pinned link now (BPF_LINK_DETACH), if this object was opened from pins.
    pub fn detach_pinned(&self) -> Result<(), SysError> {
        if let Some(fd) = &self.link_fd_pinned {
            match crate::sys::bpf::link_detach(fd.as_fd(), "pinned classifier link") {
                Err(e) if e.errno != libc::ENOLINK => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }
}

/// Where fastpath pins: a directory of its own on bpffs, made mode 0700 and owned by root.
/// bpffs itself is mounted mode 1777 (anyone may create entries), so every use checks it.
pub const PIN_ROOT: &str = "/sys/fs/bpf/fastpath";

/// Refuses `p` unless it is a real directory (not a symlink), owned by root (uid 0) and not
/// writable by group or others: anything else could have been planted by another user.
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
