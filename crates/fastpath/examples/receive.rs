//! The README's quick start: print the length of every frame one queue receives.
//! `receive IFACE [COUNT]` (root): stops after COUNT frames (default: never).
use fastpath::bpf::{AttachOpts, XskRedirect};
use fastpath::xsk::{SocketConfig, Umem, UmemConfig, XskSocket};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let iface = &fastpath::netdev::Iface::resolve(&args.next().ok_or("usage: receive IFACE [COUNT]")?)?;
    let mut left: u64 = args.next().map_or(Ok(u64::MAX), |n| n.parse())?;
    let (umem, mut frames) = Umem::new(&UmemConfig::default())?; // frames: tokens for the FILL ring
    let mut sock = XskSocket::bind(&umem, iface, 0, &SocketConfig::default())?; // queue 0
    let xdp = XskRedirect::load(Default::default())?.attach(iface, AttachOpts::default())?;
    xdp.prog.insert(0, sock.as_raw_fd())?; // queue 0's frames go to this socket (XSKMAP)
    let mut batch = sock.fill.as_mut().ok_or("no FILL ring")?.reserve(frames.len() as u32);
    let room = batch.room() as usize; // <= frames.len()
    frames.drain(..room).for_each(|f| batch.push(f)); // frames to the kernel; dropping submits
    drop(batch);
    while left > 0 {
        let XskSocket { rx, fill, .. } = &mut sock;
        let received = rx.peek(64);
        let mut back = fill.as_mut().ok_or("no FILL ring")?.reserve(received.len() as u32);
        let room = back.room() as usize;
        for frame in received.take(room).take(left as usize) {
            println!("{} bytes", umem.data(&frame).len());
            back.push(frame); // the frame is the kernel's again: no access to it after this
            left -= 1;
        }
        drop(back);
        if room == 0 {
            sock.kick_rx(); // nothing received: wake the kernel if it asks (need_wakeup)
        }
    }
    Ok(())
}
