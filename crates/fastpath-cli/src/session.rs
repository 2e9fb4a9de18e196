//! Opening a measured path: attach the XDP program, bind the AF_XDP socket, report what was
//! obtained (never what was asked for).

use std::os::fd::OwnedFd;

use anyhow::anyhow;
use fastpath::bpf::{attach_first, query_xdp, Classifier, XdpDrop, XdpMode, XskRedirect};
use fastpath::netdev::NetDev;
use fastpath::rules::compile::Compiled;
use fastpath::xsk::{BusyPoll, CopyMode, XskConfig, XskError, XskSocket};
use serde::Serialize;

use crate::args::{CopyModeArg, XdpModeArg, XskArgs};
use crate::error::{usage, CliResult};

/// What a session needs on the interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// xsk_redirect + an AF_XDP socket (rxdrop, l2fwd).
    Rx,
    /// An AF_XDP socket only (txonly, gen --engine xsk): TX needs no XDP program.
    Tx,
    /// xdp_drop only.
    Drop,
}

/// The program attached for this session; detached on drop.
#[derive(Debug)]
pub enum Prog {
    /// Held so that dropping the session detaches it.
    Redirect(#[allow(dead_code)] XskRedirect),
    /// The rule classifier in front of the socket (`--rules`).
    Classifier(Box<Classifier>),
    Drop(XdpDrop),
    None,
}

/// What was obtained, for reports.
#[derive(Debug, Clone, Serialize)]
pub struct PathInfo {
    pub iface: String,
    pub queue: u32,
    pub driver: String,
    /// "native" / "skb" as attached, None if no program.
    pub xdp_mode: Option<&'static str>,
    /// "copy" / "zero-copy" read back from XDP_OPTIONS, None without a socket.
    pub copy_mode: Option<&'static str>,
    pub need_wakeup: bool,
    pub busy_poll: bool,
    pub tx_skb_budget: Option<u32>,
    pub notes: Vec<String>,
}

#[derive(Debug)]
pub struct Session {
    pub prog: Prog,
    pub sock: Option<XskSocket>,
    pub stats_fd: Option<OwnedFd>,
    pub info: PathInfo,
}

pub fn xsk_config(x: &XskArgs) -> XskConfig {
    XskConfig {
        frame_size: x.frame_size,
        frame_count: x.frame_count,
        headroom: x.headroom,
        ring_size: x.ring_size,
        fill_size: x.ring_size.saturating_mul(2),
        need_wakeup: !x.no_need_wakeup,
        copy_mode: match x.copy_mode {
            CopyModeArg::Auto => CopyMode::Auto,
            CopyModeArg::Copy => CopyMode::Copy,
            CopyModeArg::ZeroCopy => CopyMode::ZeroCopy,
        },
        busy_poll: x.busy_poll.then_some(BusyPoll { timeout_us: 20, budget: x.batch_size }),
        huge_pages: x.huge_pages,
        tx_skb_budget: Some(x.tx_budget.unwrap_or(256.min(x.ring_size))),
    }
}

/// Checks every value that can be checked before touching the interface.
pub fn validate(x: &XskArgs, role: Role) -> CliResult<XskConfig> {
    let cfg = xsk_config(x);
    if role != Role::Drop {
        cfg.validate()?;
        if cfg.frame_count < cfg.fill_size && role == Role::Rx {
            // Fine: fewer frames than FILL slots, all of them go on FILL.
        }
    }
    if x.xdp_mode == XdpModeArg::Skb && x.copy_mode == CopyModeArg::ZeroCopy {
        return Err(usage(anyhow!(
            "--copy-mode zero-copy needs the XDP program in the driver: use --xdp-mode native or auto"
        )));
    }
    if let Some(b) = x.tx_budget {
        if b < 32 || b > x.ring_size {
            return Err(usage(anyhow!(
                "--tx-budget {b} is not accepted: use 32..={} (at most the ring size; XDP_MAX_TX_SKB_BUDGET)",
                x.ring_size
            )));
        }
    }
    if let Some(cpu) = x.cpu {
        let n = fastpath::sys::online_cpus();
        if cpu >= n {
            return Err(usage(anyhow!("--cpu {cpu} is not accepted: this machine has CPUs 0..={}", n - 1)));
        }
    }
    Ok(cfg)
}

impl Session {
    /// Attaches and binds in the current network namespace. On any error everything already
    /// attached is detached (the link fd is closed as the partial session drops).
    pub fn open(x: &XskArgs, role: Role) -> CliResult<Session> {
        Self::open_with(x, role, None)
    }

    /// As [`Session::open`]; with `rules` (Role::Rx only) the classifier with those rules
    /// replaces the minimal redirect program.
    pub fn open_with(x: &XskArgs, role: Role, rules: Option<&Compiled>) -> CliResult<Session> {
        let cfg = validate(x, role)?;
        let dev = NetDev::by_name(&x.iface).map_err(|_| XskError::NoSuchInterface { iface: x.iface.clone() })?;
        if let Some(count) = dev.rx_queue_count().map_err(crate::error::kernel)? {
            if x.queue >= count {
                return Err(XskError::QueueOutOfRange { iface: x.iface.clone(), queue: x.queue, count }.into());
            }
        }
        let driver = dev.driver().unwrap_or_else(|_| "unknown".into());
        let mut info = PathInfo {
            iface: x.iface.clone(),
            queue: x.queue,
            driver,
            xdp_mode: None,
            copy_mode: None,
            need_wakeup: cfg.need_wakeup,
            busy_poll: cfg.busy_poll.is_some(),
            tx_skb_budget: None,
            notes: Vec::new(),
        };
        let modes: &[XdpMode] = match x.xdp_mode {
            XdpModeArg::Native => &[XdpMode::Native],
            XdpModeArg::Skb => &[XdpMode::Skb],
            XdpModeArg::Auto => &[XdpMode::Native, XdpMode::Skb],
        };
        match role {
            Role::Drop => {
                let (p, m, notes) =
                    attach_first(&x.iface, modes, |m| XdpDrop::attach(&x.iface, dev.ifindex, m, x.force))?;
                info.notes.extend(notes);
                info.xdp_mode = Some(actual_mode(dev.ifindex, m));
                Ok(Session { prog: Prog::Drop(p), sock: None, stats_fd: None, info })
            }
            Role::Tx => {
                let sock = XskSocket::bind(&x.iface, x.queue, &cfg)?;
                finish(Prog::None, sock, info)
            }
            Role::Rx => {
                let (prog, m, notes) = attach_first(&x.iface, modes, |m| match rules {
                    None => XskRedirect::attach(&x.iface, dev.ifindex, m, x.force).map(Prog::Redirect),
                    Some(c) => {
                        let mut cls = Classifier::load()?;
                        cls.swap_in(c, &|i| fastpath::sys::if_nametoindex(i))?;
                        cls.attach(&x.iface, dev.ifindex, m, x.force)?;
                        Ok(Prog::Classifier(Box::new(cls)))
                    }
                })?;
                info.notes.extend(notes);
                let mut c = cfg.clone();
                if m == XdpMode::Skb && c.copy_mode == CopyMode::Auto {
                    // Generic XDP has no zero-copy: go straight to copy mode.
                    c.copy_mode = CopyMode::Copy;
                }
                let sock = XskSocket::bind(&x.iface, x.queue, &c)?;
                match &prog {
                    Prog::Redirect(p) => p.insert(x.queue, sock.as_raw_fd())?,
                    Prog::Classifier(p) => p.insert_xsk(x.queue, sock.as_raw_fd())?,
                    _ => unreachable!("Rx attaches a redirect program"),
                }
                info.xdp_mode = Some(actual_mode(dev.ifindex, m));
                finish(prog, sock, info)
            }
        }
    }

    /// The xdp_drop program, if this is an xdpdrop session.
    pub fn drop_prog(&self) -> Option<&XdpDrop> {
        match &self.prog {
            Prog::Drop(d) => Some(d),
            _ => None,
        }
    }
}

fn finish(prog: Prog, sock: XskSocket, mut info: PathInfo) -> CliResult<Session> {
    info.copy_mode = Some(sock.copy_mode_name());
    info.tx_skb_budget = sock.tx_skb_budget();
    info.notes.extend(sock.notes().iter().cloned());
    let stats_fd = Some(sock.try_clone_fd().map_err(crate::error::kernel)?);
    Ok(Session { prog, sock: Some(sock), stats_fd, info })
}

/// The attach mode as the kernel reports it after attaching (never the one merely asked for).
fn actual_mode(ifindex: u32, asked: XdpMode) -> &'static str {
    match query_xdp(ifindex) {
        Ok(Some(p)) => p.mode,
        _ => asked.name(),
    }
}
