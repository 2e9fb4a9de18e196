//! Replaying recorded frames (`fastpath gen --pcap FILE`): the send schedule, the loop over
//! any [`Port`] (AF_XDP TX and the other backends), and the xdp-live sender over
//! [`XdpReplay`]. Frames leave unchanged, in order; nothing is stamped into them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fastpath::bpf::{ReplayTiming, XdpReplay};
use fastpath::clock::monotonic_ns;
use fastpath::io::{Port, PortError};
use fastpath::SysError;

use crate::signal::{install_interrupt_handler, interrupt_thread};
use crate::stats::{Counters, Ctr};
use crate::threads::SetOnDrop;

/// Most frames one [`replay_port`] call hands to [`Port::tx_burst`] at a time.
pub const MAX_BATCH: usize = 256;

/// Longest single sleep while waiting for a send that is not yet due: a long gap in the
/// file's timing is slept in slices this long, the stop flag checked between them, so
/// --duration, Ctrl-C and SIGTERM end the replay within it.
pub const GAP_SLICE_NS: u64 = 50_000_000;

/// xdp-live: a send due further away than this ends the BPF_PROG_RUN call (the controller
/// interrupts it) and the sender sleeps in [`GAP_SLICE_NS`] slices instead of spinning
/// through dropped runs; it calls again [`LIVE_WAKE_NS`] before the send is due.
const LIVE_GAP_NS: u64 = 50_000_000;
/// xdp-live: how long before a send's due time the sender ends a gap's sleep.
const LIVE_WAKE_NS: u64 = 20_000_000;

/// When each send of a replay is due, and how many there are.
///
/// Send k (from 0) carries frame `k % n` of pass `k / n`; its due time from the first send,
/// in ns: [`ReplayTiming::File`]: `pass * span + at[k % n]` where `at` are the frames' times
/// from the file's first frame and `span` the last of them (the next pass starts as the last
/// frame of this one goes, as tcpreplay --loop does); [`ReplayTiming::IntervalNs`]:
/// `k * interval`; [`ReplayTiming::TopSpeed`]: 0.
#[derive(Debug, Clone)]
pub struct Schedule<'a> {
    /// The frames' times from the first frame, ns, non-decreasing (see [`relative_times`]).
    pub at_ns: &'a [u64],
    /// How sends are timed.
    pub timing: ReplayTiming,
    /// Sends in all: passes times frames, or less (a count); None: until stopped.
    pub total: Option<u64>,
}

impl Schedule<'_> {
    /// One pass of the file, ns: the last frame's time.
    pub fn span_ns(&self) -> u64 {
        self.at_ns.last().copied().unwrap_or(0)
    }

    /// Send `k`'s due time from the first send, ns (saturating).
    #[inline]
    pub fn due_ns(&self, k: u64) -> u64 {
        let n = self.at_ns.len().max(1) as u64;
        match self.timing {
            ReplayTiming::File => (k / n).saturating_mul(self.span_ns()).saturating_add(self.at_ns[(k % n) as usize]),
            ReplayTiming::IntervalNs(i) => k.saturating_mul(i),
            ReplayTiming::TopSpeed => 0,
        }
    }

    /// Whether send `k` is past the end.
    #[inline]
    fn finished(&self, k: u64) -> bool {
        self.total.is_some_and(|t| k >= t)
    }
}

/// Times from the first of `timestamps_ns` (absolute, as the file has them): each one's gap
/// from the first, a timestamp earlier than the one before it counting as no gap (the frame
/// goes right after its predecessor, as tcpreplay does with a clock that stepped back). The
/// sum saturates at `u64::MAX` ns (584 years).
pub fn relative_times(timestamps_ns: &[u64]) -> Vec<u64> {
    let mut at = timestamps_ns.to_vec();
    make_relative(&mut at);
    at
}

/// [`relative_times`] in place: no second array of 8 bytes a frame.
pub fn make_relative(timestamps_ns: &mut [u64]) {
    let mut prev = timestamps_ns.first().copied().unwrap_or(0);
    let mut t = 0u64;
    for x in timestamps_ns.iter_mut() {
        t = t.saturating_add(x.saturating_sub(prev));
        prev = *x;
        *x = t;
    }
}

/// Frames packed end to end in one buffer, with the offset each one ends at: what a replay
/// holds, the frames' bytes plus 4 bytes a frame (rather than an allocation per frame, which
/// costs 24 bytes of `Vec` and the allocator's rounding for each). At most `u32::MAX` bytes in
/// all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PackedFrames {
    bytes: Vec<u8>,
    ends: Vec<u32>,
}

/// [`PackedFrames::push`] past `u32::MAX` bytes in all: the frame was not added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("frames of more than {} bytes in all cannot be packed", u32::MAX)]
pub struct PackedFramesFull;

impl PackedFrames {
    /// Appends `frame`.
    ///
    /// # Errors
    ///
    /// [`PackedFramesFull`] past `u32::MAX` bytes in all (nothing added).
    pub fn push(&mut self, frame: &[u8]) -> Result<(), PackedFramesFull> {
        let end = u32::try_from(self.bytes.len() + frame.len()).map_err(|_| PackedFramesFull)?;
        self.bytes.extend_from_slice(frame);
        self.ends.push(end);
        Ok(())
    }

    /// The number of frames.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there is no frame.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The frames' bytes in all.
    pub fn bytes_len(&self) -> usize {
        self.bytes.len()
    }

    /// Frame `i` (from 0).
    ///
    /// # Panics
    ///
    /// If `i >= len()`.
    #[inline]
    pub fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.bytes[start..self.ends[i] as usize]
    }

    /// The frames in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }
}

/// Sends `frames` (whole Ethernet frames; `sched` says when and how many) out of `port`, in
/// order and unchanged, until the schedule ends or `stop`; counts them in `counters`
/// (tx_packets, tx_bytes, tx_completed). Waits for a send that is not yet due by sleeping
/// to within 100 us of it (in slices of at most [`GAP_SLICE_NS`], `stop` checked between
/// them), then spinning. At the end waits up to 5 s for outstanding
/// completions (missing ones then are an error, as in [`crate::bench::txonly`]), 300 ms when
/// stopped early. Returns the frames sent. Allocates nothing per frame.
///
/// # Errors
///
/// [`PortError::Config`] for a frame the port cannot carry (before anything of it is sent);
/// the port's failed call; [`PortError::Sys`] with ETIMEDOUT if frames are still not
/// completed 5 s after the last was sent.
///
/// # Panics
///
/// If `frames` is empty or its length differs from `sched.at_ns`'s.
pub fn replay_port<P: Port>(
    port: &mut P,
    frames: &PackedFrames,
    sched: &Schedule<'_>,
    batch_size: usize,
    counters: &Counters,
    stop: &AtomicBool,
) -> Result<u64, PortError> {
    assert!(!frames.is_empty() && frames.len() == sched.at_ns.len(), "one time per frame, at least one frame");
    let n = frames.len() as u64;
    let batch = batch_size.clamp(1, MAX_BATCH);
    let mut refs: [&[u8]; MAX_BATCH] = [&[]; MAX_BATCH];
    let sync = match port.tx_reap()? {
        None => true,
        Some(done) => {
            counters.add(Ctr::TxCompleted, done);
            false
        }
    };
    let mut k = 0u64;
    let mut idle = 0u32;
    let start = Instant::now();
    while !stop.load(Ordering::Relaxed) && !sched.finished(k) {
        if let Some(done) = port.tx_reap()? {
            counters.add(Ctr::TxCompleted, done);
        }
        let now = start.elapsed().as_nanos() as u64;
        let mut m = 0;
        while m < batch && !sched.finished(k + m as u64) && sched.due_ns(k + m as u64) <= now {
            refs[m] = frames.get(((k + m as u64) % n) as usize);
            m += 1;
        }
        if m == 0 {
            // Not yet due: push out what is queued, then wait for the next send's time.
            port.tx_outstanding()?;
            let wait = sched.due_ns(k).saturating_sub(start.elapsed().as_nanos() as u64);
            if wait > 200_000 {
                std::thread::sleep(Duration::from_nanos((wait - 100_000).min(GAP_SLICE_NS)));
            } else {
                std::hint::spin_loop();
            }
            continue;
        }
        let sent = port.tx_burst(&refs[..m])?;
        if sent == 0 {
            idle += 1;
            if idle > 64 {
                std::thread::yield_now();
            }
            continue;
        }
        idle = 0;
        let bytes: u64 = refs[..sent].iter().map(|f| f.len() as u64).sum();
        k += sent as u64;
        counters.add(Ctr::TxPackets, sent as u64);
        counters.add(Ctr::TxBytes, bytes);
        if sync {
            counters.add(Ctr::TxCompleted, sent as u64);
        }
        counters.add(Ctr::Wakeups, 1);
    }
    crate::bench::drain_completions(port, counters, sched.finished(k), k, "replay")?;
    Ok(k)
}

/// The xdp-live replay: a thread pinned to one CPU running [`XdpReplay::run`] until the
/// schedule ends, and a controller thread reading the program's counts every millisecond
/// into `counters` (tx_packets, tx_bytes), interrupting the sender once the last send is out
/// (or on [`ReplayLive::stop`]). A send due more than 50 ms away (a long gap in the file's
/// timing, or a slow --rate) ends the sender's call too: it sleeps, in slices of at most
/// [`GAP_SLICE_NS`], until shortly before the send is due, instead of spinning its CPU
/// through dropped runs. Kernel >= 5.18; root or CAP_BPF + CAP_NET_ADMIN.
#[derive(Debug)]
pub struct ReplayLive {
    stop: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
    controller: std::thread::JoinHandle<Result<u64, SysError>>,
}

/// What [`ReplayLive`] sends and when: the timing, the sends in all (None: until stopped), and
/// the frames' times from the first frame (see [`relative_times`]; one per frame loaded into
/// the [`XdpReplay`]).
#[derive(Debug, Clone)]
pub struct LivePlan {
    /// How sends are timed.
    pub timing: ReplayTiming,
    /// Sends in all; None: until stopped.
    pub total: Option<u64>,
    /// The frames' times from the first frame, ns.
    pub at_ns: Vec<u64>,
}

impl LivePlan {
    fn schedule(&self) -> Schedule<'_> {
        Schedule { at_ns: &self.at_ns, timing: self.timing, total: self.total }
    }

    /// How long until the next send (`st.next`) is due, ns: 0 if it is due, the schedule has
    /// ended, or nothing has been sent yet (the first send is due at once).
    fn wait_ns(&self, st: &fastpath::abi::fp_replay_state) -> u64 {
        let sched = self.schedule();
        if st.start_ns == 0 || sched.finished(st.next) || self.at_ns.is_empty() {
            return 0;
        }
        st.start_ns.saturating_add(sched.due_ns(st.next)).saturating_sub(monotonic_ns())
    }
}

impl ReplayLive {
    /// Resets `replay`'s state to `plan` (one pass lasting the last frame's time), and starts
    /// sending on CPU `cpu`, `batch_size` runs per kernel batch (1..=256).
    ///
    /// # Errors
    ///
    /// [`SysError`] if the interrupt handler cannot be installed (`sigaction`) or the state
    /// cannot be written (errno EIO). A CPU the sender cannot be pinned to ends the run with
    /// that error, reported by [`ReplayLive::stop`].
    pub fn start(
        replay: Arc<XdpReplay>,
        cpu: usize,
        plan: LivePlan,
        batch_size: u32,
        counters: Arc<Counters>,
    ) -> Result<Self, SysError> {
        install_interrupt_handler()?;
        let span_ns = plan.at_ns.last().copied().unwrap_or(0);
        replay
            .reset(plan.timing, plan.total.unwrap_or(0), span_ns)
            .map_err(|e| SysError { call: format!("{e}"), errno: libc::EIO })?;
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));
        let (s, d) = (stop.clone(), done.clone());
        let controller = std::thread::spawn(move || {
            let _done = SetOnDrop(d);
            control(replay, cpu, Arc::new(plan), batch_size, &counters, &s)
        });
        Ok(Self { stop, done, controller })
    }

    /// Set once the replay has ended (every send out, an error, or stopped).
    pub fn done_flag(&self) -> &AtomicBool {
        &self.done
    }

    /// Stops the replay and returns the frames sent.
    ///
    /// # Errors
    ///
    /// The sender's error: its failed BPF_PROG_RUN or `sched_setaffinity`, a frame the program
    /// refused (EINVAL, naming the frame), a state it could not read (EIO); EIO if a thread
    /// panicked.
    pub fn stop(self) -> Result<u64, SysError> {
        self.stop.store(true, Ordering::Relaxed);
        self.controller
            .join()
            .map_err(|_| SysError { call: "xdp-live replay thread panicked".into(), errno: libc::EIO })?
    }
}

/// The state of `r` as a [`SysError`] (EIO) on failure.
fn read_state(r: &XdpReplay) -> Result<fastpath::abi::fp_replay_state, SysError> {
    r.state().map_err(|e| SysError { call: format!("{e}"), errno: libc::EIO })
}

/// The controller of [`ReplayLive`]: spawns the sender, follows the counts, ends the sender's
/// calls at long gaps and at the end.
fn control(
    replay: Arc<XdpReplay>,
    cpu: usize,
    plan: Arc<LivePlan>,
    batch_size: u32,
    counters: &Counters,
    stop: &AtomicBool,
) -> Result<u64, SysError> {
    let (timing, total) = (plan.timing, plan.total);
    let finished = Arc::new(AtomicBool::new(false));
    let in_call = Arc::new(AtomicBool::new(false));
    let (r, f, c, p) = (replay.clone(), finished.clone(), in_call.clone(), plan.clone());
    let sender = std::thread::spawn(move || -> Result<(), SysError> {
        fastpath::workers::pin_current_thread(cpu)?;
        while !f.load(Ordering::Relaxed) {
            let st = read_state(&r)?;
            // A send not due for a while: sleep (in slices, the end flag checked between
            // them) rather than spin through dropped runs.
            let wait = p.wait_ns(&st);
            if wait > LIVE_WAKE_NS {
                std::thread::sleep(Duration::from_nanos((wait - LIVE_WAKE_NS).min(GAP_SLICE_NS)));
                continue;
            }
            // Top speed with a known total: exactly the sends left, no run wasted. Otherwise
            // long calls, ended by the controller's signal once the last send is out or a
            // long gap begins.
            let repeat = match (timing, total) {
                (ReplayTiming::TopSpeed, Some(t)) => {
                    if st.next >= t {
                        break;
                    }
                    (t - st.next).min(1 << 30) as u32
                }
                _ => 1 << 30,
            };
            c.store(true, Ordering::SeqCst);
            let ran = r.run(repeat, batch_size);
            c.store(false, Ordering::SeqCst);
            ran?;
        }
        Ok(())
    });
    let (mut sent, mut bytes) = (0u64, 0u64);
    let mut outcome = Ok(());
    loop {
        let st = match read_state(&replay) {
            Ok(st) => st,
            Err(e) => {
                outcome = Err(e);
                break;
            }
        };
        counters.add(Ctr::TxPackets, st.next - sent);
        counters.add(Ctr::TxBytes, st.bytes - bytes);
        (sent, bytes) = (st.next, st.bytes);
        if st.errors > 0 {
            outcome = Err(SysError {
                call: format!(
                    "xdp_replay: frame {} could not be written into its live-frames page (bpf_xdp_adjust_tail or bpf_xdp_store_bytes refused it)",
                    st.err_frame + 1
                ),
                errno: libc::EINVAL,
            });
            break;
        }
        if total.is_some_and(|t| sent >= t) || stop.load(Ordering::Relaxed) || sender.is_finished() {
            break;
        }
        // A long gap has begun: end the sender's call (repeated each round until it ends: a
        // signal that lands between two calls interrupts nothing).
        if in_call.load(Ordering::SeqCst) && plan.wait_ns(&st) > LIVE_GAP_NS {
            interrupt_thread(&sender);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    finished.store(true, Ordering::Relaxed);
    // Repeat: a signal that lands between two BPF_PROG_RUN calls interrupts nothing.
    while !sender.is_finished() {
        interrupt_thread(&sender);
        std::thread::sleep(Duration::from_millis(2));
    }
    let joined =
        sender.join().map_err(|_| SysError { call: "xdp-live replay sender panicked".into(), errno: libc::EIO })?;
    // The last sends, counted after the sender ended.
    if let Ok(st) = replay.state() {
        counters.add(Ctr::TxPackets, st.next - sent);
        counters.add(Ctr::TxBytes, st.bytes - bytes);
        sent = st.next;
    }
    outcome.and(joined).map(|_| sent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_times_from_the_first_with_backward_steps_as_no_gap() {
        assert_eq!(relative_times(&[]), Vec::<u64>::new());
        assert_eq!(relative_times(&[5]), vec![0]);
        assert_eq!(relative_times(&[100, 300, 250, 400]), vec![0, 200, 200, 350]);
        // Gaps of 2^32 s that step back to 0 and forward again: the sum saturates, no panic
        // (an overflow in debug builds, a wrap to early times in release ones).
        let s = 1_000_000_000u64;
        let big = 4_294_967_295 * s;
        let ts = [0, big, 0, big, 0, big, 0, big, 0, big, 0, s];
        let at = relative_times(&ts);
        assert_eq!(at[..3], [0, big, big]);
        assert_eq!(at[7], 4 * big);
        assert_eq!(at[11], u64::MAX, "saturated");
        assert!(at.windows(2).all(|w| w[0] <= w[1]), "non-decreasing: {at:?}");
    }

    #[test]
    fn packed_frames_in_order() {
        let mut f = PackedFrames::default();
        assert!(f.is_empty());
        for fr in [&[1u8, 2, 3][..], &[], &[4; 60]] {
            f.push(fr).unwrap();
        }
        assert_eq!(f.len(), 3);
        assert_eq!(f.bytes_len(), 63);
        assert_eq!(f.iter().collect::<Vec<_>>(), vec![&[1u8, 2, 3][..], &[], &[4; 60]]);
        let mut ts = [100, 300, 250, 400];
        make_relative(&mut ts);
        assert_eq!(ts, [0, 200, 200, 350]);
    }

    #[test]
    fn due_times_per_timing_and_pass() {
        let at = [0, 200, 400];
        let file = Schedule { at_ns: &at, timing: ReplayTiming::File, total: Some(6) };
        assert_eq!(file.span_ns(), 400);
        let due: Vec<u64> = (0..6).map(|k| file.due_ns(k)).collect();
        assert_eq!(due, vec![0, 200, 400, 400, 600, 800], "pass 2 starts as pass 1 ends");
        assert!(!file.finished(5) && file.finished(6));
        let rate = Schedule { at_ns: &at, timing: ReplayTiming::IntervalNs(1000), total: None };
        assert_eq!(rate.due_ns(7), 7000);
        assert!(!rate.finished(u64::MAX), "no total: never finished");
        let top = Schedule { at_ns: &at, timing: ReplayTiming::TopSpeed, total: Some(3) };
        assert_eq!(top.due_ns(2), 0);
        // Saturating, never a panic, for huge send numbers.
        let huge = Schedule { at_ns: &[0, u64::MAX / 2], timing: ReplayTiming::File, total: None };
        assert_eq!(huge.due_ns(u64::MAX), u64::MAX);
    }
}
