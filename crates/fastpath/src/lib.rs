//! fastpath: the fastest path between a Linux network interface and a user-space program.
//!
//! # Quick start
//!
//! A receiver on queue 0 of an interface: a UMEM and its frames, an AF_XDP socket bound to the
//! queue, `xsk_redirect` attached (native XDP, falling back to skb) with the socket in its
//! XSKMAP, free frames on the FILL ring; then each received frame's length is printed and the
//! frame goes back on the FILL ring. Run as root: `receive IFACE [COUNT]`. This is
//! `examples/receive.rs` (`cargo run --example receive -- eth0 10`), included here as it is:
//!
#![doc = concat!("```no_run\n", include_str!("../examples/receive.rs"), "```")]
//!
//! # Modules
//!
//! - [`xsk`]: AF_XDP sockets (UMEM, FILL/RX/TX/COMPLETION rings, mode negotiation, statistics).
//! - [`abi`]: the kernel/user ABI of the BPF programs, generated from bpf/include/fastpath_abi.h.
//! - [`features`]: which AF_XDP / XDP features the running kernel has (probed once, cached).
//! - [`bpf`]: the XDP programs (`xsk_redirect`, `xdp_drop`, `xdp_gen`), attached with bpf_link.
//! - [`packet`]: building and checking the generator's UDP/IPv4 and UDP/IPv6 test frames.
//! - [`pcapfilter`]: a pcap-filter expression (tcpdump's) compiled and run by libpcap.
//! - [`spread`]: spoofed-source spreads for the generator (N consecutive source addresses).
//! - [`io`]: one port API (rx_burst / tx_burst) over AF_XDP, TPACKET_V3, TAP and TAP + io_uring.
//! - [`netdev`]: interface facts and the driver's counters.
//! - [`uds`]: the AF_XDP device plugin's UDS protocol: an XSKMAP handed over a Unix socket to
//!   unprivileged programs (server and client).
//! - [`workers`]: pinning a thread to a CPU, and the CPUs this process may run on.
//! - [`clock`]: CLOCK_MONOTONIC (what BPF's `bpf_ktime_get_ns()` reads) and CLOCK_TAI in ns.
//! - [`SysError`]: a failed system call, with the call and its arguments (the crate-private
//!   `sys` module is the only one that makes system calls).
//!
//! # Cargo features
//!
//! Every feature is on by default (what the `fastpath` command needs). Without them
//! (`default-features = false`) the crate is AF_XDP sockets, the port API over AF_XDP and
//! TPACKET_V3, the XDP programs `xsk_redirect`, `xdp_drop`, `xdp_gen` and `xdp_monitor`, the
//! feature probes, interface facts and the XSKMAP hand-off; each feature adds a part, its
//! dependencies and its BPF programs (build.rs compiles only the enabled features' programs):
//!
//! - `classifier`: the rule language (`rules`, TOML rule files) and the classifier XDP program
//!   (`bpf::classifier`) with its SYN-cookie tc program (`bpf::syncookie`); the `toml`
//!   dependency. Turns on `capture` and `netlink`.
//! - `tap`: TAP devices as ports (`io::tap`, `io::PortSpec::Tap`).
//! - `io-uring`: TAP devices driven by io_uring (`io::tap_uring`, `io::PortSpec::TapUring`);
//!   the `io-uring` dependency. Turns on `tap`.
//! - `netlink`: rtnetlink change tracking (`netdev::watch`), the `netdev` generic netlink
//!   family (`netdev::napi`, `netdev::xdp_features`) and sock_diag of XDP sockets
//!   (`xsk::diag`); the netlink-sys and netlink-packet-{core,route,generic} dependencies.
//!   Without it [`features`] decides `napi_get`, `napi_set` and `irq_suspend` by kernel
//!   version.
//! - `pcap`: pcap-filter expressions run by libpcap (`pcapfilter`); links libpcap
//!   (libpcap-dev to build, libpcap0.8 to run).
//! - `cpumap`: CPUMAP redirection (`bpf::cpumap`, bpf/xdp_redirect_cpu.bpf.c).
//! - `capture`: frames copied at the driver into a BPF ring buffer (`bpf::capture`,
//!   bpf/xdp_capture.bpf.c).
//! - `replay`: a capture's frames sent from the driver with BPF_PROG_RUN live frames
//!   (`bpf::replay`, bpf/xdp_replay.bpf.c).
//! - `fwd`: forwarding between interfaces at the driver (`bpf::fwd`, bpf/xdp_fwd.bpf.c).
//!
//! For one AF_XDP socket:
//! `fastpath = { version = "0.1", default-features = false }`.
#![warn(missing_docs)]

pub mod abi;
pub mod bpf;
pub mod clock;
pub mod features;
pub mod io;
pub mod netdev;
pub mod packet;
#[cfg(feature = "pcap")]
pub mod pcapfilter;
#[cfg(feature = "classifier")]
pub mod rules;
pub mod spread;
pub(crate) mod sys;
pub mod uds;
pub mod workers;
pub mod xsk;

pub use sys::SysError;

#[cfg(test)]
mod error_text_tests {
    /// `(file, line, text)` of every `#[error(...)]` attribute under `dir`, each joined into one
    /// line (an attribute may span several).
    fn error_attributes(dir: &std::path::Path, out: &mut Vec<(String, usize, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                error_attributes(&path, out);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            for (i, line) in lines.iter().enumerate() {
                if !line.trim_start().starts_with("#[error(") {
                    continue;
                }
                let mut attr = String::new();
                for l in &lines[i..] {
                    attr.push_str(l.trim());
                    if l.trim_end().ends_with(")]") {
                        break;
                    }
                }
                out.push((path.display().to_string(), i + 1, attr));
            }
        }
    }

    /// Library errors state what happened (interface, driver, mode, errno); which command-line
    /// option to use instead is the CLI's to say (crates/fastpath-cli/src/error.rs). So no
    /// error text of the library names an option (`--force`, `--xdp-mode`, ...).
    #[test]
    fn no_error_text_names_a_command_line_option() {
        let mut found = Vec::new();
        error_attributes(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut found);
        assert!(found.len() > 50, "the scan found the error attributes: {}", found.len());
        let flag = |t: &str| {
            t.match_indices("--").any(|(i, _)| {
                let before = t[..i].chars().last();
                let after = t[i + 2..].chars().next();
                matches!(before, Some(' ' | '"' | '`' | '(')) && after.is_some_and(|c| c.is_ascii_lowercase())
            })
        };
        let named: Vec<String> =
            found.iter().filter(|(_, _, t)| flag(t)).map(|(f, l, t)| format!("{f}:{l}: {t}")).collect();
        assert!(named.is_empty(), "library errors naming an option:\n{}", named.join("\n"));
    }
}
