//! `xdp_gen` (bpf/xdp_gen.bpf.c): the live-frames generator, run through BPF_PROG_RUN.

use std::os::fd::{AsFd, OwnedFd};

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle};

use super::skel::{self, load_skel, owned_prog_fd};
use super::BpfError;
use crate::sys::{self, SysError};

/// The live-frames generator program (`bpf/xdp_gen.bpf.c`), loaded but not attached: it runs
/// through BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES (kernel >= 5.18,
/// Documentation/bpf/bpf_prog_run.rst) and XDP_REDIRECTs every frame out of one interface.
#[derive(Debug)]
pub struct XdpGen {
    prog: OwnedFd,
    seq: MapHandle,
    pace: MapHandle,
    hdr: MapHandle,
}

impl XdpGen {
    /// Loads the program with `out_ifindex` (in the calling thread's network namespace) as the
    /// interface every frame is sent out of.
    ///
    /// # Errors
    ///
    /// [`BpfError::Unsupported`] if the kernel has no live frames
    /// ([`Feature::LiveFrames`](crate::features::Feature::LiveFrames), Linux >= 5.18; probed once
    /// per process by [`crate::features::probe`]); [`BpfError::Load`] if loading fails (needs
    /// root, or CAP_BPF + CAP_NET_ADMIN); [`BpfError::Map`] / [`BpfError::Sys`] if a map handle
    /// or the program fd cannot be taken.
    pub fn load(out_ifindex: u32) -> Result<Self, BpfError> {
        Self::load_flows(out_ifindex, None)
    }

    /// As [`XdpGen::load`], and with `flows` every frame carries one of its 5-tuples: frame
    /// `seq` of a CPU gets flow `(seq - 1) % n` ([`Flows`](crate::packet::Flows): the source
    /// address's last byte and the source port rewritten, IPv4 header and UDP checksums fixed
    /// incrementally in the program). Frames may be IPv4 or IPv6 (as
    /// [`build_udp_frame`](crate::packet::build_udp_frame) makes them). Same errors.
    ///
    /// # Errors
    ///
    /// As [`XdpGen::load`].
    pub fn load_flows(out_ifindex: u32, flows: Option<&crate::packet::Flows>) -> Result<Self, BpfError> {
        Self::load_with(out_ifindex, flows, None)
    }

    /// As [`XdpGen::load`], and every frame comes from one of `spread`'s sources: frame `seq`
    /// of a CPU carries flow `(seq - 1) % flows` of the [`SourceSpread`](crate::spread::SourceSpread)
    /// (the last 32 bits of the source address and the source port rewritten, the IPv4 header
    /// and the UDP or TCP checksum fixed incrementally in the program). Frames may be IPv4 or
    /// IPv6, UDP or TCP.
    ///
    /// # Errors
    ///
    /// As [`XdpGen::load`].
    pub fn load_spread(out_ifindex: u32, spread: &crate::spread::SourceSpread) -> Result<Self, BpfError> {
        Self::load_with(out_ifindex, Some(spread.flows()), Some(spread))
    }

    fn load_with(
        out_ifindex: u32,
        flows: Option<&crate::packet::Flows>,
        spread: Option<&crate::spread::SourceSpread>,
    ) -> Result<Self, BpfError> {
        crate::features::check(crate::features::Feature::LiveFrames)?;
        let (prog, seq, pace, hdr) = load_skel!(
            skel::xdp_gen::XdpGenSkelBuilder,
            "xdp_gen",
            |open| {
                if let Some(ro) = open.maps.rodata_data.as_deref_mut() {
                    ro.out_ifindex = out_ifindex;
                    if let Some(f) = flows {
                        let [k0, k1, k2] = f.keys();
                        ro.flows = f.n();
                        ro.flow_k0 = k0;
                        ro.flow_k1 = k1;
                        ro.flow_k2 = k2;
                    }
                    if let Some(sp) = spread {
                        ro.src_count = sp.sources();
                        ro.src_base = sp.base();
                    }
                }
            },
            |s| {
                let prog = owned_prog_fd(s.progs.xdp_gen.as_fd())?;
                let seq =
                    MapHandle::try_from(&s.maps.gen_seq).map_err(|cause| BpfError::Map { map: "gen_seq", cause })?;
                let pace =
                    MapHandle::try_from(&s.maps.gen_pace).map_err(|cause| BpfError::Map { map: "gen_pace", cause })?;
                let hdr =
                    MapHandle::try_from(&s.maps.gen_hdr).map_err(|cause| BpfError::Map { map: "gen_hdr", cause })?;
                (prog, seq, pace, hdr)
            }
        );
        Ok(Self { prog, seq, pace, hdr })
    }

    /// Paces the frames the program sends on CPU `cpu` to one per `interval_ns` (0: unpaced),
    /// per frame inside the program: a run that is not yet due is XDP_DROPped (its page goes
    /// back to the run's page pool) and not counted in [`XdpGen::per_cpu_seq`]. Resets the
    /// CPU's window counts ([`XdpGen::pace_windows`]). `cpu` < 256 (`FP_GEN_MAX_CPUS`).
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] (`gen_pace`) if the update is refused, e.g. E2BIG for `cpu` >= 256.
    pub fn set_pace(&self, cpu: usize, interval_ns: u64) -> Result<(), BpfError> {
        let v = crate::abi::fp_gen_pace { interval_ns, ..Default::default() };
        self.pace
            .update(&(cpu as u32).to_ne_bytes(), bytemuck::bytes_of(&v), MapFlags::ANY)
            .map_err(|cause| BpfError::Map { map: "gen_pace", cause })
    }

    /// CPU `cpu`'s paced 1 ms windows since [`XdpGen::set_pace`]: (whole windows, of those
    /// within 20% of the nominal rate). A window with no frame counts, as not within.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] (`gen_pace`) if the lookup call fails; a `cpu` >= 256 reads as (0, 0).
    pub fn pace_windows(&self, cpu: usize) -> Result<(u64, u64), BpfError> {
        let v = self
            .pace
            .lookup(&(cpu as u32).to_ne_bytes(), MapFlags::ANY)
            .map_err(|cause| BpfError::Map { map: "gen_pace", cause })?
            .and_then(|b| crate::abi::read::<crate::abi::fp_gen_pace>(&b))
            .unwrap_or_default();
        Ok((v.windows, v.within_20pct))
    }

    /// Runs the program `repeat` times over `frame` in live-frames mode on the calling CPU,
    /// `batch_size` frames per kernel batch (1..=256, the kernel's limit). Each run sends one frame.
    ///
    /// Each call sets up and tears down a page pool. Measured on a 6.18 VM (strace -T):
    /// back-to-back calls cost ~24 ms each beyond their frames however few they carry
    /// (mostly waiting, not CPU; a lone call of up to ~100 frames every 50 ms or more returns
    /// in ~0.1 ms). So callers pass large `repeat` values, pace inside the program
    /// ([`XdpGen::set_pace`]) and count frames with [`XdpGen::per_cpu_seq`]. A signal interrupts the call: it then returns
    /// `Ok(false)` (the kernel's EINTR) having sent part of the frames; `Ok(true)` means all.
    ///
    /// # Errors
    ///
    /// [`SysError`] (errno EIO) if the `gen_hdr` map update fails; the failed BPF_PROG_RUN
    /// otherwise: EINVAL for a `batch_size` above 256 or a frame the kernel refuses, EPERM without
    /// root or CAP_BPF + CAP_NET_ADMIN. EINTR is not an error (`Ok(false)`).
    pub fn run(&self, frame: &[u8], repeat: u32, batch_size: u32) -> Result<bool, SysError> {
        // What the program puts back in every frame (struct fp_gen_hdr): MACs and TTL, and a
        // TCP frame's whole template.
        if frame.len() >= 34 {
            let mut h = crate::abi::fp_gen_hdr { set: 1, ..Default::default() };
            h.macs.copy_from_slice(&frame[..12]);
            let v6 = frame[12..14] == [0x86, 0xdd];
            h.ttl = if v6 { frame.get(21).copied().unwrap_or(64) } else { frame[22] };
            // A TCP frame (IPv4 protocol / IPv6 next header 6): its whole template goes back
            // into every page (bpf/xdp_gen.bpf.c restore_tcp), as a receiver may answer in place.
            // A longer frame gets its first FP_GEN_TCP_MAX bytes back: every header a receiver
            // answering in place rewrites (a cookie SYN-ACK ends by byte 94).
            if frame.get(if v6 { 20 } else { 23 }) == Some(&6) {
                let k = frame.len().min(h.tcp.len());
                h.tcp[..k].copy_from_slice(&frame[..k]);
                h.tcp_len = k as u8;
            }
            self.hdr
                .update(&0u32.to_ne_bytes(), bytemuck::bytes_of(&h), MapFlags::ANY)
                .map_err(|e| SysError { call: format!("BPF map gen_hdr update: {e}"), errno: libc::EIO })?;
        }
        let r = sys::bpf::prog_test_run(
            self.prog.as_fd(),
            frame,
            repeat,
            sys::bpf::BPF_F_TEST_XDP_LIVE_FRAMES,
            batch_size,
            || {
                format!("bpf_prog_test_run(xdp_gen, BPF_F_TEST_XDP_LIVE_FRAMES, repeat={repeat}, batch_size={batch_size}, len={})", frame.len())
            },
        );
        match r {
            Err(e) if e.errno == libc::EINTR => return Ok(false),
            Err(e) => return Err(e),
            Ok(_) => {}
        }
        Ok(true)
    }

    /// Sum of [`XdpGen::per_cpu_seq`]: frames generated on all CPUs since load.
    ///
    /// # Errors
    ///
    /// As [`XdpGen::per_cpu_seq`].
    pub fn total_sent(&self) -> Result<u64, BpfError> {
        Ok(self.per_cpu_seq()?.iter().sum())
    }

    /// Per-CPU sequence numbers so far (index = CPU): the count of frames each CPU generated.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] (`gen_seq`) if the per-CPU lookup fails.
    pub fn per_cpu_seq(&self) -> Result<Vec<u64>, BpfError> {
        let v = self
            .seq
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(|cause| BpfError::Map { map: "gen_seq", cause })?
            .unwrap_or_default();
        // The value is a plain __u64 (bpf/xdp_gen.bpf.c); a short value reads as 0.
        Ok(v.iter().map(|b| crate::abi::read::<u64>(b).unwrap_or(0)).collect())
    }
}
