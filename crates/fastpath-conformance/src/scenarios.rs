//! The scenarios, by the kernel's names (`prog_tests/test_xsk.h`), each a function of the bed
//! and the mode. What each sends and checks is in its doc line; the kernel's descriptions
//! (xskxceiver) are the source, the code is fastpath's own.

use fastpath::bpf::XdpMode;
use fastpath::xsk::{SocketConfig, UmemConfig, XdpDesc, XDP_PACKET_HEADROOM, XDP_PKT_CONTD};
use fastpath_testbed::Testbed;

use crate::xsk::{
    self, packets, packets_with, redirect, same_packets, socket_config, transfer, transfer_items, umem_config, Port,
    TxItem, Wait,
};
use crate::{ensure, progs, Check, Mode, Outcome};

/// One scenario: its kernel name and how it runs.
pub struct Scenario {
    /// The kernel's name (`test_xsk.h`).
    pub name: &'static str,
    /// Runs it on the bed in one mode.
    pub run: fn(&Testbed, Mode) -> Outcome,
}

fn outcome(c: Check) -> Outcome {
    match c {
        Ok(s) => Outcome::Pass(s),
        Err(s) => Outcome::Fail(s),
    }
}

/// What a plain send-and-receive run varies.
#[derive(Debug, Clone)]
struct Run {
    umem: UmemConfig,
    count: usize,
    len: usize,
    wait: Wait,
    multi_buffer: bool,
}

impl Run {
    fn new(count: usize, len: usize) -> Self {
        Run { umem: umem_config(), count, len, wait: Wait::default(), multi_buffer: false }
    }
}

/// The two sides of a scenario: the redirect program and the RX socket on the bed's b end
/// (queue 0, in XSKMAP slot 0), the TX socket on its a end.
struct Sides {
    prog: fastpath::bpf::Attached<fastpath::bpf::XskRedirect>,
    rx: Port,
    tx: Port,
}

fn sides(
    bed: &Testbed,
    xdp: XdpMode,
    umem: &UmemConfig,
    rx_cfg: SocketConfig,
    tx_cfg: SocketConfig,
) -> Result<Sides, String> {
    let prog = redirect(bed.ns_b(), bed.iface_b(), rx_cfg.multi_buffer, xdp)?;
    let rx = Port::open(bed.ns_b(), bed.iface_b(), 0, umem.clone(), rx_cfg)?;
    prog.prog.insert(0, rx.sock.as_raw_fd()).map_err(|e| e.to_string())?;
    let tx = Port::open(bed.ns_a(), bed.iface_a(), 0, umem.clone(), tx_cfg)?;
    Ok(Sides { prog, rx, tx })
}

/// The RX side on the bed's b end (queue 0, redirect attached, socket in the XSKMAP) and the
/// TX side on its a end; then the packets of `r` through them, checked byte for byte, in order.
fn send_receive(bed: &Testbed, mode: Mode, r: &Run) -> Check {
    let mut sc = socket_config(mode);
    sc.multi_buffer = r.multi_buffer;
    let Sides { prog: _prog, mut rx, mut tx } = sides(bed, mode.xdp, &r.umem, sc.clone(), sc)?;
    let pkts = packets(bed, r.count, r.len, 1);
    let t = transfer(&mut tx, &mut rx, &pkts, pkts.len(), r.wait)?;
    same_packets(&t.received, &pkts).map_err(|e| {
        let seqs: Vec<u64> = t.received.iter().filter_map(|p| fastpath::packet::payload(&p.data)).map(|p| p.seq).collect();
        let missing: Vec<u64> = (1..=pkts.len() as u64).filter(|s| !seqs.contains(s)).take(8).collect();
        let veth = fastpath_testbed::Testbed::ethtool_stats(bed.ns_b(), bed.iface_b())
            .map(|v| v.into_iter().filter(|(k, v)| *v > 0 && (k.contains("drop") || k.contains("err"))).collect::<Vec<_>>());
        format!("{e}; sent {} completed {} dropped by the driver (sendto EBUSY) {} tx free {} pending {}; missing seqs {missing:?}; RX {:?}; TX {:?}; veth b {veth:?}", t.sent, t.completed, t.driver_dropped, tx.free.len(), tx.sock.tx.pending(), rx.stats(), tx.stats())
    })?;
    // Copy mode: the kernel puts the packet at XDP_PACKET_HEADROOM + the UMEM's headroom
    // into the frame (net/xdp/xsk.c, __xsk_rcv; Documentation/networking/af_xdp.rst).
    let want_off = (XDP_PACKET_HEADROOM + r.umem.headroom) as u64;
    let fs = r.umem.frame_size as u64;
    if let Some((i, p)) = t.received.iter().enumerate().find(|(_, p)| p.addrs[0] % fs != want_off) {
        return Err(format!(
            "packet {} at frame offset {} (expected XDP_PACKET_HEADROOM {XDP_PACKET_HEADROOM} + headroom {})",
            i + 1,
            p.addrs[0] % fs,
            r.umem.headroom
        ));
    }
    let st = rx.stats()?;
    ensure(st.rx_dropped == 0 && st.rx_invalid_descs == 0, || format!("RX socket counted drops: {st:?}"))?;
    Ok(format!("{} packets of {} bytes, in order, intact", r.count, r.len))
}

fn send_receive_default(bed: &Testbed, mode: Mode) -> Outcome {
    outcome(send_receive(bed, mode, &Run::new(xsk::DEFAULT_PKT_CNT, xsk::MIN_PKT_SIZE)))
}

fn send_receive_2k_frame(bed: &Testbed, mode: Mode) -> Outcome {
    let mut r = Run::new(xsk::DEFAULT_PKT_CNT, xsk::MIN_PKT_SIZE);
    r.umem.frame_size = 2048;
    outcome(send_receive(bed, mode, &r))
}

fn send_receive_single_pkt(bed: &Testbed, mode: Mode) -> Outcome {
    outcome(send_receive(bed, mode, &Run::new(1, xsk::MIN_PKT_SIZE)))
}

fn poll_rx(bed: &Testbed, mode: Mode) -> Outcome {
    let mut r = Run::new(xsk::DEFAULT_PKT_CNT, xsk::MIN_PKT_SIZE);
    r.wait.poll_rx = true;
    outcome(send_receive(bed, mode, &r))
}

fn poll_tx(bed: &Testbed, mode: Mode) -> Outcome {
    let mut r = Run::new(xsk::DEFAULT_PKT_CNT, xsk::MIN_PKT_SIZE);
    r.wait.poll_tx = true;
    outcome(send_receive(bed, mode, &r))
}

fn umem_headroom(bed: &Testbed, mode: Mode) -> Outcome {
    let mut r = Run::new(xsk::DEFAULT_PKT_CNT, xsk::MIN_PKT_SIZE);
    r.umem.headroom = 128;
    outcome(send_receive(bed, mode, &r))
}

fn send_receive_9k(bed: &Testbed, mode: Mode) -> Outcome {
    if let Err(e) = bed.set_mtu(9000) {
        return Outcome::Fail(format!("MTU 9000 on the bed: {e}"));
    }
    let mut r = Run::new(xsk::DEFAULT_PKT_CNT, 9000);
    r.multi_buffer = true;
    let c = send_receive(bed, mode, &r);
    let back = bed.set_mtu(1500);
    match (c, back) {
        (c, Ok(())) => outcome(c),
        (_, Err(e)) => Outcome::Fail(format!("MTU back to 1500: {e}")),
    }
}

/// The largest UMEM headroom: the kernel keeps room in each frame for XDP_PACKET_HEADROOM,
/// the aligned `skb_shared_info` (320 bytes on 64-bit) and 128 bytes of packet
/// (net/xdp/xdp_umem.c, xdp_umem_reg(); older kernels allowed up to frame - 256 - 1).
fn max_headroom(frame_size: u32) -> u32 {
    frame_size - XDP_PACKET_HEADROOM - 320 - 128
}

/// The largest headroom: every other packet is 512 bytes, more than the frame keeps after it
/// (frame size - XDP_PACKET_HEADROOM - headroom = 448): those are dropped and counted in
/// `rx_dropped`, one each; the 64-byte ones arrive, in order. One more byte of headroom is
/// refused by the kernel (EINVAL) and by fastpath before it.
fn stat_rx_dropped(bed: &Testbed, mode: Mode) -> Outcome {
    outcome((|| {
        let mut umem = umem_config();
        umem.headroom = max_headroom(umem.frame_size);
        let big = 512;
        let room = (umem.frame_size - XDP_PACKET_HEADROOM - umem.headroom) as usize;
        ensure(big > room, || format!("a {big}-byte packet fits the {room} bytes a frame keeps"))?;
        let sc = socket_config(mode);
        let Sides { prog: _prog, mut rx, mut tx } = sides(bed, mode.xdp, &umem, sc.clone(), sc)?;
        let n = xsk::DEFAULT_PKT_CNT;
        let pkts = packets_with(bed, n, |i| if i % 2 == 1 { big } else { xsk::MIN_PKT_SIZE }, 1, false);
        let small: Vec<Vec<u8>> = pkts.iter().filter(|p| p.len() == xsk::MIN_PKT_SIZE).cloned().collect();
        let t = transfer(&mut tx, &mut rx, &pkts, small.len(), Wait::default())?;
        settle(&mut tx, &mut rx);
        same_packets(&t.received, &small)?;
        let st = rx.stats()?;
        ensure(st.rx_dropped == (n / 2) as u64, || {
            format!("rx_dropped {} (expected {}): {st:?}", st.rx_dropped, n / 2)
        })?;
        let mut over = umem.clone();
        over.headroom += 1;
        ensure(over.validate().is_err(), || format!("UmemConfig::validate accepts headroom {}", over.headroom))?;
        Ok(format!(
            "{} of {n} packets (64 bytes) arrived, rx_dropped = {} ({big} bytes, over the {room} a frame keeps after headroom {})",
            small.len(),
            n / 2,
            umem.headroom
        ))
    })())
}

/// An RX ring of 64 descriptors that is never read: 64 packets fill it, every later one is
/// counted in `rx_ring_full`, exactly.
fn stat_rx_full(bed: &Testbed, mode: Mode) -> Outcome {
    outcome((|| {
        let mut rx_cfg = socket_config(mode);
        rx_cfg.ring_size = 64;
        let Sides { prog: _prog, mut rx, mut tx } = sides(bed, mode.xdp, &umem_config(), rx_cfg, socket_config(mode))?;
        let n = 1024;
        let pkts = packets(bed, n, xsk::MIN_PKT_SIZE, 1);
        rx.fill(usize::MAX);
        let sent = xsk::deliver_unread(&mut tx, &mut rx, &pkts)?;
        settle(&mut tx, &mut rx);
        let st = rx.stats()?;
        let mut got = Vec::new();
        rx.recv(&mut got);
        ensure(sent == n, || format!("only {sent} of {n} packets went out"))?;
        same_packets(&got, &pkts[..64]).map_err(|e| format!("{e}: {st:?}"))?;
        ensure(st.rx_ring_full == (n - 64) as u64, || {
            format!("rx_ring_full {} (expected {} = {n} sent - 64 held by the ring): {st:?}", st.rx_ring_full, n - 64)
        })?;
        Ok(format!("64 packets held by the ring, rx_ring_full = {}", n - 64))
    })())
}

/// Nothing on the FILL ring: every packet is dropped, counted once in
/// `rx_fill_ring_empty_descs` and once in `rx_dropped`; then, with the FILL ring stocked, the
/// next packets arrive.
fn stat_fill_empty(bed: &Testbed, mode: Mode) -> Outcome {
    outcome((|| {
        let sc = socket_config(mode);
        let Sides { prog: _prog, mut rx, mut tx } = sides(bed, mode.xdp, &umem_config(), sc.clone(), sc)?;
        let n = 256;
        let pkts = packets(bed, n, xsk::MIN_PKT_SIZE, 1);
        let sent = xsk::deliver_unread(&mut tx, &mut rx, &pkts)?;
        settle(&mut tx, &mut rx);
        let st = rx.stats()?;
        ensure(sent == n, || format!("only {sent} of {n} packets went out"))?;
        ensure(st.rx_fill_ring_empty_descs == n as u64 && st.rx_dropped == n as u64, || {
            format!("expected rx_fill_ring_empty_descs = rx_dropped = {n}: {st:?}")
        })?;
        let more = packets(bed, 64, xsk::MIN_PKT_SIZE, 2);
        let t = transfer(&mut tx, &mut rx, &more, more.len(), Wait::default())?;
        same_packets(&t.received, &more)?;
        Ok(format!("{n} dropped and counted with an empty FILL ring, then 64 of 64 arrived"))
    })())
}

/// Wakes both sides for 100 ms so that everything sent has been through the receiver's XDP.
fn settle(tx: &mut Port, rx: &mut Port) {
    let t0 = std::time::Instant::now();
    while t0.elapsed() < std::time::Duration::from_millis(100) {
        let _ = tx.sock.kick_tx();
        tx.reap();
        rx.sock.kick_rx();
    }
}

/// Sockets and redirect programs on both ends: a to b, then b to a on the same sockets.
fn bidirectional(bed: &Testbed, mode: Mode) -> Outcome {
    outcome((|| {
        let sc = socket_config(mode);
        let Sides { prog: _prog_b, rx: mut b, tx: mut a } = sides(bed, mode.xdp, &umem_config(), sc.clone(), sc)?;
        let prog_a = redirect(bed.ns_a(), bed.iface_a(), false, mode.xdp)?;
        prog_a.prog.insert(0, a.sock.as_raw_fd()).map_err(|e| e.to_string())?;
        let n = xsk::DEFAULT_PKT_CNT;
        let ab = packets(bed, n, xsk::MIN_PKT_SIZE, 1);
        let t = transfer(&mut a, &mut b, &ab, n, Wait::default())?;
        same_packets(&t.received, &ab).map_err(|e| format!("a to b: {e}"))?;
        let ba = packets_with(bed, n, |_| xsk::MIN_PKT_SIZE, 2, true);
        let t = transfer(&mut b, &mut a, &ba, n, Wait::default())?;
        same_packets(&t.received, &ba).map_err(|e| format!("b to a: {e}"))?;
        Ok(format!("{n} packets each way, in order, intact"))
    })())
}

/// Ten times (the kernel's MAX_TEARDOWN_ITER): program, sockets, DEFAULT_PKT_CNT packets
/// through, everything closed; each round must work on what the last one left.
fn teardown(bed: &Testbed, mode: Mode) -> Outcome {
    outcome((|| {
        for round in 1..=10 {
            send_receive(bed, mode, &Run::new(xsk::DEFAULT_PKT_CNT, xsk::MIN_PKT_SIZE))
                .map_err(|e| format!("round {round}: {e}"))?;
        }
        Ok(format!("10 rounds of set-up, {} packets, tear-down", xsk::DEFAULT_PKT_CNT))
    })())
}

/// Two sockets on the b end's queue 0 over one UMEM (the second shares the first's FILL and
/// COMPLETION rings); the program alternates between their XSKMAP slots: each gets every other
/// packet, in order, and together all of them.
fn xdp_shared_umem(bed: &Testbed, mode: Mode) -> Outcome {
    outcome((|| {
        let sc = socket_config(mode);
        let prog = xsk::redirect_with(
            bed.ns_b(),
            bed.iface_b(),
            fastpath::bpf::XskRedirectOpts::default().with_socks_per_queue(2).with_frags(false),
            mode.xdp,
        )?;
        let mut rx0 = Port::open(bed.ns_b(), bed.iface_b(), 0, umem_config(), sc.clone())?;
        let mut rx1 = rx0.share(bed.ns_b(), bed.iface_b(), 0, sc.clone(), 0)?;
        prog.prog.insert(0, rx0.sock.as_raw_fd()).map_err(|e| e.to_string())?;
        prog.prog.insert(1, rx1.sock.as_raw_fd()).map_err(|e| e.to_string())?;
        let mut tx = Port::open(bed.ns_a(), bed.iface_a(), 0, umem_config(), sc)?;
        let n = xsk::DEFAULT_PKT_CNT;
        let pkts = packets(bed, n, xsk::MIN_PKT_SIZE, 1);
        let (mut got0, mut got1) = (Vec::new(), Vec::new());
        rx0.fill(usize::MAX);
        let mut sent = 0;
        let mut last = std::time::Instant::now();
        while got0.len() + got1.len() < n && last.elapsed() < xsk::STALL {
            let s = tx.send(&pkts[sent..]);
            sent += s;
            // Paced as transfer_items paces (the veth ring holds 256).
            let taken = sent - tx.sock.tx.pending() as usize;
            if taken - (got0.len() + got1.len()) < xsk::IN_FLIGHT {
                let _ = tx.sock.kick_tx();
            }
            tx.reap();
            rx0.sock.kick_rx();
            let r = rx0.recv(&mut got0) + rx1.recv(&mut got1);
            // Frames received on the second socket go back on the shared FILL ring.
            rx0.free.append(&mut rx1.free);
            rx0.fill(usize::MAX);
            if s + r > 0 {
                last = std::time::Instant::now();
            }
        }
        ensure(got0.len() + got1.len() == n, || format!("{} + {} of {n} packets arrived", got0.len(), got1.len()))?;
        ensure(!got0.is_empty() && !got1.is_empty(), || {
            format!("one socket got nothing: {} and {}", got0.len(), got1.len())
        })?;
        let seqs = |g: &[xsk::Received]| -> Vec<u64> {
            g.iter().filter_map(|r| fastpath::packet::payload(&r.data)).map(|p| p.seq).collect()
        };
        let (s0, s1) = (seqs(&got0), seqs(&got1));
        ensure(s0.windows(2).all(|w| w[0] < w[1]) && s1.windows(2).all(|w| w[0] < w[1]), || {
            "a socket's packets out of order".into()
        })?;
        let mut all: Vec<u64> = s0.iter().chain(&s1).copied().collect();
        all.sort_unstable();
        ensure(all == (1..=n as u64).collect::<Vec<_>>(), || "together not every packet exactly once".into())?;
        Ok(format!(
            "{} + {} packets on two sockets sharing one UMEM and FILL ring, each in order, all exactly once",
            got0.len(),
            got1.len()
        ))
    })())
}

/// Every odd packet is a descriptor at address 0 of 9001 bytes (longer than a frame): each is
/// skipped and counted in `tx_invalid_descs`, exactly, and never completed; the even ones
/// arrive, in order.
fn stat_tx_invalid(bed: &Testbed, mode: Mode) -> Outcome {
    outcome((|| {
        let sc = socket_config(mode);
        let Sides { prog: _prog, mut rx, mut tx } = sides(bed, mode.xdp, &umem_config(), sc.clone(), sc)?;
        let n = xsk::DEFAULT_PKT_CNT;
        let pkts = packets(bed, n, xsk::MIN_PKT_SIZE, 1);
        let bad = XdpDesc { addr: 0, len: 9001, options: 0 };
        let items: Vec<TxItem> = pkts
            .iter()
            .enumerate()
            .map(|(i, p)| if i % 2 == 1 { TxItem::Raw(bad) } else { TxItem::Packet(p.clone()) })
            .collect();
        let good: Vec<Vec<u8>> = pkts.iter().step_by(2).cloned().collect();
        let t = transfer_items(&mut tx, &mut rx, &items, good.len(), Wait::default())?;
        same_packets(&t.received, &good).map_err(|e| {
            format!("{e}; sent {} completed {} rx {:?} tx {:?}", t.sent, t.completed, rx.stats(), tx.stats())
        })?;
        let st = tx.stats()?;
        ensure(st.tx_invalid_descs == (n / 2) as u64, || {
            format!("tx_invalid_descs {} (expected {}): {st:?}", st.tx_invalid_descs, n / 2)
        })?;
        // The refused descriptors all name address 0, a frame no packet uses (retired at
        // the first one, before any packet could take it: packets take the highest free
        // frames first).
        let refused_too = completion_pin()?.refused_completed;
        let at0 = tx.completed_addrs.iter().filter(|a| **a == 0).count();
        let want_at0 = if refused_too { n / 2 } else { 0 };
        ensure(t.completed == good.len() + want_at0 && at0 == want_at0, || {
            format!(
                "{} completions, {at0} of them at address 0; expected the {} valid packets' and {want_at0} at address 0 (this kernel completes the refused ones: {refused_too})",
                t.completed,
                good.len()
            )
        })?;
        Ok(format!(
            "{} valid packets arrived, tx_invalid_descs = {}, {} completions ({want_at0} of them the refused descriptors at address 0)",
            good.len(),
            n / 2,
            t.completed
        ))
    })())
}

/// What the running kernel puts on the COMPLETION ring in copy mode, pinned per version from
/// what it was seen to do.
#[derive(Debug, Clone, Copy)]
struct CompletionPin {
    /// Every refused TX descriptor is completed too, once, with its address as given (even
    /// one outside the UMEM).
    refused_completed: bool,
    /// A packet of one descriptor completes with its address's bit 0 cleared (Linux 6.18
    /// keeps that address in the skb's `destructor_arg`, tagged in bit 0; only unaligned mode
    /// has odd addresses, e.g. frames of 4,001 bytes).
    single_bit0_cleared: bool,
}

/// The [`CompletionPin`] of the running kernel: Linux 6.18 completes refused descriptors and
/// clears bit 0 of a one-descriptor packet's address. Completions come in no fixed order
/// between refused descriptors (completed when skipped) and valid ones (when their skb is
/// freed), so they are compared as a multiset.
///
/// # Errors
///
/// A kernel whose behaviour is not pinned here (its release, and what was pinned), or
/// /proc/sys/kernel/osrelease unreadable.
fn completion_pin() -> Result<CompletionPin, String> {
    const OSRELEASE: &str = "/proc/sys/kernel/osrelease";
    let release = std::fs::read_to_string(OSRELEASE).map_err(|e| format!("{OSRELEASE}: {e}"))?;
    let release = release.trim();
    let mut v = release.split(|c: char| !c.is_ascii_digit()).map(|n| n.parse::<u32>().ok());
    match (v.next().flatten(), v.next().flatten()) {
        (Some(6), Some(18)) => Ok(CompletionPin { refused_completed: true, single_bit0_cleared: true }),
        _ => Err(format!(
            "completions of TX descriptors are not pinned for kernel {release} (pinned: 6.18 completes each refused descriptor at its address as given, and a one-descriptor packet at its address with bit 0 cleared); run the scenario there and pin what it does"
        )),
    }
}

/// A TX descriptor of a crafted stream, for [`pin_completions`].
#[derive(Debug, Clone, Copy)]
struct Sent {
    addr: u64,
    /// The kernel takes it.
    valid: bool,
    /// A valid packet of this one descriptor.
    single: bool,
}

/// Checks the COMPLETION ring's addresses against the TX stream `descs` as the running
/// kernel completes them ([`completion_pin`]). Says what it saw.
fn pin_completions(completed: &[u64], descs: &[Sent]) -> Result<String, String> {
    let pin = completion_pin()?;
    let mut want: Vec<u64> = descs
        .iter()
        .filter(|d| d.valid || pin.refused_completed)
        .map(|d| if d.valid && d.single && pin.single_bit0_cleared { d.addr & !1 } else { d.addr })
        .collect();
    let mut got = completed.to_vec();
    want.sort_unstable();
    got.sort_unstable();
    let invalid = descs.iter().filter(|d| !d.valid).count();
    ensure(got == want, || {
        format!(
            "completions {got:#x?}, expected {want:#x?} ({} valid, {invalid} refused descriptors; pinned for this kernel: {pin:?})",
            descs.len() - invalid
        )
    })?;
    Ok(match pin.refused_completed {
        true => format!("all {} completed, the refused ones at their addresses as given", want.len()),
        false => format!("the {} valid ones completed, no refused one", want.len()),
    })
}

/// One row of an invalid-descriptor table: the descriptor and whether the kernel takes it.
struct Row {
    desc: XdpDesc,
    valid: bool,
}

/// Sends `rows` and checks: exactly the valid packets arrive, in order, intact; the
/// completions are the ones the running kernel gives ([`pin_completions`]);
/// `tx_invalid_descs` counts each invalid row. A run of valid rows chained with
/// XDP_PKT_CONTD is one packet of their lengths together, cut over their buffers; a lone valid
/// row carries a packet of its length (at least 64 bytes, the rest not sent). `rx_frags`: for
/// each valid packet, in order, the number of RX buffers it must arrive in (empty: not
/// checked).
fn inv_desc_table(
    bed: &Testbed,
    mode: Mode,
    umem: &UmemConfig,
    rows: &[Row],
    multi_buffer: bool,
    rx_frags: &[usize],
) -> Check {
    let mut sc = socket_config(mode);
    sc.multi_buffer = multi_buffer;
    let Sides { prog: _prog, mut rx, mut tx } = sides(bed, mode.xdp, umem, sc.clone(), sc)?;
    // Valid packets: the rows each covers.
    let mut groups: Vec<std::ops::Range<usize>> = Vec::new();
    let mut i = 0;
    while i < rows.len() {
        let start = i;
        while rows[i].valid && rows[i].desc.options & XDP_PKT_CONTD != 0 && i + 1 < rows.len() && rows[i + 1].valid {
            i += 1;
        }
        if rows[start].valid {
            groups.push(start..i + 1);
        }
        i += 1;
    }
    let lens: Vec<usize> = groups
        .iter()
        .map(|g| rows[g.clone()].iter().map(|r| r.desc.len as usize).sum::<usize>().clamp(xsk::MIN_PKT_SIZE, 9000))
        .collect();
    let want = packets_with(bed, groups.len(), |i| lens[i], 1, false);
    let mut items: Vec<TxItem> = rows.iter().map(|r| TxItem::Raw(r.desc)).collect();
    for (g, p) in groups.iter().zip(&want) {
        let mut at = 0;
        for k in g.clone() {
            let r = &rows[k];
            let n = r.desc.len as usize;
            items[k] = TxItem::At { addr: r.desc.addr, bytes: p[at..at + n].to_vec(), options: r.desc.options };
            at += n;
        }
    }
    // A lone valid row sends only its length: the packet is cut to it.
    let want: Vec<Vec<u8>> = groups
        .iter()
        .zip(want)
        .map(|(g, p)| p[..rows[g.clone()].iter().map(|r| r.desc.len as usize).sum::<usize>()].to_vec())
        .collect();
    let t = transfer_items(&mut tx, &mut rx, &items, want.len(), Wait::default())?;
    same_packets(&t.received, &want)
        .map_err(|e| format!("{e}; completed {:x?}; TX {:?}; RX {:?}", tx.completed_addrs, tx.stats(), rx.stats()))?;
    if !rx_frags.is_empty() {
        let got: Vec<usize> = t.received.iter().map(|r| r.addrs.len()).collect();
        ensure(got == rx_frags, || format!("RX buffers per packet {got:?}, expected {rx_frags:?}"))?;
    }
    let valid = rows.iter().filter(|r| r.valid).count();
    let invalid = rows.len() - valid;
    let descs: Vec<Sent> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| Sent { addr: r.desc.addr, valid: r.valid, single: groups.iter().any(|g| *g == (i..i + 1)) })
        .collect();
    let also = pin_completions(&tx.completed_addrs, &descs)?;
    let st = tx.stats()?;
    ensure(st.tx_invalid_descs == invalid as u64, || {
        format!("tx_invalid_descs {} (expected {invalid}): {st:?}", st.tx_invalid_descs)
    })?;
    Ok(format!(
        "{} valid packets ({valid} descriptors) arrived, {invalid} invalid descriptors skipped and counted, {also}",
        want.len()
    ))
}

/// The kernel's aligned table: address 0; a plain frame; before the UMEM (-2); longer than a
/// frame (9001); ending exactly at the UMEM's end; at the end; crossing the end; crossing a
/// 4K frame; crossing a 2K frame (valid with 4K frames); a plain frame.
fn aligned_rows(umem: &UmemConfig) -> Vec<Row> {
    let fs = umem.frame_size as u64;
    let u = fs * umem.frame_count as u64;
    let row = |addr: u64, len: u32, valid: bool| Row { desc: XdpDesc { addr, len, options: 0 }, valid };
    vec![
        row(0, 64, true),
        row(fs, 64, true),
        row(u64::MAX - 1, 64, false),
        row(2 * fs, 9001, false),
        row(u - 64, 64, true),
        row(u, 64, false),
        row(u - 32, 64, false),
        row(13 * fs + 0x1000 - 32, 64, false),
        row(8 * fs + 0x800 - 32, 64, fs == 4096),
        row(12 * fs, 64, true),
    ]
}

fn aligned_inv_desc(bed: &Testbed, mode: Mode) -> Outcome {
    let umem = umem_config();
    outcome(inv_desc_table(bed, mode, &umem, &aligned_rows(&umem), false, &[]))
}

fn aligned_inv_desc_2k(bed: &Testbed, mode: Mode) -> Outcome {
    let mut umem = umem_config();
    umem.frame_size = 2048;
    outcome(inv_desc_table(bed, mode, &umem, &aligned_rows(&umem), false, &[]))
}

/// The kernel's multi-buffer table: packets with one bad buffer (a zero-length last buffer,
/// a buffer beyond the UMEM, one longer than a frame, unknown options) are dropped whole, each
/// of their descriptors counted invalid; a packet sent in 2 full frames arrives in 3 RX buffers
/// (each keeps frame size - XDP_PACKET_HEADROOM in copy mode); a packet whose second buffer
/// crosses a chunk boundary is refused in aligned mode and taken in unaligned mode
/// (`unaligned`); the packets around them arrive.
fn inv_desc_multi_buff(bed: &Testbed, mode: Mode, umem: &UmemConfig) -> Check {
    let fs = umem.frame_size as u64;
    let u = fs * umem.frame_count as u64;
    let c = XDP_PKT_CONTD;
    let row = |addr: u64, len: u32, options: u32, valid: bool| Row { desc: XdpDesc { addr, len, options }, valid };
    let full = umem.frame_size;
    let rows = vec![
        row(0, 64, 0, true),
        // Ends with a zero-length buffer.
        row(fs, 3072, c, false),
        row(2 * fs, 3072, c, false),
        row(3 * fs, 0, 0, false),
        // Second buffer beyond the UMEM.
        row(4 * fs, 3072, c, false),
        row(u, 3072, c, false),
        row(5 * fs, 64, 0, false),
        // Second buffer longer than a frame.
        row(6 * fs, 3072, c, false),
        row(7 * fs, 9001, 0, false),
        // Second buffer with unknown options (0xffff, XDP_PKT_CONTD among them): the packet
        // is dropped through its end, the next buffer without XDP_PKT_CONTD.
        row(8 * fs, 3072, c, false),
        row(9 * fs, 3072, 0xffff, false),
        row(10 * fs, 64, 0, false),
        // 2 full frames sent, 3 buffers received.
        row(12 * fs, full, c, true),
        row(13 * fs, full, 0, true),
        // Second buffer of 64 bytes crossing a chunk boundary (from frame 15 into 16).
        row(14 * fs, 3072, c, umem.unaligned),
        row(16 * fs - 32, 64, 0, umem.unaligned),
        row(11 * fs, 64, 0, true),
    ];
    let per_buf = umem.frame_size - XDP_PACKET_HEADROOM - umem.headroom;
    let two_frames = (2 * full).div_ceil(per_buf) as usize;
    ensure(two_frames == 3, || format!("2 frames of {full} bytes fit {two_frames} RX buffers of {per_buf}, not 3"))?;
    let rx_frags: Vec<usize> = match umem.unaligned {
        true => vec![1, 3, 1, 1],
        false => vec![1, 3, 1],
    };
    inv_desc_table(bed, mode, umem, &rows, true, &rx_frags)
}

fn aligned_inv_desc_multi_buff(bed: &Testbed, mode: Mode) -> Outcome {
    with_mtu(bed, 9000, || inv_desc_multi_buff(bed, mode, &umem_config()))
}

/// `Udp: NoPorts` of namespace `ns` (/proc/net/snmp): datagrams to a port nobody listens on.
fn udp_no_ports(ns: &str) -> Result<u64, String> {
    let o = fastpath_testbed::ns_command(ns, "cat").arg("/proc/net/snmp").output().map_err(|e| format!("cat: {e}"))?;
    let text = String::from_utf8_lossy(&o.stdout);
    let mut udp = text.lines().filter(|l| l.starts_with("Udp: "));
    let (names, values) = (udp.next().unwrap_or_default(), udp.next().unwrap_or_default());
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "NoPorts")
        .and_then(|(_, v)| v.parse().ok())
        .ok_or_else(|| format!("no Udp NoPorts in {ns}'s /proc/net/snmp"))
}

/// The RX socket behind one of the scenarios' own programs ([`progs::Prog`]) on the b end,
/// the TX socket on the a end.
fn sides_with(
    bed: &Testbed,
    xdp: XdpMode,
    which: progs::Prog,
    umem: &UmemConfig,
    sc: SocketConfig,
) -> Result<(progs::TestProg, Port, Port), String> {
    let prog = progs::attach(bed.ns_b(), bed.iface_b(), which, xdp)?;
    let rx = Port::open(bed.ns_b(), bed.iface_b(), 0, umem.clone(), sc.clone())?;
    prog.insert(0, rx.sock.as_raw_fd())?;
    let tx = Port::open(bed.ns_a(), bed.iface_a(), 0, umem.clone(), sc)?;
    Ok((prog, rx, tx))
}

/// An XDP program drops every other frame by arrival (XDP_DROP): the 1st, 3rd, ... arrive,
/// in order, intact; the socket counts no drop of its own.
fn xdp_drop_half(bed: &Testbed, mode: Mode) -> Outcome {
    outcome((|| {
        let (_prog, mut rx, mut tx) =
            sides_with(bed, mode.xdp, progs::Prog::DropHalf, &umem_config(), socket_config(mode))?;
        let n = xsk::DEFAULT_PKT_CNT;
        let pkts = packets(bed, n, xsk::MIN_PKT_SIZE, 1);
        let kept: Vec<Vec<u8>> = pkts.iter().step_by(2).cloned().collect();
        let t = transfer(&mut tx, &mut rx, &pkts, kept.len(), Wait::default())?;
        same_packets(&t.received, &kept)?;
        let st = rx.stats()?;
        ensure(st.rx_dropped == 0 && st.rx_ring_full == 0, || format!("the socket counted drops: {st:?}"))?;
        Ok(format!("{} of {n} packets (every other, dropped by XDP) arrived in order", kept.len()))
    })())
}

/// An XDP program puts 32 bytes of metadata in front of each frame, the first 8 its arrival
/// count: the kernel copies them into the UMEM with the frame, each packet's count is its
/// position (from 0).
fn metadata_copy(bed: &Testbed, mode: Mode, multi_buffer: bool) -> Check {
    let mut sc = socket_config(mode);
    sc.multi_buffer = multi_buffer;
    let (_prog, mut rx, mut tx) = sides_with(bed, mode.xdp, progs::Prog::Meta, &umem_config(), sc)?;
    // Multi-buffer: packets of two frames each, the metadata in front of the first.
    let (n, len) =
        if multi_buffer { (xsk::DEFAULT_PKT_CNT / 4, 5000) } else { (xsk::DEFAULT_PKT_CNT, xsk::MIN_PKT_SIZE) };
    let pkts = packets(bed, n, len, 1);
    let t = transfer(&mut tx, &mut rx, &pkts, n, Wait::default())?;
    same_packets(&t.received, &pkts)?;
    for (i, r) in t.received.iter().enumerate() {
        let count = r.meta.get(..8).map(|b| u64::from_ne_bytes(b.try_into().expect("8 bytes")));
        ensure(count == Some(i as u64), || format!("packet {}: metadata count {count:?}, expected {i}", i + 1))?;
        ensure(!multi_buffer || r.addrs.len() > 1, || format!("packet {} came in one buffer", i + 1))?;
    }
    Ok(format!("{n} packets of {len} bytes, each with its arrival count in the 32 bytes of metadata before it"))
}

fn xdp_metadata_copy(bed: &Testbed, mode: Mode) -> Outcome {
    outcome(metadata_copy(bed, mode, false))
}

fn xdp_metadata_copy_multi_buff(bed: &Testbed, mode: Mode) -> Outcome {
    with_mtu(bed, 9000, || metadata_copy(bed, mode, true))
}

/// Runs `f` with the bed's MTU at `mtu`, then puts 1500 back.
fn with_mtu(bed: &Testbed, mtu: u32, f: impl FnOnce() -> Check) -> Outcome {
    outcome(with_mtu_check(bed, mtu, f))
}

/// [`with_mtu`] as a [`Check`].
fn with_mtu_check(bed: &Testbed, mtu: u32, f: impl FnOnce() -> Check) -> Check {
    bed.set_mtu(mtu).map_err(|e| format!("MTU {mtu} on the bed: {e}"))?;
    let r = f();
    bed.set_mtu(1500).map_err(|e| format!("MTU back to 1500: {e}"))?;
    r
}

/// An XDP program changes every frame's length by `by` bytes (`bpf_xdp_adjust_tail`):
/// `count` packets of `len` bytes arrive as their first `len + by` bytes when `by` < 0, or
/// followed by `by` zero bytes when `by` > 0 (the helper clears what it adds, net/core/filter.c).
/// Where the helper answers -EOPNOTSUPP (the kernel's suite skips the scenario then) it is NOT
/// RUN HERE, with that answer.
fn adjust_tail(bed: &Testbed, mode: Mode, count: usize, len: usize, by: i32, multi_buffer: bool) -> Outcome {
    let r = (|| {
        let mut sc = socket_config(mode);
        sc.multi_buffer = multi_buffer;
        let (prog, mut rx, mut tx) = sides_with(bed, mode.xdp, progs::Prog::AdjustTail(by), &umem_config(), sc)?;
        let pkts = packets(bed, count, len, 1);
        let new_len = (len as i64 + by as i64) as usize;
        let want: Vec<Vec<u8>> = pkts
            .iter()
            .map(|p| {
                let mut w = p[..new_len.min(len)].to_vec();
                w.resize(new_len, 0);
                w
            })
            .collect();
        let t = transfer(&mut tx, &mut rx, &pkts, count, Wait::default())?;
        let err = prog.adjust_error()?;
        if err == -libc::EOPNOTSUPP && by > 0 {
            return Ok(Err(format!(
                "bpf_xdp_adjust_tail cannot grow a {} frame by {by} here (-EOPNOTSUPP, {} XDP on veth); the kernel's suite skips it too",
                if multi_buffer { "multi-buffer" } else { "linear" },
                crate::xdp_name(mode.xdp)
            )));
        }
        if err == -libc::EINVAL && by > 0 {
            return Ok(Err(format!(
                "bpf_xdp_adjust_tail(+{by}) answers -EINVAL: the buffer {} XDP on veth hands the program ends with the frame, no tailroom to grow into (the kernel's program drops such frames, its scenario fails here too)",
                crate::xdp_name(mode.xdp)
            )));
        }
        ensure(err == 0, || format!("bpf_xdp_adjust_tail({by}) failed: {err} (-errno)"))?;
        same_packets(&t.received, &want)?;
        Ok(Ok(match by < 0 {
            true => format!("{count} packets of {len} bytes arrived as their first {new_len} bytes"),
            false => format!("{count} packets of {len} bytes arrived grown to {new_len}, {by} zero bytes added"),
        }))
    })();
    match r {
        Ok(Ok(s)) => Outcome::Pass(s),
        Ok(Err(why)) => Outcome::NotHere(why),
        Err(e) => Outcome::Fail(e),
    }
}

fn xdp_adjust_tail_shrink(bed: &Testbed, mode: Mode) -> Outcome {
    adjust_tail(bed, mode, 64, 128, -4, false)
}

/// 6,144-byte packets (2 × 3K) shrunk by a whole frame (4,096).
fn xdp_adjust_tail_shrink_multi_buff(bed: &Testbed, mode: Mode) -> Outcome {
    with_mtu_outcome(bed, 9000, || adjust_tail(bed, mode, 64, 6144, -4096, true))
}

/// 128-byte packets grown by 4.
fn xdp_adjust_tail_grow(bed: &Testbed, mode: Mode) -> Outcome {
    adjust_tail(bed, mode, 64, 128, 4, false)
}

/// 6,144-byte packets grown by 2,047 (half a 4K frame - 1: within the last fragment).
fn xdp_adjust_tail_grow_multi_buff(bed: &Testbed, mode: Mode) -> Outcome {
    with_mtu_outcome(bed, 9000, || adjust_tail(bed, mode, 64, 6144, 2047, true))
}

/// [`with_mtu`] of a scenario that gives its own [`Outcome`].
fn with_mtu_outcome(bed: &Testbed, mtu: u32, f: impl FnOnce() -> Outcome) -> Outcome {
    if let Err(e) = bed.set_mtu(mtu) {
        return Outcome::Fail(format!("MTU {mtu} on the bed: {e}"));
    }
    let o = f();
    match bed.set_mtu(1500) {
        Ok(()) => o,
        Err(e) => Outcome::Fail(format!("MTU back to 1500: {e}")),
    }
}

/// An RX socket with a stocked FILL ring and nobody sending: `poll(POLLIN)` waits its whole
/// timeout (1 s, the kernel's POLL_TMOUT) and returns 0, not an error and not early.
fn poll_rxq_full(bed: &Testbed, mode: Mode) -> Outcome {
    outcome((|| {
        let prog = redirect(bed.ns_b(), bed.iface_b(), false, mode.xdp)?;
        let mut rx = Port::open(bed.ns_b(), bed.iface_b(), 0, umem_config(), socket_config(mode))?;
        prog.prog.insert(0, rx.sock.as_raw_fd()).map_err(|e| e.to_string())?;
        rx.fill(usize::MAX);
        let t0 = std::time::Instant::now();
        let r = xsk::poll_fd(rx.sock.as_raw_fd(), libc::POLLIN, 1000)?;
        let waited = t0.elapsed();
        ensure(r == 0, || format!("poll(POLLIN) returned revents {r:#x} with nothing sent"))?;
        ensure(waited >= std::time::Duration::from_millis(990), || {
            format!("poll returned after {waited:?}, before its 1 s")
        })?;
        Ok(format!("poll(POLLIN) timed out after {:.2} s", waited.as_secs_f64()))
    })())
}

/// A TX socket whose COMPLETION ring is never read: once it is full the kernel stops taking
/// from the TX ring, the TX ring fills, and `poll(POLLOUT)` times out (1 s); after the
/// completions are read, `poll(POLLOUT)` reports room again and every packet is sent.
fn poll_txq_full(bed: &Testbed, mode: Mode) -> Outcome {
    outcome((|| {
        let mut umem = umem_config();
        umem.frame_size = 2048;
        (umem.frame_count, umem.fill_size, umem.comp_size) = (1024, 64, 64);
        let mut sc = socket_config(mode);
        sc.ring_size = 64;
        let mut tx = Port::open(bed.ns_a(), bed.iface_a(), 0, umem, sc)?;
        let pkts = packets(bed, 512, xsk::MIN_PKT_SIZE, 1);
        let mut sent = 0;
        let t0 = std::time::Instant::now();
        // Until the TX ring is full and stays so: the COMPLETION ring (64) is full behind it.
        while t0.elapsed() < xsk::STALL {
            sent += tx.send(&pkts[sent..]);
            let _ = tx.sock.kick_tx();
            if tx.sock.tx.pending() == 64 && sent > 64 {
                break;
            }
        }
        ensure(tx.sock.tx.pending() == 64, || {
            format!("the TX ring holds {} of 64 after {sent} packets", tx.sock.tx.pending())
        })?;
        let r = xsk::poll_fd(tx.sock.as_raw_fd(), libc::POLLOUT, 1000)?;
        ensure(r & libc::POLLOUT == 0, || {
            format!("poll(POLLOUT) reported room with the TX ring full (revents {r:#x})")
        })?;
        let done = tx.reap();
        ensure(done == 64, || format!("{done} completions waiting, expected 64 (the COMPLETION ring's size)"))?;
        let r = xsk::poll_fd(tx.sock.as_raw_fd(), libc::POLLOUT, 1000)?;
        ensure(r & libc::POLLOUT != 0, || format!("poll(POLLOUT) after the completions were read: revents {r:#x}"))?;
        // And the rest goes out: every packet completes.
        let mut completed = done;
        let t0 = std::time::Instant::now();
        while completed < pkts.len() && t0.elapsed() < xsk::STALL {
            sent += tx.send(&pkts[sent..]);
            let _ = tx.sock.kick_tx();
            completed += tx.reap();
        }
        ensure(completed == pkts.len(), || format!("{completed} of {} packets completed", pkts.len()))?;
        Ok(format!("TX ring full behind a full COMPLETION ring: poll(POLLOUT) timed out; room again once 64 completions were read; all {} completed", pkts.len()))
    })())
}

/// A socket in the XSKMAP closes: its slot empties by itself (the kernel removes a closed
/// socket from every XSKMAP), frames then go to the kernel's stack (XDP_PASS), none to the
/// dead socket; a new socket in the slot takes the traffic, in order; and once the program is
/// dropped, nothing is left attached to the interface.
fn xdp_prog_cleanup(bed: &Testbed, mode: Mode) -> Outcome {
    outcome((|| {
        let sc = socket_config(mode);
        let Sides { prog, mut rx, mut tx } = sides(bed, mode.xdp, &umem_config(), sc.clone(), sc.clone())?;
        let first = packets(bed, 256, xsk::MIN_PKT_SIZE, 1);
        let t = transfer(&mut tx, &mut rx, &first, first.len(), Wait::default())?;
        same_packets(&t.received, &first).map_err(|e| format!("first socket: {e}"))?;
        drop(rx);
        let mut rx2 = Port::open(bed.ns_b(), bed.iface_b(), 0, umem_config(), sc)?;
        // Frames with the slot empty are passed to the stack (XDP_PASS, xsk_redirect's
        // default), not to anyone's ring: b's UDP layer sees each, to a port nobody listens on.
        let no_ports = || udp_no_ports(bed.ns_b());
        let before = no_ports()?;
        let gap = packets(bed, 64, xsk::MIN_PKT_SIZE, 2);
        let t = transfer(&mut tx, &mut rx2, &gap, 0, Wait::default())?;
        ensure(t.received.is_empty(), || format!("{} frames reached a socket not in the map", t.received.len()))?;
        let passed = no_ports()? - before;
        ensure(passed == 64, || format!("{passed} of 64 frames reached b's stack (Udp NoPorts) with the slot empty"))?;
        prog.prog.insert(0, rx2.sock.as_raw_fd()).map_err(|e| e.to_string())?;
        let second = packets(bed, 256, xsk::MIN_PKT_SIZE, 3);
        let t = transfer(&mut tx, &mut rx2, &second, second.len(), Wait::default())?;
        same_packets(&t.received, &second).map_err(|e| format!("second socket: {e}"))?;
        let ifindex = rx2.sock.ifindex();
        drop(prog);
        let left = fastpath_testbed::run_in_netns(bed.ns_b(), move || fastpath::bpf::query_xdp(ifindex))
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        ensure(left.is_none(), || format!("an XDP program is still attached: {left:?}"))?;
        Ok("256 packets to the first socket; with its slot emptied by its close, 64 to the stack and none to a socket; 256 to its successor; nothing left attached".into())
    })())
}

/// A multi-buffer packet may have at most `net.core.max_skb_frags` + 1 buffers (18 by
/// default): one of exactly that many arrives whole; one with one buffer more is dropped, its
/// buffers counted invalid; the packets around them arrive.
fn too_many_frags(bed: &Testbed, mode: Mode) -> Outcome {
    with_mtu(bed, 9000, || {
        let frags: usize = std::fs::read_to_string("/proc/sys/net/core/max_skb_frags")
            .map_err(|e| format!("/proc/sys/net/core/max_skb_frags: {e}"))?
            .trim()
            .parse::<usize>()
            .map_err(|e| format!("max_skb_frags: {e}"))?
            + 1;
        let mut sc = socket_config(mode);
        sc.multi_buffer = true;
        let Sides { prog: _prog, mut rx, mut tx } = sides(bed, mode.xdp, &umem_config(), sc.clone(), sc)?;
        let chunk = xsk::MIN_PKT_SIZE;
        let p = packets_with(
            bed,
            4,
            |i| if i == 1 || i == 2 { chunk * frags + if i == 2 { chunk } else { 0 } } else { 64 },
            1,
            false,
        );
        rx.fill(usize::MAX);
        let mut sent = 0;
        let t0 = std::time::Instant::now();
        while sent < 4 && t0.elapsed() < xsk::STALL {
            sent += tx.send_split(&p[sent..], chunk);
            let _ = tx.sock.kick_tx();
            tx.reap();
        }
        let want = vec![p[0].clone(), p[1].clone(), p[3].clone()];
        let none: Vec<Vec<u8>> = Vec::new();
        let t = transfer(&mut tx, &mut rx, &none, want.len(), Wait::default())?;
        same_packets(&t.received, &want)?;
        let st = tx.stats()?;
        ensure(st.tx_invalid_descs == (frags + 1) as u64, || {
            format!(
                "tx_invalid_descs {} (expected the {} buffers of the over-long packet): {st:?}",
                st.tx_invalid_descs,
                frags + 1
            )
        })?;
        Ok(format!(
            "a packet of {frags} buffers arrived whole; one of {} was dropped, its buffers counted invalid",
            frags + 1
        ))
    })
}

/// 33 packets on the TX ring and one wake-up (`sendto`): the kernel takes exactly its TX
/// budget, 32, in that call (copy mode, XDP_MAX_TX_SKB_BUDGET default; net/xdp/xsk.c), and
/// publishes its consumer index so the ring shows 1 left; the next wake-up takes it; all 33
/// arrive.
fn tx_queue_consumer(bed: &Testbed, mode: Mode) -> Outcome {
    outcome((|| {
        let sc = socket_config(mode);
        let Sides { prog: _prog, mut rx, mut tx } = sides(bed, mode.xdp, &umem_config(), sc.clone(), sc)?;
        rx.fill(usize::MAX);
        let pkts = packets(bed, 33, xsk::MIN_PKT_SIZE, 1);
        ensure(tx.send(&pkts) == 33, || "33 packets did not fit the TX ring".into())?;
        let before = tx.sock.tx.pending();
        xsk::wake_tx(&tx);
        let after = tx.sock.tx.pending();
        ensure(before == 33 && after == 1, || {
            format!("TX ring: {before} before one sendto, {after} after (expected 33 and 1)")
        })?;
        xsk::wake_tx(&tx);
        let none: Vec<Vec<u8>> = Vec::new();
        let t = transfer(&mut tx, &mut rx, &none, 33, Wait::default())?;
        same_packets(&t.received, &pkts)?;
        Ok("one sendto took 32 of 33 descriptors, the next the last; 33 arrived".into())
    })())
}

/// The UMEM of the unaligned scenarios: unaligned chunk mode, `frame_size`-byte chunks, on
/// 2 MiB huge pages as the kernel's (xskxceiver maps an unaligned UMEM with MAP_HUGETLB).
fn unaligned_umem(frame_size: u32) -> UmemConfig {
    let mut c = umem_config();
    c.frame_size = frame_size;
    c.unaligned = true;
    c.huge_pages = true;
    c
}

/// Runs `f` with enough 2 MiB huge pages reserved for two UMEMs of `umem` (the sending and
/// the receiving socket's; `/proc/sys/vm/nr_hugepages` raised, put back afterwards). When the
/// kernel cannot reserve them the scenario is NOT RUN HERE, with why: it never falls back to
/// normal pages.
fn on_huge_pages(umem: &UmemConfig, f: impl FnOnce() -> Check) -> Outcome {
    let pages = 2 * (umem.frame_size as usize * umem.frame_count as usize).div_ceil(2 << 20);
    match xsk::HugePages::reserve(pages) {
        Ok(reserved) => {
            let o = outcome(f());
            drop(reserved);
            o
        }
        Err(e) => {
            Outcome::NotHere(format!("the kernel's unaligned UMEMs are on huge pages, and none could be reserved: {e}"))
        }
    }
}

/// Unaligned chunk mode on huge pages: every other packet is a TX buffer 32 bytes before a
/// frame's end, so it crosses into the next frame (allowed only in unaligned mode); all arrive
/// in order, intact, at XDP_PACKET_HEADROOM into their frames.
fn send_receive_unaligned(bed: &Testbed, mode: Mode) -> Outcome {
    let umem = unaligned_umem(4096);
    on_huge_pages(&umem, || {
        let sc = socket_config(mode);
        let Sides { prog: _prog, mut rx, mut tx } = sides(bed, mode.xdp, &umem, sc.clone(), sc)?;
        let fs = umem.frame_size as u64;
        let n = xsk::DEFAULT_PKT_CNT / 2;
        // Frames 2j and 2j+1 of the upper half carry straddling packet j (odd ones).
        let first = umem.frame_count as u64 / 2;
        tx.hold(|a| a >= first * fs);
        let pkts = packets(bed, n, xsk::MIN_PKT_SIZE, 1);
        let items: Vec<TxItem> = pkts
            .iter()
            .enumerate()
            .map(|(i, p)| match i % 2 {
                0 => TxItem::Packet(p.clone()),
                _ => TxItem::At { addr: (first + i as u64) * fs - 32, bytes: p.clone(), options: 0 },
            })
            .collect();
        let t = transfer_items(&mut tx, &mut rx, &items, n, Wait::default())?;
        same_packets(&t.received, &pkts)?;
        let off = XDP_PACKET_HEADROOM as u64;
        ensure(t.received.iter().all(|r| r.addrs[0] % fs == off), || {
            "a packet not at XDP_PACKET_HEADROOM into its frame".into()
        })?;
        ensure(tx.stats()?.tx_invalid_descs == 0, || format!("TX counted invalid descriptors: {:?}", tx.stats()))?;
        Ok(format!("{n} packets on huge pages, every other one a TX buffer across two frames, in order, intact"))
    })
}

/// The aligned table in unaligned mode: crossing a frame (4K or 2K) is allowed now; before,
/// at or across the UMEM's end, longer than a frame, still refused.
fn unaligned_rows(umem: &UmemConfig) -> Vec<Row> {
    let mut rows = aligned_rows(umem);
    rows[7].valid = true;
    rows[8].valid = true;
    rows
}

fn unaligned_inv_desc(bed: &Testbed, mode: Mode) -> Outcome {
    let umem = unaligned_umem(4096);
    on_huge_pages(&umem, || inv_desc_table(bed, mode, &umem, &unaligned_rows(&umem), false, &[]))
}

/// Chunks of 4001 bytes (not a power of two, only unaligned mode takes them).
fn unaligned_inv_desc_4001(bed: &Testbed, mode: Mode) -> Outcome {
    let umem = unaligned_umem(4001);
    on_huge_pages(&umem, || inv_desc_table(bed, mode, &umem, &unaligned_rows(&umem), false, &[]))
}

fn unaligned_inv_desc_multi_buff(bed: &Testbed, mode: Mode) -> Outcome {
    let umem = unaligned_umem(4096);
    on_huge_pages(&umem, || with_mtu_check(bed, 9000, || inv_desc_multi_buff(bed, mode, &umem)))
}

fn send_receive_unaligned_9k(bed: &Testbed, mode: Mode) -> Outcome {
    let mut r = Run::new(xsk::DEFAULT_PKT_CNT, 9000);
    r.multi_buffer = true;
    r.umem = unaligned_umem(4096);
    on_huge_pages(&r.umem.clone(), || with_mtu_check(bed, 9000, || send_receive(bed, mode, &r)))
}

/// The kernel sets hardware ring sizes with ethtool; veth has none.
fn hw_ring_size(bed: &Testbed, _mode: Mode) -> Outcome {
    match fastpath_testbed::ns_command(bed.ns_a(), "ethtool").args(["-g", bed.iface_a()]).output() {
        Ok(o) if o.status.success() => {
            Outcome::Missing("the driver has ring parameters; fastpath does not set them yet".into())
        }
        Ok(o) => Outcome::NotHere(format!(
            "veth has no hardware rings (ethtool -g: {})",
            String::from_utf8_lossy(&o.stderr).trim().replace('\n', " ")
        )),
        Err(e) => Outcome::NotHere(format!("ethtool: {e}")),
    }
}

/// Every scenario, in the kernel's order.
pub fn all() -> Vec<Scenario> {
    vec![
        Scenario { name: "SEND_RECEIVE", run: send_receive_default },
        Scenario { name: "SEND_RECEIVE_2K_FRAME", run: send_receive_2k_frame },
        Scenario { name: "SEND_RECEIVE_SINGLE_PKT", run: send_receive_single_pkt },
        Scenario { name: "POLL_RX", run: poll_rx },
        Scenario { name: "POLL_TX", run: poll_tx },
        Scenario { name: "POLL_RXQ_FULL", run: poll_rxq_full },
        Scenario { name: "POLL_TXQ_FULL", run: poll_txq_full },
        Scenario { name: "ALIGNED_INV_DESC", run: aligned_inv_desc },
        Scenario { name: "ALIGNED_INV_DESC_2K_FRAME_SIZE", run: aligned_inv_desc_2k },
        Scenario { name: "ALIGNED_INV_DESC_MULTI_BUFF", run: aligned_inv_desc_multi_buff },
        Scenario { name: "SEND_RECEIVE_UNALIGNED", run: send_receive_unaligned },
        Scenario { name: "UNALIGNED_INV_DESC", run: unaligned_inv_desc },
        Scenario { name: "UNALIGNED_INV_DESC_4001_FRAME_SIZE", run: unaligned_inv_desc_4001 },
        Scenario { name: "UNALIGNED_INV_DESC_MULTI_BUFF", run: unaligned_inv_desc_multi_buff },
        Scenario { name: "UMEM_HEADROOM", run: umem_headroom },
        Scenario { name: "BIDIRECTIONAL", run: bidirectional },
        Scenario { name: "STAT_RX_DROPPED", run: stat_rx_dropped },
        Scenario { name: "STAT_TX_INVALID", run: stat_tx_invalid },
        Scenario { name: "STAT_RX_FULL", run: stat_rx_full },
        Scenario { name: "STAT_FILL_EMPTY", run: stat_fill_empty },
        Scenario { name: "XDP_SHARED_UMEM", run: xdp_shared_umem },
        Scenario { name: "XDP_PROG_CLEANUP", run: xdp_prog_cleanup },
        Scenario { name: "XDP_DROP_HALF", run: xdp_drop_half },
        Scenario { name: "XDP_METADATA_COPY", run: xdp_metadata_copy },
        Scenario { name: "XDP_METADATA_COPY_MULTI_BUFF", run: xdp_metadata_copy_multi_buff },
        Scenario { name: "TOO_MANY_FRAGS", run: too_many_frags },
        Scenario { name: "XDP_ADJUST_TAIL_SHRINK", run: xdp_adjust_tail_shrink },
        Scenario { name: "XDP_ADJUST_TAIL_SHRINK_MULTI_BUFF", run: xdp_adjust_tail_shrink_multi_buff },
        Scenario { name: "XDP_ADJUST_TAIL_GROW", run: xdp_adjust_tail_grow },
        Scenario { name: "XDP_ADJUST_TAIL_GROW_MULTI_BUFF", run: xdp_adjust_tail_grow_multi_buff },
        Scenario { name: "TX_QUEUE_CONSUMER", run: tx_queue_consumer },
        Scenario { name: "SEND_RECEIVE_9K_PACKETS", run: send_receive_9k },
        Scenario { name: "SEND_RECEIVE_UNALIGNED_9K_PACKETS", run: send_receive_unaligned_9k },
        Scenario { name: "HW_SW_MIN_RING_SIZE", run: hw_ring_size },
        Scenario { name: "HW_SW_MAX_RING_SIZE", run: hw_ring_size },
        Scenario { name: "TEARDOWN", run: teardown },
    ]
}
