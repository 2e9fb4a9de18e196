//! The AF_XDP backend of the port API: an [`XskSocket`] behind the minimal `xsk_redirect`
//! program. Receive is zero-copy from the UMEM (copy mode on drivers without zero-copy: the
//! kernel copied the frame into the UMEM once); transmit copies into a free UMEM frame.
//! Half of the UMEM's frames serve RX (they cycle through FILL), half TX (they cycle through
//! the COMPLETION ring back to a free list). Needs CAP_NET_ADMIN + CAP_BPF + CAP_NET_RAW.

use super::{Port, PortError, PortStats};
use crate::bpf::{XdpMode, XskRedirect};
use crate::netdev::NetDev;
use crate::xsk::{XdpDesc, XskConfig, XskError, XskSocket};

/// An AF_XDP port on one (interface, queue).
#[derive(Debug)]
pub struct AfXdpPort {
    sock: XskSocket,
    _prog: XskRedirect,
    tx_free: Vec<u64>,
    stats: PortStats,
}

impl AfXdpPort {
    /// Attaches `xsk_redirect` to `iface` (native, or skb when `xdp_mode` is `None` and the
    /// driver refuses native) and binds a socket to `queue` with `cfg`.
    pub fn open(
        iface: &str,
        queue: u32,
        cfg: &XskConfig,
        xdp_mode: Option<XdpMode>,
        force: bool,
    ) -> Result<Self, PortError> {
        let dev = NetDev::by_name(iface).map_err(|_| XskError::NoSuchInterface { iface: iface.to_string() })?;
        let modes: &[XdpMode] = match xdp_mode {
            Some(XdpMode::Native) => &[XdpMode::Native],
            Some(XdpMode::Skb) => &[XdpMode::Skb],
            None => &[XdpMode::Native, XdpMode::Skb],
        };
        let (prog, _, _) =
            crate::bpf::attach_first(iface, modes, |m| XskRedirect::attach(iface, dev.ifindex, m, force))?;
        let mut sock = XskSocket::bind(iface, queue, cfg)?;
        prog.insert(queue, sock.as_raw_fd())?;
        // First half of the frames on FILL for RX, second half free for TX.
        let half = cfg.frame_count / 2;
        sock.fill_first_frames(half);
        let tx_free = (half..cfg.frame_count).rev().map(|i| sock.frame_addr(i)).collect();
        Ok(Self { sock, _prog: prog, tx_free, stats: PortStats::default() })
    }

    /// The socket (mode read back from the kernel, statistics).
    pub fn socket(&self) -> &XskSocket {
        &self.sock
    }

    fn reap_completions(&mut self) {
        let (ci, n) = self.sock.comp.peek(u32::MAX);
        for i in 0..n {
            self.tx_free.push(self.sock.comp.read(ci.wrapping_add(i)));
        }
        self.sock.comp.release(n);
    }
}

impl Port for AfXdpPort {
    fn path(&self) -> &'static str {
        "afxdp"
    }

    fn rx_burst(&mut self, max: usize, timeout_ms: i32, f: &mut dyn FnMut(&[u8])) -> Result<usize, PortError> {
        let max = max.min(u32::MAX as usize) as u32;
        let (mut ri, mut n) = self.sock.rx.peek(max);
        if n == 0 {
            if timeout_ms > 0 {
                self.sock.poll_rx(timeout_ms)?;
            } else {
                self.sock.kick_rx();
            }
            (ri, n) = self.sock.rx.peek(max);
            if n == 0 {
                return Ok(0);
            }
        }
        let fs = self.sock.config().frame_size as u64;
        let fi = loop {
            if let Some(fi) = self.sock.fill.reserve(n) {
                break fi;
            }
            self.sock.kick_rx();
        };
        for i in 0..n {
            let d = self.sock.rx.read(ri.wrapping_add(i));
            f(self.sock.frame(d.addr, d.len));
            self.stats.rx_bytes += d.len as u64;
            self.sock.fill.write(fi.wrapping_add(i), d.addr & !(fs - 1));
        }
        self.sock.fill.submit(n);
        self.sock.rx.release(n);
        self.stats.rx_packets += n as u64;
        Ok(n as usize)
    }

    fn tx_burst(&mut self, frames: &[&[u8]]) -> Result<usize, PortError> {
        self.reap_completions();
        let fs = self.sock.config().frame_size as usize;
        // Check every frame before reserving anything: nothing half-done on bad input.
        if let Some(fr) = frames.iter().find(|f| f.is_empty() || f.len() > fs) {
            return Err(PortError::Config {
                what: "frame length",
                value: fr.len().to_string(),
                accepted: format!("use 1 to {fs} bytes (the frame size)"),
            });
        }
        let want = frames.len().min(self.tx_free.len()) as u32;
        let (ti, got) = self.sock.tx.reserve_up_to(want);
        for (i, fr) in frames.iter().take(got as usize).enumerate() {
            let a = self.tx_free.pop().expect("got <= free");
            self.sock.frame_mut(a, fr.len() as u32).copy_from_slice(fr);
            self.sock.tx.write(ti.wrapping_add(i as u32), XdpDesc { addr: a, len: fr.len() as u32, options: 0 });
            self.stats.tx_bytes += fr.len() as u64;
        }
        self.sock.tx.submit(got);
        self.stats.tx_packets += got as u64;
        // Copy mode transmits inside sendto, at most XDP_MAX_TX_SKB_BUDGET descriptors per call:
        // kick until the kernel has taken everything, so no frame waits for the next burst.
        let mut tries = 0;
        while got > 0 && self.sock.tx.pending() > 0 && tries < 10_000 {
            self.sock.kick_tx()?;
            tries += 1;
        }
        Ok(got as usize)
    }

    fn stats(&mut self) -> Result<PortStats, PortError> {
        let mut s = self.stats.clone();
        let x = self.sock.stats()?;
        s.drops = x.fields().iter().map(|(k, v)| (k.to_string(), *v)).collect();
        Ok(s)
    }
}
