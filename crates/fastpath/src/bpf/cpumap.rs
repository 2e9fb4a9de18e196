//! CPUMAP redirect (`bpf/xdp_redirect_cpu.bpf.c`, docs/ARCHITECTURE.md §4b): an XDP program on an interface sends every
//! frame through a CPUMAP (`kernel/bpf/cpumap.c`) to one CPU of a list, where the CPUMAP's
//! kthread runs a second XDP program (`SEC("xdp/cpumap")`, kernel >= 5.9) that counts the frame
//! on that CPU and drops it or passes it to the network stack. The engine of
//! `fastpath bench redirect-cpu`, shaped after xdp-tools' `xdp-bench redirect-cpu`.
//!
//! Counters: [`RedirectCpu::redirected`] counts frames the interface program handled (per CPU
//! it ran on); [`RedirectCpu::delivered_per_cpu`] frames the CPUMAP program saw, per CPU (the
//! target CPUs). Frames in between are lost only at places the XDP tracepoints name
//! ([`crate::bpf::monitor`]): `xdp_cpumap_enqueue` drops (the target's ring of `qsize` frames
//! was full), `xdp_redirect_err` (no CPUMAP entry), `xdp_cpumap_kthread` drops (no skb).

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use serde::Serialize;

use bytemuck::bytes_of;

use super::skel::{self, owned_prog_fd};
use super::{BpfError, Loaded, XdpLink};
use crate::abi::{self, bpf_cpumap_val, bpf_cpumap_val__bindgen_ty_1, fp_pkt_stats};

/// Most CPUs in the list (`FP_RCPU_MAX_CPUS`).
pub const MAX_CPUS: usize = 64;
/// Highest CPU number the CPUMAP holds + 1 (`FP_RCPU_MAP_SIZE`).
pub const MAP_SIZE: u32 = 256;
/// Largest CPUMAP queue the kernel accepts (`cpu_map_update_elem`: qsize > 16384 is EOVERFLOW).
pub const MAX_QSIZE: u32 = 16384;
/// [`BpfError::BadValue`]'s `what` for [`CpumapConfig::qsize`].
pub const QSIZE: &str = "CPUMAP queue size";
/// [`BpfError::BadValue`]'s `what` for [`CpumapConfig::cpus`].
pub const CPUS: &str = "CPUMAP CPUs";
/// Frames per target CPU's queue that [`CpumapConfig::new`] asks (xdp-bench's default).
pub const DEFAULT_QSIZE: u32 = 2048;

/// How the interface program picks the target CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CpuDist {
    /// Each receiving CPU walks the list in turn.
    RoundRobin,
    /// Hash of the 5-tuple (addresses, protocol, TCP/UDP ports): a flow stays on one CPU.
    Hash,
    /// TCP to the list's first CPU, UDP to its second, anything else to its third (positions
    /// modulo the list's length).
    Proto,
}

impl CpuDist {
    fn code(self) -> u32 {
        match self {
            CpuDist::RoundRobin => 0,
            CpuDist::Hash => 1,
            CpuDist::Proto => 2,
        }
    }

    /// "round-robin", "hash" or "proto".
    pub fn name(self) -> &'static str {
        match self {
            CpuDist::RoundRobin => "round-robin",
            CpuDist::Hash => "hash",
            CpuDist::Proto => "proto",
        }
    }
}

/// The verdict of the program on the CPUMAP entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RemoteAction {
    /// XDP_DROP on the target CPU (measures the CPUMAP hand-off alone).
    Drop,
    /// XDP_PASS: the kthread builds an skb and hands it to the network stack on the target CPU.
    Pass,
}

impl RemoteAction {
    /// "drop" or "pass".
    pub fn name(self) -> &'static str {
        match self {
            RemoteAction::Drop => "drop",
            RemoteAction::Pass => "pass",
        }
    }
}

/// What to build.
///
/// # Examples
///
/// ```
/// use fastpath::bpf::{CpuDist, CpumapConfig};
///
/// let mut cfg = CpumapConfig::new(vec![2, 3]);
/// cfg.dist = CpuDist::Hash; // a flow stays on one CPU
/// cfg.qsize = 4096;
/// assert!(cfg.validate(4).is_ok()); // a machine with CPUs 0..=3
/// assert!(cfg.validate(3).is_err()); // CPU 3 is not there
/// cfg.cpus = vec![2, 2];
/// assert!(cfg.validate(4).unwrap_err().to_string().contains("CPU 2 is listed twice"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct CpumapConfig {
    /// Target CPUs (distinct, online, < [`MAP_SIZE`]; 1..=[`MAX_CPUS`] of them).
    pub cpus: Vec<u32>,
    /// How a frame's CPU is chosen.
    pub dist: CpuDist,
    /// Frames each target CPU's ring holds (`bpf_cpumap_val.qsize`, 1..=[`MAX_QSIZE`]).
    pub qsize: u32,
    /// The CPUMAP program's verdict.
    pub remote_action: RemoteAction,
}

impl CpumapConfig {
    /// Frames to `cpus` in turn ([`CpuDist::RoundRobin`]), queues of [`DEFAULT_QSIZE`] frames,
    /// dropped on the target CPU ([`RemoteAction::Drop`]); set the fields to change them.
    /// Nothing is checked here: [`CpumapConfig::validate`] does.
    pub fn new(cpus: Vec<u32>) -> Self {
        Self { cpus, dist: CpuDist::RoundRobin, qsize: DEFAULT_QSIZE, remote_action: RemoteAction::Drop }
    }

    /// Checks every value against what the kernel and this machine accept (`online_cpus`
    /// CPUs, numbered from 0).
    ///
    /// # Errors
    ///
    /// [`BpfError::BadValue`] naming the first bad value ([`QSIZE`] or [`CPUS`]): a queue size
    /// of 0 or above [`MAX_QSIZE`], no CPU or more than [`MAX_CPUS`], a CPU not below
    /// `online_cpus` (or the map size), or a CPU listed twice.
    pub fn validate(&self, online_cpus: usize) -> Result<(), BpfError> {
        let bad = |what, value: String, accepted: String| Err(BpfError::BadValue { what, value, accepted });
        if self.qsize == 0 || self.qsize > MAX_QSIZE {
            return bad(QSIZE, self.qsize.to_string(), format!("frames per CPU queue, 1..={MAX_QSIZE}"));
        }
        let list = || self.cpus.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        if self.cpus.is_empty() || self.cpus.len() > MAX_CPUS {
            return bad(CPUS, list(), format!("1..={MAX_CPUS} CPUs"));
        }
        let top = (online_cpus as u32).min(MAP_SIZE);
        if let Some(c) = self.cpus.iter().find(|&&c| c >= top) {
            return bad(CPUS, c.to_string(), format!("CPUs of this machine, 0..={}", top.saturating_sub(1)));
        }
        let mut seen = std::collections::HashSet::new();
        if let Some(c) = self.cpus.iter().find(|c| !seen.insert(**c)) {
            return bad(CPUS, list(), format!("each CPU once (CPU {c} is listed twice)"));
        }
        Ok(())
    }
}

/// `xdp_redirect_cpu` attached to an interface with its CPUMAP filled. Dropping it detaches the
/// program; the CPUMAP (and its kthreads) go with the last reference.
///
/// # Examples
///
/// ```no_run
/// use fastpath::bpf::{AttachOpts, CpumapConfig, RedirectCpu, RemoteAction};
/// use fastpath::netdev::Iface;
///
/// let iface = Iface::resolve("eth0")?;
/// let mut cfg = CpumapConfig::new(vec![1, 2, 3]);
/// cfg.remote_action = RemoteAction::Pass; // to the network stack, on CPUs 1 to 3
/// let rc = RedirectCpu::load(&cfg)?.attach(&iface, AttachOpts::default())?.prog;
/// std::thread::sleep(std::time::Duration::from_secs(1));
/// println!("redirected {}, delivered per CPU {:?}", rc.redirected()?, rc.delivered_per_cpu()?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct RedirectCpu {
    link: XdpLink,
    rx_stats: MapHandle,
    remote_stats: MapHandle,
    cpu_map: MapHandle,
    _remote_prog: OwnedFd,
}

fn map_err(map: &'static str) -> impl Fn(libbpf_rs::Error) -> BpfError {
    move |cause| BpfError::Map { map, cause }
}

fn per_cpu_packets(m: &MapHandle, name: &'static str) -> Result<Vec<u64>, BpfError> {
    let v = m.lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY).map_err(map_err(name))?.unwrap_or_default();
    Ok(v.iter().map(|b| abi::read::<fp_pkt_stats>(b).map_or(0, |st| st.packets)).collect())
}

impl RedirectCpu {
    /// Validates `cfg` (see [`CpumapConfig::validate`]), loads the programs and fills the CPU
    /// list and one CPUMAP entry per CPU (queue `qsize`, program `cpumap_remote`); not attached
    /// ([`Loaded::attach`]). Every map is filled before the attach, so on any error nothing is
    /// left attached. Needs root, or CAP_BPF (+ CAP_NET_ADMIN to attach); Linux >= 5.9 (a
    /// program in a CPUMAP entry).
    ///
    /// # Errors
    ///
    /// [`BpfError::BadValue`] for a `cfg` value out of range, [`BpfError::Load`],
    /// [`BpfError::Map`], [`BpfError::Sys`].
    pub fn load(cfg: &CpumapConfig) -> Result<Loaded<Self>, BpfError> {
        cfg.validate(crate::sys::online_cpus())?;
        let mut storage = MaybeUninit::uninit();
        let builder = skel::xdp_redirect_cpu::XdpRedirectCpuSkelBuilder::default();
        let mut open =
            builder.open(&mut storage).map_err(|cause| BpfError::Load { prog: "xdp_redirect_cpu", cause })?;
        if let Some(ro) = open.maps.rodata_data.as_deref_mut() {
            ro.cpu_dist = cfg.dist.code();
            ro.n_cpus = cfg.cpus.len() as u32;
            ro.remote_action = match cfg.remote_action {
                RemoteAction::Drop => crate::sys::bpf::XDP_DROP,
                RemoteAction::Pass => crate::sys::bpf::XDP_PASS,
            };
        }
        let s = open.load().map_err(|cause| BpfError::Load { prog: "xdp_redirect_cpu", cause })?;
        let prog = owned_prog_fd(s.progs.xdp_redirect_cpu.as_fd())?;
        let remote = owned_prog_fd(s.progs.cpumap_remote.as_fd())?;
        let h = |m: &libbpf_rs::MapMut<'_>, name: &'static str| MapHandle::try_from(m).map_err(map_err(name));
        let cpus_available = h(&s.maps.cpus_available, "cpus_available")?;
        let cpu_map = h(&s.maps.cpu_map, "cpu_map")?;
        for (i, cpu) in cfg.cpus.iter().enumerate() {
            cpus_available
                .update(&(i as u32).to_ne_bytes(), &cpu.to_ne_bytes(), MapFlags::ANY)
                .map_err(map_err("cpus_available"))?;
            let val =
                bpf_cpumap_val { qsize: cfg.qsize, bpf_prog: bpf_cpumap_val__bindgen_ty_1 { fd: remote.as_raw_fd() } };
            cpu_map.update(&cpu.to_ne_bytes(), bytes_of(&val), MapFlags::ANY).map_err(map_err("cpu_map"))?;
        }
        let rx_stats = h(&s.maps.rx_stats, "rx_stats")?;
        let remote_stats = h(&s.maps.remote_stats, "remote_stats")?;
        Ok(Loaded::new(prog, move |link| Self { link, rx_stats, remote_stats, cpu_map, _remote_prog: remote }))
    }

    /// Frames the interface program handled, per CPU it ran on (index = CPU).
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] (`rx_stats`) if the per-CPU lookup fails.
    pub fn redirected_per_cpu(&self) -> Result<Vec<u64>, BpfError> {
        per_cpu_packets(&self.rx_stats, "rx_stats")
    }

    /// Frames the interface program handled, all CPUs.
    ///
    /// # Errors
    ///
    /// As [`RedirectCpu::redirected_per_cpu`].
    pub fn redirected(&self) -> Result<u64, BpfError> {
        Ok(self.redirected_per_cpu()?.iter().sum())
    }

    /// Frames the CPUMAP program saw, per CPU it ran on (index = CPU): the frames each target
    /// CPU received.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] (`remote_stats`) if the per-CPU lookup fails.
    pub fn delivered_per_cpu(&self) -> Result<Vec<u64>, BpfError> {
        per_cpu_packets(&self.remote_stats, "remote_stats")
    }

    /// The CPUMAP's id, for [`crate::bpf::MonitorFilter::cpumap_id`].
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] (`cpu_map`) if `bpf_obj_get_info_by_fd` on the map fails.
    pub fn cpumap_id(&self) -> Result<u32, BpfError> {
        Ok(self.cpu_map.info().map_err(map_err("cpu_map"))?.info.id)
    }

    /// The attachment.
    pub fn link(&self) -> &XdpLink {
        &self.link
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(cpus: &[u32], qsize: u32) -> CpumapConfig {
        CpumapConfig { cpus: cpus.to_vec(), dist: CpuDist::Hash, qsize, remote_action: RemoteAction::Drop }
    }

    #[test]
    fn validate_names_the_value() {
        assert!(cfg(&[0, 1], 2048).validate(2).is_ok());
        let e = cfg(&[1], 0).validate(2).expect_err("qsize 0").to_string();
        assert_eq!(e, "CPUMAP queue size 0 is not accepted: frames per CPU queue, 1..=16384");
        let e = cfg(&[99], 8).validate(2).expect_err("cpu 99").to_string();
        assert_eq!(e, "CPUMAP CPUs 99 is not accepted: CPUs of this machine, 0..=1");
        assert!(cfg(&[1, 1], 8).validate(2).expect_err("dup").to_string().contains("listed twice"));
        assert!(cfg(&[], 8).validate(2).is_err());
        assert!(cfg(&[1], MAX_QSIZE + 1).validate(2).is_err());
    }
}
