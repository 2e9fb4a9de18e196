//! The TAP backend driven by io_uring: the same TAP interface as [`super::tap::TapPort`], but
//! packets move through a submission / completion ring, so ONE system call (`io_uring_enter`)
//! submits and reaps MANY packets instead of one `readv` / `writev` each.
//!
//! ```text
//!   registered buffers (IORING_REGISTER_BUFFERS, pinned once):
//!     [ rx 0 | rx 1 | ... | rx N-1 | tx 0 | tx 1 | ... | tx N-1 ]   each `buf_size` bytes
//!
//!   rx: N READ_FIXED ops stay in flight on the tap fd, one per rx buffer. The kernel completes
//!       one per packet (parking it in io_uring's poll machinery while the tap is empty).
//!       rx_burst reaps completions from the CQ (no syscall), hands each buffer to the callback,
//!       queues a new READ_FIXED for it, and submits all of them with one io_uring_enter.
//!   tx: tx_burst copies each frame into a tx buffer, queues one WRITE_FIXED per frame (linked
//!       with IOSQE_IO_LINK so they run in order and a failure cancels the rest), then ONE
//!       io_uring_enter submits them all and waits for their completions.
//! ```
//!
//! Fixed buffers skip the per-I/O page pinning of plain READ/WRITE (the pages are pinned at
//! registration). Frames are still copied once by the tun driver, as with `readv`/`writev`.
//!
//! Kernel: io_uring with `IORING_OP_READ_FIXED`/`WRITE_FIXED` (5.1), `IORING_FEAT_NODROP` (5.5)
//! and timeouts on enter (`IORING_FEAT_EXT_ARG`, 5.11), which [`TapUringPort::open`] checks;
//! `kernel.io_uring_disabled` must be 0 (or 1 with the caller in `io_uring_group`).
//! Registered buffers count against RLIMIT_MEMLOCK unless the caller has CAP_IPC_LOCK.
//! Privileges as for the tap: CAP_NET_ADMIN. Sources: the io_uring(7), io_uring_enter(2) and
//! io_uring_register(2) manual pages; Documentation/networking/tuntap.rst; drivers/net/tun.c.

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, OwnedFd};

use io_uring::{opcode, squeue, types, IoUring};

use super::tap::{check_frame, check_name, csum_offload_hdr, open_tap_fd, TapOptions, MAX_TAP_FRAME};
use super::{Port, PortError, PortStats};
use crate::sys::tun::{VirtioNetHdr, VNET_HDR_LEN};
use crate::sys::{Mmap, SysError};

/// Default ring size: rx reads in flight, and tx frames per submission.
pub const DEFAULT_ENTRIES: u32 = 256;
/// Default buffer size without offload: a 1500-byte MTU frame (1518 with a VLAN tag) plus the
/// virtio header fits with room to spare; frames up to `buf_size - 1 - header` bytes arrive
/// whole (a packet that fills a buffer completely is counted as truncated, see [`TapUringPort`]).
pub const DEFAULT_BUF_SIZE: usize = 2048;
/// Default buffer size with `offload`: a 64 KiB GSO super-frame plus headers.
pub const OFFLOAD_BUF_SIZE: usize = (MAX_TAP_FRAME + VNET_HDR_LEN).next_multiple_of(64);

/// user_data of tx operations: this bit plus the tx buffer index; rx: the rx buffer index.
const TX_BIT: u64 = 1 << 32;
/// user_data of cancellations (their completions are ignored).
const CANCEL: u64 = u64::MAX;

/// Ring shape of a [`TapUringPort`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct UringOptions {
    /// Ring entries N (a power of two, 1..=4096): N rx reads in flight, up to N tx frames per
    /// submission, 2N registered buffers.
    pub entries: u32,
    /// Bytes per registered buffer, virtio header included; 256..=[`OFFLOAD_BUF_SIZE`] and a
    /// multiple of 64. Received frames of `buf_size - header` bytes or more are cut by the
    /// kernel and skipped (counted in `drops` as `rx_truncated`).
    pub buf_size: usize,
}

impl UringOptions {
    /// The defaults for `opts`: 256 entries, 2048-byte buffers, 64 KiB ones with `offload`.
    pub fn for_tap(opts: &TapOptions) -> Self {
        Self { entries: DEFAULT_ENTRIES, buf_size: if opts.offload { OFFLOAD_BUF_SIZE } else { DEFAULT_BUF_SIZE } }
    }

    /// Checks the values before anything is created.
    ///
    /// # Errors
    ///
    /// [`PortError::Config`] unless `entries` is a power of two from 1 to 4096 and `buf_size` a
    /// multiple of 64 from 256 to [`OFFLOAD_BUF_SIZE`].
    pub fn validate(&self) -> Result<(), PortError> {
        if self.entries == 0 || self.entries > 4096 || !self.entries.is_power_of_two() {
            return Err(PortError::Config {
                what: "io_uring entries",
                value: self.entries.to_string(),
                accepted: "a power of two from 1 to 4096".into(),
            });
        }
        if !(256..=OFFLOAD_BUF_SIZE).contains(&self.buf_size) || self.buf_size % 64 != 0 {
            return Err(PortError::Config {
                what: "io_uring buffer size",
                value: self.buf_size.to_string(),
                accepted: format!("a multiple of 64 from 256 to {OFFLOAD_BUF_SIZE} bytes"),
            });
        }
        Ok(())
    }
}

/// An io_uring error as a [`SysError`] naming the call.
fn uring_err(call: impl Into<String>, e: std::io::Error) -> SysError {
    SysError { call: call.into(), errno: e.raw_os_error().unwrap_or(0) }
}

/// A TAP interface driven by io_uring with registered buffers (see the module docs for the
/// picture). Same interface, options, privileges and loss points as [`super::tap::TapPort`];
/// `path()` is "tap-uring".
///
/// rx_burst: reaps completed reads (no syscall while completions are waiting), calls `f` with
/// each frame in its registered buffer, re-queues the reads and submits them with one
/// `io_uring_enter`, which waits up to `timeout_ms` only if nothing had arrived. Between calls
/// up to N packets sit already read in the buffers: they count as received only when handed to
/// `f`. tx_burst: copies up to N frames into tx buffers, one `io_uring_enter` submits and waits
/// for them; returns how many the kernel took, in order.
///
/// Dropping the port cancels the reads in flight and waits (up to 1 s) for them, so the tap's
/// file is released and the interface disappears at once, as with [`super::tap::TapPort`].
pub struct TapUringPort {
    // Field order is drop order: the ring (which holds requests on the tap's file and the
    // registration of the buffers) goes before the file and the buffers.
    ring: IoUring,
    fd: OwnedFd,
    bufs: Mmap,
    ifname: String,
    opts: TapOptions,
    uopts: UringOptions,
    /// rx reads queued or in flight.
    rx_inflight: u32,
    /// rx completions reaped but not yet handed to a callback: (buffer, result).
    ready: VecDeque<(u16, i32)>,
    /// rx buffers to queue a read for.
    idle: Vec<u16>,
    /// tx writes in flight; their results.
    tx_inflight: u32,
    tx_done: u32,
    tx_failed: Option<i32>,
    rx_error: Option<i32>,
    rx_truncated: u64,
    stats: PortStats,
}

impl std::fmt::Debug for TapUringPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TapUringPort")
            .field("ifname", &self.ifname)
            .field("opts", &self.opts)
            .field("uopts", &self.uopts)
            .field("rx_inflight", &self.rx_inflight)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl TapUringPort {
    /// Creates (or with `multi_queue` attaches to) the TAP interface `name` exactly as
    /// [`super::tap::TapPort::open`] does, with the default ring ([`UringOptions::for_tap`]).
    ///
    /// # Errors
    ///
    /// As [`TapUringPort::open_with`].
    pub fn open(name: &str, opts: TapOptions) -> Result<TapUringPort, PortError> {
        Self::open_with(name, opts, UringOptions::for_tap(&opts))
    }

    /// As [`TapUringPort::open`], with a chosen ring shape. Sets up a ring of `entries`
    /// submission and 4 x `entries` completion slots and registers 2 x `entries` buffers of
    /// `buf_size` bytes (page-aligned anonymous memory).
    ///
    /// # Errors
    ///
    /// Those of `TapPort::open`, [`PortError::Config`] for the ring shape
    /// ([`UringOptions::validate`]) or a kernel without `IORING_FEAT_EXT_ARG` (< 5.11), and
    /// [`PortError::Sys`] for `io_uring_setup` (EPERM: io_uring disabled by
    /// `kernel.io_uring_disabled`; ENOSYS: no io_uring) or `IORING_REGISTER_BUFFERS` (ENOMEM:
    /// RLIMIT_MEMLOCK too small without CAP_IPC_LOCK).
    pub fn open_with(name: &str, opts: TapOptions, uopts: UringOptions) -> Result<TapUringPort, PortError> {
        check_name(name)?;
        uopts.validate()?;
        let n = uopts.entries;
        // SQ: N rx refills plus N tx writes (and a closing NOP) may be queued at once.
        let ring: IoUring = IoUring::builder().setup_cqsize(4 * n).build(2 * n).map_err(|e| {
            let hint = match e.raw_os_error() {
                Some(libc::EPERM) => " [io_uring is disabled: sysctl kernel.io_uring_disabled]",
                Some(libc::ENOSYS) => " [this kernel has no io_uring]",
                _ => "",
            };
            uring_err(format!("io_uring_setup(entries={}, cq_entries={}){hint}", 2 * n, 4 * n), e)
        })?;
        if !ring.params().is_feature_ext_arg() || !ring.params().is_feature_nodrop() {
            return Err(PortError::Config {
                what: "kernel io_uring features",
                value: "without IORING_FEAT_EXT_ARG / IORING_FEAT_NODROP".into(),
                accepted: "Linux >= 5.11".into(),
            });
        }
        let (fd, ifname) = open_tap_fd(name, opts)?;
        let count = 2 * n as usize;
        let bufs = Mmap::anonymous(count * uopts.buf_size, false)?;
        let iovecs: Vec<libc::iovec> = (0..count)
            .map(|i| libc::iovec {
                // Pointer arithmetic only (no dereference): within the mapping by construction.
                iov_base: bufs.as_ptr().wrapping_add(i * uopts.buf_size).cast(),
                iov_len: uopts.buf_size,
            })
            .collect();
        // SAFETY: every iovec lies inside `bufs`, which lives as long as the ring: the field
        // order of TapUringPort drops the ring (and with it the registration) first, and Drop
        // waits for the reads in flight. Even if a request outlived the mapping it would write
        // to the pinned pages, never to memory reused by someone else.
        unsafe { ring.submitter().register_buffers(&iovecs) }.map_err(|e| {
            let hint = if e.raw_os_error() == Some(libc::ENOMEM) {
                " [pinned memory is charged to RLIMIT_MEMLOCK without CAP_IPC_LOCK: lower entries or buf_size]"
            } else {
                ""
            };
            uring_err(
                format!("io_uring_register(IORING_REGISTER_BUFFERS, nr={count}, size={}){hint}", uopts.buf_size),
                e,
            )
        })?;
        Ok(TapUringPort {
            ring,
            fd,
            bufs,
            ifname,
            opts,
            uopts,
            rx_inflight: 0,
            ready: VecDeque::with_capacity(n as usize),
            idle: (0..n as u16).rev().collect(),
            tx_inflight: 0,
            tx_done: 0,
            tx_failed: None,
            rx_error: None,
            rx_truncated: 0,
            stats: PortStats::default(),
        })
    }

    /// The interface's name as the kernel created it.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The options the port was opened with.
    pub fn options(&self) -> (TapOptions, UringOptions) {
        (self.opts, self.uopts)
    }

    /// The interface's MAC address (`SIOCGIFHWADDR` through the tap fd).
    ///
    /// # Errors
    ///
    /// [`PortError::Sys`] if `ioctl(SIOCGIFHWADDR)` fails.
    pub fn mac(&self) -> Result<[u8; 6], PortError> {
        Ok(crate::sys::tun::hwaddr(&self.fd)?)
    }

    fn buf_ptr(&self, idx: usize) -> *mut u8 {
        debug_assert!(idx < 2 * self.uopts.entries as usize);
        self.bufs.as_ptr().wrapping_add(idx * self.uopts.buf_size)
    }

    /// Queues a READ_FIXED for every idle rx buffer (SQ space permitting).
    fn queue_reads(&mut self) {
        let fd = types::Fd(self.fd.as_raw_fd());
        let len = self.uopts.buf_size as u32;
        while let Some(&idx) = self.idle.last() {
            let ptr = self.buf_ptr(idx as usize);
            let e = opcode::ReadFixed::new(fd, ptr, len, idx).offset(0).build().user_data(idx as u64);
            // SAFETY: the buffer `idx` (rx half) is registered under index `idx`, lies in
            // `bufs`, and belongs to the kernel until this read's completion is reaped: it is
            // not in `idle` or `ready` meanwhile, so we neither read nor write it.
            if unsafe { self.ring.submission().push(&e) }.is_err() {
                break;
            }
            self.idle.pop();
            self.rx_inflight += 1;
        }
    }

    /// Moves every completion out of the CQ: rx ones to `ready`, tx ones into the counters.
    fn reap(&mut self) {
        let mut cq = self.ring.completion();
        cq.sync();
        for cqe in &mut cq {
            let ud = cqe.user_data();
            let res = cqe.result();
            if ud == CANCEL {
                continue;
            }
            if ud & TX_BIT != 0 {
                self.tx_inflight -= 1;
                if res >= 0 {
                    if self.tx_failed.is_none() {
                        self.tx_done += 1;
                    }
                } else if self.tx_failed.is_none() {
                    self.tx_failed = Some(-res);
                }
            } else {
                self.rx_inflight -= 1;
                self.ready.push_back((ud as u16, res));
            }
        }
    }

    /// Submits what is queued; waits up to `timeout_ms` for at least `want` completions.
    /// ETIME (timeout) and EINTR are not errors.
    fn enter(&mut self, want: usize, timeout_ms: i32) -> Result<(), PortError> {
        let r = if want > 0 && timeout_ms > 0 {
            let ts = types::Timespec::from(std::time::Duration::from_millis(timeout_ms as u64));
            let args = types::SubmitArgs::new().timespec(&ts);
            self.ring.submitter().submit_with_args(want, &args)
        } else if want > 0 && timeout_ms < 0 {
            self.ring.submitter().submit_and_wait(want)
        } else {
            self.ring.submitter().submit()
        };
        match r {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY) | Some(libc::EAGAIN)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(uring_err(format!("io_uring_enter(tap, want={want}, timeout={timeout_ms})"), e).into()),
        }
    }

    /// Like [`Port::rx_burst`], also handing over each packet's virtio header (all zero
    /// without `vnet_hdr`); see [`super::tap::TapPort::rx_burst_hdr`] for its meaning.
    ///
    /// # Errors
    ///
    /// [`PortError::Sys`] if `io_uring_enter` fails with anything but ETIME / EINTR / EBUSY /
    /// EAGAIN, or if a READ_FIXED completed with an error and no packet was received in this call
    /// (else the error is reported by the next call).
    pub fn rx_burst_hdr<F: FnMut(&VirtioNetHdr, &[u8])>(
        &mut self,
        max: usize,
        timeout_ms: i32,
        mut f: F,
    ) -> Result<usize, PortError> {
        if max == 0 {
            return Ok(0);
        }
        let hdr_len = if self.opts.vnet_hdr { VNET_HDR_LEN } else { 0 };
        let cap = self.uopts.buf_size;
        let mut count = 0;
        let mut waited = false;
        loop {
            self.reap();
            while count < max {
                let Some((idx, res)) = self.ready.pop_front() else { break };
                self.idle.push(idx);
                if res < 0 {
                    // EAGAIN / EINTR / ECANCELED: just read again; anything else is reported
                    // after the burst (the buffer is read again meanwhile).
                    if !matches!(-res, libc::EAGAIN | libc::EINTR | libc::ECANCELED) {
                        self.rx_error = Some(-res);
                    }
                    continue;
                }
                let n = res as usize;
                if n >= cap {
                    self.rx_truncated += 1;
                    continue;
                }
                if n < hdr_len {
                    continue;
                }
                // SAFETY: the read into buffer `idx` has completed (its CQE was reaped), so the
                // kernel no longer touches it, and it is not queued again before `f` returns;
                // n < buf_size, so the slice is inside the buffer.
                let data = unsafe { std::slice::from_raw_parts(self.buf_ptr(idx as usize), n) };
                let h = if hdr_len > 0 {
                    VirtioNetHdr::from_bytes(data).unwrap_or_default()
                } else {
                    VirtioNetHdr::default()
                };
                let frame = &data[hdr_len..];
                f(&h, frame);
                self.stats.rx_packets += 1;
                self.stats.rx_bytes += frame.len() as u64;
                count += 1;
            }
            self.queue_reads();
            if count == 0 && self.ready.is_empty() && timeout_ms != 0 && !waited {
                waited = true;
                self.enter(1, timeout_ms)?;
                continue;
            }
            self.enter(0, 0)?;
            break;
        }
        if let Some(errno) = self.rx_error.take() {
            if count == 0 {
                return Err(
                    SysError { call: format!("io_uring READ_FIXED(tap {}, len={cap})", self.ifname), errno }.into()
                );
            }
            self.rx_error = Some(errno);
        }
        Ok(count)
    }

    /// Transmits up to N `frames`, each behind `hdr` (None: a zero header) when the port has
    /// `vnet_hdr`, as linked WRITE_FIXED ops and one submit-and-wait; returns how many the
    /// kernel took, in order.
    fn tx_inner(&mut self, frames: &[&[u8]], hdr: Option<&VirtioNetHdr>) -> Result<usize, PortError> {
        let n = self.uopts.entries as usize;
        let hdr_len = if self.opts.vnet_hdr { VNET_HDR_LEN } else { 0 };
        let room = self.uopts.buf_size - hdr_len;
        let fd = types::Fd(self.fd.as_raw_fd());
        // Whatever is still queued (rx refills) goes out with this submission too.
        let planned = frames.len().min(n);
        let mut queued = 0usize;
        let mut first_err = None;
        for frame in frames.iter().take(planned) {
            if let Err(e) = check_frame(frame) {
                first_err = Some(e);
                break;
            }
            if frame.len() > room {
                first_err = Some(PortError::Config {
                    what: "frame length",
                    value: frame.len().to_string(),
                    accepted: format!(
                        "at most {room} bytes (the io_uring buffer size {} minus the virtio header)",
                        self.uopts.buf_size
                    ),
                });
                break;
            }
            let idx = n + queued;
            let ptr = self.buf_ptr(idx);
            let zero = VirtioNetHdr::default();
            let h = hdr.unwrap_or(&zero).to_bytes();
            // SAFETY: tx buffer `idx` lies in `bufs` with room for header + frame (checked
            // above); no tx write is in flight (every tx_burst waits for its own), so the kernel
            // does not read it now.
            unsafe {
                std::ptr::copy_nonoverlapping(h.as_ptr(), ptr, hdr_len);
                std::ptr::copy_nonoverlapping(frame.as_ptr(), ptr.add(hdr_len), frame.len());
            }
            let len = (hdr_len + frame.len()) as u32;
            let mut e =
                opcode::WriteFixed::new(fd, ptr, len, idx as u16).offset(0).build().user_data(TX_BIT | idx as u64);
            if queued + 1 < planned {
                e = e.flags(squeue::Flags::IO_LINK);
            }
            // SAFETY: the buffer is registered under `idx` and stays untouched by us until the
            // completion is reaped below, before this function returns.
            if unsafe { self.ring.submission().push(&e) }.is_err() {
                break;
            }
            queued += 1;
        }
        if queued == 0 {
            return match first_err {
                Some(e) => Err(e),
                None => Ok(0),
            };
        }
        if queued < planned {
            // The last queued write carries IO_LINK but its successor was refused above: a
            // NOP (no IO_LINK) closes the chain, which otherwise would wait for an entry that
            // never comes.
            let e = opcode::Nop::new().build().user_data(CANCEL);
            // SAFETY: a NOP references no memory. The SQ has room: it holds 2N entries and at
            // most N writes are queued here (rx refills are submitted by every rx_burst).
            let _ = unsafe { self.ring.submission().push(&e) };
        }
        self.tx_inflight += queued as u32;
        self.tx_done = 0;
        self.tx_failed = None;
        while self.tx_inflight > 0 {
            self.enter(self.tx_inflight as usize, -1)?;
            self.reap();
        }
        let done = self.tx_done as usize;
        for frame in &frames[..done] {
            self.stats.tx_packets += 1;
            self.stats.tx_bytes += frame.len() as u64;
        }
        match self.tx_failed.take() {
            Some(errno)
                if done == 0 && !matches!(errno, libc::EAGAIN | libc::ENOBUFS | libc::EINTR | libc::ECANCELED) =>
            {
                Err(SysError {
                    call: format!("io_uring WRITE_FIXED(tap {}, len={})", self.ifname, frames[0].len() + hdr_len),
                    errno,
                }
                .into())
            }
            _ => Ok(done),
        }
    }

    /// Writes one frame with `flags = VIRTIO_NET_HDR_F_NEEDS_CSUM` so the kernel completes its
    /// L4 checksum; see [`super::tap::TapPort::tx_with_csum_offload`]. Needs `vnet_hdr`.
    /// Returns false when the kernel could not take it now.
    ///
    /// # Errors
    ///
    /// [`PortError::Config`] if `csum_start + csum_offset + 2` exceeds the frame; as
    /// [`TapUringPort::tx_with_hdr`].
    pub fn tx_with_csum_offload(&mut self, frame: &[u8], csum_start: u16, csum_offset: u16) -> Result<bool, PortError> {
        let hdr = csum_offload_hdr(frame, csum_start, csum_offset)?;
        self.tx_with_hdr(&hdr, frame)
    }

    /// Writes one frame with header `hdr` (the port must have `vnet_hdr`).
    ///
    /// # Errors
    ///
    /// [`PortError::Config`] if the port has no `vnet_hdr`, or the frame is not 14 to
    /// [`MAX_TAP_FRAME`] bytes or does not fit a buffer after the
    /// header; [`PortError::Sys`] if `io_uring_enter` fails or the WRITE_FIXED completes with an
    /// error other than EAGAIN / ENOBUFS / EINTR (e.g. EIO while the interface is down, EINVAL for
    /// a header the kernel refuses).
    pub fn tx_with_hdr(&mut self, hdr: &VirtioNetHdr, frame: &[u8]) -> Result<bool, PortError> {
        if !self.opts.vnet_hdr {
            return Err(PortError::Config {
                what: "virtio_net_hdr on a tap opened with vnet_hdr",
                value: "false".into(),
                accepted: "open the port with TapOptions { vnet_hdr: true, .. }".into(),
            });
        }
        Ok(self.tx_inner(&[frame], Some(hdr))? == 1)
    }
}

impl Port for TapUringPort {
    fn path(&self) -> &'static str {
        "tap-uring"
    }

    fn rx_burst<F: FnMut(&[u8])>(&mut self, max: usize, timeout_ms: i32, mut f: F) -> Result<usize, PortError> {
        self.rx_burst_hdr(max, timeout_ms, |_, frame| f(frame))
    }

    fn tx_burst(&mut self, frames: &[&[u8]]) -> Result<usize, PortError> {
        self.tx_inner(frames, None)
    }

    /// Packets and bytes counted in user space; `drops` holds `rx_truncated`: frames that did
    /// not fit a registered buffer (see [`UringOptions::buf_size`]), skipped.
    fn stats(&mut self) -> Result<PortStats, PortError> {
        let mut s = self.stats.clone();
        s.drops = vec![("rx_truncated".into(), self.rx_truncated)];
        Ok(s)
    }
}

impl Drop for TapUringPort {
    fn drop(&mut self) {
        // Cancel the reads in flight and wait for their completions, so the requests drop
        // their references to the tap's file now (the interface disappears with the last one)
        // rather than whenever the ring's asynchronous teardown gets to them.
        self.ready.clear();
        let start = std::time::Instant::now();
        while self.rx_inflight > 0 && start.elapsed() < std::time::Duration::from_secs(1) {
            let e = opcode::AsyncCancel2::new(types::CancelBuilder::fd(types::Fd(self.fd.as_raw_fd())).all())
                .build()
                .user_data(CANCEL);
            // SAFETY: a cancellation references no memory of ours.
            let _ = unsafe { self.ring.submission().push(&e) };
            if self.enter(1, 100).is_err() {
                break;
            }
            self.reap();
            self.ready.clear();
        }
    }
}

/// The TAP device's file descriptor, e.g. for tokio's `AsyncFd` or `poll`; it stays owned by the TapUringPort.
impl std::os::fd::AsFd for TapUringPort {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&self.fd)
    }
}

impl std::os::fd::AsRawFd for TapUringPort {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(&std::os::fd::AsFd::as_fd(self))
    }
}
