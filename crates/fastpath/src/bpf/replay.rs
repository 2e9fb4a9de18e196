//! The live-frames replay program (`bpf/xdp_replay.bpf.c`): the frames of a capture in a
//! BPF array, each run of BPF_PROG_RUN (BPF_F_TEST_XDP_LIVE_FRAMES) writing the next one over
//! its page in full and XDP_REDIRECTing it out of one interface, unchanged.

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle};

use super::skel::{self, owned_prog_fd};
use super::BpfError;
use crate::abi::{fp_replay_frame_hdr, fp_replay_state, FP_REPLAY_FRAME_MAX};
use crate::sys::{self, SysError};

/// Bytes the kernel keeps at the head of each live-frames page before the packet's own
/// headroom: `struct xdp_page_head` (two `struct xdp_buff`, 56 bytes each on 64-bit;
/// net/bpf/test_run.c, include/net/xdp.h). The frame may grow (bpf_xdp_adjust_tail) only up
/// to the page less this, XDP_PACKET_HEADROOM and the aligned `skb_shared_info` (320).
const PAGE_HEAD_BYTES: usize = 2 * 56;

/// The longest frame [`XdpReplay`] sends: a page (see [`crate::xsk::page_size`]) less the
/// page head, XDP_PACKET_HEADROOM (256) and the aligned `skb_shared_info` (320): 3408 bytes
/// with 4 KiB pages (`bpf_xdp_adjust_tail` refuses more, `xdp_data_hard_end`,
/// include/net/xdp.h); never more than a map slot (`FP_REPLAY_FRAME_MAX`, 3520).
pub fn max_frame_len() -> usize {
    let page = crate::xsk::page_size().min(4096);
    (page - PAGE_HEAD_BYTES - crate::xsk::XDP_PACKET_HEADROOM as usize - 320).min(FP_REPLAY_FRAME_MAX as usize)
}

/// Bytes of one slot of map replay_frames: its header and `FP_REPLAY_FRAME_MAX` bytes of frame,
/// whatever the frame's length.
pub const SLOT_BYTES: usize = std::mem::size_of::<fp_replay_frame_hdr>() + FP_REPLAY_FRAME_MAX as usize;

/// The most kernel memory [`XdpReplay::load`] takes for frames: 64 MiB (see [`max_frames`]).
pub const MAX_MAP_BYTES: usize = 64 << 20;

/// The most frames [`XdpReplay::load`] takes: as many [`SLOT_BYTES`] slots as fit in
/// [`MAX_MAP_BYTES`] (18,978). Longer captures go with AF_XDP (`--engine xsk`), which keeps
/// them in user memory.
pub const fn max_frames() -> usize {
    MAX_MAP_BYTES / SLOT_BYTES
}

/// How the sends of a replay are timed (`fp_replay_state.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayTiming {
    /// Frame i of pass p at p * span + its time from the file's first frame (the file's own
    /// gaps).
    File,
    /// One send per this many nanoseconds (>= 1).
    IntervalNs(u64),
    /// As fast as the runs go.
    TopSpeed,
}

/// The replay program, loaded with its frames, not attached: it runs through BPF_PROG_RUN with
/// BPF_F_TEST_XDP_LIVE_FRAMES (kernel >= 5.18) on one CPU at a time.
#[derive(Debug)]
pub struct XdpReplay {
    prog: OwnedFd,
    state: MapHandle,
    max_len: usize,
}

impl XdpReplay {
    /// Loads the program with `out_ifindex` (in the calling thread's network namespace) as the
    /// interface every frame leaves by, and `frames` as (time from the first frame in ns,
    /// whole Ethernet frame) in sending order. Kernel memory: [`SLOT_BYTES`] (3,536) per frame
    /// whatever its length, so at most [`max_frames`] frames ([`MAX_MAP_BYTES`]). Needs root,
    /// or CAP_BPF + CAP_NET_ADMIN.
    ///
    /// # Errors
    ///
    /// [`BpfError::Unsupported`] without live frames (Linux >= 5.18); [`BpfError::BadValue`] for
    /// no frames, more than [`max_frames`], or a frame shorter than 14 bytes or longer than
    /// [`max_frame_len`]; [`BpfError::Load`] if loading fails (verifier, privileges, the
    /// memory cgroup's limit for the frame array); [`BpfError::Map`] if a frame cannot be
    /// stored.
    pub fn load(out_ifindex: u32, frames: &[(u64, &[u8])]) -> Result<Self, BpfError> {
        crate::features::check(crate::features::Feature::LiveFrames)?;
        let n = u32::try_from(frames.len()).ok().filter(|&n| n > 0 && n as usize <= max_frames()).ok_or_else(|| {
            BpfError::BadValue {
                what: "replay frames",
                value: frames.len().to_string(),
                accepted: format!(
                    "use 1..={} frames ({SLOT_BYTES} bytes of kernel memory each, at most {} MiB)",
                    max_frames(),
                    MAX_MAP_BYTES >> 20
                ),
            }
        })?;
        let max_len = max_frame_len();
        if let Some((i, (_, f))) = frames.iter().enumerate().find(|(_, (_, f))| f.len() < 14 || f.len() > max_len) {
            return Err(BpfError::BadValue {
                what: "replay frame length",
                value: format!("{} (frame {})", f.len(), i + 1),
                accepted: format!("use 14..={max_len} bytes (one live-frames page)"),
            });
        }
        let mut storage = MaybeUninit::uninit();
        let builder = skel::xdp_replay::XdpReplaySkelBuilder::default();
        let mut open = builder.open(&mut storage).map_err(|cause| BpfError::Load { prog: "xdp_replay", cause })?;
        if let Some(ro) = open.maps.rodata_data.as_deref_mut() {
            ro.out_ifindex = out_ifindex;
            ro.nframes = n;
        }
        open.maps.replay_frames.set_max_entries(n).map_err(|cause| BpfError::Map { map: "replay_frames", cause })?;
        let s = open.load().map_err(|cause| BpfError::Load { prog: "xdp_replay", cause })?;
        let prog = owned_prog_fd(s.progs.xdp_replay.as_fd())?;
        let frames_map = MapHandle::try_from(&s.maps.replay_frames)
            .map_err(|cause| BpfError::Map { map: "replay_frames", cause })?;
        let state =
            MapHandle::try_from(&s.maps.replay_state).map_err(|cause| BpfError::Map { map: "replay_state", cause })?;
        let hdr_len = std::mem::size_of::<fp_replay_frame_hdr>();
        let mut value = vec![0u8; hdr_len + FP_REPLAY_FRAME_MAX as usize];
        for (i, (at_ns, f)) in frames.iter().enumerate() {
            let h = fp_replay_frame_hdr { len: f.len() as u32, _pad: 0, at_ns: *at_ns };
            value[..hdr_len].copy_from_slice(bytemuck::bytes_of(&h));
            value[hdr_len..hdr_len + f.len()].copy_from_slice(f);
            value[hdr_len + f.len()..].fill(0);
            frames_map
                .update(&(i as u32).to_ne_bytes(), &value, MapFlags::ANY)
                .map_err(|cause| BpfError::Map { map: "replay_frames", cause })?;
        }
        let max_len = frames.iter().map(|(_, f)| f.len()).max().unwrap_or(14);
        Ok(Self { prog, state, max_len })
    }

    /// Starts a replay over: `total` sends (0: until stopped) timed by `timing`, one pass of
    /// the file lasting `span_ns` ([`ReplayTiming::File`]). Call before the first
    /// [`XdpReplay::run`].
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] (`replay_state`) if the update is refused.
    pub fn reset(&self, timing: ReplayTiming, total: u64, span_ns: u64) -> Result<(), BpfError> {
        let (mode, interval_ns) = match timing {
            ReplayTiming::File => (crate::abi::FP_REPLAY_FILE, 0),
            ReplayTiming::IntervalNs(i) => (crate::abi::FP_REPLAY_RATE, i.max(1)),
            ReplayTiming::TopSpeed => (crate::abi::FP_REPLAY_TOP, 0),
        };
        let st = fp_replay_state { total, interval_ns, span_ns, mode, ..Default::default() };
        self.state
            .update(&0u32.to_ne_bytes(), bytemuck::bytes_of(&st), MapFlags::ANY)
            .map_err(|cause| BpfError::Map { map: "replay_state", cause })
    }

    /// The replay's counts so far: sends done (`next`), bytes, refused runs and the frame index
    /// of the first refusal.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] (`replay_state`) if the lookup fails.
    pub fn state(&self) -> Result<fp_replay_state, BpfError> {
        Ok(self
            .state
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(|cause| BpfError::Map { map: "replay_state", cause })?
            .and_then(|b| crate::abi::read::<fp_replay_state>(&b))
            .unwrap_or_default())
    }

    /// Runs the program `repeat` times in live-frames mode on the calling CPU, `batch_size`
    /// runs per kernel batch (1..=256). Each run sends the next frame if it is due, else drops
    /// its page. A signal interrupts the call: then `Ok(false)` (the kernel's EINTR, checked
    /// between batches, `bpf_test_timer_continue` in net/bpf/test_run.c); `Ok(true)`: all runs
    /// done.
    ///
    /// # Errors
    ///
    /// The failed BPF_PROG_RUN: E2BIG for a `batch_size` above 256, EPERM without root or
    /// CAP_BPF + CAP_NET_ADMIN.
    pub fn run(&self, repeat: u32, batch_size: u32) -> Result<bool, SysError> {
        // The page's first bytes: the longest frame, so that no run needs to grow the frame
        // beyond what the page was set up with. Every run overwrites them.
        let data = vec![0u8; self.max_len];
        let r = sys::bpf::prog_test_run(
            self.prog.as_fd(),
            &data,
            repeat,
            sys::bpf::BPF_F_TEST_XDP_LIVE_FRAMES,
            batch_size,
            || {
                format!("bpf_prog_test_run(xdp_replay, BPF_F_TEST_XDP_LIVE_FRAMES, repeat={repeat}, batch_size={batch_size})")
            },
        );
        match r {
            Err(e) if e.errno == libc::EINTR => Ok(false),
            Err(e) => Err(e),
            Ok(_) => Ok(true),
        }
    }
}
