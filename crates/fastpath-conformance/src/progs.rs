//! The scenarios' own XDP programs (`bpf/xsk_progs.bpf.c`): XDP_DROP of every other frame,
//! metadata in front of the frame, a tail adjustment. Loaded fresh for each use (their
//! counters start at 0) and attached in the run's XDP mode with `fastpath::bpf::XdpLink`.

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd, RawFd};

use fastpath::bpf::{AttachOpts, Attached, XdpLink, XdpMode};
use fastpath::netdev::Iface;
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle};

#[allow(clippy::all, clippy::pedantic, missing_docs, clippy::undocumented_unsafe_blocks, unsafe_op_in_unsafe_fn)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/xsk_progs.skel.rs"));
}

/// Which program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prog {
    /// `xsk_drop_half`: XDP_DROP of the 2nd, 4th, ... frame by arrival.
    DropHalf,
    /// `xsk_meta`: a 32-byte metadata area before each frame, its first u64 the frame's
    /// arrival count from 0 (`bpf_xdp_adjust_meta`).
    Meta,
    /// `xsk_adjust_tail`: every frame's length changed by this many bytes
    /// (`bpf_xdp_adjust_tail`); a frame the helper refuses is dropped and its error kept
    /// ([`TestProg::adjust_error`]).
    AdjustTail(i32),
}

/// One of the programs, attached; its XSKMAP slot 0 takes what it keeps. Detached on drop.
#[derive(Debug)]
pub struct TestProg {
    _link: Attached<XdpLink>,
    xsks: MapHandle,
    bss: MapHandle,
    _prog: OwnedFd,
}

impl TestProg {
    /// Puts AF_XDP socket `fd` in XSKMAP slot `slot` (0..4).
    ///
    /// # Errors
    ///
    /// The map update's, as text.
    pub fn insert(&self, slot: u32, fd: RawFd) -> Result<(), String> {
        self.xsks
            .update(&slot.to_ne_bytes(), &(fd as u32).to_ne_bytes(), MapFlags::ANY)
            .map_err(|e| format!("xsks: {e}"))
    }

    /// `xsk_adjust_tail`'s record: 0, or the last error `bpf_xdp_adjust_tail` returned
    /// (a negative errno: -EOPNOTSUPP where the driver or generic XDP cannot grow the
    /// frame, -EINVAL past the frame's tailroom).
    ///
    /// # Errors
    ///
    /// Reading the program's .bss, as text.
    pub fn adjust_error(&self) -> Result<i32, String> {
        let v = self.bss.lookup(&0u32.to_ne_bytes(), MapFlags::ANY).map_err(|e| format!(".bss: {e}"))?;
        let b = v.ok_or(".bss: no value")?;
        // The layout of `struct xsk_progs_bss` (the skeleton's): read through the skeleton's type.
        let off = std::mem::offset_of!(skel::types::bss, adjust_err);
        let bytes: [u8; 4] = b.get(off..off + 4).and_then(|s| s.try_into().ok()).ok_or(".bss: too short")?;
        Ok(i32::from_ne_bytes(bytes))
    }
}

/// Loads `which` and attaches it to `iface` in namespace `ns` in attach mode `xdp`.
///
/// # Errors
///
/// Loading (verifier, privileges) or attaching, as text; the kernel reporting the program
/// in another mode ([`crate::xsk::check_attached`]).
pub fn attach(ns: &str, iface: &str, which: Prog, xdp: XdpMode) -> Result<TestProg, String> {
    let iface = iface.to_string();
    fastpath_testbed::run_in_netns(ns, move || load_and_attach(&iface, which, xdp)).map_err(|e| e.to_string())?
}

fn load_and_attach(iface: &str, which: Prog, xdp: XdpMode) -> Result<TestProg, String> {
    let ifc = Iface::resolve(iface).map_err(|e| e.to_string())?;
    let mut storage = MaybeUninit::uninit();
    let mut open = skel::XskProgsSkelBuilder::default().open(&mut storage).map_err(|e| format!("open: {e}"))?;
    if let (Prog::AdjustTail(by), Some(ro)) = (which, open.maps.rodata_data.as_deref_mut()) {
        ro.adjust_by = by;
    }
    let s = open.load().map_err(|e| format!("load: {e}"))?;
    let p = match which {
        Prog::DropHalf => &s.progs.xsk_drop_half,
        Prog::Meta => &s.progs.xsk_meta,
        Prog::AdjustTail(_) => &s.progs.xsk_adjust_tail,
    };
    let prog = p.as_fd().try_clone_to_owned().map_err(|e| format!("dup: {e}"))?;
    let xsks = MapHandle::try_from(&s.maps.xsks).map_err(|e| format!("xsks: {e}"))?;
    let bss = MapHandle::try_from(&s.maps.bss).map_err(|e| format!(".bss: {e}"))?;
    let link = XdpLink::attach(prog.as_fd(), &ifc, AttachOpts::mode(Some(xdp))).map_err(|e| e.to_string())?;
    crate::xsk::check_attached(&ifc, xdp)?;
    Ok(TestProg { _link: link, xsks, bss, _prog: prog })
}
