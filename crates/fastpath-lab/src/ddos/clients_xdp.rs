//! The classifier on the clients' veth ([`ClientsXdp`]): the wire beyond the clients, where the
//! victim's answers to the spoofed sources end; and [`classifier_on`], which it shares with the
//! classifier defences.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use anyhow::anyhow;
use fastpath::bpf::{Classifier, XdpMode};
use fastpath::rules::compile::compile;
use fastpath::rules::parse_toml;
use fastpath_testbed::{spawn_in_netns, Testbed};

use super::flood::FLOOD_SRC_NET;
use crate::error::{kernel, runtime, LabError, LabResult};

/// The rules of the classifier on the clients' veth ([`ClientsXdp`]):
/// every frame to the flood's spoofed sources (FLOOD_SRC_NET: the victim's SYN-ACKs) ends
/// there, as on a wire; the rest passes.
pub(super) fn clients_xdp_rules() -> String {
    format!("default = \"pass\"\n[[rule]]\ndst = \"{FLOOD_SRC_NET}\"\naction = \"drop\"\n")
}

/// Compiles the rule set `text` (named `what` in errors), loads a classifier with it and
/// attaches it (native XDP) to `iface` in the calling thread's namespace; dropping the returned
/// classifier detaches it.
pub(super) fn classifier_on(what: &str, text: &str, iface: &str) -> Result<Classifier, String> {
    let set = parse_toml(what, text).map_err(|e| e.to_string())?;
    let c = compile(what, &set).map_err(|e| e.to_string())?;
    let dev = fastpath::netdev::Iface::resolve(iface).map_err(|e| e.to_string())?;
    let cls = Classifier::load().map_err(|e| format!("{e:#}"))?;
    cls.swap_in(&c).map_err(|e| format!("{e:#}"))?;
    let a = cls.attach(&dev, fastpath::bpf::AttachOpts::mode(Some(XdpMode::Native))).map_err(|e| format!("{e:#}"))?;
    Ok(a.prog)
}

/// The classifier on the clients' veth in ns a (native XDP), held by a thread for as long as
/// this lives and detached on drop: it drops frames to the flood's spoofed sources
/// ([`clients_xdp_rules`]) and passes the rest. The drop is the wire: the victim's answers to
/// a TCP flood (the kernel's SYN-ACKs and RSTs, the classifier's XDP_TX SYN-ACKs) leave a
/// NIC's host, while a veth's are received on the victim's CPU (the clients' veth NAPI or
/// backlog is scheduled there by the sender) and would go up ns a's stack to be dropped as not
/// local; an XDP drop leaves that CPU only the poll. A veth also delivers the frames its peer
/// sends with XDP_TX only to a NAPI that XDP keeps running (drivers/net/veth.c: veth_xdp_xmit
/// queues them on the peer's xdp_ring, polled by its NAPI, which exists only with XDP or GRO),
/// so the SYN-ACKs `action = "syncookie"` sends need it.
pub(super) struct ClientsXdp {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Result<(), fastpath_testbed::TestbedError>>>,
}

impl ClientsXdp {
    /// Attaches it; on an error nothing stays attached.
    pub(super) fn start(bed: &Testbed) -> LabResult<Self> {
        let iface = bed.iface_a().to_string();
        let done = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel::<Result<(), String>>();
        let d2 = done.clone();
        let h =
            spawn_in_netns(bed.ns_a(), move || match classifier_on("clients' veth", &clients_xdp_rules(), &iface) {
                Ok(_held) => {
                    let _ = tx.send(Ok(()));
                    while !d2.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                }
            });
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(Ok(())) => Ok(ClientsXdp { done, thread: Some(h) }),
            Ok(Err(e)) => Err(kernel(anyhow!(
                "loading the classifier on the clients' veth (TCP floods and fastpath-syncookie need it): {e}"
            ))),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                done.store(true, Ordering::Relaxed);
                Err(runtime(anyhow!("the classifier on the clients' veth did not start within 60 s")))
            }
            // The thread ended before loading: entering the namespace failed.
            Err(mpsc::RecvTimeoutError::Disconnected) => match h.join() {
                Ok(Err(e)) => Err(LabError::from(e)),
                _ => Err(runtime(anyhow!("the classifier thread of the clients' veth ended before loading"))),
            },
        }
    }
}

impl Drop for ClientsXdp {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
