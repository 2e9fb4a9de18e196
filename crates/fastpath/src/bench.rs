//! The run loops behind `fastpath bench` and `fastpath gen`: rxdrop, txonly, l2fwd on an
//! [`XskSocket`], and the xdp-live generator. Hot loops allocate nothing; counters are
//! published once per batch.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::bpf::XdpGen;
use crate::packet::{self, Payload, UdpFrameSpec};
use crate::stats::{Counters, Ctr};
use crate::sys::{self, SysError};
use crate::xsk::{XdpDesc, XskSocket};

/// How a loop waits when there is nothing to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Spin, kicking the kernel only when need_wakeup asks (xdpsock's default).
    Spin,
    /// `poll()` on the socket with this timeout in ms (xdpsock -p).
    Poll(i32),
}

/// Options shared by the run loops.
#[derive(Debug, Clone, Copy)]
pub struct LoopOpts {
    /// Descriptors per ring operation.
    pub batch_size: u32,
    /// Spin or poll.
    pub wait: Wait,
}

/// Limits of a sending loop.
#[derive(Debug, Clone, Copy, Default)]
pub struct SendLimits {
    /// Stop after this many packets (None = until stopped).
    pub count: Option<u64>,
    /// Pace to this many packets per second (None = as fast as possible).
    pub rate_pps: Option<u64>,
}

/// A token bucket checked once per batch: how many packets may go now.
#[derive(Debug)]
struct Pacer {
    start: Instant,
    rate_pps: Option<u64>,
    sent: u64,
    remaining: Option<u64>,
}

impl Pacer {
    fn new(l: SendLimits) -> Self {
        Self { start: Instant::now(), rate_pps: l.rate_pps, sent: 0, remaining: l.count }
    }
    /// Packets allowed now, at most `want`.
    #[inline]
    fn allowed(&self, want: u64) -> u64 {
        let mut n = want;
        if let Some(r) = self.remaining {
            n = n.min(r);
        }
        if let Some(rate) = self.rate_pps {
            let due = (self.start.elapsed().as_nanos() as u64 as u128 * rate as u128 / 1_000_000_000) as u64;
            n = n.min(due.saturating_sub(self.sent));
        }
        n
    }
    #[inline]
    fn took(&mut self, n: u64) {
        self.sent += n;
        if let Some(r) = self.remaining.as_mut() {
            *r -= n;
        }
    }
    fn done(&self) -> bool {
        self.remaining == Some(0)
    }
    /// With a rate: time until the next packet is due.
    fn wait_time(&self) -> Option<Duration> {
        let rate = self.rate_pps?;
        let due_ns = (self.sent + 1) as u128 * 1_000_000_000 / rate as u128;
        let now = self.start.elapsed().as_nanos();
        (due_ns > now).then(|| Duration::from_nanos((due_ns - now) as u64))
    }
}

#[inline]
fn frame_base(addr: u64, frame_size: u32) -> u64 {
    addr & !(frame_size as u64 - 1)
}

/// Puts the first `n` frames of the UMEM on the FILL ring.
fn prefill(sock: &mut XskSocket, n: u32) {
    sock.fill_first_frames(n);
}

#[inline]
fn wait_rx(sock: &XskSocket, wait: Wait, counters: &Counters) -> Result<(), SysError> {
    match wait {
        Wait::Poll(ms) => {
            counters.add(Ctr::Wakeups, 1);
            sock.poll_rx(ms)?;
        }
        Wait::Spin => {
            sock.kick_rx();
        }
    }
    Ok(())
}

/// rxdrop: receive and recycle every frame to the FILL ring, calling `on_packet` with each
/// packet's bytes. Runs until `stop`.
pub fn rxdrop(
    sock: &mut XskSocket,
    opts: LoopOpts,
    counters: &Counters,
    stop: &AtomicBool,
    mut on_packet: impl FnMut(&[u8]),
) -> Result<(), SysError> {
    let fs = sock.config().frame_size;
    prefill(sock, sock.config().frame_count);
    while !stop.load(Ordering::Relaxed) {
        let (ri, n) = sock.rx.peek(opts.batch_size);
        if n == 0 {
            wait_rx(sock, opts.wait, counters)?;
            continue;
        }
        // Frames are conserved (FILL size >= frames in flight), so room appears as soon as the
        // kernel consumes; spin until it does.
        let fi = loop {
            if let Some(fi) = sock.fill.reserve(n) {
                break fi;
            }
            if stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            sock.kick_rx();
        };
        let mut bytes = 0u64;
        for i in 0..n {
            let d = sock.rx.read(ri.wrapping_add(i));
            on_packet(sock.frame(d.addr, d.len));
            bytes += d.len as u64;
            sock.fill.write(fi.wrapping_add(i), frame_base(d.addr, fs));
        }
        sock.fill.submit(n);
        sock.rx.release(n);
        counters.add(Ctr::RxPackets, n as u64);
        counters.add(Ctr::RxBytes, bytes);
    }
    Ok(())
}

/// Returns completed TX frames to `free`; returns how many.
#[inline]
fn drain_completions(sock: &mut XskSocket, free: &mut Vec<u64>, batch: u32) -> u32 {
    let (ci, n) = sock.comp.peek(batch);
    for i in 0..n {
        free.push(sock.comp.read(ci.wrapping_add(i)));
    }
    sock.comp.release(n);
    n
}

/// txonly: sends `spec` frames, each stamped with `stream`, the next sequence number (from 1)
/// and the send time; drains completions. Stops at `limits.count`, or `stop`; then waits up to
/// 5 s for outstanding completions (with a count reached, missing completions are an error: `--count N`
/// means N frames submitted AND completed), or 300 ms when stopped early. Returns the number of
/// packets sent.
pub fn txonly(
    sock: &mut XskSocket,
    spec: &UdpFrameSpec,
    stream: u16,
    limits: SendLimits,
    opts: LoopOpts,
    counters: &Counters,
    stop: &AtomicBool,
) -> Result<u64, SysError> {
    let frames = sock.config().frame_count;
    // Write the template into every frame once; per packet only the payload changes.
    let mut free: Vec<u64> = Vec::with_capacity(frames as usize);
    for i in (0..frames).rev() {
        let a = sock.frame_addr(i);
        packet::build_udp_frame(spec, sock.frame_mut(a, spec.frame_len as u32));
        free.push(a);
    }
    let len = spec.frame_len as u32;
    let mut pacer = Pacer::new(limits);
    let mut seq = 0u64;
    let mut outstanding = 0u64;
    // Descriptors queued per kick: what one copy-mode sendto will take (XDP_MAX_TX_SKB_BUDGET,
    // 32 by default), so each system call moves as many frames as the kernel allows.
    let per_kick = sock.tx_skb_budget().unwrap_or(32).max(opts.batch_size) as u64;
    while !stop.load(Ordering::Relaxed) && !pacer.done() {
        let done = drain_completions(sock, &mut free, per_kick.max(256) as u32);
        outstanding -= done as u64;
        counters.add(Ctr::TxCompleted, done as u64);
        let mut queued = 0u64;
        while queued < per_kick {
            let want = pacer.allowed(opts.batch_size.min(free.len() as u32) as u64) as u32;
            if want == 0 {
                break;
            }
            let (ti, got) = sock.tx.reserve_up_to(want);
            if got == 0 {
                break;
            }
            let now = sys::monotonic_ns();
            for i in 0..got {
                let a = free.pop().expect("want <= free.len()");
                seq += 1;
                packet::stamp(sock.frame_mut(a, len), &Payload { stream, seq, tstamp_ns: now });
                sock.tx.write(ti.wrapping_add(i), XdpDesc { addr: a, len, options: 0 });
            }
            sock.tx.submit(got);
            pacer.took(got as u64);
            queued += got as u64;
        }
        if queued > 0 {
            outstanding += queued;
            counters.add(Ctr::TxPackets, queued);
            counters.add(Ctr::TxBytes, queued * len as u64);
            counters.add(Ctr::Wakeups, 1);
            sock.kick_tx()?;
            continue;
        }
        // Nothing may go yet: either pacing, or every frame is in flight. Kick only while the
        // kernel has TX descriptors left to take.
        if sock.tx.pending() > 0 {
            counters.add(Ctr::Wakeups, 1);
            sock.kick_tx()?;
        } else if let Some(w) = pacer.wait_time() {
            if w > Duration::from_micros(100) {
                std::thread::sleep(w - Duration::from_micros(60));
            }
        }
    }
    // Every descriptor submitted must come back on the COMPLETION ring before the count is
    // reported: the summary is taken after this thread ends, so `tx_completed` is final.
    // An interrupted run (signal, interface gone) waits briefly: on a link that is down the
    // kernel may never complete them, and the run must end within a second.
    let wait = if pacer.done() { Duration::from_secs(5) } else { Duration::from_millis(300) };
    let deadline = Instant::now() + wait;
    while outstanding > 0 && Instant::now() < deadline {
        sock.kick_tx()?;
        let done = drain_completions(sock, &mut free, 4096);
        outstanding -= done as u64;
        counters.add(Ctr::TxCompleted, done as u64);
        if done == 0 {
            std::thread::sleep(Duration::from_micros(100));
        }
    }
    if outstanding > 0 && pacer.done() {
        return Err(SysError {
            call: format!("txonly: {outstanding} of {seq} TX frames not completed by the kernel within 5 s"),
            errno: libc::ETIMEDOUT,
        });
    }
    Ok(seq)
}

/// Moves up to `max` completed TX frames to the FILL ring; returns how many.
#[inline]
fn recycle_completions(sock: &mut XskSocket, max: u32, stop: &AtomicBool) -> u32 {
    let (ci, n) = sock.comp.peek(max);
    if n == 0 {
        return 0;
    }
    // Frames are conserved: FILL always has room for every frame we own, once the kernel
    // consumes what is there.
    let fi = loop {
        if let Some(fi) = sock.fill.reserve(n) {
            break fi;
        }
        if stop.load(Ordering::Relaxed) {
            sock.comp.cancel(n);
            return 0;
        }
        sock.kick_rx();
    };
    for i in 0..n {
        let a = sock.comp.read(ci.wrapping_add(i));
        sock.fill.write(fi.wrapping_add(i), a);
    }
    sock.fill.submit(n);
    sock.comp.release(n);
    n
}

/// l2fwd: swap MAC addresses and send each frame back on the same queue from the same UMEM frame
/// (no copy); completed frames go back to the FILL ring. Runs until `stop`.
pub fn l2fwd(sock: &mut XskSocket, opts: LoopOpts, counters: &Counters, stop: &AtomicBool) -> Result<(), SysError> {
    prefill(sock, sock.config().frame_count);
    // TX descriptors submitted and not yet completed: kick only while there are some, so an
    // idle loop makes no system calls (copy mode always asks for a wakeup).
    let mut in_flight = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let done = recycle_completions(sock, opts.batch_size.max(256), stop);
        in_flight -= done as u64;
        counters.add(Ctr::TxCompleted, done as u64);
        let (ri, n) = sock.rx.peek(opts.batch_size);
        if n == 0 {
            if in_flight > 0 && sock.tx.pending() > 0 {
                counters.add(Ctr::Wakeups, 1);
                sock.kick_tx()?;
            }
            wait_rx(sock, opts.wait, counters)?;
            continue;
        }
        let ti = loop {
            if let Some(ti) = sock.tx.reserve(n) {
                break ti;
            }
            // TX full: push it out and take completions so it drains.
            if stop.load(Ordering::Relaxed) {
                sock.rx.cancel(n);
                return Ok(());
            }
            counters.add(Ctr::Wakeups, 1);
            sock.kick_tx()?;
            let done = recycle_completions(sock, n.max(opts.batch_size), stop);
            in_flight -= done as u64;
            counters.add(Ctr::TxCompleted, done as u64);
        };
        let mut bytes = 0u64;
        for i in 0..n {
            let d = sock.rx.read(ri.wrapping_add(i));
            packet::swap_macs(sock.frame_mut(d.addr, d.len));
            bytes += d.len as u64;
            sock.tx.write(ti.wrapping_add(i), XdpDesc { addr: d.addr, len: d.len, options: 0 });
        }
        sock.tx.submit(n);
        sock.rx.release(n);
        in_flight += n as u64;
        counters.add(Ctr::RxPackets, n as u64);
        counters.add(Ctr::RxBytes, bytes);
        counters.add(Ctr::TxPackets, n as u64);
        counters.add(Ctr::TxBytes, bytes);
        counters.add(Ctr::Wakeups, 1);
        sock.kick_tx()?;
    }
    Ok(())
}

/// The xdp-live generator loop of one thread: runs `gen` over `frame`, paced and bounded by
/// `limits`, until `stop`. Call on a thread pinned to CPU `cpu` (that CPU's id is the stream id
/// stamped in each frame, and its slot of the per-CPU sequence map counts this thread), after [`sys::install_interrupt_handler`]; to stop it promptly, set
/// `stop` and [`sys::interrupt_thread`] it. Frames are counted by the program's per-CPU sequence
/// map (exact even when a call is interrupted); `counters` get them after each call.
/// Returns the frames this thread generated.
pub fn gen_live(
    gen: &XdpGen,
    cpu: usize,
    frame: &[u8],
    limits: SendLimits,
    batch_size: u32,
    counters: &Counters,
    stop: &AtomicBool,
) -> Result<u64, SysError> {
    let read_seq = || -> Result<u64, SysError> {
        gen.per_cpu_seq()
            .ok()
            .and_then(|v| v.get(cpu).copied())
            .ok_or_else(|| SysError { call: format!("bpf_map_lookup_elem(gen_seq, cpu {cpu})"), errno: libc::EIO })
    };
    let mut pacer = Pacer::new(limits);
    // One BPF_PROG_RUN costs ~24 ms of set-up whatever its size (see XdpGen::run): without a
    // rate, send in calls of up to 2^26 frames and rely on interruption to stop; with a rate,
    // calls of 1/20 s worth of frames. Pacing is therefore per call: each call is a line-rate
    // burst (use the xsk engine for pacing per 64-frame batch).
    let chunk: u64 = match limits.rate_pps {
        Some(r) => (r / 20).clamp(64, 1 << 26),
        None => 1 << 26,
    };
    let mut total = 0u64;
    let before = read_seq()?;
    while !stop.load(Ordering::Relaxed) && !pacer.done() {
        let n = pacer.allowed(chunk) as u32;
        if n == 0 {
            std::thread::sleep(Duration::from_micros(200));
            continue;
        }
        gen.run(frame, n, batch_size)?;
        let sent_now = read_seq()?.wrapping_sub(before);
        let delta = sent_now.saturating_sub(total);
        total = sent_now;
        pacer.took(delta.min(pacer.remaining.unwrap_or(u64::MAX)));
        counters.add(Ctr::TxPackets, delta);
        counters.add(Ctr::TxBytes, delta * frame.len() as u64);
    }
    Ok(total)
}

/// The xdp-live generator as a set of threads, one pinned to each CPU of `cpus`, each running
/// [`gen_live`] with its share of the limits (count split with the remainder to the first
/// threads, rate divided evenly). [`LiveGen::stop`] interrupts the threads' BPF_PROG_RUN calls
/// (SIGUSR1, repeated until each returns) and joins them.
#[derive(Debug)]
pub struct LiveGen {
    stop: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
    workers: Vec<std::thread::JoinHandle<Result<u64, SysError>>>,
}

/// Sets `done` when the last of `n` workers ends, however it ends (error, panic).
struct LastOut(Arc<AtomicU64>, Arc<AtomicBool>, u64);

impl Drop for LastOut {
    fn drop(&mut self) {
        if self.0.fetch_add(1, Ordering::Relaxed) + 1 == self.2 {
            self.1.store(true, Ordering::Relaxed);
        }
    }
}

impl LiveGen {
    /// Starts one thread per CPU in `cpus` (which must be distinct: each thread's frames are
    /// counted in its CPU's slot of the sequence map). `counters[i]` gets thread i's counts.
    pub fn start(
        gen: Arc<XdpGen>,
        frame: &[u8],
        cpus: &[usize],
        limits: SendLimits,
        batch_size: u32,
        counters: &[Arc<Counters>],
    ) -> Result<Self, SysError> {
        sys::install_interrupt_handler()?;
        let n = cpus.len() as u64;
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));
        let finished = Arc::new(AtomicU64::new(0));
        let workers = cpus
            .iter()
            .enumerate()
            .map(|(i, &cpu)| {
                let share = SendLimits {
                    count: limits.count.map(|t| t / n + u64::from((i as u64) < t % n)),
                    rate_pps: limits.rate_pps.map(|r| (r / n).max(1)),
                };
                let (g, f, s, c) = (gen.clone(), frame.to_vec(), stop.clone(), counters[i].clone());
                let last = LastOut(finished.clone(), done.clone(), n);
                std::thread::spawn(move || {
                    let _last = last;
                    sys::pin_current_thread(cpu)?;
                    gen_live(&g, cpu, &f, share, batch_size, &c, &s)
                })
            })
            .collect();
        Ok(Self { stop, done, workers })
    }

    /// Set once every thread has ended (e.g. its count was reached).
    pub fn done_flag(&self) -> &AtomicBool {
        &self.done
    }

    /// Stops and joins the threads; returns the frames they generated.
    pub fn stop(self) -> Result<u64, SysError> {
        use std::os::unix::thread::JoinHandleExt;
        self.stop.store(true, Ordering::Relaxed);
        // Repeat: a signal that lands between two BPF_PROG_RUN calls interrupts nothing.
        while self.workers.iter().any(|w| !w.is_finished()) {
            for w in self.workers.iter().filter(|w| !w.is_finished()) {
                sys::interrupt_thread(w.as_pthread_t());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut total = 0;
        for w in self.workers {
            total += w
                .join()
                .map_err(|_| SysError { call: "xdp-live generator thread panicked".into(), errno: libc::EIO })??;
        }
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pacer_respects_count_and_rate() {
        let mut p = Pacer::new(SendLimits { count: Some(10), rate_pps: None });
        assert_eq!(p.allowed(64), 10);
        p.took(10);
        assert!(p.done());
        let p = Pacer::new(SendLimits { count: None, rate_pps: Some(1000) });
        std::thread::sleep(Duration::from_millis(20));
        let a = p.allowed(1_000_000);
        assert!((15..=200).contains(&a), "about 20 packets due after 20 ms at 1000 pps, got {a}");
    }

    #[test]
    fn frame_base_masks_headroom() {
        assert_eq!(frame_base(4096 * 3 + 256 + 17, 4096), 4096 * 3);
        assert_eq!(frame_base(2048 * 5 + 300, 2048), 2048 * 5);
    }
}
