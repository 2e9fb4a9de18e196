//! `xdp_drop` (bpf/xdp_drop.bpf.c): counts per CPU and drops every frame.

use std::os::fd::AsFd;

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle};

use super::skel::{self, load_skel, owned_prog_fd};
use super::{BpfError, Loaded, XdpLink};

/// `xdp_drop` attached to an interface: counts per CPU and drops.
///
/// # Examples
///
/// ```no_run
/// use fastpath::bpf::{AttachOpts, XdpDrop};
/// use fastpath::netdev::Iface;
///
/// let iface = Iface::resolve("eth0")?;
/// let xdp = XdpDrop::load()?.attach(&iface, AttachOpts::default())?; // native, else skb
/// for note in &xdp.notes {
///     eprintln!("{note}"); // e.g. the fallback to skb
/// }
/// std::thread::sleep(std::time::Duration::from_secs(1));
/// let (packets, bytes) = xdp.prog.counters()?;
/// println!("{iface} ({} mode): dropped {packets} packets, {bytes} bytes", xdp.mode);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct XdpDrop {
    link: XdpLink,
    stats: MapHandle,
}

impl XdpDrop {
    /// Loads `bpf/xdp_drop.bpf.c` (not attached: [`Loaded::attach`]). Needs root, or CAP_BPF.
    ///
    /// # Errors
    ///
    /// [`BpfError::Load`], [`BpfError::Map`], [`BpfError::Sys`].
    pub fn load() -> Result<Loaded<Self>, BpfError> {
        let (prog, stats) = load_skel!(skel::xdp_drop::XdpDropSkelBuilder, "xdp_drop", |open| {}, |s| {
            let prog = owned_prog_fd(s.progs.xdp_drop.as_fd())?;
            let stats =
                MapHandle::try_from(&s.maps.drop_stats).map_err(|cause| BpfError::Map { map: "drop_stats", cause })?;
            (prog, stats)
        });
        Ok(Loaded::new(prog, move |link| Self { link, stats }))
    }

    /// (packets, bytes) dropped so far, summed over CPUs.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] (`drop_stats`) if the per-CPU lookup fails.
    pub fn counters(&self) -> Result<(u64, u64), BpfError> {
        let per_cpu = self
            .stats
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(|cause| BpfError::Map { map: "drop_stats", cause })?
            .unwrap_or_default();
        Ok(per_cpu
            .iter()
            .filter_map(|v| crate::abi::read::<crate::abi::fp_pkt_stats>(v))
            .fold((0, 0), |(p, b), c| (p + c.packets, b + c.bytes)))
    }

    /// The attachment.
    pub fn link(&self) -> &XdpLink {
        &self.link
    }
}
