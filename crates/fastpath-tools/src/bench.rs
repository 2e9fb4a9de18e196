//! The run loops behind `fastpath bench` and `fastpath gen`: rxdrop, txonly, l2fwd on any
//! [`Port`] (AF_XDP or the other backends), and the xdp-live generator. Hot loops allocate
//! nothing; counters are published once per batch. What a sending loop sends is a plan
//! ([`TxPlan`], [`GenPlan`]) with named fields.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fastpath::bpf::XdpGen;
use fastpath::clock::monotonic_ns;
use fastpath::io::{Port, PortError};
use fastpath::packet::{self, Flows, Payload};
use fastpath::SysError;

use crate::stats::{Counters, Ctr};

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

impl Wait {
    /// The port API's timeout for this wait: poll for `ms`, or 0 (kick and return).
    #[inline]
    fn timeout_ms(self) -> i32 {
        match self {
            Wait::Poll(ms) => ms,
            Wait::Spin => 0,
        }
    }
}

/// rxdrop: receive and give every frame back to the kernel, calling `on_packet` with each
/// packet's bytes. Runs until `stop`. The same loop for every backend; `on_packet` is
/// monomorphised into the backend's receive loop.
///
/// # Errors
///
/// The first error of [`Port::rx_burst`] (e.g. the interface gone), which ends the loop.
pub fn rxdrop<P: Port>(
    port: &mut P,
    opts: LoopOpts,
    counters: &Counters,
    stop: &AtomicBool,
    mut on_packet: impl FnMut(&[u8]),
) -> Result<(), PortError> {
    rx_loop(opts, counters, stop, |timeout, bytes| {
        port.rx_burst(opts.batch_size as usize, timeout, |p| {
            *bytes += p.len() as u64;
            on_packet(p);
        })
    })
}

/// The receive loop of [`rxdrop`] and [`rxdrop_meta`]: `burst(timeout_ms, &mut bytes)` takes a
/// burst and adds its bytes; packets, bytes and wake-ups go to `counters`. Runs until `stop`.
#[inline]
fn rx_loop(
    opts: LoopOpts,
    counters: &Counters,
    stop: &AtomicBool,
    mut burst: impl FnMut(i32, &mut u64) -> Result<usize, PortError>,
) -> Result<(), PortError> {
    let timeout = opts.wait.timeout_ms();
    while !stop.load(Ordering::Relaxed) {
        let mut bytes = 0u64;
        let n = burst(timeout, &mut bytes)?;
        if n == 0 {
            if timeout > 0 {
                counters.add(Ctr::Wakeups, 1);
            }
            continue;
        }
        counters.add(Ctr::RxPackets, n as u64);
        counters.add(Ctr::RxBytes, bytes);
    }
    Ok(())
}

/// What `bench rxdrop --rx-meta` saw of the driver's RX metadata ([`fastpath::xsk::RxMeta`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RxMetaTally {
    /// Packets seen.
    pub frames: u64,
    /// Of those, with an RX timestamp.
    pub with_timestamp: u64,
    /// With an RSS hash.
    pub with_hash: u64,
    /// With a VLAN tag.
    pub with_vlan: u64,
    /// Packets per RSS hash type (`enum xdp_rss_hash_type` bits; serialized as a map from
    /// [`fastpath::xsk::RssType::name`] to the count).
    #[serde(serialize_with = "hash_type_names")]
    pub hash_types: Vec<(u32, u64)>,
    /// Distinct RSS hashes seen, counted up to [`RxMetaTally::MAX_DISTINCT`].
    pub distinct_hashes: u64,
    /// The first packet's metadata.
    pub first: Option<fastpath::xsk::RxMeta>,
    /// What each kfunc returned, counted: serialized as
    /// `{"timestamp"|"hash"|"vlan": {"answered", "no_data", "unsupported", "other": packets}}`
    /// (errno 0, ENODATA, EOPNOTSUPP, anything else; [`fastpath::xsk::KfuncErrno`]).
    #[serde(serialize_with = "kfunc_answers")]
    pub answers: [[u64; 4]; 3],
    #[serde(skip)]
    hashes: std::collections::HashSet<u32>,
    #[serde(skip)]
    last_hash: Option<u32>,
}

impl RxMetaTally {
    /// Distinct hashes kept (a flood of flows does not grow the set beyond this).
    pub const MAX_DISTINCT: usize = 4096;

    /// Counts one packet's metadata.
    #[inline]
    pub fn record(&mut self, m: &fastpath::xsk::RxMeta) {
        if self.frames == 0 {
            self.first = Some(*m);
        }
        self.frames += 1;
        self.with_timestamp += m.timestamp.is_some() as u64;
        self.with_vlan += m.vlan.is_some() as u64;
        for (k, e) in [m.errno.timestamp, m.errno.hash, m.errno.vlan].into_iter().enumerate() {
            let i = match e {
                0 => 0,
                fastpath::xsk::KfuncErrno::ENODATA => 1,
                fastpath::xsk::KfuncErrno::EOPNOTSUPP => 2,
                _ => 3,
            };
            self.answers[k][i] += 1;
        }
        if let Some((h, t)) = m.hash {
            self.with_hash += 1;
            // A handful of types at most: a linear search, no allocation after the first of each.
            match self.hash_types.iter_mut().find(|(k, _)| *k == t.0) {
                Some((_, n)) => *n += 1,
                None => self.hash_types.push((t.0, 1)),
            }
            // Consecutive packets are mostly of one flow: the set is asked only on a change.
            if self.last_hash != Some(h) {
                self.last_hash = Some(h);
                if self.hashes.len() < Self::MAX_DISTINCT && self.hashes.insert(h) {
                    self.distinct_hashes += 1;
                }
            }
        }
    }

    /// Adds another worker's tally.
    pub fn merge(&mut self, o: &RxMetaTally) {
        if self.first.is_none() {
            self.first = o.first;
        }
        self.frames += o.frames;
        self.with_timestamp += o.with_timestamp;
        self.with_hash += o.with_hash;
        self.with_vlan += o.with_vlan;
        for (a, b) in self.answers.iter_mut().flatten().zip(o.answers.iter().flatten()) {
            *a += b;
        }
        for &(k, v) in &o.hash_types {
            match self.hash_types.iter_mut().find(|(t, _)| *t == k) {
                Some((_, n)) => *n += v,
                None => self.hash_types.push((k, v)),
            }
        }
        for h in &o.hashes {
            if self.hashes.len() < Self::MAX_DISTINCT && self.hashes.insert(*h) {
                self.distinct_hashes += 1;
            }
        }
    }
}

fn kfunc_answers<S: serde::Serializer>(a: &[[u64; 4]; 3], s: S) -> Result<S::Ok, S::Error> {
    let outcome = |c: &[u64; 4]| {
        let names = ["answered", "no_data", "unsupported", "other"];
        names.iter().zip(c).map(|(n, v)| (*n, *v)).collect::<std::collections::BTreeMap<_, _>>()
    };
    let m: std::collections::BTreeMap<&str, _> =
        ["timestamp", "hash", "vlan"].iter().zip(a).map(|(k, c)| (*k, outcome(c))).collect();
    serde::Serialize::serialize(&m, s)
}

fn hash_type_names<S: serde::Serializer>(types: &[(u32, u64)], s: S) -> Result<S::Ok, S::Error> {
    let m: std::collections::BTreeMap<String, u64> =
        types.iter().map(|&(t, n)| (fastpath::xsk::RssType(t).name(), n)).collect();
    serde::Serialize::serialize(&m, s)
}

/// rxdrop with the driver's RX metadata of every packet counted into `tally`
/// ([`fastpath::io::afxdp::AfXdpPort::rx_burst_meta`]); `on_packet` sees each packet as in
/// [`rxdrop`]. Runs until `stop`.
///
/// # Errors
///
/// The first error of the port's receive, which ends the loop.
pub fn rxdrop_meta(
    port: &mut fastpath::io::afxdp::AfXdpPort,
    opts: LoopOpts,
    counters: &Counters,
    stop: &AtomicBool,
    tally: &mut RxMetaTally,
    mut on_packet: impl FnMut(&[u8]),
) -> Result<(), PortError> {
    rx_loop(opts, counters, stop, |timeout, bytes| {
        port.rx_burst_meta(opts.batch_size as usize, timeout, |p, m| {
            *bytes += p.len() as u64;
            tally.record(m);
            on_packet(p);
        })
    })
}

/// l2fwd: swap the MAC addresses of each received frame and send it back out of the same port
/// (on AF_XDP from the same UMEM frame, no copy). Runs until `stop`.
///
/// # Errors
///
/// The first error of the port's receive or send ([`Port::fwd_burst`]), which ends the loop.
pub fn l2fwd<P: Port>(port: &mut P, opts: LoopOpts, counters: &Counters, stop: &AtomicBool) -> Result<(), PortError> {
    let timeout = opts.wait.timeout_ms();
    while !stop.load(Ordering::Relaxed) {
        let mut bytes = 0u64;
        let (rx, tx) = port.fwd_burst(opts.batch_size as usize, timeout, |p| {
            packet::swap_macs(p);
            bytes += p.len() as u64;
            true
        })?;
        if rx == 0 {
            if timeout > 0 {
                counters.add(Ctr::Wakeups, 1);
            }
            continue;
        }
        counters.add(Ctr::RxPackets, rx as u64);
        counters.add(Ctr::RxBytes, bytes);
        counters.add(Ctr::TxPackets, tx as u64);
        counters.add(Ctr::TxBytes, bytes);
    }
    Ok(())
}

/// What the UDP checksum of each sent frame holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum UdpChecksum {
    /// The complete checksum, kept right as each frame is stamped (and its flow applied).
    #[default]
    Full,
    /// A partial checksum, the pseudo-header sum only ([`packet::udp_csum_partial`]): for a
    /// port that asks the device to complete it (TX metadata,
    /// [`fastpath::io::afxdp::AfXdpPort::set_tx_meta`]).
    Partial,
}

/// What [`txonly`] sends: copies of `template` (a whole frame with the fastpath payload, see
/// [`packet::stamp`]), each stamped with `stream`, the next sequence number (from 1) and the
/// send time.
#[derive(Debug, Clone, Copy)]
pub struct TxPlan<'a> {
    /// The frame sent: Ethernet to payload, as [`packet::build_udp_frame`] makes it.
    pub template: &'a [u8],
    /// The stream id stamped in every frame (a receiver counts sequence numbers per stream).
    pub stream: u16,
    /// With flows, frame `seq` carries flow `(seq - 1) % n` of [`Flows`] (source address's last
    /// byte and source port rewritten in place, checksums fixed incrementally; IPv4 or IPv6
    /// templates); None sends the template's one 5-tuple.
    pub flows: Option<&'a Flows>,
    /// Complete or partial UDP checksums.
    pub udp_checksum: UdpChecksum,
    /// Packets in all and their rate.
    pub limits: SendLimits,
    /// Batch size and how the loop waits.
    pub opts: LoopOpts,
}

impl<'a> TxPlan<'a> {
    /// Copies of `template` on stream 0, one flow, complete checksums, no count and no rate.
    pub fn new(template: &'a [u8], opts: LoopOpts) -> Self {
        TxPlan {
            template,
            stream: 0,
            flows: None,
            udp_checksum: UdpChecksum::Full,
            limits: SendLimits::default(),
            opts,
        }
    }
}

/// txonly: sends `plan`'s frames, paced and bounded by `plan.limits`. Stops at
/// `plan.limits.count`, or `stop`; then waits up to 5 s for outstanding completions (with a
/// count reached, missing completions are an error: `--count N` means N frames submitted AND
/// completed), or 300 ms when stopped early. Returns the number of packets sent. The same loop
/// for every backend.
///
/// # Errors
///
/// The first error of the port ([`Port::tx_stamped`]: [`PortError::Config`] for a template it
/// cannot carry; [`Port::tx_reap`], [`Port::tx_outstanding`]); [`PortError::Sys`] with ETIMEDOUT if
/// `plan.limits.count` was reached and frames are still not completed after 5 s.
pub fn txonly<P: Port>(
    port: &mut P,
    plan: &TxPlan<'_>,
    counters: &Counters,
    stop: &AtomicBool,
) -> Result<u64, PortError> {
    let TxPlan { template, stream, flows, udp_checksum, limits, opts } = *plan;
    let csum_partial = udp_checksum == UdpChecksum::Partial;
    let mut pacer = Pacer::new(limits);
    let mut seq = 0u64;
    // Frames offered per call: what one system call of the backend moves (copy-mode AF_XDP:
    // XDP_MAX_TX_SKB_BUDGET descriptors per sendto).
    let per_call = port.tx_batch_hint().max(opts.batch_size as usize) as u64;
    let len = template.len() as u64;
    let mut idle = 0u32;
    // Backends that complete on accept (they copied the frame) report no completions.
    let sync = match port.tx_reap()? {
        None => true,
        Some(done) => {
            counters.add(Ctr::TxCompleted, done);
            false
        }
    };
    while !stop.load(Ordering::Relaxed) && !pacer.done() {
        if let Some(done) = port.tx_reap()? {
            counters.add(Ctr::TxCompleted, done);
        }
        let want = pacer.allowed(per_call) as usize;
        if want == 0 {
            // Paced: push out what is queued (copy mode sends at most its budget per kick),
            // then wait for the next frame's time.
            port.tx_outstanding()?;
            if let Some(w) = pacer.wait_time() {
                if w > Duration::from_micros(100) {
                    std::thread::sleep(w - Duration::from_micros(60));
                }
            }
            continue;
        }
        let now = monotonic_ns();
        let base = seq;
        let k = port.tx_stamped(template, want, |i, buf| {
            let seq = base + 1 + i as u64;
            if let Some(f) = flows {
                f.apply(buf, f.flow_of_seq(seq));
            }
            packet::stamp(buf, &Payload { stream, seq, tstamp_ns: now });
            if csum_partial {
                packet::udp_csum_partial(buf);
            }
        })? as u64;
        if k == 0 {
            // Every frame in flight or the ring full: the backend pushed what it had; back off
            // a little after many empty rounds.
            idle += 1;
            if idle > 64 {
                std::thread::yield_now();
            }
            continue;
        }
        idle = 0;
        seq += k;
        pacer.took(k);
        counters.add(Ctr::TxPackets, k);
        counters.add(Ctr::TxBytes, k * len);
        if sync {
            counters.add(Ctr::TxCompleted, k);
        }
        counters.add(Ctr::Wakeups, 1);
    }
    drain_completions(port, counters, pacer.done(), seq, "txonly")?;
    Ok(seq)
}

/// The end of a sending loop: every frame accepted must be completed before the count is
/// reported (the summary is taken after the sending thread ends, so `tx_completed` is final).
/// Waits up to 5 s when the loop reached its count (`reached`; frames still outstanding then
/// are an error naming `what` and `sent`), 300 ms when it was interrupted (signal, interface gone: on a
/// link that is down the kernel may never complete them).
pub(crate) fn drain_completions<P: Port>(
    port: &mut P,
    counters: &Counters,
    reached: bool,
    sent: u64,
    what: &str,
) -> Result<(), PortError> {
    let wait = if reached { Duration::from_secs(5) } else { Duration::from_millis(300) };
    let deadline = Instant::now() + wait;
    let mut outstanding = port.tx_outstanding()?;
    while outstanding > 0 && Instant::now() < deadline {
        if let Some(done) = port.tx_reap()? {
            counters.add(Ctr::TxCompleted, done);
        }
        std::thread::sleep(Duration::from_micros(100));
        outstanding = port.tx_outstanding()?;
    }
    if let Some(done) = port.tx_reap()? {
        counters.add(Ctr::TxCompleted, done);
    }
    let outstanding = port.tx_outstanding()?;
    if outstanding > 0 && reached {
        return Err(PortError::Sys(SysError {
            call: format!("{what}: {outstanding} of {sent} TX frames not completed by the kernel within 5 s"),
            errno: libc::ETIMEDOUT,
        }));
    }
    Ok(())
}

/// What one thread of the xdp-live generator sends ([`gen_live`]).
#[derive(Debug, Clone, Copy)]
pub struct GenPlan<'a> {
    /// The CPU the thread runs on: the stream id stamped in each frame, and this thread's slot of
    /// the program's per-CPU sequence map.
    pub cpu: usize,
    /// The frame the program sends (and stamps).
    pub frame: &'a [u8],
    /// Frames in all and their rate, for this thread.
    pub limits: SendLimits,
    /// Frames per BPF_PROG_RUN batch (the kernel's `batch_size` of live frames).
    pub batch_size: u32,
}

/// The xdp-live generator loop of one thread: runs `gen` over `plan.frame`, paced and bounded by
/// `plan.limits`, until `stop`. Call on a thread pinned to CPU `plan.cpu`, after
/// [`signal::install_interrupt_handler`](crate::signal::install_interrupt_handler); to stop it
/// promptly, set `stop` and [`signal::interrupt_thread`](crate::signal::interrupt_thread) it.
/// Frames are counted by the program's per-CPU sequence map (exact even when a call is
/// interrupted); `counters` get them after each call.
/// Returns the frames this thread generated. With a rate, `pace` counts how evenly they went
/// out: every whole 1 ms window after the first, and those within 20% of the nominal rate.
///
/// # Errors
///
/// [`SysError`] from [`XdpGen::run`] (EINTR is not one), EIO if the per-CPU sequence map cannot be
/// read for `plan.cpu`, or if [`XdpGen::set_pace`] / [`XdpGen::pace_windows`] fail (their
/// message in `call`).
pub fn gen_live(
    gen: &XdpGen,
    plan: &GenPlan<'_>,
    counters: &Counters,
    stop: &AtomicBool,
    pace: &PaceStats,
) -> Result<u64, SysError> {
    let GenPlan { cpu, frame, limits, batch_size } = *plan;
    let read_seq = || -> Result<u64, SysError> {
        gen.per_cpu_seq()
            .ok()
            .and_then(|v| v.get(cpu).copied())
            .ok_or_else(|| SysError { call: format!("bpf_map_lookup_elem(gen_seq, cpu {cpu})"), errno: libc::EIO })
    };
    // Without a rate, send in calls of up to 2^26 frames and rely on interruption to stop.
    // With a rate and no count, the program paces itself per frame (XdpGen::set_pace): long
    // calls, each frame sent when due, the thread's CPU busy all the while. Back-to-back
    // BPF_PROG_RUN calls cost ~24 ms each on a 6.18 VM (see XdpGen::run), so pacing by call
    // makes each call a burst followed by silence: that is what a rate with a count (exact
    // totals) still does, in calls of 1/20 s worth of frames.
    let in_prog = limits.rate_pps.is_some() && limits.count.is_none();
    let interval_ns = match limits.rate_pps {
        Some(r) if in_prog => (1_000_000_000 / r.max(1)).max(1),
        _ => 0,
    };
    if in_prog || cpu < fastpath::abi::FP_GEN_MAX_CPUS as usize {
        gen.set_pace(cpu, interval_ns).map_err(|e| SysError {
            call: format!(
                "pacing the xdp-live generator on CPU {cpu} (paced on CPUs below {}): {e}",
                fastpath::abi::FP_GEN_MAX_CPUS
            ),
            errno: libc::EINVAL,
        })?;
    }
    let chunk: u64 = match limits.rate_pps {
        _ if in_prog => 1 << 28,
        Some(r) => (r / 20).clamp(64, 1 << 26),
        None => 1 << 26,
    };
    let limits = if in_prog { SendLimits { rate_pps: None, ..limits } } else { limits };
    let mut pacer = Pacer::new(limits);
    // Frames per whole 1 ms window, and the window being counted (per-call pacing).
    // Scored only at >= 5 frames per ms, as in the program (FP_GEN_PACE_SCORED_MAX_INTERVAL_NS).
    let nominal_per_ms = limits.rate_pps.map(|r| r as f64 / 1000.0).filter(|&n| n >= 5.0);
    let (mut window, mut in_window) = (0u128, 0u64);
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
        if let (Some(nominal), false) = (nominal_per_ms, in_prog) {
            let ms = pacer.start.elapsed().as_millis();
            if ms != window {
                // Windows with no call at all count as empty (and so, as outside 20%).
                for w in window..ms {
                    let count = if w == window { in_window } else { 0 };
                    if w > 0 {
                        pace.windows.fetch_add(1, Ordering::Relaxed);
                        if (count as f64 - nominal).abs() <= 0.2 * nominal {
                            pace.within_20pct.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                (window, in_window) = (ms, 0);
            }
            in_window += delta;
        }
    }
    if in_prog {
        let (w, ok) = gen.pace_windows(cpu).map_err(|e| SysError { call: format!("{e}"), errno: libc::EIO })?;
        pace.windows.fetch_add(w, Ordering::Relaxed);
        pace.within_20pct.fetch_add(ok, Ordering::Relaxed);
    }
    Ok(total)
}

/// How evenly a paced generator sent: whole 1 ms windows, and those that held the nominal
/// rate within 20%. Filled by [`gen_live`] when it has a rate of at least 5,000 frames/s per
/// thread (below that a whole number of frames per window cannot be within 20%).
#[derive(Debug, Default)]
pub struct PaceStats {
    /// Whole 1 ms windows counted (the first, partial one is not).
    pub windows: AtomicU64,
    /// Of those, windows whose frame count was within 20% of rate / 1000.
    pub within_20pct: AtomicU64,
}

impl PaceStats {
    /// The share of 1 ms windows within 20% of the nominal rate, 0..=1; `None` before a window.
    pub fn share_within_20pct(&self) -> Option<f64> {
        let w = self.windows.load(Ordering::Relaxed);
        (w > 0).then(|| self.within_20pct.load(Ordering::Relaxed) as f64 / w as f64)
    }
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
    pace: Arc<PaceStats>,
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
    ///
    /// # Errors
    ///
    /// [`SysError`] if the SIGUSR1 handler cannot be installed (`sigaction`). A thread that cannot
    /// be pinned to its CPU (`sched_setaffinity`, EINVAL for a CPU not online) ends with that
    /// error, reported by [`LiveGen::stop`].
    ///
    /// # Panics
    ///
    /// If `counters` has fewer entries than `cpus`; if `cpus` is empty while `limits` sets a count
    /// or a rate (division by zero); if a thread cannot be spawned.
    pub fn start(
        gen: Arc<XdpGen>,
        frame: &[u8],
        cpus: &[usize],
        limits: SendLimits,
        batch_size: u32,
        counters: &[Arc<Counters>],
    ) -> Result<Self, SysError> {
        crate::signal::install_interrupt_handler()?;
        let n = cpus.len() as u64;
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));
        let finished = Arc::new(AtomicU64::new(0));
        let pace = Arc::new(PaceStats::default());
        let workers = cpus
            .iter()
            .enumerate()
            .map(|(i, &cpu)| {
                let share = SendLimits {
                    count: limits.count.map(|t| t / n + u64::from((i as u64) < t % n)),
                    rate_pps: limits.rate_pps.map(|r| (r / n).max(1)),
                };
                let (g, f, s, c, p) = (gen.clone(), frame.to_vec(), stop.clone(), counters[i].clone(), pace.clone());
                let last = LastOut(finished.clone(), done.clone(), n);
                std::thread::spawn(move || {
                    let _last = last;
                    fastpath::workers::pin_current_thread(cpu)?;
                    let plan = GenPlan { cpu, frame: &f, limits: share, batch_size };
                    gen_live(&g, &plan, &c, &s, &p)
                })
            })
            .collect();
        Ok(Self { stop, done, workers, pace })
    }

    /// Set once every thread has ended (e.g. its count was reached).
    pub fn done_flag(&self) -> &AtomicBool {
        &self.done
    }

    /// How evenly the threads sent, summed over threads (each window of each thread against
    /// that thread's share of the rate); complete once [`LiveGen::stop`] returned; empty
    /// without a rate.
    pub fn pace(&self) -> Arc<PaceStats> {
        self.pace.clone()
    }

    /// Stops and joins the threads; returns the frames they generated.
    ///
    /// # Errors
    ///
    /// The first thread's error (as [`gen_live`], or its failed `sched_setaffinity`); EIO if a
    /// thread panicked.
    pub fn stop(self) -> Result<u64, SysError> {
        self.stop.store(true, Ordering::Relaxed);
        // Repeat: a signal that lands between two BPF_PROG_RUN calls interrupts nothing.
        while self.workers.iter().any(|w| !w.is_finished()) {
            for w in self.workers.iter().filter(|w| !w.is_finished()) {
                crate::signal::interrupt_thread(w);
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
}
