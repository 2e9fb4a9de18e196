//! The defences of `bench ddos` ([`Defence`]): their names and descriptions, their rules against
//! each flood (nftables, iptables, the classifier's rule set), installing one in the victim's
//! namespace for a run of phases ([`Installed`]) and reading its drop counter.
//!
//! A new defence: a variant of [`Defence`] with its [`Defence::name`] and
//! [`Defence::describe`] (and, if it reads differently per flood, an arm of
//! [`Flood::describe_defence`]); its arm of [`Installed::install`] (a variant of
//! [`Installed`] if it holds something of its own, with its arms of [`Installed::counters`] and
//! of the drop); and the front end's `--defences` value (crates/fastpath-cli: args.rs,
//! ddos.rs). The phase loop, the tables and the chart take every defence as it comes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use anyhow::anyhow;
use fastpath_testbed::{spawn_in_netns, Testbed};

use super::clients_xdp::classifier_on;
use super::flood::Flood;
use super::service::{PORT_FIRST, PORT_LAST};
use crate::error::{env, kernel, runtime, LabError, LabResult};
use crate::tools;

/// Rules in front of the flood's rule for `fastpath-10k`.
const RULES_IN_FRONT: usize = 10_000;
/// The nftables table `nft` installs in the victim's namespace.
const NFT_TABLE: &str = "fastpath_ddos";

/// SYN flood defences: SYNs per second admitted per source address, and for all sources
/// together (the rest dropped).
const SYN_RATE_PER_SOURCE: u32 = 100;
const SYN_RATE_TOTAL: u32 = 2000;
/// ACK flood defences without state (nft, iptables, fastpath): pure ACKs per second admitted
/// per source address. A heuristic: the service's client address sends a few hundred pure ACKs
/// a second (the connect probe's handshakes and closes; ping-pong replies carry the ACK), the
/// flood's N sources (`--flood-sources`) each offered/N: with 256 sources (3,900/s each at 1M)
/// it drops the flood only above ~256k/s in all; the default 65,536 sources send 15/s each at
/// 1M, and the per-source limit passes the whole flood (the classifier's rule still has its
/// aggregate limit, 64 x this, `rate_total`'s default).
const ACK_RATE_PER_SOURCE: u32 = 1000;

/// A defence of `bench ddos`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Defence {
    /// No filter.
    None,
    /// nftables: a drop (or SYN limit) in a prerouting chain at priority raw.
    Nft,
    /// iptables: a drop (or SYN hashlimit) in the raw table's PREROUTING.
    Iptables,
    /// The fastpath classifier (XDP, native) with the one rule.
    Fastpath,
    /// The fastpath classifier with the rule last behind 10,000 others.
    Fastpath10k,
    /// The fastpath classifier with one rule `action = "syncookie"` for the service's ports
    /// (SYN cookies answered at the driver, out-of-state ACKs dropped; Linux >= 6.9). Its
    /// SYN-ACKs reach the clients through the classifier a run holds on the clients' veth
    /// (`ClientsXdp`): a veth delivers the frames its peer sends with XDP_TX only to a NAPI
    /// that XDP keeps running (crates/fastpath-cli/tests/syncookie.rs).
    FastpathSyncookie,
}

impl Defence {
    /// Its name on the command line and in the JSON ("none", "nft", "fastpath-10k"...).
    pub fn name(self) -> &'static str {
        match self {
            Defence::None => "none",
            Defence::Nft => "nft",
            Defence::Iptables => "iptables",
            Defence::Fastpath => "fastpath",
            Defence::Fastpath10k => "fastpath-10k",
            Defence::FastpathSyncookie => "fastpath-syncookie",
        }
    }
    /// The defence in words.
    pub fn describe(self) -> &'static str {
        match self {
            Defence::None => "no filter",
            Defence::Nft => "nftables raw-table drop (prerouting, priority raw)",
            Defence::Iptables => "iptables raw-table drop (PREROUTING)",
            Defence::Fastpath => "fastpath classifier, one rule (XDP, native)",
            Defence::Fastpath10k => "fastpath classifier, the rule last behind 10,000 others",
            Defence::FastpathSyncookie => "fastpath classifier, one rule action = \"syncookie\" for the service's ports (SYN-ACKs with cookies at the driver, out-of-state ACKs dropped)",
        }
    }
}

impl Flood {
    /// The nftables rules (prerouting, priority raw) of the `nft` defence.
    fn nft_rules(self) -> String {
        match self {
            Flood::Udp => "  udp dport 9 counter drop\n".into(),
            Flood::Syn => format!(
                "  tcp dport {PORT_FIRST}-{PORT_LAST} tcp flags & (syn | ack) == syn meter fastpath_syn {{ ip saddr limit rate over {SYN_RATE_PER_SOURCE}/second }} counter drop\n  tcp dport {PORT_FIRST}-{PORT_LAST} tcp flags & (syn | ack) == syn limit rate over {SYN_RATE_TOTAL}/second counter drop\n"
            ),
            Flood::Ack => format!(
                "  tcp dport {PORT_FIRST}-{PORT_LAST} tcp flags & (fin | syn | rst | psh | ack) == ack meter fastpath_ack {{ ip saddr limit rate over {ACK_RATE_PER_SOURCE}/second }} counter drop\n"
            ),
        }
    }

    /// The iptables rules (`-t raw`, PREROUTING, in order) of the `iptables` defence.
    fn iptables_rules(self) -> Vec<Vec<String>> {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let ports = format!("{PORT_FIRST}:{PORT_LAST}");
        match self {
            Flood::Udp => vec![v(&["-p", "udp", "--dport", "9", "-j", "DROP"])],
            Flood::Syn => {
                // SYNs to the service's ports over a hashlimit: per source, then in all.
                let over = |name: &str, mode: &[&str], rate: u32| {
                    let mut r =
                        v(&["-p", "tcp", "--dport", &ports, "--syn", "-m", "hashlimit", "--hashlimit-name", name]);
                    r.extend(v(mode));
                    r.extend(v(&["--hashlimit-above", &format!("{rate}/sec"), "-j", "DROP"]));
                    r
                };
                vec![
                    over("fastpath_syn_src", &["--hashlimit-mode", "srcip"], SYN_RATE_PER_SOURCE),
                    over("fastpath_syn_all", &[], SYN_RATE_TOTAL),
                ]
            }
            // Pure ACKs (no other flag) to the service's ports over a per-source hashlimit.
            Flood::Ack => vec![v(&[
                "-p",
                "tcp",
                "--dport",
                &ports,
                "--tcp-flags",
                "FIN,SYN,RST,PSH,ACK",
                "ACK",
                "-m",
                "hashlimit",
                "--hashlimit-name",
                "fastpath_ack_src",
                "--hashlimit-mode",
                "srcip",
                "--hashlimit-above",
                &format!("{ACK_RATE_PER_SOURCE}/sec"),
                "-j",
                "DROP",
            ])],
        }
    }

    /// The classifier rule that meets the flood (last in the rule set); the same rule for every
    /// flood under `fastpath-syncookie`.
    fn classifier_rule(self, d: Defence) -> String {
        if d == Defence::FastpathSyncookie {
            return syncookie_rule();
        }
        match self {
            Flood::Udp => "[[rule]]\nname = \"flood\"\nproto = \"udp\"\ndst_port = 9\naction = \"drop\"\n".into(),
            Flood::Syn => format!(
                "[[rule]]\nname = \"syn\"\nproto = \"tcp\"\ndst_port = \"{PORT_FIRST}-{PORT_LAST}\"\ntcp_flags = \"syn,!ack\"\naction = \"pass\"\nrate = {SYN_RATE_PER_SOURCE}\nrate_total = {SYN_RATE_TOTAL}\n"
            ),
            Flood::Ack => format!(
                "[[rule]]\nname = \"ack\"\nproto = \"tcp\"\ndst_port = \"{PORT_FIRST}-{PORT_LAST}\"\ntcp_flags = \"ack,!fin,!syn,!rst,!psh\"\naction = \"pass\"\nrate = {ACK_RATE_PER_SOURCE}\n"
            ),
        }
    }

    /// The defence `d` against this flood, in words (the survivable-rate lines).
    pub fn describe_defence(self, d: Defence) -> String {
        match (self, d) {
            (_, Defence::None) if self != Flood::Udp => "no filter (SYN cookies on)".into(),
            (_, Defence::None) => "no filter".into(),
            (_, Defence::FastpathSyncookie) => d.describe().into(),
            (Flood::Udp, _) => d.describe().into(),
            (Flood::Syn, Defence::Nft) => format!("nftables raw-table SYN limit: {SYN_RATE_PER_SOURCE}/s per source (meter), {SYN_RATE_TOTAL}/s in all"),
            (Flood::Syn, Defence::Iptables) => format!("iptables raw-table SYN limit (hashlimit): {SYN_RATE_PER_SOURCE}/s per source, {SYN_RATE_TOTAL}/s in all"),
            (Flood::Syn, _) => format!("{}: SYNs rate-limited, {SYN_RATE_PER_SOURCE}/s per source, {SYN_RATE_TOTAL}/s in all", d.describe()),
            (Flood::Ack, Defence::Nft) => format!("nftables raw-table pure-ACK limit (stateless): {ACK_RATE_PER_SOURCE}/s per source (meter)"),
            (Flood::Ack, Defence::Iptables) => format!("iptables raw-table pure-ACK limit (stateless, hashlimit): {ACK_RATE_PER_SOURCE}/s per source"),
            (Flood::Ack, _) => format!("{}: pure ACKs rate-limited (stateless), {ACK_RATE_PER_SOURCE}/s per source", d.describe()),
        }
    }
}

/// The rule of `fastpath-syncookie`: SYN cookies for the service's ports.
fn syncookie_rule() -> String {
    format!(
        "[[rule]]\nname = \"syncookie\"\nproto = \"tcp\"\ndst_port = \"{PORT_FIRST}-{PORT_LAST}\"\naction = \"syncookie\"\n"
    )
}

/// A defence installed in the victim's namespace; removed on drop (and with the namespace).
pub(super) enum Installed {
    None,
    Nft {
        ns: String,
    },
    Iptables {
        ns: String,
        rules: Vec<Vec<String>>,
    },
    Classifier {
        done: Arc<AtomicBool>,
        req: mpsc::Sender<mpsc::Sender<(u64, Option<u64>)>>,
        thread: Option<std::thread::JoinHandle<()>>,
    },
}

/// The flood rule's drop counter in the nftables table (`nft -j list table`).
fn nft_count(ns: &str) -> LabResult<u64> {
    tools::nft_packets(ns, NFT_TABLE)
}

/// The flood rule's packet counter in iptables' raw PREROUTING chain.
fn iptables_count(ns: &str) -> LabResult<u64> {
    let out = tools::iptables_raw_listing(ns)?;
    Ok(out
        .lines()
        .filter(|l| {
            // The match is the last word: "udp dpt:9" or "tcp dpts:20000:29999 ... limit: above ...".
            let dports = format!("dpts:{PORT_FIRST}:{PORT_LAST}");
            l.contains("DROP") && l.split_whitespace().any(|w| w == "dpt:9" || w == dports)
        })
        .filter_map(|l| l.split_whitespace().next()?.parse::<u64>().ok())
        .sum())
}

/// The rule set of a classifier defence: the flood's rule alone, or last behind
/// [`RULES_IN_FRONT`] others (source /32s with UDP ports, destination /24s; none matches the
/// flood). Returns the TOML text and the flood rule's index.
fn classifier_rules(in_front: usize, kind: Flood, d: Defence) -> (String, usize) {
    let mut t = fastpath::rules::mixed_rules_toml(in_front, 0);
    t += &kind.classifier_rule(d);
    (t, in_front)
}

impl Installed {
    /// Installs defence `d` against flood `kind` in the victim's namespace of `bed`; on an
    /// error nothing stays installed.
    pub(super) fn install(d: Defence, bed: &Testbed, kind: Flood) -> LabResult<Self> {
        let ns = bed.ns_b().to_string();
        match d {
            Defence::None => Ok(Installed::None),
            Defence::Nft => {
                let script = tools::nft_raw_table(NFT_TABLE, &kind.nft_rules(), true);
                tools::nft_apply(&ns, &script).map_err(|e| match e {
                    tools::ToolError::Start(e) => env(anyhow!("nft (Debian package nftables): {e}")),
                    tools::ToolError::Io(e) => runtime(anyhow!("nft -f -: {e}")),
                    tools::ToolError::Failed(s) => runtime(anyhow!("nft -f - failed: {}", s.trim())),
                })?;
                Ok(Installed::Nft { ns })
            }
            Defence::Iptables => {
                // The rules added so far are held by `inst`: on an error its drop removes them,
                // so nothing is left half-applied.
                let mut inst = Installed::Iptables { ns: ns.clone(), rules: Vec::new() };
                for r in kind.iptables_rules() {
                    tools::iptables_raw_append(&ns, &r)?;
                    if let Installed::Iptables { rules, .. } = &mut inst {
                        rules.push(r);
                    }
                }
                Ok(inst)
            }
            Defence::Fastpath | Defence::Fastpath10k | Defence::FastpathSyncookie => {
                let in_front = if d == Defence::Fastpath10k { RULES_IN_FRONT } else { 0 };
                let (text, index) = classifier_rules(in_front, kind, d);
                let iface = bed.iface_b().to_string();
                let done = Arc::new(AtomicBool::new(false));
                let syncookie = d == Defence::FastpathSyncookie;
                let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
                let (req_tx, req_rx) = mpsc::channel::<mpsc::Sender<(u64, Option<u64>)>>();
                let d2 = done.clone();
                // The classifier is loaded, attached and held by a thread in the victim's
                // namespace; it answers counter requests until `done`.
                let h = spawn_in_netns(&ns, move || {
                    let cls = match classifier_on("ddos rules", &text, &iface) {
                        Ok(c) => {
                            let _ = ready_tx.send(Ok(()));
                            c
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    };
                    while !d2.load(Ordering::Relaxed) {
                        if let Ok(reply) = req_rx.recv_timeout(Duration::from_millis(20)) {
                            let set = cls.active().unwrap_or(fastpath::bpf::SetIndex::Zero);
                            // syncookie: every frame it dropped (bad cookie, invalid, malformed), and the
                            // SYN-ACKs it sent; UDP: the flood rule's drops; SYN and ACK: what
                            // the rate limits dropped.
                            let n = match kind {
                                _ if syncookie => cls
                                    .totals(set)
                                    .map(|t| {
                                        // All its XDP drops: syncookie_ack_bad + syncookie_invalid
                                        // and `malformed` frames (dropped before the rule).
                                        (t.packets("drop"), Some(t.packets("syncookie_synack")))
                                    })
                                    .unwrap_or((0, Some(0))),
                                Flood::Udp => (
                                    cls.rule_counters(set, index + 1)
                                        .ok()
                                        .and_then(|v| v.get(index).map(|c| c.0))
                                        .unwrap_or(0),
                                    None,
                                ),
                                Flood::Syn | Flood::Ack => {
                                    (cls.totals(set).map(|t| t.packets("rate_dropped")).unwrap_or(0), None)
                                }
                            };
                            let _ = reply.send(n);
                        }
                    }
                });
                let r = match ready_rx.recv_timeout(Duration::from_secs(60)) {
                    Ok(Ok(())) => {
                        return Ok(Installed::Classifier {
                            done,
                            req: req_tx,
                            thread: Some(std::thread::spawn(move || {
                                let _ = h.join();
                            })),
                        })
                    }
                    Ok(Err(e)) => Err(kernel(anyhow!("loading the classifier defence: {e}"))),
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        Err(runtime(anyhow!("the classifier defence did not start within 60 s")))
                    }
                    // The thread ended before loading: entering the namespace failed.
                    Err(mpsc::RecvTimeoutError::Disconnected) => match h.join() {
                        Ok(Err(e)) => Err(LabError::from(e)),
                        _ => Err(runtime(anyhow!("the classifier defence's thread ended before loading"))),
                    },
                };
                // Nothing stays attached: the thread sees `done` and detaches what it holds.
                done.store(true, Ordering::Relaxed);
                r
            }
        }
    }

    /// Frames the defence has dropped so far, and SYN-ACKs it has sent (`fastpath-syncookie`
    /// only, else None).
    pub(super) fn counters(&self) -> LabResult<(u64, Option<u64>)> {
        match self {
            Installed::None => Ok((0, None)),
            Installed::Nft { ns } => Ok((nft_count(ns)?, None)),
            Installed::Iptables { ns, .. } => Ok((iptables_count(ns)?, None)),
            Installed::Classifier { req, .. } => {
                let (tx, rx) = mpsc::channel();
                req.send(tx).map_err(|_| runtime(anyhow!("the classifier defence's thread ended")))?;
                rx.recv_timeout(Duration::from_secs(10))
                    .map_err(|_| runtime(anyhow!("the classifier defence did not answer")))
            }
        }
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        match self {
            Installed::None => {}
            Installed::Nft { ns } => {
                tools::nft_delete_table(ns, NFT_TABLE);
            }
            Installed::Iptables { ns, rules } => {
                for r in rules.iter() {
                    tools::iptables_raw_delete(ns, r);
                }
            }
            Installed::Classifier { done, thread, .. } => {
                done.store(true, Ordering::Relaxed);
                if let Some(t) = thread.take() {
                    let _ = t.join();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use fastpath::rules::compile::compile;
    use fastpath::rules::parse_toml;

    use super::super::clients_xdp::clients_xdp_rules;
    use super::super::flood::{DEFAULT_FLOOD_SOURCES, FLOOD_SRC_BASE, MAX_FLOOD_SOURCES};
    use super::*;

    #[test]
    fn every_flood_and_defence_rule_set_compiles() {
        for kind in [Flood::Udp, Flood::Syn, Flood::Ack] {
            for d in [Defence::Fastpath, Defence::Fastpath10k, Defence::FastpathSyncookie] {
                let (text, index) = classifier_rules(0, kind, d);
                let set = parse_toml("t", &text).unwrap_or_else(|e| panic!("{kind:?} {d:?}: {e}"));
                compile("t", &set).unwrap_or_else(|e| panic!("{kind:?} {d:?}: {e}"));
                assert_eq!(index, 0);
                assert_eq!(text.contains("action = \"syncookie\""), d == Defence::FastpathSyncookie, "{kind:?} {d:?}");
            }
        }
        assert!(syncookie_rule().contains(&format!("dst_port = \"{PORT_FIRST}-{PORT_LAST}\"")));
        // The clients' veth drops what the victim sends to every flood flow's source (all of
        // FLOOD_SRC_NET: the first and last of the most sources, the 65,536 default's last)
        // and passes what it sends to the clients.
        let set = parse_toml("t", &clients_xdp_rules()).unwrap();
        compile("t", &set).unwrap();
        let to = |dst: std::net::Ipv4Addr| {
            let b = etherparse::PacketBuilder::ethernet2([2; 6], [4; 6])
                .ipv4(fastpath_testbed::IP4_B.octets(), dst.octets(), 64)
                .tcp(PORT_FIRST, 40000, 1, 64240)
                .syn()
                .ack(2);
            let mut f = Vec::new();
            b.write(&mut f, &[]).unwrap();
            fastpath::rules::reference::classify(&set, &f)
        };
        use fastpath::rules::reference::Verdict;
        for n in [1, 2, DEFAULT_FLOOD_SOURCES, MAX_FLOOD_SOURCES] {
            let a = std::net::Ipv4Addr::from(u32::from(FLOOD_SRC_BASE) + n - 1);
            assert_eq!(to(a), Verdict::Rule(0), "SYN-ACK to flood source {a}");
        }
        assert_eq!(to(fastpath_testbed::IP4_A), Verdict::NoMatch, "the clients' own frames pass");
        assert!(Flood::Ack.nft_rules().contains("== ack meter"));
        assert!(Flood::Ack.iptables_rules()[0].iter().any(|w| w == "FIN,SYN,RST,PSH,ACK"));
        assert_eq!(Flood::Ack.name(), "ack");
        assert_eq!(Defence::FastpathSyncookie.name(), "fastpath-syncookie");
    }
}
