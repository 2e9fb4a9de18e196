//! What `bench ddos` is asked for ([`DdosOptions`]) and its test bed ([`DdosBed`], [`prepare`]):
//! the checks before any test bed exists, the bed's set-up (no qdisc and no TSO on the sending
//! veth, the receiving NAPI threaded on the service's CPU at SCHED_FIFO), and the run in words
//! (the model lines, the command that reproduces it). The phases are in `phase.rs`, the tables
//! and the chart in `report.rs`.

use anyhow::anyhow;
use fastpath_testbed::{Testbed, TestbedConfig};
use fastpath_tools::stats::thousands;

use super::clients_xdp::ClientsXdp;
use super::defence::{Defence, Installed};
use super::flood::{flood_spread, Flood, FloodRate, Model, FLOOD_SRC_BASE, FLOOD_SRC_NET, MAX_FLOOD_SOURCES};
use super::service::{start_server, PORT_FIRST, SERVICE_CPU};
use crate::coalesce::{self, Coalescer};
use crate::error::{env, LabError, LabResult};
use crate::tools;

/// SCHED_FIFO priority of the receiving NAPI thread (`chrt -f 50`).
const NAPI_FIFO_PRIORITY: i32 = 50;

/// What `bench ddos` is asked for (the front end has checked every value).
#[derive(Debug, Clone)]
pub struct DdosOptions {
    /// The flood.
    pub flood: Flood,
    /// The defences, each once, in order.
    pub defences: Vec<Defence>,
    /// The offered flood rates, each once, in order.
    pub rates: Vec<FloodRate>,
    /// The attacker's CPUs, one flood thread each (none of them [`SERVICE_CPU`]).
    pub flood_cpus: Vec<usize>,
    /// Seconds per phase; 0 = set up and tear down ([`DdosBed::smoke`]).
    pub duration_s: f64,
    /// The flood models, each a row set, in order (each once).
    pub models: Vec<Model>,
    /// The coalesced model's `rx-usecs` (1..=[`coalesce::MAX_RX_USECS`]).
    pub rx_usecs: u32,
    /// Spoofed source addresses of the flood, 1..=[`MAX_FLOOD_SOURCES`] (10.128.0.0 up;
    /// [`DEFAULT_FLOOD_SOURCES`](super::DEFAULT_FLOOD_SOURCES) by default, 256 for the single /24
    /// of earlier runs).
    pub flood_sources: u32,
}

/// The test bed of `bench ddos`, ready for its phases; removed on drop.
pub struct DdosBed {
    pub(super) bed: Testbed,
    pub(super) napi_pids: Vec<i32>,
    pub(super) flood: Flood,
    pub(super) defences: Vec<Defence>,
    pub(super) rates: Vec<FloodRate>,
    pub(super) flood_cpus: Vec<usize>,
    pub(super) secs: f64,
    pub(super) notes: Vec<String>,
    pub(super) models: Vec<Model>,
    pub(super) rx_usecs: u32,
    pub(super) flood_sources: u32,
}

/// Checks the programs `bench ddos` drives (sockperf; nft and iptables when those defences are
/// asked for: without iptables its rows are left out, with a note) and builds its test bed:
/// no qdisc and no TSO on the sending veth, the receiving NAPI threaded on [`SERVICE_CPU`] at
/// SCHED_FIFO.
///
/// Needs root: creates network namespaces, runs ethtool in one.
///
/// # Errors
///
/// [`LabError::Usage`] for no model, a model twice, rx-usecs outside 1..=1000 with the
/// coalesced model, or flood sources outside 1..=[`MAX_FLOOD_SOURCES`]; [`LabError::Unsupported`] for the coalesced model on a kernel without the
/// netdev family's `napi-set` (Linux < 6.13), before any test bed exists;
/// [`LabError::Environment`] when sockperf (or nft, with that defence) is missing or ethtool
/// cannot be started, [`LabError::Testbed`] when the test bed cannot be made,
/// [`LabError::Runtime`] when ethtool fails.
pub fn prepare(o: &DdosOptions) -> LabResult<DdosBed> {
    // The models: at least one, each once; the coalesced one needs a period and, before any
    // test bed exists (rather than after the per-frame rows ran), the kernel's napi-set.
    let names = || o.models.iter().map(|m| m.name()).collect::<Vec<_>>().join(",");
    if o.models.is_empty() || (1..o.models.len()).any(|i| o.models[..i].contains(&o.models[i])) {
        return Err(crate::error::usage(anyhow!(
            "models [{}] are not accepted: one or both of per-frame, coalesced, each once",
            names()
        )));
    }
    if !(1..=MAX_FLOOD_SOURCES).contains(&o.flood_sources) {
        return Err(crate::error::usage(anyhow!(
            "flood sources {} is not accepted: 1..={MAX_FLOOD_SOURCES} spoofed addresses ({FLOOD_SRC_NET})",
            o.flood_sources
        )));
    }
    if o.models.contains(&Model::Coalesced) {
        if !(1..=1000).contains(&o.rx_usecs) {
            return Err(crate::error::usage(anyhow!("rx-usecs {} is not accepted: 1..=1000 microseconds", o.rx_usecs)));
        }
        fastpath::features::check(fastpath::features::Feature::NapiSet).map_err(|u| {
            LabError::Unsupported(anyhow!("the coalesced flood model needs {u}: use --model per-frame"))
        })?;
    }
    if !tools::installed("sockperf") {
        return Err(env(anyhow!("bench ddos needs sockperf (apt-get install sockperf)")));
    }
    let mut notes = Vec::new();
    let mut defences = o.defences.clone();
    if defences.contains(&Defence::Nft) && !tools::installed("nft") {
        return Err(env(anyhow!("--defences nft needs nft (apt-get install nftables)")));
    }
    if defences.contains(&Defence::Iptables) && !tools::installed("iptables") {
        defences.retain(|d| *d != Defence::Iptables);
        notes.push(
            "iptables: the command is not installed (Debian package iptables); its rows are left out".to_string(),
        );
    }
    // No qdisc on the sender: when the victim's receive ring is full the service's packets are
    // lost with the flood's, as at a NIC's ring, instead of waiting in a qdisc for a free slot
    // (which would give them priority over the flood).
    let bed = Testbed::up(&TestbedConfig { name: None, queues: 1, sender_qdisc: false, ipv6: false })?;
    // Without TSO on the sending veth every TCP skb is eligible for the receiving veth's NAPI
    // (veth_skb_is_eligible_for_gro, drivers/net/veth.c): the service's packets then always
    // travel the same ring and NAPI as the flood, with or without an XDP program attached, as
    // at a NIC. With TSO they would bypass NAPI (netif_rx) unless a program is attached.
    tools::ns_run(
        bed.ns_a(),
        "ethtool",
        &["-K", bed.iface_a(), "tso", "off"],
        "ethtool -K tso off (the sending veth)",
    )?;
    bed.set_rx_napi_cpu(Some(SERVICE_CPU))?;
    let napi_pids = bed.set_rx_napi_fifo(NAPI_FIFO_PRIORITY)?;
    // Whole seconds: sockperf's -t takes whole seconds.
    let secs = if o.duration_s > 0.0 { o.duration_s.round().max(1.0) } else { 1.0 };
    Ok(DdosBed {
        bed,
        napi_pids,
        flood: o.flood,
        defences,
        rates: o.rates.clone(),
        flood_cpus: o.flood_cpus.clone(),
        secs,
        notes,
        models: o.models.clone(),
        rx_usecs: o.rx_usecs,
        flood_sources: o.flood_sources,
    })
}

impl DdosBed {
    /// The defences measured (those asked for, less iptables when it is not installed).
    pub fn defences(&self) -> &[Defence] {
        &self.defences
    }

    /// Notes for the reader (a defence left out).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Seconds per phase: whole seconds, at least 1.
    pub fn secs(&self) -> f64 {
        self.secs
    }

    /// Spoofed source addresses of the flood (`--flood-sources`).
    pub fn flood_sources(&self) -> u32 {
        self.flood_sources
    }

    /// The test bed's name.
    pub fn testbed_name(&self) -> &str {
        self.bed.name()
    }

    /// Sets everything up once and tears it down: the service's server, every defence.
    ///
    /// # Errors
    ///
    /// As [`DdosBed::run`]'s setup: sockperf, nft or iptables failed, the classifier could
    /// not be loaded.
    pub fn smoke(&self) -> LabResult<()> {
        drop(start_server(&self.bed, PORT_FIRST)?);
        let _clients = if self.clients_xdp() { Some(ClientsXdp::start(&self.bed)?) } else { None };
        for d in &self.defences {
            drop(Installed::install(*d, &self.bed, self.flood)?);
        }
        if self.models.contains(&Model::Coalesced) {
            self.coalescer()?.stop()?;
        }
        Ok(())
    }

    /// The model of the run in one line (see the module's documentation).
    pub fn model(&self) -> String {
        format!(
            "model: a NIC queue whose interrupt lands on the service's CPU: the receiving veth's NAPI threaded, pinned to CPU {SERVICE_CPU} with SCHED_FIFO {NAPI_FIFO_PRIORITY}; the service's packets share its ring and NAPI with the flood (no TSO, no qdisc on the sending veth); service and clients on CPU {SERVICE_CPU}; attacker (xdp-live, paced per frame, {}) on CPU {}",
            match self.flood {
                Flood::Udp => format!("64-byte UDP to port 9 {}", self.sources_text()),
                Flood::Syn => format!("TCP SYNs to the service's port {}, SYN cookies on", self.sources_text()),
                Flood::Ack => format!(
                    "out-of-state TCP ACKs (fixed sequence and acknowledgement numbers) to the service's port {}, SYN cookies on",
                    self.sources_text()
                ),
            },
            self.flood_cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")
        ) + &if self.clients_xdp() {
            format!("; in every phase an XDP program on the clients' veth (ns a) drops what the victim sends to the spoofed sources ({FLOOD_SRC_NET}: SYN-ACKs, RSTs), as a NIC's would leave on the wire, instead of ns a's stack dropping them on the victim's CPU; it also lets the classifier's XDP_TX SYN-ACKs arrive (a veth delivers them only to a peer running XDP)")
        } else {
            String::new()
        }
    }

    /// "from N sources (FIRST..LAST), F flows (each source 1/N of the flood)".
    fn sources_text(&self) -> String {
        let flows = flood_spread(self.flood_sources).map_or(0, |s| s.flows().n());
        let first = FLOOD_SRC_BASE;
        let last = std::net::Ipv4Addr::from(u32::from(first) + self.flood_sources - 1);
        format!(
            "from {} spoofed sources ({first}..{last}, --flood-sources), {} flows: each source 1/{} of the flood",
            thousands(u64::from(self.flood_sources)),
            thousands(u64::from(flows)),
            thousands(u64::from(self.flood_sources))
        )
    }

    /// Whether the run holds [`ClientsXdp`] in every phase: TCP floods (the victim answers
    /// them) and `fastpath-syncookie` (its XDP_TX SYN-ACKs reach a veth peer only through XDP).
    pub(super) fn clients_xdp(&self) -> bool {
        self.flood != Flood::Udp || self.defences.contains(&Defence::FastpathSyncookie)
    }

    /// The flood models measured, in order.
    pub fn models(&self) -> &[Model] {
        &self.models
    }

    /// The coalesced model's `rx-usecs`.
    pub fn rx_usecs(&self) -> u32 {
        self.rx_usecs
    }

    /// One flood model in one line: what reaches the receiving NAPI and what the service's own
    /// packets experience.
    pub fn model_line(&self, m: Model) -> String {
        match m {
            Model::PerFrame => "per-frame model: no interrupt coalescing: every frame may wake the receiving NAPI thread (it polls what is there and sleeps again); the service's packets wait for no timer".into(),
            Model::Coalesced => {
                let on = coalesce::COALESCE_ON_PPS;
                format!(
                    "coalesced model: adaptive interrupt coalescing as a NIC with rx-usecs {u} (Intel X710/i40e's default: 50 us, adaptive): a controller samples the victim's received frames every {ms} ms and from {on_k}k frames/s (back below {off_k}k) sets its NAPI's defer-hard-irqs {d} and gro-flush-timeout {u} us (netdev napi-set), so under load it polls at most every {u} us, a batch per poll; below that no deferral, every frame wakes it. Under load the service's packets wait up to {u} us with the flood's batch, as at a NIC; the service alone (below {on_k}k frames/s) waits for no timer. The flood leaves the generator paced per frame (the wire's arrivals; the batching is the receiver's); only the victim's queue coalesces (the clients' veth does not)",
                    u = self.rx_usecs,
                    ms = coalesce::SAMPLE_MS,
                    on_k = on / 1e3,
                    off_k = on / 2e3,
                    d = coalesce::DEFER_HARD_IRQS,
                )
            }
        }
    }

    /// The command line that reproduces the run.
    pub fn command(&self) -> String {
        let models = if self.models.len() == 2 { "both" } else { self.models[0].name() };
        let mut c = format!(
            "fastpath bench ddos --flood {} --duration {} --flood-rates {} --defences {} --model {models}",
            self.flood.name(),
            self.secs,
            self.rates.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(","),
            self.defences.iter().map(|d| d.name()).collect::<Vec<_>>().join(",")
        );
        c += &format!(" --flood-sources {}", self.flood_sources);
        if self.models.contains(&Model::Coalesced) {
            c += &format!(" --rx-usecs {}", self.rx_usecs);
        }
        c
    }

    /// The coalesced model's controller on the victim's veth, on the attacker's first CPU (not
    /// the service's).
    pub(super) fn coalescer(&self) -> LabResult<Coalescer> {
        Coalescer::start(self.bed.ns_b(), self.bed.iface_b(), self.rx_usecs, self.flood_cpus.first().copied())
    }
}
