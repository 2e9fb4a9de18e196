//! Command-line arguments: one spelling per concept across every subcommand (docs/ARCHITECTURE.md §7).

use std::net::IpAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// `fastpath --version`: "0.1.0 (abc1234 2026-11-29)", the commit the binary was built from
/// (`-dirty` after the hash when its sources differed from it; build.rs says where it comes from).
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("FASTPATH_BUILD_COMMIT"), ")");

/// fastpath: the fastest path between a Linux network interface and a user-space program.
#[derive(Debug, Parser)]
#[command(name = "fastpath", version = VERSION, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Build, inspect or remove a test bed: two network namespaces joined by a veth pair.
    #[command(subcommand)]
    Testbed(TestbedCmd),
    /// Measure one AF_XDP path (rxdrop, txonly, l2fwd) or in-kernel XDP_DROP (xdpdrop).
    Bench(Box<BenchArgs>),
    /// Generate 64-byte (configurable) sequence-numbered UDP frames out of an interface.
    Gen(GenArgs),
    /// Build a test bed, drive xdp-live traffic into rxdrop, then into xdpdrop, print one table.
    Demo(DemoArgs),
    /// Every receive path side by side on a test bed of its own, against in-kernel XDP_DROP.
    Compare(CompareArgs),
    /// Rule-based drop and steering at the driver: check, load, reload, stats, unload.
    #[command(subcommand)]
    Filter(FilterCmd),
    /// Forward between interfaces at the driver (XDP_REDIRECT through a DEVMAP), L2 port pairs
    /// or L3 through the kernel's FIB; follows links that go down, come up or are recreated.
    Fwd(FwdArgs),
    /// What this kernel and each interface support (kernel features, the driver's XDP features
    /// from the netdev netlink family, queues, privileges, bpffs) and the path fastpath would
    /// pick for each interface, with the reason.
    Probe(ProbeArgs),
    /// Every AF_XDP socket of the namespace (sock_diag, as `ss --xdp`): owning process,
    /// interface, queue, ring sizes, UMEM, XDP_STATISTICS.
    Ss(SsArgs),
    /// Write an interface's frames to a pcapng file: copied by XDP and passed on (copy), or
    /// taken from the kernel through AF_XDP (divert).
    Capture(CaptureArgs),
    /// Why packets do not arrive: one line per check (link, queues, XDP mode, MTU, foreign
    /// program, veth peer, AF_XDP rings, polling), OK or the problem and its fix. Run it while
    /// the traffic and the application run.
    Doctor(DoctorArgs),
    /// Write the man pages and shell completions of this binary (packaging: `make man
    /// completions`, `make install`, `make deb`). Hidden: in neither --help, the pages nor the
    /// completions.
    #[command(hide = true)]
    Assets(AssetsArgs),
}

/// `fastpath assets` (hidden).
#[derive(Debug, Clone, Args)]
#[group(required = true, multiple = true)]
pub struct AssetsArgs {
    /// Directory for one man page per command: fastpath.1, fastpath-filter.1,
    /// fastpath-filter-load.1, ... (created if absent; existing pages are replaced).
    #[arg(long, value_name = "DIR")]
    pub man: Option<PathBuf>,
    /// Directory for the completions: fastpath.bash, _fastpath (zsh), fastpath.fish.
    #[arg(long, value_name = "DIR")]
    pub completions: Option<PathBuf>,
}

/// `fastpath doctor`.
#[derive(Debug, Clone, Args)]
pub struct DoctorArgs {
    /// The interface the application receives on.
    #[arg(short = 'i', long = "iface", value_parser = parse_iface)]
    pub iface: String,
    /// The queue its AF_XDP socket is bound to.
    #[arg(short = 'q', long, default_value_t = 0)]
    pub queue: u32,
    /// Network namespace of the interface.
    #[arg(long)]
    pub netns: Option<String>,
    /// Seconds over which counters are sampled, 0.2..=60.
    #[arg(long, default_value_t = 1.0, value_parser = parse_window)]
    pub window: f64,
    /// One JSON object instead of the lines.
    #[arg(long)]
    pub json: bool,
}

/// `--window`: seconds in 0.2..=60.
pub fn parse_window(s: &str) -> Result<f64, String> {
    parse_seconds(s, "--window", 0.2, 60.0)
}

/// `capture -s/--snaplen`: bytes 1..=16384 ([`fastpath::bpf::capture::MAX_SNAPLEN`]); 0 is the
/// most, as tcpdump's -s 0.
pub fn parse_snaplen(s: &str) -> Result<u32, String> {
    let max = fastpath::bpf::capture::MAX_SNAPLEN;
    match s.trim().parse::<u32>() {
        Ok(0) => Ok(max),
        Ok(n) if n <= max => Ok(n),
        _ => Err(format!("-s/--snaplen {s} is not accepted: use bytes in 1..={max}, or 0 for {max} (the most)")),
    }
}

/// `capture -c/--count`: frames, 1.. (tcpdump refuses -c 0 too).
pub fn parse_count(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("-c/--count {s} is not accepted: use a number of frames, 1..")),
    }
}

/// `capture -C/--rotate-mb`: millions of bytes, a whole number in 1..=1000000 (tcpdump refuses
/// 0, fractions and suffixes too).
pub fn parse_file_size_mb(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(n) if (1..=1_000_000).contains(&n) => Ok(n),
        _ => Err(format!(
            "-C {s} is not accepted: use a whole number of millions of bytes (1,000,000 bytes), 1..=1000000"
        )),
    }
}

/// `capture -W/--rotate-files`: files, 1..=100000 (tcpdump refuses 0 too).
pub fn parse_file_count(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(n) if (1..=100_000).contains(&n) => Ok(n),
        _ => Err(format!("-W {s} is not accepted: use a number of files, 1..=100000")),
    }
}

/// `capture -G/--rotate-seconds`: whole seconds, 1..=31622400 (a leap year; tcpdump's -G 0 is
/// no rotation and it reads -G 1.5 as 1: both refused here).
pub fn parse_rotate_seconds(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(n) if (1..=31_622_400).contains(&n) => Ok(n),
        _ => Err(format!("-G {s} is not accepted: use whole seconds, 1..=31622400")),
    }
}

/// How `fastpath capture` takes frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CaptureModeArg {
    /// An XDP program copies each frame (up to --snaplen) into a BPF ring buffer and passes it
    /// on untouched: the traffic is not disturbed (as xdpdump).
    Copy,
    /// Frames are redirected to AF_XDP sockets (one per queue) and written from the UMEM: they
    /// leave the kernel (a capture appliance).
    Divert,
}

/// `fastpath capture`.
#[derive(Debug, Clone, Args)]
pub struct CaptureArgs {
    /// Interface to capture on (every receive queue).
    #[arg(short = 'i', long = "iface", value_parser = parse_iface)]
    pub iface: String,
    /// Output pcapng file, created new with mode 0600 (and so are rotation files); `-` writes
    /// to stdout (e.g. `| tshark -r -`).
    #[arg(short = 'w', long = "write", value_name = "FILE")]
    pub write: String,
    /// Replace an existing regular file at -w (and at its rotation names); a symbolic link is
    /// never written through.
    #[arg(long)]
    pub overwrite: bool,
    /// Capture only what a pcap-filter expression (tcpdump's) or rules select. Default: every
    /// frame.
    #[command(flatten)]
    pub rules: CaptureSelect,
    /// Bytes of each frame kept, as tcpdump -s: 1..=16384, or 0 for the most, 16384 (tcpdump's
    /// -s 0 is its most, 262144). Each frame's original length is recorded too.
    #[arg(short = 's', long, default_value_t = 16384, value_parser = parse_snaplen)]
    pub snaplen: u32,
    /// Stop after this many frames written, 1.. (tcpdump -c).
    #[arg(short = 'c', long, value_parser = parse_count)]
    pub count: Option<u64>,
    /// Stop after this many seconds (default: at --count or Ctrl-C).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<f64>,
    /// copy (default) or divert.
    #[arg(long, value_enum, default_value_t = CaptureModeArg::Copy)]
    pub mode: CaptureModeArg,
    /// Start a new file (FILE, FILE1, FILE2, ... as tcpdump -C) once one holds this many bytes
    /// (4096..). Every name the run may take is checked at the start, before anything is
    /// attached: an existing FILE<N> is refused as FILE is (naming the first), unless
    /// --overwrite, which replaces each when the capture reaches it.
    #[arg(long, value_parser = clap::value_parser!(u64).range(4096..))]
    pub rotate_bytes: Option<u64>,
    /// tcpdump -C: before each frame, start a new file if this one is larger than FILE_SIZE
    /// millions of bytes (1,000,000 bytes, not 1,048,576; a file ends up to one frame and the
    /// statistics blocks past it): FILE, FILE1, FILE2, ...; with -W, a ring. A whole number,
    /// 1..=1000000, as tcpdump takes. --rotate-bytes is the same counted in bytes (not both).
    #[arg(short = 'C', long = "rotate-mb", value_name = "FILE_SIZE", value_parser = parse_file_size_mb)]
    pub rotate_mb: Option<u64>,
    /// tcpdump -W, 1..=100000. With -C or --rotate-bytes: at most FILECOUNT files, a ring
    /// FILE0 .. FILE<FILECOUNT-1> (the number padded with zeros to one width) whose oldest is
    /// overwritten. With -G: the capture ends, exit 0, once FILECOUNT files are complete. With
    /// both: a ring within each -G period, no end. Alone: no effect (as in tcpdump).
    #[arg(short = 'W', long = "rotate-files", value_name = "FILECOUNT", value_parser = parse_file_count)]
    pub rotate_files: Option<u32>,
    /// tcpdump -G: a new file every ROTATE_SECONDS seconds of the wall clock (whole seconds,
    /// 1..), named by passing -w through strftime(3) at its start, local time (e.g. -w
    /// 'cap-%Y%m%d-%H%M%S.pcapng'); without a time format in -w each new file replaces the
    /// previous one. With -C: each period's files are NAME, NAME1, ... The first name is checked
    /// at the start as -w is; later ones when they are reached (an existing one not made by this
    /// run is refused unless --overwrite; a symbolic link always).
    #[arg(short = 'G', long = "rotate-seconds", value_name = "ROTATE_SECONDS", value_parser = parse_rotate_seconds)]
    pub rotate_seconds: Option<u64>,
    /// Where the XDP program runs.
    #[arg(long, value_enum, default_value_t = XdpModeArg::Auto)]
    pub xdp_mode: XdpModeArg,
    /// Replace an XDP program that is already attached.
    #[arg(long)]
    pub force: bool,
    /// Network namespace of the interface.
    #[arg(long)]
    pub netns: Option<String>,
    /// A ready line and the summary as JSON (on stderr with -w -).
    #[arg(long)]
    pub json: bool,
    /// Serve per-queue counters at http://ADDR:PORT/metrics (Prometheus text format); a bare
    /// PORT is 127.0.0.1:PORT. Loopback only unless --metrics-listen-any.
    #[arg(long, value_name = "[ADDR:]PORT", value_parser = parse_metrics_addr)]
    pub metrics: Option<std::net::SocketAddr>,
    /// Let --metrics listen on an address that is not loopback (the endpoint has no
    /// authentication).
    #[arg(long)]
    pub metrics_listen_any: bool,
}

/// `fastpath ss`.
#[derive(Debug, Clone, Args)]
pub struct SsArgs {
    /// Network namespace to list.
    #[arg(long)]
    pub netns: Option<String>,
    /// One JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// `fastpath probe`.
#[derive(Debug, Clone, Args)]
pub struct ProbeArgs {
    /// An interface (repeat for several; default: every interface of the namespace).
    #[arg(short = 'i', long = "iface", value_parser = parse_iface)]
    pub ifaces: Vec<String>,
    /// Network namespace of the interfaces.
    #[arg(long)]
    pub netns: Option<String>,
    /// One JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// `fastpath fwd`.
#[derive(Debug, Clone, Args)]
pub struct FwdArgs {
    /// A port (repeat: at least 2, at most 64, each once). L2 pairs them in order: the 1st
    /// with the 2nd, the 3rd with the 4th.
    #[arg(short = 'i', long = "iface", required = true, value_parser = parse_iface)]
    pub ifaces: Vec<String>,
    /// l2: frames keep their MACs and leave by the port's pair; l3: bpf_fib_lookup picks the
    /// egress port and next hop, TTL/hop limit - 1, MACs rewritten; the kernel gets what it must
    /// answer (TTL 1, unresolved neighbours, local destinations).
    #[arg(long, value_enum, default_value_t = FwdModeArg::L3)]
    pub mode: FwdModeArg,
    /// Network namespace of the ports.
    #[arg(long)]
    pub netns: Option<String>,
    /// Where the XDP program runs.
    #[arg(long, value_enum, default_value_t = XdpModeArg::Auto)]
    pub xdp_mode: XdpModeArg,
    /// Replace XDP programs that fastpath did not attach.
    #[arg(long)]
    pub force: bool,
    /// xdp: XDP_REDIRECT through a DEVMAP in the kernel; xsk: AF_XDP sockets on both ports over
    /// one shared UMEM per queue pair, frames moved RX -> TX in user space without a copy
    /// (--mode l2, two ports; kernel >= 5.10).
    #[arg(long, value_enum, default_value_t = FwdEngineArg::Xdp)]
    pub engine: FwdEngineArg,
    /// --mode l3: ask the kernel's FIB for every frame (no per-CPU cache of its answers; the
    /// cache follows rtnetlink route/rule/nexthop/neighbour/address/link changes, so it lags
    /// them by the notification's delay, about a millisecond, is emptied every second anyway,
    /// and is bypassed while policy rules or multipath routes make it inexact).
    #[arg(long)]
    pub no_fib_cache: bool,
    /// --engine xsk: queue pairs 0..N-1 (queue q of one port with queue q of the other), one
    /// UMEM and one pinned thread each (1..=64; each port needs N queues).
    #[arg(long, default_value_t = 1)]
    pub queues: u32,
    /// --engine xsk: CPUs of the queue pairs' threads, one each in turn (default: the last
    /// online CPU first, then downwards).
    #[arg(long, value_name = "LIST", value_parser = parse_cpus)]
    pub cpus: Option<CpuList>,
    /// --engine xsk: at most this many bytes handed to a port's TX ring and not yet sent, per
    /// queue (a byte queue limit in the spirit of BQL: beyond it frames wait on the other
    /// port's RX ring, where the kernel drops and counts what does not fit). Default: no limit
    /// but the ring.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1 << 30))]
    pub tx_limit_bytes: Option<u64>,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FwdEngineArg {
    Xdp,
    Xsk,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FwdModeArg {
    L2,
    L3,
}

/// Where the rules come from: a TOML file and/or one-off `--rule`s.
#[derive(Debug, Clone, Args)]
pub struct RulesArgs {
    /// TOML rule file.
    pub file: Option<std::path::PathBuf>,
    /// A one-off rule, e.g. 'proto=udp,dst_port=9,action=drop' (repeatable; after the file's rules).
    #[arg(long = "rule")]
    pub rules: Vec<String>,
}

/// What `fastpath capture` selects: a pcap-filter expression, or rules (not both).
#[derive(Debug, Clone, Args)]
pub struct CaptureSelect {
    /// Capture only what these rules match (a TOML file in the rule language of `fastpath
    /// filter`; their actions are not used).
    #[arg(long = "rules", value_name = "FILE")]
    pub file: Option<std::path::PathBuf>,
    /// A one-off rule, e.g. 'proto=udp,dst_port=53' (repeatable; after the file's rules;
    /// action= may be left out).
    #[arg(long = "rule")]
    pub rules: Vec<String>,
    /// A pcap-filter expression, as tcpdump takes it (pcap-filter(7)): the last words of the
    /// command line, joined with spaces (or one quoted argument), after every option. It
    /// means exactly what it means to tcpdump: libpcap decides each copied frame; the part
    /// the classifier can decide runs at the driver (a superset), and the ready line says
    /// which part ran where. --mode divert takes an expression only if the classifier decides
    /// it exactly.
    #[arg(value_name = "EXPRESSION", num_args = 1.., trailing_var_arg = true)]
    pub expression: Vec<String>,
}

/// The interface a filter is on.
#[derive(Debug, Clone, Args)]
pub struct FilterTarget {
    /// Interface (1 to 15 bytes, no '/', ':' or whitespace, not "." or "..").
    #[arg(short = 'i', long, value_parser = parse_iface)]
    pub iface: String,
    /// Network namespace of the interface (/var/run/netns/NAME).
    #[arg(long)]
    pub netns: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum FilterCmd {
    /// Validate and compile a rule set; touch nothing.
    Check {
        #[command(flatten)]
        rules: RulesArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Attach the classifier with these rules and run until SIGINT/SIGTERM (or --duration):
    /// SIGHUP re-reads the rule file and flips to it atomically (a bad file keeps the rules in
    /// force). With --pin it stays attached and pinned when the command ends; with --detach the
    /// command ends once it is pinned. Either adopts a classifier fastpath pinned on the
    /// interface before (an earlier run or an older fastpath): its program is replaced under
    /// the pinned link with no frame unfiltered.
    Load {
        #[command(flatten)]
        rules: RulesArgs,
        #[command(flatten)]
        target: FilterTarget,
        /// Where the XDP program runs.
        #[arg(long, value_enum, default_value_t = XdpModeArg::Auto)]
        xdp_mode: XdpModeArg,
        /// Replace an XDP program that fastpath did not attach.
        #[arg(long)]
        force: bool,
        /// Leave the classifier attached and pinned under /sys/fs/bpf/fastpath/; remove it with
        /// `fastpath filter unload`.
        #[arg(long)]
        detach: bool,
        /// Pin the classifier under /sys/fs/bpf/fastpath/ and leave it attached and pinned when
        /// the command ends (SIGTERM, a restart, an upgrade): the next `load --pin` or
        /// `--detach` adopts it without a gap; `fastpath filter unload` removes it. What the
        /// systemd unit runs.
        #[arg(long, conflicts_with = "detach")]
        pin: bool,
        /// With --pin or --detach on a pinned classifier: give the new program maps of its own
        /// (counters from zero) instead of the pinned ones; still without a gap. What an upgrade
        /// across a map layout change does by itself.
        #[arg(long)]
        fresh_maps: bool,
        /// Serve the classifier's XSKMAP at this Unix socket (the AF_XDP device plugin's
        /// protocol) while running, for unprivileged programs (`bench rxdrop --xsk-handoff`,
        /// DPDK af_xdp use_cni). Its directory must be owned by root and not writable by group
        /// or others (e.g. /run/fastpath, 0755). Not with --detach.
        #[arg(long, value_name = "PATH")]
        xsk_handoff: Option<std::path::PathBuf>,
        /// Users allowed the XSKMAP at --xsk-handoff: uids, comma-separated (of the connecting
        /// process, SO_PEERCRED); others get /error. An allowed uid controls the whole XSKMAP
        /// (any queue's slot, all xsk-steered traffic): allow only uids that trust each other.
        #[arg(long, value_name = "UIDS", default_value = "0", requires = "xsk_handoff", value_parser = parse_uids)]
        xsk_handoff_allow: Uids,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Swap a new rule set in atomically on a classifier left by `load --detach`. Refused
    /// (exit 3, nothing written) if that classifier is no longer attached to the interface.
    Reload {
        #[command(flatten)]
        rules: RulesArgs,
        #[command(flatten)]
        target: FilterTarget,
        /// Print one JSON object: rules, rule set, and the time taken (`compile_ns`: read,
        /// validate, compile; `install_ns`: write the maps and flip; `reload_ns`: the whole).
        #[arg(long)]
        json: bool,
    },
    /// Live counters of a classifier left by `load --detach`. If that classifier is no
    /// longer attached (the interface was deleted or recreated, or another program replaced
    /// it), the counters it kept are printed once and the command fails (exit 3) saying so.
    /// With --json the summary also has `previous`: the totals of the rule set the last reload
    /// replaced (kept until the next reload).
    Stats {
        #[command(flatten)]
        target: FilterTarget,
        #[command(flatten)]
        run: RunArgs,
    },
    /// The rule set in force of a classifier left by `load --detach`, as `nft list ruleset`
    /// prints one: where it came from, the rule set index, the default and malformed actions,
    /// and each rule in match order with its name, its text (the `--rule` form) and its packet
    /// and byte counters. Rules pinned by a fastpath that kept no rule text are listed by name.
    /// If that classifier is no longer attached, what it kept is printed and the command fails
    /// (exit 3) saying so.
    Show {
        #[command(flatten)]
        target: FilterTarget,
        /// Print one JSON object (`source`, `rule_set`, `default`, `malformed`, and `rules`:
        /// `rule`, `name`, `text` (null when not kept), `packets`, `bytes`).
        #[arg(long)]
        json: bool,
    },
    /// Detach a classifier left by `load --detach` and remove its pins.
    Unload {
        #[command(flatten)]
        target: FilterTarget,
    },
    /// Serve Prometheus metrics of every classifier pinned in this network namespace (left by
    /// `load --detach` or `--pin`) until SIGINT/SIGTERM: per interface (label `iface`) the
    /// series of `filter load --metrics`, and fastpath_filter_attached. Quiet: a log line when a
    /// classifier appears or goes; pins are looked for, and counters read, every second.
    Export {
        /// Serve at http://ADDR:PORT/metrics, e.g. 9101 (127.0.0.1:9101) or [::1]:9101.
        /// Loopback only unless --metrics-listen-any.
        #[arg(long, value_name = "[ADDR:]PORT", value_parser = parse_metrics_addr)]
        metrics: std::net::SocketAddr,
        /// Let --metrics listen on an address that is not loopback, e.g. 0.0.0.0:9101 (the
        /// endpoint has no authentication: anyone who reaches it sees the counters).
        #[arg(long)]
        metrics_listen_any: bool,
        /// Network namespace whose pinned classifiers are served (/var/run/netns/NAME); the
        /// endpoint listens in the namespace the command starts in.
        #[arg(long)]
        netns: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum TestbedCmd {
    /// Create a test bed and print its names and addresses (it stays until `testbed down`).
    Up {
        /// Test bed name (1-12 ASCII letters/digits); default: a unique "fp..." name.
        #[arg(long)]
        name: Option<String>,
        /// Queues on each veth end (rx and tx).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
        queues: u32,
        /// Run the receiving veth's NAPI in threads pinned to this CPU (default: the sender's CPU).
        #[arg(long)]
        napi_cpu: Option<usize>,
        /// Give the sending veth a pfifo qdisc.
        #[arg(long)]
        sender_qdisc: bool,
        /// Build a forwarding test bed instead: namespaces <name>-a, <name>-f, <name>-b, hosts a
        /// (10.99.1.1, fd99:0:0:1::1) and b (10.99.2.1, fd99:0:0:2::1) routed through f (ports
        /// <name>fa, <name>fb, kernel forwarding on) for `fastpath fwd`.
        #[arg(long, conflicts_with_all = ["queues", "napi_cpu", "sender_qdisc"])]
        fwd: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove a test bed (both namespaces and the veth pair).
    Down {
        /// Test bed name.
        name: String,
    },
    /// Show a test bed, or list all test beds.
    Info {
        /// Test bed name; omitted: list all.
        name: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BenchMode {
    /// Flood scenario on a test bed of its own: TCP ping-pong (sockperf) with no flood, with a
    /// UDP port-9 flood, and with the flood dropped by the classifier.
    Ddos,
    /// Receive on an AF_XDP socket and drop (recycle to FILL).
    Rxdrop,
    /// Send generated frames on an AF_XDP socket.
    Txonly,
    /// Receive, swap MACs, send back on the same queue from the same frame.
    L2fwd,
    /// The in-kernel reference: count and XDP_DROP in the driver.
    Xdpdrop,
    /// Redirect every frame through a CPUMAP to the CPUs of --cpus (--cpu-dist, --qsize,
    /// --remote-action); counts what each CPU received.
    RedirectCpu,
    /// Round-trip latency, one packet in flight, between two namespaces of a test bed: AF_XDP
    /// (softirq, busy poll, busy poll + IRQ suspension) against kernel UDP sockets (the same
    /// program, and sockperf); p50 / p99 / p99.9 / max, medians of --runs interleaved runs.
    Pingpong,
}

/// Which port backend `bench rxdrop`/`txonly` run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PathArg {
    /// AF_XDP (the default; all AF_XDP options apply).
    Afxdp,
    /// AF_PACKET TPACKET_V3 ring.
    Tpacket,
    /// A TAP device named by -i (created), readv/writev.
    Tap,
    /// The same TAP device driven by io_uring.
    TapUring,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum XdpModeArg {
    Native,
    Skb,
    Auto,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CopyModeArg {
    Auto,
    Copy,
    ZeroCopy,
}

/// Where and how to open the AF_XDP socket and attach the XDP program.
#[derive(Debug, Clone, Args)]
pub struct XskArgs {
    /// Interface (1 to 15 bytes, no '/', ':' or whitespace, not "." or ".."; not used by
    /// `bench ddos`, which builds its own test bed).
    #[arg(short = 'i', long, default_value = "", value_parser = parse_iface_or_none)]
    pub iface: String,
    /// Queue id.
    #[arg(short = 'q', long, default_value_t = 0)]
    pub queue: u32,
    /// Run inside this network namespace (/var/run/netns/NAME).
    #[arg(long)]
    pub netns: Option<String>,
    /// Where the XDP program runs: in the driver, on the skb, or native falling back to skb.
    #[arg(long, value_enum, default_value_t = XdpModeArg::Auto)]
    pub xdp_mode: XdpModeArg,
    /// AF_XDP data path: auto walks zero-copy -> copy.
    #[arg(long, value_enum, default_value_t = CopyModeArg::Auto)]
    pub copy_mode: CopyModeArg,
    /// UMEM frame size in bytes (2048 or 4096; with --unaligned-chunks any size 2048..=4096).
    #[arg(long, default_value_t = 4096)]
    pub frame_size: u32,
    /// UMEM in unaligned chunk mode (XDP_UMEM_UNALIGNED_CHUNK_FLAG, kernel >= 5.4).
    #[arg(long)]
    pub unaligned_chunks: bool,
    /// Frames in the UMEM (power of two).
    #[arg(long, default_value_t = 4096)]
    pub frame_count: u32,
    /// Headroom in bytes before each received packet.
    #[arg(long, default_value_t = 0)]
    pub headroom: u32,
    /// Back the UMEM with huge pages (MAP_HUGETLB; reserve them first in /proc/sys/vm/nr_hugepages).
    #[arg(long)]
    pub huge_pages: bool,
    /// RX/TX ring size in descriptors (power of two, 64..=32768); FILL/COMPLETION get twice this.
    #[arg(long, default_value_t = 2048)]
    pub ring_size: u32,
    /// Descriptors per ring operation.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub batch_size: u32,
    /// Busy poll: SO_PREFER_BUSY_POLL, SO_BUSY_POLL=20 us, SO_BUSY_POLL_BUDGET=batch size.
    #[arg(long)]
    pub busy_poll: bool,
    /// Bind without XDP_USE_NEED_WAKEUP.
    #[arg(long)]
    pub no_need_wakeup: bool,
    /// rxdrop/l2fwd: wait in poll() when the RX ring is empty. Default: spin, except when the
    /// --queues workers are pinned to every online CPU (e.g. --queues 2 on 2 CPUs): then
    /// poll(), as the receive softirq needs those CPUs (a veth's NAPI runs in the sender's
    /// softirq, a NIC's on its IRQ CPUs) and spinning workers would starve it.
    #[arg(long, conflicts_with = "spin")]
    pub poll: bool,
    /// rxdrop/l2fwd: spin when the RX ring is empty even with workers pinned to every online
    /// CPU (where the default is poll(); see --poll).
    #[arg(long)]
    pub spin: bool,
    /// Copy-mode TX descriptors per sendto (XDP_MAX_TX_SKB_BUDGET, kernel >= 6.17, 32..=ring size);
    /// default 256 (measured best of 32/256/2048 for txonly on veth).
    #[arg(long)]
    pub tx_budget: Option<u32>,
    /// Replace an XDP program that fastpath did not attach.
    #[arg(long)]
    pub force: bool,
    /// Pin the run loop to this CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// One AF_XDP socket and one pinned thread per queue 0..N-1 (1..=64); the XSKMAP is keyed
    /// by queue id. Lines and JSON give each queue and the total.
    #[arg(long)]
    pub queues: Option<u32>,
    /// A CPU list like 1 or 0,2-3. With --queues: the queues' threads, one CPU per queue
    /// (default: one per CPU in turn). bench redirect-cpu: the CPUMAP's target CPUs (default:
    /// every online CPU but 0, which takes the receive softirq here; CPU 0 on a one-CPU machine).
    #[arg(long, value_name = "LIST", value_parser = parse_cpus)]
    pub cpus: Option<CpuList>,
    /// One UMEM for every queue (XDP_SHARED_UMEM with a FILL/COMPLETION ring pair per socket,
    /// kernel >= 5.10; --frame-count frames split over the queues); default: one UMEM per queue.
    #[arg(long)]
    pub shared_umem: bool,
}

impl XdpModeArg {
    /// The mode asked for, or None for native falling back to skb
    /// (`fastpath::bpf::XdpLink::attach`).
    pub fn mode(self) -> Option<fastpath::bpf::XdpMode> {
        match self {
            XdpModeArg::Native => Some(fastpath::bpf::XdpMode::Native),
            XdpModeArg::Skb => Some(fastpath::bpf::XdpMode::Skb),
            XdpModeArg::Auto => None,
        }
    }
}

impl XskArgs {
    /// The command line's defaults for `iface`, pinned to `cpu`: for commands that open a path
    /// themselves (demo, compare).
    pub fn defaults(iface: &str, cpu: Option<usize>) -> Self {
        Self {
            iface: iface.to_string(),
            queue: 0,
            netns: None,
            xdp_mode: XdpModeArg::Auto,
            copy_mode: CopyModeArg::Auto,
            frame_size: 4096,
            unaligned_chunks: false,
            frame_count: 4096,
            headroom: 0,
            huge_pages: false,
            ring_size: 2048,
            batch_size: 64,
            busy_poll: false,
            no_need_wakeup: false,
            poll: false,
            spin: false,
            tx_budget: None,
            force: false,
            cpu,
            queues: None,
            cpus: None,
            shared_umem: false,
        }
    }
}

/// How long to run and how to report.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Seconds to run, 0..=31536000 (a year); 0 = set up, attach, detach, exit. Default 10,
    /// except `filter load`: until SIGINT/SIGTERM.
    #[arg(long, default_value_t = 10.0, hide_default_value = true, value_parser = parse_duration)]
    pub duration: f64,
    /// Seconds between interval lines, 0.1..=3600. Interval lines are printed on a terminal,
    /// with --json, or when --interval is given; under systemd (stdout the journal) only when
    /// --interval is given. The summary at the end always is.
    #[arg(long, default_value_t = 1.0, value_parser = parse_interval)]
    pub interval: f64,
    /// One JSON object per interval and one for the summary.
    #[arg(long)]
    pub json: bool,
    /// Whether interval lines are printed (set from the command line and where stdout goes,
    /// see logging::interval_lines).
    #[arg(skip)]
    pub interval_lines: bool,
    /// More counters per line; on `bench` and `filter stats` also attach the XDP tracepoint
    /// monitor (xdp_exception, xdp_redirect_err, xdp_cpumap_enqueue/kthread, xdp_devmap_xmit;
    /// needs kernel BTF, Linux >= 5.10) and show its counters ("tracepoints" in JSON).
    #[arg(short = 'e', long)]
    pub extended: bool,
    /// Serve the run's counters at http://ADDR:PORT/metrics in the Prometheus text format
    /// (per queue, per port, per rule, XDP_STATISTICS; units in the names), refreshed at most
    /// every 100 ms, until the command ends. E.g. 9100 (127.0.0.1:9100) or [::1]:9100.
    /// Loopback only unless --metrics-listen-any.
    #[arg(long, value_name = "[ADDR:]PORT", value_parser = parse_metrics_addr)]
    pub metrics: Option<std::net::SocketAddr>,
    /// Let --metrics listen on an address that is not loopback, e.g. 0.0.0.0:9100 (the
    /// endpoint has no authentication: anyone who reaches it sees the counters).
    #[arg(long)]
    pub metrics_listen_any: bool,
}

/// `bench redirect-cpu`: the CPUMAP and its programs.
#[derive(Debug, Clone, Default, Args)]
pub struct CpumapArgs {
    /// redirect-cpu: how each frame's CPU is chosen (hash: of the 5-tuple; proto: TCP to the
    /// list's first CPU, UDP to its second, the rest to its third).
    #[arg(long, value_enum, default_value_t = CpuDistArg::RoundRobin)]
    pub cpu_dist: CpuDistArg,
    /// redirect-cpu: frames each target CPU's CPUMAP queue holds (bpf_cpumap_val.qsize).
    #[arg(long, default_value_t = 2048, value_parser = clap::value_parser!(u32).range(1..=16384))]
    pub qsize: u32,
    /// redirect-cpu: verdict of the XDP program on the CPUMAP entries (runs on the target CPU).
    #[arg(long, value_enum, default_value_t = RemoteActionArg::Drop)]
    pub remote_action: RemoteActionArg,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum CpuDistArg {
    #[default]
    RoundRobin,
    Hash,
    Proto,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum RemoteActionArg {
    #[default]
    Drop,
    Pass,
}

/// A `--cpus` list (a type of its own: clap reads `Option<Vec<_>>` as a repeated option).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<u32>);

/// `--cpus`: a list like `1`, `0,2-3`; every CPU online on this machine, each once, at most 64.
pub fn parse_cpus(s: &str) -> Result<CpuList, String> {
    let ncpu = fastpath::workers::online_cpus().min(fastpath::bpf::cpumap::MAP_SIZE as usize) as u32;
    let bad = |what: &str| {
        format!(
            "--cpus {s} is not accepted: {what}; use CPUs of this machine, 0..={}, as a list like 1 or 0,2-3",
            ncpu.saturating_sub(1)
        )
    };
    let mut out: Vec<u32> = Vec::new();
    for part in s.split(',') {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse::<u32>(), b.trim().parse::<u32>()),
            None => (part.trim().parse::<u32>(), part.trim().parse::<u32>()),
        };
        let (Ok(lo), Ok(hi)) = (lo, hi) else { return Err(bad(&format!("{part:?} is not a CPU number or range"))) };
        if lo > hi {
            return Err(bad(&format!("range {part} runs backwards")));
        }
        if hi >= ncpu {
            return Err(bad(&format!("CPU {hi} does not exist")));
        }
        for c in lo..=hi {
            if out.contains(&c) {
                return Err(bad(&format!("CPU {c} is listed twice")));
            }
            out.push(c);
        }
    }
    if out.len() > fastpath::bpf::cpumap::MAX_CPUS {
        return Err(bad(&format!("{} CPUs, at most {}", out.len(), fastpath::bpf::cpumap::MAX_CPUS)));
    }
    Ok(CpuList(out))
}

/// The generated frames.
#[derive(Debug, Clone, Args)]
pub struct FrameArgs {
    /// Frame length in bytes without FCS: 62..=9014 for IPv4 (default 64), 82..=9014 for IPv6
    /// (default 84); at most the interface's MTU + 14. Above one UMEM frame (MTU > 3822) the
    /// AF_XDP socket is multi-buffer (XDP_USE_SG, kernel >= 6.6); --engine xdp-live sends at most
    /// 3408 bytes (one page with 4 KiB pages), --path tpacket/tap at most 1514.
    #[arg(long, value_parser = clap::value_parser!(u16).range(62..=9014))]
    pub frame_len: Option<u16>,
    /// Ethernet source (default: the interface's address).
    #[arg(long, value_parser = parse_mac)]
    pub src_mac: Option<[u8; 6]>,
    /// Ethernet destination.
    #[arg(long, value_parser = parse_mac, default_value = "ff:ff:ff:ff:ff:ff")]
    pub dst_mac: [u8; 6],
    /// IP source, IPv4 or IPv6 (the same version as --dst-ip).
    #[arg(long, default_value = "10.99.0.1")]
    pub src_ip: IpAddr,
    /// IP destination, IPv4 or IPv6.
    #[arg(long, default_value = "10.99.0.2")]
    pub dst_ip: IpAddr,
    /// UDP source port.
    #[arg(long, default_value_t = 9000)]
    pub src_port: u16,
    /// UDP destination port.
    #[arg(long, default_value_t = 9)]
    pub dst_port: u16,
    /// Send from N distinct 5-tuples (1..=16777216): the last byte of --src-ip and the source
    /// port drawn per flow from a bijection seeded by --seed; frame k (from 1) of each sender
    /// stream carries flow (k - 1) mod N, so a --count that is a multiple of N (per stream)
    /// gives every flow the same number of frames.
    #[arg(long, value_name = "N", value_parser = parse_flows)]
    pub flows: Option<u32>,
    /// Seed of --flows (an integer, 0..=18446744073709551615; default 1): the same seed gives
    /// the same tuples.
    #[arg(long, value_name = "S", requires = "flows", value_parser = parse_seed)]
    pub seed: Option<u64>,
    /// Stop after this many frames (bench pingpong: round trips per run after 1,000 not
    /// measured, 1..=100000000, default 100000; a run also ends after --duration seconds).
    #[arg(long)]
    pub count: Option<u64>,
    /// Send at most this many frames per second, 1.. (leave it out for no limit). With `gen
    /// --pcap`: this many frames per second, evenly, instead of the file's own timing (as
    /// tcpreplay --pps).
    #[arg(long, value_parser = parse_rate)]
    pub rate: Option<u64>,
}

#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// rxdrop, txonly, l2fwd or xdpdrop.
    #[arg(value_enum)]
    pub mode: BenchMode,
    #[command(flatten)]
    pub xsk: XskArgs,
    #[command(flatten)]
    pub run: RunArgs,
    #[command(flatten)]
    pub frame: FrameArgs,
    /// rxdrop: check every fastpath frame (checksums, payload) and count each (stream, seq)
    /// received once, twice or not at all; reported in the summary.
    #[arg(long)]
    pub verify: bool,
    /// rxdrop: receive behind a device-bound program that reads the driver's RX metadata
    /// (RX timestamp, RSS hash and type, VLAN tag: the XDP metadata kfuncs, Linux >= 6.3) and
    /// puts it in front of every frame; the summary counts which fields came and shows the
    /// first frame's.
    #[arg(long)]
    pub rx_meta: bool,
    /// rxdrop/txonly: the port backend (one API over every path).
    #[arg(long, value_enum, default_value_t = PathArg::Afxdp)]
    pub path: PathArg,
    /// ddos: flood generator threads (xdp-live), from CPU 0 upwards.
    #[arg(long, default_value_t = 1)]
    pub flood_threads: u32,
    /// rxdrop/l2fwd: run the AF_XDP socket behind the rule classifier with this rule file
    /// (rules with action "xsk" reach the socket) instead of the minimal redirect program.
    #[arg(long)]
    pub rules: Option<std::path::PathBuf>,
    /// rxdrop: attach no program; take the XSKMAP from the server at this Unix socket
    /// (`fastpath filter load --xsk-handoff PATH`, which must run as root) and put the socket
    /// in it. Needs CAP_NET_RAW (and nothing else on Linux 6.18, where this was measured).
    #[arg(long, value_name = "PATH")]
    pub xsk_handoff: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub cpumap: CpumapArgs,
    #[command(flatten)]
    pub ddos: DdosArgs,
    #[command(flatten)]
    pub tx_meta: TxMetaArgs,
    #[command(flatten)]
    pub pingpong: PingpongArgs,
}

/// Who completes a partial TX checksum (`--tx-csum`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TxCsumArg {
    /// The kernel, on the CPU, in copy mode (XDP_UMEM_TX_SW_CSUM).
    Sw,
    /// The device: the packet leaves with CHECKSUM_PARTIAL (zero-copy: drivers with
    /// xsk-features tx-checksum).
    Device,
}

/// AF_XDP TX metadata (Linux >= 6.11, with the XDP_UMEM_TX_METADATA_LEN flag fastpath sets): per-frame requests written in front of each TX frame.
#[derive(Debug, Clone, Default, Args)]
pub struct TxMetaArgs {
    /// txonly / gen --engine xsk: send every frame with a partial UDP checksum (the
    /// pseudo-header sum) and a TX checksum request (AF_XDP TX metadata, Linux >= 6.11). sw
    /// (the default): the kernel completes it on the CPU in copy mode (XDP_UMEM_TX_SW_CSUM);
    /// device: the frame leaves partial, for the device to complete.
    #[arg(long, value_enum, value_name = "WHO", num_args = 0..=1, default_missing_value = "sw")]
    pub tx_csum: Option<TxCsumArg>,
    /// txonly / gen --engine xsk: ask for every frame's TX timestamp; the summary counts those
    /// that came back (copy mode: the kernel's software CLOCK_TAI time when it freed the frame's
    /// skb, on any driver; zero-copy: the device's, xsk-features tx-timestamp).
    #[arg(long)]
    pub tx_timestamp: bool,
    /// txonly / gen --engine xsk: ask the device to send each frame NS nanoseconds after its
    /// burst is queued, by CLOCK_TAI (launch time, Linux >= 6.14; drivers with xsk-features
    /// tx-launch-time-fifo, such as igc; refused on any other).
    #[arg(long, value_name = "NS")]
    pub tx_launch_time: Option<u64>,
}

impl TxMetaArgs {
    /// True if any TX metadata option was given.
    pub fn any(&self) -> bool {
        self.tx_csum.is_some() || self.tx_timestamp || self.tx_launch_time.is_some()
    }

    /// The option given first, for refusals: "--tx-csum", "--tx-timestamp" or "--tx-launch-time".
    pub fn first_name(&self) -> &'static str {
        if self.tx_csum.is_some() {
            "--tx-csum"
        } else if self.tx_timestamp {
            "--tx-timestamp"
        } else {
            "--tx-launch-time"
        }
    }
}

/// `bench pingpong`: which modes, how many round trips, where.
#[derive(Debug, Clone, Args)]
pub struct PingpongArgs {
    /// pingpong: modes, comma-separated, measured in this order in every run: xsk-softirq,
    /// xsk-busy-poll, xsk-irq-suspend, udp, sockperf-udp.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "LIST",
        default_value = "xsk-softirq,xsk-busy-poll,xsk-irq-suspend,udp,sockperf-udp"
    )]
    pub modes: Vec<String>,
    /// pingpong: runs of every mode, interleaved (each row is the median of its runs), 1..=50.
    #[arg(long, default_value_t = 3)]
    pub runs: u32,
    /// pingpong: the client's CPU (namespace a).
    #[arg(long, default_value_t = 0)]
    pub client_cpu: usize,
    /// pingpong: the echo server's CPU (namespace b).
    #[arg(long, default_value_t = 1)]
    pub server_cpu: usize,
    /// pingpong: use this test bed (`fastpath testbed up`) instead of one of its own.
    #[arg(long, value_name = "NAME")]
    pub testbed: Option<String>,
}

impl Default for PingpongArgs {
    fn default() -> Self {
        Self { modes: vec![], runs: 3, client_cpu: 0, server_cpu: 1, testbed: None }
    }
}

/// `bench ddos`: which floods, which defences.
#[derive(Debug, Clone, Default, Args)]
pub struct DdosArgs {
    /// ddos: offered flood rates, frames/s, comma-separated: 250k, 1M, 1.5M, 300000 (1k..=100M)
    /// or max [default: 25k,50k,100k,250k,1M,2M,max; with --rate R: R alone].
    #[arg(long, value_name = "LIST")]
    pub flood_rates: Option<String>,
    /// ddos: defences, comma-separated, each measured at every flood rate.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        value_name = "LIST",
        default_value = "none,nft,iptables,fastpath,fastpath-10k"
    )]
    pub defences: Vec<DefenceArg>,
    /// ddos: also draw transactions/s against offered flood rate, a line per defence, as SVG
    /// (a new file, mode 0600).
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// ddos: replace an existing regular file at --svg (never through a symbolic link).
    #[arg(long)]
    pub overwrite: bool,
    /// ddos: the flood: UDP to port 9, TCP SYNs to the service's listening port from spoofed
    /// sources (--flood-sources) with the kernel's SYN cookies on, the defences rate-limiting
    /// SYNs per source and in aggregate, or out-of-state TCP ACKs to that port from the same
    /// sources, the stateless defences rate-limiting pure ACKs per source. With the TCP floods
    /// (and fastpath-syncookie under any flood) every phase runs with an XDP program on the
    /// clients' veth dropping what the victim sends to the spoofed sources.
    #[arg(long, value_enum, default_value_t = FloodKind::Udp)]
    pub flood: FloodKind,
    /// ddos: spoofed source addresses of the flood, 1..=8388608: 10.128.0.0 and up (within
    /// 10.128.0.0/9), each sending 1/N of the flood (any N consecutive frames come from N
    /// distinct addresses). 256 is the single /24 of earlier runs, which a per-source rate
    /// limit keys on; the default 65536 (a /16) is a flood it cannot key on.
    #[arg(long, value_name = "N", default_value = "65536", allow_negative_numbers = true, value_parser = fastpath_lab::ddos::parse_flood_sources)]
    pub flood_sources: u32,
    /// ddos: the flood model, each a row set of its own in the same run: per-frame (every frame
    /// may wake the receiving NAPI), coalesced (adaptive interrupt coalescing as a NIC's: under
    /// load the NAPI polls at most every --rx-usecs, idle every frame wakes it), or both.
    #[arg(long, value_enum, default_value_t = ModelArg::Both)]
    pub model: ModelArg,
    /// ddos: the coalesced model's rx-usecs, 1..=1000 [default: 50, Intel X710 (i40e)'s,
    /// drivers/net/ethernet/intel/i40e/i40e_txrx.h I40E_ITR_20K]; needs the coalesced model.
    #[arg(long, value_name = "US")]
    pub rx_usecs: Option<u32>,
}

/// The flood model(s) of `bench ddos`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum ModelArg {
    /// Every frame may wake the receiving NAPI (no interrupt coalescing).
    PerFrame,
    /// Adaptive interrupt coalescing on the victim's NAPI (--rx-usecs).
    Coalesced,
    /// Both, side by side.
    #[default]
    Both,
}

/// The flood of `bench ddos`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum FloodKind {
    /// 64-byte UDP to port 9.
    #[default]
    Udp,
    /// TCP SYNs to the service's port, from spoofed sources.
    Syn,
    /// Out-of-state TCP ACKs to the service's port, from spoofed sources.
    Ack,
}

/// A defence of `bench ddos`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DefenceArg {
    /// No filter.
    None,
    /// nftables: `udp dport 9 counter drop` in a prerouting chain at priority raw.
    Nft,
    /// iptables: `-t raw -I PREROUTING -p udp --dport 9 -j DROP` (rows left out if the command is missing).
    Iptables,
    /// The fastpath classifier (XDP, native) with the one rule.
    Fastpath,
    /// The fastpath classifier with the rule last behind 10,000 others.
    #[value(name = "fastpath-10k")]
    Fastpath10k,
    /// The fastpath classifier with one rule `action = "syncookie"` for the service's ports
    /// (Linux >= 6.9).
    #[value(name = "fastpath-syncookie")]
    FastpathSyncookie,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Engine {
    /// AF_XDP TX (the txonly path).
    Xsk,
    /// In-kernel: BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES, XDP_REDIRECT out of the interface.
    XdpLive,
}

#[derive(Debug, Clone, Args)]
pub struct GenArgs {
    /// Traffic engine.
    #[arg(long, value_enum, default_value_t = Engine::XdpLive)]
    pub engine: Engine,
    /// xdp-live: sending threads, each pinned to its own CPU (from --cpu, or 0, upwards).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub threads: u32,
    #[command(flatten)]
    pub xsk: XskArgs,
    #[command(flatten)]
    pub run: RunArgs,
    #[command(flatten)]
    pub frame: FrameArgs,
    /// Replay the frames of this capture instead of building frames: pcap or pcapng (as
    /// `fastpath capture`, tcpdump -w or tshark -w write it), Ethernet frames captured whole.
    /// Each frame leaves unchanged, in the file's order, at the file's own timing (the gaps
    /// between its timestamps) unless --rate or --topspeed; one sending thread, on either
    /// engine. Runs until the last frame of the last --loop is sent (or --count frames,
    /// --duration if given, Ctrl-C). Longest frame: the MTU + 14, and with --engine xdp-live
    /// one page (3408 bytes with 4 KiB pages). Files of up to 1 GiB; the file is read as a
    /// stream and its frames held packed, less memory than the file's size (their bytes plus
    /// 12 bytes each).
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["frame_len", "src_mac", "dst_mac", "src_ip", "dst_ip", "src_port", "dst_port", "flows", "seed"]
    )]
    pub pcap: Option<PathBuf>,
    /// With --pcap: play the file N times, each pass right after the last (0: over and over
    /// until --count, --duration or Ctrl-C), as tcpreplay --loop.
    #[arg(long = "loop", value_name = "N", default_value_t = 1, requires = "pcap")]
    pub loops: u64,
    /// With --pcap: send as fast as the engine goes, ignoring the file's timestamps (as
    /// tcpreplay --topspeed).
    #[arg(long, requires = "pcap", conflicts_with = "rate")]
    pub topspeed: bool,
    #[command(flatten)]
    pub tx_meta: TxMetaArgs,
}

#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Seconds per phase, 0..=31536000.
    #[arg(long, default_value_t = 10.0, value_parser = parse_duration)]
    pub duration: f64,
    /// Print the table as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Generator threads (xdp-live).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub threads: u32,
    /// CPU of the receiving application (rxdrop); the generator and the veth softirq run on
    /// the other CPUs. Equal to --gen-cpu puts everything on one core.
    #[arg(long, default_value_t = 1)]
    pub app_cpu: usize,
    /// First CPU of the generator threads.
    #[arg(long, default_value_t = 0)]
    pub gen_cpu: usize,
    /// Also write the JSON object to this file (a new file, mode 0600).
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Replace an existing regular file at --output (never through a symbolic link).
    #[arg(long)]
    pub overwrite: bool,
}

/// Longest accepted `--duration`: a year, in seconds.
pub const MAX_DURATION_S: f64 = 31_536_000.0;
/// Accepted `--interval` range, seconds: shorter would be a busy loop of printing.
pub const INTERVAL_RANGE_S: (f64, f64) = (0.1, 3600.0);

fn parse_seconds(s: &str, what: &str, lo: f64, hi: f64) -> Result<f64, String> {
    let bad = || format!("{what} {s:?} is not accepted: use seconds in {lo}..={hi}");
    let v: f64 = s.trim().parse().map_err(|_| bad())?;
    if !(v.is_finite() && (lo..=hi).contains(&v)) {
        return Err(bad());
    }
    Ok(v)
}

/// `--duration`: seconds in 0..=31536000 (finite; `Duration::from_secs_f64` never panics).
/// `--rate`: frames per second, 1.. (0 would send nothing and call it a success).
pub fn parse_rate(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(0) => Err("0 frames/s sends nothing: use 1.. frames/s, or leave --rate out for no limit".into()),
        Ok(r) => Ok(r),
        Err(_) => Err(format!("{s:?} is not a number of frames per second (1..)")),
    }
}

/// `--metrics`: ADDR:PORT, or a bare PORT meaning 127.0.0.1:PORT.
pub fn parse_metrics_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    s.parse().map_err(|_| format!("{s:?} is not PORT or ADDR:PORT (e.g. 9100, 127.0.0.1:9100, [::1]:9100)"))
}

pub fn parse_duration(s: &str) -> Result<f64, String> {
    parse_seconds(s, "--duration", 0.0, MAX_DURATION_S)
}

/// `--interval`: seconds in 0.1..=3600.
pub fn parse_interval(s: &str) -> Result<f64, String> {
    parse_seconds(s, "--interval", INTERVAL_RANGE_S.0, INTERVAL_RANGE_S.1)
}

/// `-i/--iface`: a valid interface name (the kernel's dev_valid_name rules).
pub fn parse_iface(s: &str) -> Result<String, String> {
    fastpath::netdev::validate_ifname(s)?;
    Ok(s.to_string())
}

/// `-i/--iface` where it may be left out (its default is empty; commands that need it say so).
pub fn parse_iface_or_none(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Ok(String::new());
    }
    parse_iface(s)
}

/// `--flows`: 1..=16777216 ([`fastpath::packet::MAX_FLOWS`]).
pub fn parse_flows(s: &str) -> Result<u32, String> {
    let max = fastpath::packet::MAX_FLOWS;
    match s.trim().parse::<u32>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "--flows {s} is not accepted: use a number of flows in 1..={max} (256 source addresses x 65536 source ports)"
        )),
    }
}

/// `--seed`: any integer 0..=u64::MAX.
pub fn parse_seed(s: &str) -> Result<u64, String> {
    s.trim().parse::<u64>().map_err(|_| format!("--seed {s} is not accepted: use an integer in 0..={}", u64::MAX))
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = s.split(':').collect();
    let bad = || format!("MAC address {s:?} is not accepted: use six hex bytes like 02:00:00:00:00:01");
    if parts.len() != 6 {
        return Err(bad());
    }
    let mut m = [0u8; 6];
    for (d, p) in m.iter_mut().zip(parts) {
        if p.len() != 2 {
            return Err(bad());
        }
        *d = u8::from_str_radix(p, 16).map_err(|_| bad())?;
    }
    Ok(m)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Pin {
    /// Application and the veth's receive softirq on one core (threaded NAPI pinned with it).
    Same,
    /// Receive softirq in the generator's context on CPU 0, application on CPU 1.
    Split,
}

#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// Runs; each row reports the median, min and max.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub runs: u32,
    /// Seconds of traffic per row and run, 0..=31536000; 0 = set every row up and tear it down.
    #[arg(long, default_value_t = 5.0, value_parser = parse_duration)]
    pub duration: f64,
    /// Where the application runs relative to the receive softirq.
    #[arg(long, value_enum, default_value_t = Pin::Split)]
    pub pin: Pin,
    /// One JSON object with every figure.
    #[arg(long)]
    pub json: bool,
    /// Also draw the table as an SVG bar chart to this file (a new file, mode 0600).
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Replace an existing regular file at --svg (never through a symbolic link).
    #[arg(long)]
    pub overwrite: bool,
    /// Also N-queue rows (2..=CPUs): AF_XDP with one socket and thread per queue over one
    /// shared UMEM, and XDP_DROP, on an N-queue test bed with one generator thread per queue.
    #[arg(long)]
    pub queues: Option<u32>,
    /// Also the tools users run today, on the same test bed, generator and pinning: DPDK
    /// dpdk-testpmd (net_af_xdp, net_af_packet, net_tap; rxonly, txonly, macswap) and
    /// xdp-tools (xdp-bench drop, xdp-trafficgen, xdp-filter with 1, 100, 10,000 rules), each
    /// row with its command line, version, Mpps, share of XDP_DROP and fastpath / peer. A
    /// missing peer is a row saying so (with CI=true: an error). Needs --duration > 0.
    #[arg(long, conflicts_with = "inject")]
    pub peers: bool,
    /// Injection instead: user space hands packets to the kernel through TAP and io_uring TAP
    /// (UDP sink packets/s; TCP throughput and latency through a user-space veth<->TAP bridge).
    #[arg(long)]
    pub inject: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpus("0"), Ok(CpuList(vec![0])));
        let n = fastpath::workers::online_cpus() as u32;
        assert_eq!(parse_cpus(&format!("0-{}", n - 1)), Ok(CpuList((0..n).collect())));
        for bad in ["99", "x", "1-0", "0,0", ""] {
            let e = parse_cpus(bad).unwrap_err();
            assert!(e.starts_with(&format!("--cpus {bad} is not accepted")) && e.contains("0..="), "{e}");
        }
    }

    /// capture's tcpdump flags: -s 0 is the most (16384); -s, -c, -C, -W, -G refuse what
    /// tcpdump refuses (and -s above 16384, -G 0 and fractions), naming the value and the range.
    #[test]
    fn capture_tcpdump_values() {
        assert_eq!(parse_snaplen("0"), Ok(16384));
        assert_eq!(parse_snaplen("64"), Ok(64));
        assert_eq!(parse_snaplen("16384"), Ok(16384));
        assert_eq!(parse_count("1"), Ok(1));
        assert_eq!(parse_file_size_mb("1"), Ok(1));
        assert_eq!(parse_file_count("1"), Ok(1));
        assert_eq!(parse_rotate_seconds("1"), Ok(1));
        for (f, bad, range) in [
            (parse_snaplen as fn(&str) -> Result<u32, String>, "16385", "1..=16384"),
            (parse_snaplen, "-1", "1..=16384"),
            (parse_file_count, "0", "1..=100000"),
        ] {
            let e = f(bad).unwrap_err();
            assert!(e.contains(&format!(" {bad} is not accepted")) && e.contains(range), "{e}");
        }
        for (f, bad, range) in [
            (parse_count as fn(&str) -> Result<u64, String>, "0", "1.."),
            (parse_file_size_mb, "0", "1..=1000000"),
            (parse_file_size_mb, "0.5", "1..=1000000"),
            (parse_file_size_mb, "1k", "1..=1000000"),
            (parse_rotate_seconds, "0", "1..="),
            (parse_rotate_seconds, "1.5", "1..="),
        ] {
            let e = f(bad).unwrap_err();
            assert!(e.contains(&format!(" {bad} is not accepted")) && e.contains(range), "{e}");
        }
    }

    #[test]
    fn flows_and_seeds_are_bounded() {
        assert_eq!(parse_flows("1"), Ok(1));
        assert_eq!(parse_flows("16777216"), Ok(16_777_216));
        for bad in ["0", "16777217", "-1", "x", "1e3", ""] {
            let e = parse_flows(bad).unwrap_err();
            assert!(e.starts_with(&format!("--flows {bad} is not accepted")) && e.contains("1..=16777216"), "{e}");
        }
        assert_eq!(parse_seed("18446744073709551615"), Ok(u64::MAX));
        for bad in ["-1", "18446744073709551616", "x"] {
            let e = parse_seed(bad).unwrap_err();
            assert!(e.contains(bad) && e.contains("0..=18446744073709551615"), "{e}");
        }
    }

    #[test]
    fn seconds_are_bounded() {
        assert_eq!(parse_duration("0"), Ok(0.0));
        assert_eq!(parse_duration("31536000"), Ok(MAX_DURATION_S));
        assert_eq!(parse_interval("0.1"), Ok(0.1));
        for bad in ["1e20", "-1", "nan", "inf", "31536001", "x"] {
            let e = parse_duration(bad).unwrap_err();
            assert!(e.contains(bad) && e.contains("0..=31536000"), "{e}");
        }
        for bad in ["1e19", "1e-9", "0", "3601", "nan"] {
            let e = parse_interval(bad).unwrap_err();
            assert!(e.contains(bad) && e.contains("0.1..=3600"), "{e}");
        }
    }

    #[test]
    fn ddos_ack_flood_and_syncookie_defence_parse() {
        assert_eq!(FloodKind::from_str("ack", false), Ok(FloodKind::Ack));
        assert_eq!(DefenceArg::from_str("fastpath-syncookie", false), Ok(DefenceArg::FastpathSyncookie));
        assert!(FloodKind::from_str("rst", false).is_err());
        assert!(DefenceArg::from_str("syncookie", false).is_err());
    }
}

/// A list of uids (`--xsk-handoff-allow`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uids(pub Vec<u32>);

fn parse_uids(s: &str) -> Result<Uids, String> {
    let mut v = Vec::new();
    for p in s.split(',') {
        let u: u32 = p
            .trim()
            .parse()
            .map_err(|_| format!("{p:?} is not a uid: give numeric uids 0..=4294967294, comma-separated"))?;
        if u == u32::MAX {
            return Err(format!("{p} is not a uid (it is (uid_t)-1): give numeric uids 0..=4294967294"));
        }
        if !v.contains(&u) {
            v.push(u);
        }
    }
    Ok(Uids(v))
}
