//! `bpf/xdp_capture.bpf.c` attached to an interface: every frame copied (up to the snap length,
//! all buffers of a multi-buffer frame) into a BPF ring buffer and passed on untouched, as
//! xdpdump does. [`CaptureMaps::ring`] reads the records; [`CaptureMaps::stats`] says per queue
//! what was seen, captured and lost to a full ring buffer.
//!
//! Needs CAP_BPF + CAP_NET_ADMIN; kernel >= 5.18 (BPF ring buffer 5.8, bpf_xdp_load_bytes and
//! BPF_F_XDP_HAS_FRAGS 5.18; Documentation/bpf/ringbuf.rst).

use std::mem::MaybeUninit;
use std::os::fd::AsFd;

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use serde::Serialize;

use super::skel::{self, owned_prog_fd};
use super::{BpfError, Loaded, XdpLink};
use crate::abi::{self, fp_cap_hdr, fp_cap_stats};

/// Longest snap length the program keeps, in bytes.
pub const MAX_SNAPLEN: u32 = abi::FP_CAP_MAX_BYTES;
/// Queues counted one by one (higher queue ids share the last slot).
pub const MAX_QUEUES: u32 = abi::FP_CAP_MAX_QUEUES;
/// Bytes of a record's header before the frame's bytes.
pub const HDR_BYTES: usize = std::mem::size_of::<fp_cap_hdr>();

/// One captured frame, as read from the ring buffer.
#[derive(Debug, Clone, Copy)]
pub struct CapRecord<'a> {
    /// CLOCK_MONOTONIC nanoseconds when the program ran.
    pub tstamp_ns: u64,
    /// The receive queue.
    pub queue: u32,
    /// The frame's length on the wire, in bytes.
    pub len: u32,
    /// The bytes kept (at most the snap length).
    pub data: &'a [u8],
}

impl<'a> CapRecord<'a> {
    /// Parses a ring-buffer record; `None` if it is shorter than its header says.
    pub fn parse(rec: &'a [u8]) -> Option<Self> {
        let h: fp_cap_hdr = abi::read(rec)?;
        let data = rec.get(HDR_BYTES..HDR_BYTES + h.caplen as usize)?;
        Some(Self { tstamp_ns: h.tstamp_ns, queue: h.queue, len: h.len, data })
    }
}

/// Per queue: frames the program ran on, captured, and not captured because the ring buffer
/// was full.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CapStats {
    /// Frames seen.
    pub seen: u64,
    /// Frames written to the ring buffer.
    pub captured: u64,
    /// Frames lost to a full ring buffer (they went on, uncaptured).
    pub ringbuf_full: u64,
}

/// The capture ring and its per-queue counters (`bpf/include/fastpath_capture.h`), of
/// [`XdpCapture`] or of a classifier loaded with
/// [`Classifier::load_with_capture`](super::Classifier::load_with_capture).
#[derive(Debug)]
pub struct CaptureMaps {
    ring: MapHandle,
    stats: MapHandle,
}

impl CaptureMaps {
    pub(crate) fn new(ring: &libbpf_rs::MapMut<'_>, stats: &libbpf_rs::MapMut<'_>) -> Result<Self, BpfError> {
        Ok(Self {
            ring: MapHandle::try_from(ring).map_err(|cause| BpfError::Map { map: "cap_ring", cause })?,
            stats: MapHandle::try_from(stats).map_err(|cause| BpfError::Map { map: "cap_stats", cause })?,
        })
    }

    /// A reader of the ring buffer calling `f` with each record (in order per CPU); poll it
    /// with `RingBuffer::poll`. Records that do not parse are skipped.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] (`cap_ring`) if libbpf cannot set up the ring buffer reader (mmap of the
    /// ring, epoll).
    pub fn ring<'a>(&'a self, mut f: impl FnMut(CapRecord<'_>) + 'a) -> Result<libbpf_rs::RingBuffer<'a>, BpfError> {
        let mut b = libbpf_rs::RingBufferBuilder::new();
        b.add(&self.ring, move |rec: &[u8]| {
            if let Some(r) = CapRecord::parse(rec) {
                f(r);
            }
            0
        })
        .map_err(|cause| BpfError::Map { map: "cap_ring", cause })?;
        b.build().map_err(|cause| BpfError::Map { map: "cap_ring", cause })
    }

    /// Counters of queue `q` (queue ids >= [`MAX_QUEUES`] - 1 share the last slot), summed
    /// over CPUs.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] (`cap_stats`) if the per-CPU lookup fails.
    pub fn stats(&self, q: u32) -> Result<CapStats, BpfError> {
        let key = q.min(MAX_QUEUES - 1);
        let per_cpu = self
            .stats
            .lookup_percpu(&key.to_ne_bytes(), MapFlags::ANY)
            .map_err(|cause| BpfError::Map { map: "cap_stats", cause })?
            .unwrap_or_default();
        Ok(per_cpu.iter().filter_map(|v| abi::read::<fp_cap_stats>(v)).fold(CapStats::default(), |a, c| CapStats {
            seen: a.seen + c.seen,
            captured: a.captured + c.captured,
            ringbuf_full: a.ringbuf_full + c.ringbuf_full,
        }))
    }
}

/// The capture program (`bpf/xdp_capture.bpf.c`: every frame), attached. Dropping it detaches.
#[derive(Debug)]
pub struct XdpCapture {
    link: XdpLink,
    maps: CaptureMaps,
}

impl XdpCapture {
    /// Loads the program with `snaplen` (1..=[`MAX_SNAPLEN`]) and a ring buffer of
    /// `ring_bytes` (a power of two, at least a page); not attached ([`Loaded::attach`]).
    /// Needs root, or CAP_BPF; Linux >= 5.8 (BPF ring buffer).
    ///
    /// # Errors
    ///
    /// [`BpfError::Load`], [`BpfError::Map`], [`BpfError::Sys`].
    pub fn load(snaplen: u32, ring_bytes: u32) -> Result<Loaded<Self>, BpfError> {
        let mut storage = MaybeUninit::uninit();
        let builder = skel::xdp_capture::XdpCaptureSkelBuilder::default();
        let mut open = builder.open(&mut storage).map_err(|cause| BpfError::Load { prog: "xdp_capture", cause })?;
        if let Some(ro) = open.maps.rodata_data.as_deref_mut() {
            ro.cap_snaplen = snaplen.clamp(1, MAX_SNAPLEN);
        }
        open.maps.cap_ring.set_max_entries(ring_bytes).map_err(|cause| BpfError::Map { map: "cap_ring", cause })?;
        let s = open.load().map_err(|cause| BpfError::Load { prog: "xdp_capture", cause })?;
        let prog = owned_prog_fd(s.progs.xdp_capture.as_fd())?;
        let maps = CaptureMaps::new(&s.maps.cap_ring, &s.maps.cap_stats)?;
        Ok(Loaded::new(prog, move |link| Self { link, maps }))
    }

    /// Its ring and counters.
    pub fn maps(&self) -> &CaptureMaps {
        &self.maps
    }

    /// The attachment.
    pub fn link(&self) -> &XdpLink {
        &self.link
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Crafted records: a header claiming more bytes than follow, or a record shorter than a
    /// header, is skipped, never read past.
    #[test]
    fn records_are_parsed_within_their_bounds() {
        let h = fp_cap_hdr { tstamp_ns: 5, queue: 2, len: 100, caplen: 4, _pad: 0 };
        let mut rec = bytemuck::bytes_of(&h).to_vec();
        rec.extend_from_slice(&[1, 2, 3, 4]);
        let r = CapRecord::parse(&rec).expect("a whole record");
        assert_eq!((r.tstamp_ns, r.queue, r.len, r.data), (5, 2, 100, &[1u8, 2, 3, 4][..]));
        assert!(CapRecord::parse(&rec[..rec.len() - 1]).is_none(), "caplen beyond the record");
        assert!(CapRecord::parse(&rec[..HDR_BYTES - 1]).is_none(), "shorter than a header");
        let huge = fp_cap_hdr { caplen: u32::MAX, ..h };
        assert!(CapRecord::parse(bytemuck::bytes_of(&huge)).is_none());
    }
}
