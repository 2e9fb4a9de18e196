//! The smallest AF_XDP receiver: count and drop every frame of one queue.
//!
//!     rxdrop IFACE [QUEUE] [SECONDS]      (root; e.g. inside `ip netns exec`)
//!
//! Creates a UMEM, binds a socket, attaches xsk_redirect (native, falling back to skb), puts
//! every frame on the FILL ring, and moves each received frame straight back to FILL.
use std::sync::Arc;
use std::time::{Duration, Instant};

use fastpath::bpf::{AttachOpts, XskRedirect};
use fastpath::netdev::Iface;
use fastpath::xsk::{SocketConfig, Umem, UmemConfig, XskSocket};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let iface = args.get(1).ok_or("usage: rxdrop IFACE [QUEUE] [SECONDS]")?;
    let queue: u32 = args.get(2).map_or(Ok(0), |q| q.parse())?;
    let seconds: f64 = args.get(3).map_or(Ok(5.0), |s| s.parse())?;
    let iface = &Iface::resolve(iface)?;

    let (umem, mut frames): (Arc<Umem>, _) = Umem::new(&UmemConfig::default())?;
    let mut sock = XskSocket::bind(&umem, iface, queue, &SocketConfig::default())?;
    let prog = XskRedirect::load(Default::default())?.attach(iface, AttachOpts::default())?;
    prog.prog.insert(queue, sock.as_raw_fd())?;
    println!("rxdrop: {iface} queue {queue}, xdp {}, {}", prog.mode.name(), sock.copy_mode_name());

    let fill = sock.fill.as_mut().expect("the first socket of a UMEM has a FILL ring");
    let mut batch = fill.reserve(frames.len() as u32);
    while batch.room() > 0 {
        batch.push(frames.pop().expect("room <= frames"));
    }
    drop(batch); // submits

    let (start, mut packets, mut bytes) = (Instant::now(), 0u64, 0u64);
    while start.elapsed() < Duration::from_secs_f64(seconds) {
        let XskSocket { rx, fill, .. } = &mut sock;
        let fill = fill.as_mut().expect("FILL ring");
        let received = rx.peek(64);
        let mut back = fill.reserve(received.len() as u32);
        let room = back.room() as usize;
        for frame in received.take(room) {
            bytes += umem.data(&frame).len() as u64;
            packets += 1;
            back.push(frame); // the frame is the kernel's again: no more access to it
        }
        drop(back);
        if room == 0 {
            sock.kick_rx(); // nothing received (or no FILL room): wake the kernel if it asks
        }
    }
    let s = sock.stats()?;
    println!("rxdrop: {packets} packets, {bytes} bytes, rx_dropped {} rx_ring_full {}", s.rx_dropped, s.rx_ring_full);
    Ok(())
}
