//! The kernel's AF_XDP selftest scenarios (tools/testing/selftests/bpf, `test_xsk.sh` /
//! xskxceiver, the list in `prog_tests/test_xsk.h`), written again as fastpath's own code over
//! its public API (`fastpath::xsk`, `fastpath::bpf`) and run by `make conformance`
//! (`tests/conformance.rs`): one line per scenario and mode.
//!
//! The set-up follows the kernel's: a veth pair with 4 queues, the sending socket on one end
//! (namespace `<bed>-a`) and the receiving socket on the other (`<bed>-b`), queue 0, copy mode
//! (veth has no zero-copy), an XDP program on the receiving end redirecting queue 0 into the
//! socket's XSKMAP slot. Each scenario runs four times, as the kernel's suite runs it on veth:
//! with the XDP programs in generic (skb) mode and in the driver (native), each in softirq
//! mode (the sockets as they come: need_wakeup on, no busy poll) and in busy-poll mode
//! (`SO_PREFER_BUSY_POLL`, `SO_BUSY_POLL` 20 µs, `SO_BUSY_POLL_BUDGET` 64 on every socket).
//!
//! A scenario ends in one of four [`Outcome`]s: it passed, it failed (with what differed), the
//! machine cannot run it (a hardware property veth lacks: said why, not counted), or fastpath
//! does not have what it needs yet (named, counted as not passed).
//!
//! Privileges: root (namespaces, XDP programs, AF_XDP sockets). Kernel: as each scenario says;
//! the suite as a whole wants >= 6.6 (multi-buffer AF_XDP).

pub mod progs;
pub mod scenarios;
pub mod xsk;

/// How the sockets of a run wait for the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Napi {
    /// need_wakeup on, no busy poll: the veth's NAPI runs in softirq.
    Softirq,
    /// `SO_PREFER_BUSY_POLL`, `SO_BUSY_POLL` = 20 µs, `SO_BUSY_POLL_BUDGET` = 64 on every socket
    /// (kernel >= 5.11, Documentation/networking/napi.rst "Busy polling").
    BusyPoll,
}

/// How a run attaches its XDP programs and waits: the kernel's suite runs every scenario
/// with the program in generic (skb) mode and in the driver (native), each with and without
/// busy polling (xskxceiver's TEST_MODE_SKB and TEST_MODE_DRV; `test_xsk.sh` and
/// `test_xsk.sh -b`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mode {
    /// The XDP attach mode of every program the scenario puts on an interface
    /// (XDP_FLAGS_SKB_MODE or XDP_FLAGS_DRV_MODE); the sockets are in copy mode either way.
    pub xdp: fastpath::bpf::XdpMode,
    /// Softirq or busy poll.
    pub napi: Napi,
}

impl Mode {
    /// Every mode, in the order they run (the kernel's: softirq before busy poll, skb before
    /// driver within each).
    pub const ALL: [Mode; 4] = [
        Mode { xdp: fastpath::bpf::XdpMode::Skb, napi: Napi::Softirq },
        Mode { xdp: fastpath::bpf::XdpMode::Native, napi: Napi::Softirq },
        Mode { xdp: fastpath::bpf::XdpMode::Skb, napi: Napi::BusyPoll },
        Mode { xdp: fastpath::bpf::XdpMode::Native, napi: Napi::BusyPoll },
    ];

    /// The name printed: the XDP mode as the kernel's suite names it ("skb", "drv"), then
    /// "softirq" or "busy-poll".
    pub fn name(self) -> String {
        format!("{} {}", xdp_name(self.xdp), self.napi_name())
    }

    /// "softirq" or "busy-poll".
    pub fn napi_name(self) -> &'static str {
        match self.napi {
            Napi::Softirq => "softirq",
            Napi::BusyPoll => "busy-poll",
        }
    }

    /// The socket's busy-poll settings in this mode.
    pub fn busy_poll(self) -> Option<fastpath::xsk::BusyPoll> {
        match self.napi {
            Napi::Softirq => None,
            Napi::BusyPoll => Some(fastpath::xsk::BusyPoll::new(20, 64)),
        }
    }
}

/// The kernel suite's name of an XDP attach mode: "skb" or "drv".
pub fn xdp_name(m: fastpath::bpf::XdpMode) -> &'static str {
    match m {
        fastpath::bpf::XdpMode::Skb => "skb",
        fastpath::bpf::XdpMode::Native => "drv",
    }
}

/// How a scenario ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Everything checked was as expected; what was checked, briefly.
    Pass(String),
    /// Something differed: what was expected and what was seen.
    Fail(String),
    /// This machine cannot run it (a property of the kernel or of veth), and why. Not counted.
    NotHere(String),
    /// fastpath lacks what the scenario needs (named). Counted as not passed.
    Missing(String),
}

impl Outcome {
    /// The word printed first.
    pub fn word(&self) -> &'static str {
        match self {
            Outcome::Pass(_) => "PASS",
            Outcome::Fail(_) => "FAIL",
            Outcome::NotHere(_) => "NOT RUN HERE",
            Outcome::Missing(_) => "MISSING",
        }
    }

    /// What follows the word.
    pub fn detail(&self) -> &str {
        match self {
            Outcome::Pass(s) | Outcome::Fail(s) | Outcome::NotHere(s) | Outcome::Missing(s) => s,
        }
    }
}

/// A scenario's result before it is an [`Outcome`]: `Err` is a failure with its text.
pub type Check = Result<String, String>;

/// `Ok` if `cond`.
///
/// # Errors
///
/// `what()` unless `cond`.
pub fn ensure(cond: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if cond {
        Ok(())
    } else {
        Err(what())
    }
}
