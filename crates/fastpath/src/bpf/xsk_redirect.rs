//! `xsk_redirect` (bpf/xsk_redirect.bpf.c) and its RX-metadata variant
//! (bpf/xsk_redirect_meta.bpf.c): frames of queue q go to the AF_XDP socket in XSKMAP slot q.

use std::os::fd::{AsFd, RawFd};

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle};

use super::skel::{self, load_skel, owned_prog_fd};
use super::{BpfError, Loaded, XdpLink};
use crate::netdev::Iface;
use crate::sys;

/// `xsk_redirect` attached to an interface: frames of queue q go to the XSK in slot q.
///
/// # Examples
///
/// ```no_run
/// use fastpath::bpf::{AttachOpts, XskRedirect, XskRedirectOpts};
/// use fastpath::netdev::Iface;
/// use fastpath::xsk::{SocketConfig, Umem, UmemConfig, XskSocket};
///
/// let iface = Iface::resolve("eth0")?;
/// let (umem, _frames) = Umem::new(&UmemConfig::default())?;
/// let sock = XskSocket::bind(&umem, &iface, 0, &SocketConfig::default())?;
/// let opts = XskRedirectOpts::default().with_socks_per_queue(1);
/// let xdp = XskRedirect::load(opts)?.attach(&iface, AttachOpts::default())?;
/// xdp.prog.insert(0, sock.as_raw_fd())?; // queue 0's frames now go to `sock`
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct XskRedirect {
    link: XdpLink,
    xsks: MapHandle,
    /// The RX-metadata program's per-CPU count of frames it passed to the stack for want of
    /// room for the metadata ([`XskRedirect::load_rx_meta`]).
    no_room: Option<MapHandle>,
}

/// How to load [`XskRedirect`] (load-time properties; the attach ones are [`AttachOpts`](super::AttachOpts)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct XskRedirectOpts {
    /// Sockets on each queue (sharing one UMEM's FILL and COMPLETION rings,
    /// [`crate::xsk::Sharing::SameQueue`]): queue q's frames go round robin (per CPU) to XSKMAP
    /// slots `q * socks_per_queue ..` (insert with [`XskRedirect::insert`] at those slots).
    /// 1..=64 (clamped).
    pub socks_per_queue: u32,
    /// The frags-aware program (`xdp.frags`, BPF_F_XDP_HAS_FRAGS, kernel >= 5.18) for
    /// multi-buffer sockets: it attaches natively whatever the MTU, where a single-buffer
    /// program is refused above one page. A load-time property: choosing it is choosing which
    /// program to load, the same for both attach modes.
    pub frags: bool,
}

impl Default for XskRedirectOpts {
    fn default() -> Self {
        Self { socks_per_queue: 1, frags: false }
    }
}

impl XskRedirectOpts {
    /// These options with `socks_per_queue` sockets on each queue (1..=64, clamped at load).
    #[must_use]
    pub fn with_socks_per_queue(self, socks_per_queue: u32) -> Self {
        Self { socks_per_queue, ..self }
    }

    /// These options with the frags-aware program or not ([`XskRedirectOpts::frags`]).
    #[must_use]
    pub fn with_frags(self, frags: bool) -> Self {
        Self { frags, ..self }
    }
}

impl XskRedirect {
    /// Loads `bpf/xsk_redirect.bpf.c` as `opts` says (not attached: [`Loaded::attach`]).
    /// Needs root, or CAP_BPF (+ CAP_NET_ADMIN to attach).
    ///
    /// # Errors
    ///
    /// [`BpfError::Load`] (verifier, privileges, a kernel < 5.18 for `frags`),
    /// [`BpfError::Map`], [`BpfError::Sys`].
    pub fn load(opts: XskRedirectOpts) -> Result<Loaded<Self>, BpfError> {
        let XskRedirectOpts { socks_per_queue, frags } = opts;
        let (prog, xsks) = load_skel!(
            skel::xsk_redirect::XskRedirectSkelBuilder,
            "xsk_redirect",
            |open| {
                if let Some(ro) = open.maps.rodata_data.as_deref_mut() {
                    ro.socks_per_queue = socks_per_queue.clamp(1, 64);
                }
                open.progs.xsk_redirect.set_autoload(!frags);
                open.progs.xsk_redirect_frags.set_autoload(frags);
            },
            |s| {
                let p = if frags { &s.progs.xsk_redirect_frags } else { &s.progs.xsk_redirect };
                let prog = owned_prog_fd(p.as_fd())?;
                let xsks = MapHandle::try_from(&s.maps.xsks).map_err(|cause| BpfError::Map { map: "xsks", cause })?;
                (prog, xsks)
            }
        );
        Ok(Loaded::new(prog, move |link| Self { link, xsks, no_room: None }))
    }

    /// Loads `bpf/xsk_redirect_meta.bpf.c` bound to `iface` (BPF_F_XDP_DEV_BOUND_ONLY; it can
    /// be attached to that interface only): `xsk_redirect` that also calls the driver's XDP
    /// RX metadata kfuncs and puts their answers in front of every frame
    /// ([`crate::xsk::RxMeta`]). One socket per queue, single-buffer frames. Needs root, or
    /// CAP_BPF (+ CAP_NET_ADMIN to attach); Linux >= 6.3 (device-bound programs, the timestamp
    /// and hash kfuncs; the VLAN kfunc >= 6.8, skipped where absent).
    ///
    /// # Errors
    ///
    /// [`BpfError::Load`] (a kernel < 6.3, a driver whose XDP does not support device-bound
    /// programs, privileges), [`BpfError::Map`].
    pub fn load_rx_meta(iface: &Iface) -> Result<Loaded<Self>, BpfError> {
        let ifindex = iface.ifindex();
        let (prog, xsks, no_room) = load_skel!(
            skel::xsk_redirect_meta::XskRedirectMetaSkelBuilder,
            "xsk_redirect_meta",
            |open| {
                open.progs.xsk_redirect_meta.set_ifindex(ifindex);
                open.progs.xsk_redirect_meta.set_flags(sys::uapi::BPF_F_XDP_DEV_BOUND_ONLY);
            },
            |s| {
                let prog = owned_prog_fd(s.progs.xsk_redirect_meta.as_fd())?;
                let xsks = MapHandle::try_from(&s.maps.xsks).map_err(|cause| BpfError::Map { map: "xsks", cause })?;
                let no_room =
                    MapHandle::try_from(&s.maps.no_room).map_err(|cause| BpfError::Map { map: "no_room", cause })?;
                (prog, xsks, no_room)
            }
        );
        Ok(Loaded::new(prog, move |link| Self { link, xsks, no_room: Some(no_room) }))
    }

    /// The RX-metadata program's frames passed to the kernel's stack because the driver kept no
    /// room for the metadata in front of them (summed over CPUs); `None` for the plain program.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] if the map cannot be read.
    pub fn rx_meta_no_room(&self) -> Result<Option<u64>, BpfError> {
        let Some(m) = &self.no_room else { return Ok(None) };
        let per_cpu = m
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(|cause| BpfError::Map { map: "no_room", cause })?
            .unwrap_or_default();
        Ok(Some(per_cpu.iter().filter_map(|v| crate::abi::read::<u64>(v)).sum()))
    }

    /// Puts the AF_XDP socket `xsk_fd` into XSKMAP slot `queue_id`.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] (`xsks`) if the update is refused: E2BIG for `queue_id` beyond the
    /// XSKMAP's size, EOPNOTSUPP if `xsk_fd` is not an AF_XDP socket (kernel/bpf/xskmap.c).
    pub fn insert(&self, queue_id: u32, xsk_fd: RawFd) -> Result<(), BpfError> {
        self.xsks
            .update(&queue_id.to_ne_bytes(), &(xsk_fd as u32).to_ne_bytes(), MapFlags::ANY)
            .map_err(|cause| BpfError::Map { map: "xsks", cause })
    }

    /// The attachment.
    pub fn link(&self) -> &XdpLink {
        &self.link
    }
}
