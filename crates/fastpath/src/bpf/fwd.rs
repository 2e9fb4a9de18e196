//! Forwarding between interfaces at the driver (`bpf/xdp_fwd.bpf.c`, docs/ARCHITECTURE.md §13):
//! the engine of `fastpath fwd --engine xdp`.
//!
//! One program is loaded and attached to every port (one bpf_link each). In [`FwdMode::L2`]
//! ports form pairs and a frame leaves by its port's peer unchanged; in [`FwdMode::L3`] the
//! kernel's FIB and neighbour table pick the egress port and next hop (`bpf_fib_lookup`), the
//! TTL / hop limit is decremented and the MACs rewritten. Whatever the kernel must handle goes
//! to it with XDP_PASS. Every frame is counted once per ingress port under one of
//! [`REASONS`], so rx = forwarded + the named passes and drops.
//!
//! Ports can be paused (down or deleted: frames that would leave by them are dropped in L2 and
//! passed to the kernel in L3, each counted) and resumed with a new ifindex when an interface
//! is recreated ([`Forwarder::resume`]). What the kernel did with redirected frames afterwards
//! (enqueue failed, egress driver took or refused them) is counted from the XDP tracepoints
//! ([`Forwarder::after`]). Needs CAP_BPF + CAP_NET_ADMIN (CAP_PERFMON for the tracepoints);
//! kernel >= 5.18 for the frags-aware program (BPF_F_XDP_HAS_FRAGS), DEVMAP_HASH >= 5.4,
//! bpf_fib_lookup >= 4.18, tp_btf >= 5.5.

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};

use bytemuck::{bytes_of, Zeroable};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use serde::Serialize;

use super::skel::{self, owned_prog_fd};
use super::{AttachOpts, BpfError, XdpLink, XdpMode};
use crate::abi::{self, bpf_devmap_val, fp_fwd_port, fp_pkt_stats};
use crate::netdev::Iface;

/// Most ports of one forwarder.
pub const MAX_PORTS: usize = abi::FP_FWD_MAX_PORTS as usize;

/// Bytes a frame may have beyond its egress port's MTU: the Ethernet header and one VLAN tag
/// (`xdp_ok_fwd_dev()` in include/linux/filter.h, which a DEVMAP redirect passes through:
/// `mtu + hard_header_len + VLAN_HLEN`; a longer frame is dropped after the program returned).
pub const L2_OVERHEAD_BYTES: u32 = 14 + 4;

/// Counter names, in `FP_FWD_*` order (bpf/include/fastpath_abi.h).
pub const REASONS: [&str; abi::FP_FWD_COUNT as usize] = [
    "forwarded",
    "drop_peer_down",
    "pass_not_ip",
    "pass_not_for_us",
    "pass_ttl",
    "pass_no_neigh",
    "pass_frag_needed",
    "pass_fib",
    "pass_no_port",
    "pass_malformed",
    "drop_mtu",
    "pass_bad_csum",
    "pass_ip_options",
    "pass_martian",
    "pass_rp_filter",
];

/// The IPv4 source check a port makes before forwarding (L3), from the kernel's
/// `net.ipv4.conf.{all,IF}.rp_filter` (the larger of the two, as `IN_DEV_RPFILTER()` in
/// include/linux/inetdevice.h) and the routing setup ([`RpCheck::for_kernel`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum RpCheck {
    /// Martians and our own addresses only (the state before the first rp_filter read).
    #[default]
    Off,
    /// rp_filter 1: the route back to the source must leave by the ingress port.
    Strict,
    /// rp_filter 2, or 0 (where the kernel makes the same reverse lookup once the namespace has
    /// ever had custom rules): a unicast route back to the source must exist, else the frame
    /// goes to the kernel.
    Loose,
    /// rp_filter 1 or 2 while rules select on the input interface: the kernel's reverse lookup
    /// (from `lo`) cannot be repeated here (bpf_fib_lookup makes it from the ingress port);
    /// every IPv4 frame of the port goes to the kernel (`pass_rp_filter`).
    Kernel,
}

impl RpCheck {
    /// The check that matches what `fib_validate_source()` (net/ipv4/fib_frontend.c) does for
    /// `rp_filter` (0, 1 or 2; larger values are taken as 2, as the kernel does) with rules
    /// selecting on iif present (`iif_rules`) or not.
    pub fn for_kernel(rp_filter: u32, iif_rules: bool) -> Self {
        // rp_filter 0 refuses only a source whose route back is local, broadcast, blackhole or
        // the like, and only once the namespace has had custom rules: fib4_has_custom_rules()
        // stays set after the last one is deleted (net/ipv4/fib_rules.c), and nothing shows it
        // to user space. So rp_filter 0 is always checked loosely: a frame whose route back is
        // not unicast goes to the kernel, which decides.
        match (rp_filter, iif_rules) {
            (0, _) => RpCheck::Loose,
            (_, true) => RpCheck::Kernel,
            (1, _) => RpCheck::Strict,
            _ => RpCheck::Loose,
        }
    }

    /// "off", "strict", "loose" or "kernel".
    pub fn name(self) -> &'static str {
        match self {
            RpCheck::Off => "off",
            RpCheck::Strict => "strict",
            RpCheck::Loose => "loose",
            RpCheck::Kernel => "kernel",
        }
    }

    fn abi(self) -> u8 {
        (match self {
            RpCheck::Off => abi::FP_FWD_RP_OFF,
            RpCheck::Strict => abi::FP_FWD_RP_STRICT,
            RpCheck::Loose => abi::FP_FWD_RP_LOOSE,
            RpCheck::Kernel => abi::FP_FWD_RP_KERNEL,
        }) as u8
    }
}

/// How frames find their egress port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FwdMode {
    /// Port pairs; frames keep their MACs (a bridge port pair).
    L2,
    /// The kernel's FIB and neighbour table; TTL decremented, MACs rewritten.
    L3,
}

impl FwdMode {
    /// "l2" or "l3".
    pub fn name(self) -> &'static str {
        match self {
            FwdMode::L2 => "l2",
            FwdMode::L3 => "l3",
        }
    }
}

/// One port as the forwarder knows it.
#[derive(Debug)]
pub struct Port {
    /// Interface name (stays when the interface is deleted and recreated).
    pub iface: String,
    /// Current ifindex; `None` while the interface is gone.
    pub ifindex: Option<u32>,
    /// Its MAC (L3: frames to another MAC go to the kernel).
    pub mac: [u8; 6],
    /// Its MTU in bytes (L2: frames from its peer larger than this + 18 bytes are dropped
    /// as `drop_mtu`).
    pub mtu: u32,
    /// False while paused (down or gone): nothing leaves by it.
    pub up: bool,
    /// L2: index of the peer port.
    pub peer: Option<usize>,
    /// The attach mode obtained.
    pub mode: Option<XdpMode>,
    /// L3, IPv4: the source check (see [`Forwarder::set_rp_check`]).
    pub rp: RpCheck,
    link: Option<XdpLink>,
    /// The interface as resolved (`None` while it is gone).
    resolved: Option<Iface>,
    written_ifindex: Option<u32>,
}

/// What became of port `i`'s redirected frames after the program (native mode only), from the
/// kernel's XDP tracepoints: `redirect_err` is by ingress port, `xmit_*` by egress port, so
/// that summed over the ports, forwarded = redirect_err + xmit_sent + xmit_drops.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct AfterCounters {
    /// Frames this port received and redirected whose enqueue failed (`xdp_redirect_err`).
    pub redirect_err: u64,
    /// Frames the driver of this port took for transmission (`xdp_devmap_xmit` sent).
    pub xmit_sent: u64,
    /// Frames the driver of this port refused (`xdp_devmap_xmit` drops: ring full, peer down).
    pub xmit_drops: u64,
}

/// Per-port counters: `(packets, bytes)` per [`REASONS`] entry, summed over CPUs.
pub type PortCounters = [(u64, u64); abi::FP_FWD_COUNT as usize];

/// The loaded forwarder.
#[derive(Debug)]
pub struct Forwarder {
    mode: FwdMode,
    prog: OwnedFd,
    fwd_in: MapHandle,
    fwd_ports: MapHandle,
    fwd_stats: MapHandle,
    fwd_after: MapHandle,
    fwd_gen: MapHandle,
    fwd_local4: MapHandle,
    local4: Vec<std::net::Ipv4Addr>,
    /// The FIB cache's generation (0: off).
    fib_gen: u32,
    /// The highest generation handed out; `fib_gen` never goes back to one at or below it.
    used_gen: u32,
    _tracepoints: Vec<libbpf_rs::Link>,
    ports: Vec<Port>,
}

fn map_err(map: &'static str) -> impl Fn(libbpf_rs::Error) -> BpfError {
    move |cause| BpfError::Map { map, cause }
}

impl Forwarder {
    /// Loads `bpf/xdp_fwd.bpf.c` for `mode`; no port yet.
    ///
    /// # Errors
    ///
    /// [`BpfError::Load`] if opening or loading fails (verifier; needs root, or CAP_BPF +
    /// CAP_NET_ADMIN); [`BpfError::AttachTracepoint`] if `tp_btf/xdp_redirect_err` or
    /// `tp_btf/xdp_devmap_xmit` cannot be attached (needs kernel BTF and CAP_BPF + CAP_PERFMON);
    /// [`BpfError::Map`] / [`BpfError::Sys`] if a map handle or the program fd cannot be taken.
    pub fn load(mode: FwdMode) -> Result<Self, BpfError> {
        let mut storage = MaybeUninit::uninit();
        let builder = skel::xdp_fwd::XdpFwdSkelBuilder::default();
        let mut open = builder.open(&mut storage).map_err(|cause| BpfError::Load { prog: "xdp_fwd", cause })?;
        if let Some(ro) = open.maps.rodata_data.as_deref_mut() {
            ro.fwd_mode = match mode {
                FwdMode::L2 => abi::FP_FWD_L2,
                FwdMode::L3 => abi::FP_FWD_L3,
            };
            ro.fwd_netns_ino = super::monitor::current_netns_ino();
        }
        let s = open.load().map_err(|cause| BpfError::Load { prog: "xdp_fwd", cause })?;
        let mut tracepoints = Vec::new();
        for (tracepoint, p) in [
            ("tp_btf/xdp_redirect_err", &s.progs.fwd_redirect_err),
            ("tp_btf/xdp_devmap_xmit", &s.progs.fwd_devmap_xmit),
        ] {
            tracepoints.push(p.attach().map_err(|cause| BpfError::AttachTracepoint { tracepoint, cause })?);
        }
        let h = |m: &libbpf_rs::MapMut<'_>, name: &'static str| MapHandle::try_from(m).map_err(map_err(name));
        Ok(Self {
            mode,
            prog: owned_prog_fd(s.progs.xdp_fwd.as_fd())?,
            fwd_in: h(&s.maps.fwd_in, "fwd_in")?,
            fwd_ports: h(&s.maps.fwd_ports, "fwd_ports")?,
            fwd_stats: h(&s.maps.fwd_stats, "fwd_stats")?,
            fwd_after: h(&s.maps.fwd_after, "fwd_after")?,
            fwd_gen: h(&s.maps.fwd_gen, "fwd_gen")?,
            fwd_local4: h(&s.maps.fwd_local4, "fwd_local4")?,
            local4: Vec::new(),
            fib_gen: 0,
            used_gen: 0,
            _tracepoints: tracepoints,
            ports: Vec::new(),
        })
    }

    /// The mode it was loaded for.
    pub fn mode(&self) -> FwdMode {
        self.mode
    }

    /// The ports, by index.
    pub fn ports(&self) -> &[Port] {
        &self.ports
    }

    /// Adds a port with its MTU in bytes (not yet attached: see [`Forwarder::attach`]).
    /// Errors past [`MAX_PORTS`].
    ///
    /// # Errors
    ///
    /// [`BpfError::BadValue`] past [`MAX_PORTS`].
    pub fn add_port(&mut self, iface: &Iface, mac: [u8; 6], mtu: u32) -> Result<usize, BpfError> {
        if self.ports.len() >= MAX_PORTS {
            return Err(BpfError::BadValue {
                what: "-i",
                value: iface.name().to_string(),
                accepted: format!("at most {MAX_PORTS} ports"),
            });
        }
        self.ports.push(Port {
            iface: iface.name().to_string(),
            ifindex: Some(iface.ifindex()),
            resolved: Some(iface.clone()),
            mac,
            mtu,
            up: true,
            peer: None,
            mode: None,
            rp: RpCheck::Off,
            link: None,
            written_ifindex: None,
        });
        Ok(self.ports.len() - 1)
    }

    /// L2: frames arriving on `a` leave by `b` and the other way round.
    pub fn pair(&mut self, a: usize, b: usize) {
        self.ports[a].peer = Some(b);
        self.ports[b].peer = Some(a);
    }

    /// Attaches the (one, already loaded) program to port `i` as `opts` asks
    /// ([`XdpLink::attach`]: `mode` None: native, else skb) and writes the maps. Returns the
    /// notes of any fallback taken. Needs root, or CAP_NET_ADMIN + CAP_BPF; Linux >= 5.9.
    ///
    /// # Errors
    ///
    /// [`BpfError::BadValue`] for a port whose interface is gone; as [`XdpLink::attach`];
    /// [`BpfError::Map`] writing the maps.
    pub fn attach(&mut self, i: usize, opts: AttachOpts) -> Result<Vec<String>, BpfError> {
        let p = &self.ports[i];
        let iface = p.resolved.clone().ok_or_else(|| BpfError::BadValue {
            what: "port",
            value: p.iface.clone(),
            accepted: "an interface that exists".into(),
        })?;
        let a = XdpLink::attach(self.prog.as_fd(), &iface, opts)?;
        let p = &mut self.ports[i];
        p.link = Some(a.prog);
        p.mode = Some(a.mode);
        self.sync()?;
        Ok(a.notes)
    }

    /// Pauses port `i` (down, or deleted: `gone`). Frames stop leaving by it at once.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] if rewriting `fwd_gen`, `fwd_in` or `fwd_ports` fails.
    ///
    /// # Panics
    ///
    /// If `i` is not a port index ([`Forwarder::add_port`]).
    pub fn pause(&mut self, i: usize, gone: bool) -> Result<(), BpfError> {
        let p = &mut self.ports[i];
        p.up = false;
        if gone {
            p.ifindex = None;
            p.resolved = None;
            p.link = None; // the kernel detached it with the interface
        }
        self.sync()
    }

    /// Resumes port `i`, up, as `iface` (resolved again after a link event) with `mac`:
    /// re-attaches the program as `opts` asks if the interface is new (recreated) or lost its
    /// program. Returns the fallback notes.
    ///
    /// # Errors
    ///
    /// As [`Forwarder::attach`].
    pub fn resume(&mut self, i: usize, iface: &Iface, mac: [u8; 6], opts: AttachOpts) -> Result<Vec<String>, BpfError> {
        let ifindex = iface.ifindex();
        let reattach = {
            let p = &self.ports[i];
            p.ifindex != Some(ifindex) || p.link.is_none()
        };
        {
            let p = &mut self.ports[i];
            p.ifindex = Some(ifindex);
            p.resolved = Some(iface.clone());
            p.mac = mac;
            p.up = true;
        }
        if reattach {
            self.ports[i].link = None;
            return self.attach(i, opts);
        }
        self.sync()?;
        Ok(Vec::new())
    }

    /// L3: turns the FIB cache on or off (off at load). On, the program keeps the answers of
    /// `bpf_fib_lookup` per CPU (4,096 direct-mapped slots keyed by ingress port and destination)
    /// and reuses them until [`Forwarder::invalidate_fib_cache`] is called, which the caller must
    /// do on every route, rule, nexthop, neighbour, address or link change (rtnetlink) so the
    /// cache lags the kernel's tables by no more than one notification, and periodically as a
    /// backstop. The key is exact only while the FIB answer depends on destination and ingress
    /// alone: the caller must turn the cache off while
    /// [`crate::netdev::watch::RoutingShape::inexact`] is not empty.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] (`fwd_gen`) if the update fails.
    pub fn set_fib_cache(&mut self, on: bool) -> Result<(), BpfError> {
        // Turned on again, the cache starts at a generation no slot was ever filled under:
        // slots are overwritten, never cleared, so reusing one would revive old answers.
        self.fib_gen = if on { self.next_gen() } else { 0 };
        self.write_gen()
    }

    /// A generation above every one used so far (never 0).
    fn next_gen(&mut self) -> u32 {
        self.used_gen = self.used_gen.wrapping_add(1).max(1);
        self.used_gen
    }

    /// L3: forgets every cached FIB answer (a new generation); a no-op while the cache is off.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] (`fwd_gen`) if the update fails.
    pub fn invalidate_fib_cache(&mut self) -> Result<(), BpfError> {
        if self.fib_gen == 0 {
            return Ok(());
        }
        self.fib_gen = self.next_gen();
        self.write_gen()
    }

    fn write_gen(&self) -> Result<(), BpfError> {
        self.fwd_gen.update(&0u32.to_ne_bytes(), &self.fib_gen.to_ne_bytes(), MapFlags::ANY).map_err(map_err("fwd_gen"))
    }

    /// L3: port `i`'s IPv4 source check from now on.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] if rewriting `fwd_gen`, `fwd_in` or `fwd_ports` fails.
    ///
    /// # Panics
    ///
    /// If `i` is not a port index ([`Forwarder::add_port`]).
    pub fn set_rp_check(&mut self, i: usize, rp: RpCheck) -> Result<(), BpfError> {
        if self.ports[i].rp == rp {
            return Ok(());
        }
        self.ports[i].rp = rp;
        self.sync()
    }

    /// L3: the namespace's IPv4 addresses; a frame from one of them goes to the kernel as
    /// `pass_martian`. Errors past 1,024 addresses (the map's size) or on a map update; the
    /// caller should then check sources with [`RpCheck::Loose`], which refuses them too.
    ///
    /// # Errors
    ///
    /// [`BpfError::BadValue`] for more than 1,024 distinct addresses (`FP_FWD_MAX_LOCAL4`), nothing
    /// written; [`BpfError::Map`] (`fwd_local4`) if an update fails.
    pub fn set_local4(&mut self, addrs: &[std::net::Ipv4Addr]) -> Result<(), BpfError> {
        let mut want: Vec<_> = addrs.to_vec();
        want.sort();
        want.dedup();
        if want == self.local4 {
            return Ok(());
        }
        if want.len() > abi::FP_FWD_MAX_LOCAL4 as usize {
            return Err(BpfError::BadValue {
                what: "IPv4 addresses",
                value: want.len().to_string(),
                accepted: format!("at most {}", abi::FP_FWD_MAX_LOCAL4),
            });
        }
        // Add first: an address present in both stays present throughout.
        for a in &want {
            self.fwd_local4.update(&a.octets(), &[1u8], MapFlags::ANY).map_err(map_err("fwd_local4"))?;
        }
        for a in self.local4.iter().filter(|a| !want.contains(a)) {
            let _ = self.fwd_local4.delete(&a.octets());
        }
        self.local4 = want;
        Ok(())
    }

    /// Port `i`'s MTU changed to `mtu` bytes: in L2, frames its peer sends larger than
    /// `mtu` + 18 (Ethernet header and one VLAN tag, the limit of `xdp_ok_fwd_dev()`) are
    /// dropped and counted `drop_mtu` from now on.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] if rewriting `fwd_gen`, `fwd_in` or `fwd_ports` fails.
    ///
    /// # Panics
    ///
    /// If `i` is not a port index ([`Forwarder::add_port`]).
    pub fn set_mtu(&mut self, i: usize, mtu: u32) -> Result<(), BpfError> {
        self.ports[i].mtu = mtu;
        self.sync()
    }

    /// Writes `fwd_in` and `fwd_ports` from the ports' state: every present port is known as
    /// an ingress; only present and up ports can be left by.
    fn sync(&mut self) -> Result<(), BpfError> {
        self.invalidate_fib_cache()?;
        // Egress first: a paused port stops taking frames before anything else changes.
        for p in &self.ports {
            if let Some(old) = p.written_ifindex {
                if !(p.up && p.ifindex == Some(old)) {
                    let _ = self.fwd_ports.delete(&old.to_ne_bytes());
                }
            }
        }
        for (slot, p) in self.ports.iter().enumerate() {
            if let Some(old) = p.written_ifindex {
                if p.ifindex != Some(old) {
                    let _ = self.fwd_in.delete(&old.to_ne_bytes());
                }
            }
            let Some(ifindex) = p.ifindex else { continue };
            let peer_ifindex = p.peer.and_then(|j| self.ports[j].ifindex).unwrap_or(0);
            let peer_max_bytes = p.peer.map(|j| self.ports[j].mtu.saturating_add(L2_OVERHEAD_BYTES)).unwrap_or(0);
            let v = fp_fwd_port {
                slot: slot as u32,
                peer_ifindex,
                mac: p.mac,
                rp_filter: p.rp.abi(),
                peer_max_bytes,
                ..Zeroable::zeroed()
            };
            self.fwd_in.update(&ifindex.to_ne_bytes(), bytes_of(&v), MapFlags::ANY).map_err(map_err("fwd_in"))?;
        }
        for p in &mut self.ports {
            match p.ifindex {
                Some(ifindex) if p.up => {
                    let v = bpf_devmap_val { ifindex, ..Zeroable::zeroed() };
                    self.fwd_ports
                        .update(&ifindex.to_ne_bytes(), bytes_of(&v), MapFlags::ANY)
                        .map_err(map_err("fwd_ports"))?;
                }
                _ => {}
            }
            p.written_ifindex = p.ifindex;
        }
        Ok(())
    }

    /// [`AfterCounters`] of port `i`, summed over CPUs.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] (`fwd_after`) if the per-CPU lookup fails.
    pub fn after(&self, i: usize) -> Result<AfterCounters, BpfError> {
        let mut o = AfterCounters::default();
        let v = self.fwd_after.lookup_percpu(&(i as u32).to_ne_bytes(), MapFlags::ANY).map_err(map_err("fwd_after"))?;
        for b in v.unwrap_or_default() {
            if let Some(st) = abi::read::<abi::fp_fwd_after>(&b) {
                o.redirect_err += st.redirect_err;
                o.xmit_sent += st.xmit_sent;
                o.xmit_drops += st.xmit_drops;
            }
        }
        Ok(o)
    }

    /// Counters of port `i`.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] (`fwd_stats`) if a per-CPU lookup fails.
    pub fn counters(&self, i: usize) -> Result<PortCounters, BpfError> {
        let mut out = [(0u64, 0u64); abi::FP_FWD_COUNT as usize];
        for (r, o) in out.iter_mut().enumerate() {
            let key = (i as u32 * abi::FP_FWD_COUNT + r as u32).to_ne_bytes();
            let v = self.fwd_stats.lookup_percpu(&key, MapFlags::ANY).map_err(map_err("fwd_stats"))?;
            for b in v.unwrap_or_default() {
                if let Some(st) = abi::read::<fp_pkt_stats>(&b) {
                    o.0 += st.packets;
                    o.1 += st.bytes;
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// rp_filter and the routing setup map to the check the kernel's fib_validate_source()
    /// makes, or a safe superset: 0 is a loose check (the kernel refuses non-unicast routes back
    /// once the namespace ever had custom rules, which user space cannot see), 1 strict, 2 and
    /// above loose; with rules on iif, 1 and 2 leave it to the kernel.
    #[test]
    fn rp_check_follows_the_kernel() {
        assert_eq!(RpCheck::for_kernel(0, false), RpCheck::Loose);
        assert_eq!(RpCheck::for_kernel(1, false), RpCheck::Strict);
        assert_eq!(RpCheck::for_kernel(2, false), RpCheck::Loose);
        assert_eq!(RpCheck::for_kernel(7, false), RpCheck::Loose);
        assert_eq!(RpCheck::for_kernel(0, true), RpCheck::Loose);
        for rp in 1..3 {
            assert_eq!(RpCheck::for_kernel(rp, true), RpCheck::Kernel);
        }
    }
}
