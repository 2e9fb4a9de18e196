//! The one AF_XDP ring data path around the RX -> TX move, shared by both users of the rings:
//! the port of the port API (`io::afxdp::AfXdpPort`, one socket) and [`super::XskPair`] (two
//! sockets over one UMEM). Free frames go onto a FILL ring with [`refill`]; completed frames
//! come back with [`reap`] (onto a FILL ring, the free frames first, or to a free list); TX is
//! woken with [`kick_tx`] under a [`TxKick`] policy. Frames move as [`Frame`] tokens, by
//! value, between the rings and the callers' free lists (ownership rules: `xsk/mod.rs`).

use super::{CompRing, FillBatch, FillRing, Frame, XskSocket};
use crate::sys::SysError;

/// Free frames onto a FILL batch (the most recently freed first) while it has room; `on_fill`
/// sees each frame before the kernel gets it.
#[inline]
pub(crate) fn refill(fb: &mut FillBatch<'_>, free: &mut Vec<Frame>, mut on_fill: impl FnMut(&Frame)) {
    while fb.room() > 0 {
        let Some(f) = free.pop() else { break };
        on_fill(&f);
        fb.push(f);
    }
}

/// Takes every completed frame of `comp`. With a `fill` ring, `free` goes onto it first
/// ([`refill`]), then the completed frames while it has room (`on_fill` sees each frame that
/// goes there); the rest, or all without `fill`, go to `free` as whole frames (`frame_size`:
/// a forwarded frame completes at its receive offset). `ends` sees every completed frame first
/// and says whether it ended a packet. Returns how many packets completed.
#[inline]
pub(crate) fn reap(
    comp: &mut CompRing,
    fill: Option<&mut FillRing>,
    free: &mut Vec<Frame>,
    frame_size: u32,
    mut ends: impl FnMut(&Frame) -> bool,
    mut on_fill: impl FnMut(&Frame),
) -> u64 {
    let batch = comp.peek(u32::MAX);
    // Slots for what there is to give, no more: an empty round does not read the kernel's index.
    let want = free.len().saturating_add(batch.len()).min(u32::MAX as usize) as u32;
    let mut fb = fill.map(|r| r.reserve(want));
    if let Some(fb) = fb.as_mut() {
        refill(fb, free, &mut on_fill);
    }
    let mut packets = 0;
    for mut f in batch {
        packets += ends(&f) as u64;
        match fb.as_mut() {
            Some(fb) if fb.room() > 0 => {
                on_fill(&f);
                fb.push(f);
            }
            _ => {
                f.reset(frame_size);
                free.push(f);
            }
        }
    }
    packets
}

/// The one TX wake-up policy: how many wake-ups (`sendto`) one call may make while frames wait
/// on the TX ring. Copy mode transmits inside `sendto`, at most the socket's TX budget
/// (XDP_MAX_TX_SKB_BUDGET, 32 by default) per call, so a full ring takes several; and `sendto`
/// on a port that is down answers ENETDOWN at once (taken as success, the frames stay), so the
/// bound is what a call may spin there. Each caller names the bound it can afford.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TxKick {
    max_wakeups: u32,
}

impl TxKick {
    /// One wake-up if anything waits: for calls that come again soon (a burst loop, an idle
    /// round of the forwarder, a look at what is outstanding), whose next call wakes again.
    pub(crate) const ONCE: Self = Self { max_wakeups: 1 };
    /// A forwarding round of [`super::XskPair`]: up to 64 wake-ups (a TX ring of 2,048 at 32
    /// per call). No more, because the same thread serves the other direction and both RX
    /// rings: an egress that is down (ENETDOWN) or slow must not hold them for 10,000 calls;
    /// what is left waits for the next round.
    pub(crate) const ROUND: Self = Self { max_wakeups: 64 };
    /// `tx_burst` of the port: until the kernel has taken everything, so no frame waits for the
    /// next burst (bounded, for a port that is down).
    pub(crate) const DRAIN: Self = Self { max_wakeups: 10_000 };
}

/// Wakes the kernel for TX while frames wait on `sock`'s TX ring, at most as often as `kick`
/// allows ([`XskSocket::kick_tx`]: only when the ring asks, with need_wakeup).
///
/// # Errors
///
/// `sendto` failed otherwise than EAGAIN, EBUSY, ENOBUFS, ENETDOWN or EINTR.
#[inline]
pub(crate) fn kick_tx(sock: &mut XskSocket, kick: TxKick) -> Result<(), SysError> {
    let mut tries = 0;
    while tries < kick.max_wakeups && sock.tx.pending() > 0 {
        sock.kick_tx()?;
        tries += 1;
    }
    Ok(())
}
