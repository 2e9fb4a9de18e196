//! `fastpath probe`: what this kernel and each interface support, and the path fastpath would
//! pick for each interface, with the reason. Read-only; no program is attached, no socket bound
//! (the kernel feature probes bind test sockets in a private namespace, `fastpath::features`).

use anyhow::anyhow;
use fastpath::features::{Feature, Features};
use fastpath::netdev::napi::{self, NapiSettings};
use fastpath::netdev::xdp_features::{xdp_features, XdpFeatures};
use fastpath::netdev::{link_state, NetDev};
use serde::Serialize;
use serde_json::json;

use crate::args::ProbeArgs;
use crate::common::enter_ns;
use crate::error::{env, CliResult};
use crate::session::L2_OVERHEAD_BYTES;

/// UMEM frame size fastpath uses by default, and what one frame holds for a received packet in
/// copy mode (XDP_PACKET_HEADROOM 256 before it): the MTU above which sockets are multi-buffer.
const FRAME_SIZE: u32 = 4096;
const MAX_SINGLE_BUFFER_MTU: u32 = FRAME_SIZE - fastpath::xsk::XDP_PACKET_HEADROOM - L2_OVERHEAD_BYTES;

/// The capabilities fastpath's commands need (include/uapi/linux/capability.h bit numbers).
const CAPS: [(u32, &str, &str); 6] = [
    (12, "cap_net_admin", "attach XDP programs, create namespaces and veths"),
    (13, "cap_net_raw", "AF_XDP and AF_PACKET sockets"),
    (14, "cap_ipc_lock", "lock UMEM pages beyond RLIMIT_MEMLOCK"),
    (21, "cap_sys_admin", "BPF on kernels < 5.8, bpffs mounts, test beds"),
    (38, "cap_perfmon", "tracepoint programs (-e)"),
    (39, "cap_bpf", "load BPF programs and maps (kernel >= 5.8)"),
];

/// The path fastpath would take on one interface, and why.
#[derive(Debug, Clone, Serialize)]
pub struct PathChoice {
    /// "native" or "skb": where the XDP program runs.
    pub xdp_mode: &'static str,
    /// "zero-copy" or "copy": the AF_XDP data path.
    pub copy_mode: &'static str,
    /// Sockets bound with XDP_USE_SG (the MTU does not fit one UMEM frame).
    pub multi_buffer: bool,
    /// Why, in words.
    pub reason: String,
}

/// What `--xdp-mode auto` and `--copy-mode auto` would obtain on an interface with these
/// driver features, MTU and kernel: the same rules the commands apply (native unless the driver
/// lacks it, zero-copy where the driver offers it, multi-buffer above one UMEM frame).
pub fn choose(xf: Option<&XdpFeatures>, mtu: u32, kernel: &Features) -> PathChoice {
    let mut why = Vec::new();
    let native = match xf {
        Some(x) if x.has("basic") && x.has("redirect") => {
            why.push("the driver runs XDP and XDP_REDIRECT itself (xdp-features basic, redirect)".to_string());
            true
        }
        Some(_) => {
            why.push(
                "the driver lacks native XDP redirect (xdp-features without basic/redirect): generic (skb) XDP".into(),
            );
            false
        }
        None => {
            why.push(
                "this kernel cannot say (no netdev netlink family, < 6.3): native is tried first, skb if refused"
                    .into(),
            );
            true
        }
    };
    let zc = native && xf.is_some_and(|x| x.has("xsk-zerocopy"));
    if native && !zc {
        why.push("no xsk-zerocopy: the kernel copies frames into the UMEM (copy mode)".into());
    }
    if zc {
        why.push("xsk-zerocopy: the driver DMAs into the UMEM".into());
    }
    let mut multi_buffer = false;
    let mut xdp_mode = if native { "native" } else { "skb" };
    if mtu > MAX_SINGLE_BUFFER_MTU {
        if kernel.check(Feature::MultiBuffer).is_err() {
            why.push(format!(
                "MTU {mtu} > {MAX_SINGLE_BUFFER_MTU} needs AF_XDP multi-buffer (kernel >= 6.6), which this kernel lacks: AF_XDP is refused until the MTU is <= {MAX_SINGLE_BUFFER_MTU}"
            ));
        } else {
            multi_buffer = true;
            why.push(format!(
                "MTU {mtu} > {MAX_SINGLE_BUFFER_MTU}: multi-buffer sockets (XDP_USE_SG) behind a frags-aware program"
            ));
            if native && xf.is_some_and(|x| !x.has("rx-sg")) {
                xdp_mode = "skb";
                why.push("the driver has no rx-sg (multi-buffer XDP receive): generic (skb) XDP at this MTU".into());
            }
        }
    }
    PathChoice {
        xdp_mode,
        copy_mode: if zc && xdp_mode == "native" { "zero-copy" } else { "copy" },
        multi_buffer,
        reason: why.join("; "),
    }
}

/// Effective capabilities of this process (CapEff in /proc/self/status), by name.
fn capabilities() -> Vec<(&'static str, bool, &'static str)> {
    let eff = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("CapEff:").map(|v| v.trim().to_string())))
        .and_then(|v| u64::from_str_radix(&v, 16).ok())
        .unwrap_or(0);
    CAPS.iter().map(|&(bit, name, what)| (name, eff & (1u64 << bit) != 0, what)).collect()
}

/// True if a bpf filesystem is mounted at /sys/fs/bpf (/proc/self/mounts).
fn bpffs_mounted() -> bool {
    std::fs::read_to_string("/proc/self/mounts")
        .is_ok_and(|m| m.lines().any(|l| l.split_whitespace().nth(1) == Some("/sys/fs/bpf") && l.contains(" bpf ")))
}

/// How this kernel can take the per-NAPI busy-poll profile ([`NapiSettings::BUSY_POLL`], which
/// `bench pingpong`'s busy-poll modes apply): per NAPI (`napi-set`), with IRQ suspension, or
/// per device through sysfs. `--busy-poll` (bench, gen) applies none of it: it sets the socket
/// options SO_PREFER_BUSY_POLL, SO_BUSY_POLL and SO_BUSY_POLL_BUDGET only.
fn busy_poll_profile(kernel: &Features) -> serde_json::Value {
    let set = kernel.supported(Feature::NapiSet);
    let suspend = kernel.supported(Feature::IrqSuspend);
    let sysfs = napi::sysfs_knobs();
    let b = NapiSettings::BUSY_POLL;
    let (d, g) = (b.defer_hard_irqs.unwrap_or(0), b.gro_flush_timeout_ns.unwrap_or(0));
    let how = if set {
        format!(
            "per NAPI through napi-set (defer-hard-irqs {d}, gro-flush-timeout {g} ns){}; sysfs knobs {}; applied by bench pingpong (--busy-poll sets socket options only)",
            if suspend { ", irq-suspend-timeout available" } else { ", no irq-suspend-timeout (kernel < 6.14)" },
            if sysfs { "present" } else { "absent" }
        )
    } else if sysfs {
        format!("per device through /sys/class/net/DEV/napi_defer_hard_irqs and gro_flush_timeout (defer-hard-irqs {d}, gro-flush-timeout {g} ns); no napi-set (kernel < 6.13); applied by bench pingpong (--busy-poll sets socket options only)")
    } else {
        "none: neither napi-set nor the sysfs knobs (--busy-poll sets socket options only)".to_string()
    };
    json!({"napi_set": set, "irq_suspend_timeout": suspend, "sysfs_knobs": sysfs,
           "defer_hard_irqs": d, "gro_flush_timeout_ns": g, "how": how})
}

/// `fastpath probe`.
pub fn run(p: &ProbeArgs) -> CliResult<()> {
    enter_ns(&p.netns)?;
    let names = if p.ifaces.is_empty() {
        NetDev::all().map_err(crate::error::kernel)?.into_iter().map(|d| d.name).collect()
    } else {
        p.ifaces.clone()
    };
    // Every interface named must exist before anything is printed.
    for i in &names {
        if link_state(i).is_none() {
            return Err(env(anyhow!(
                "-i {i}: no interface of that name in this network namespace (see `ip link`){}",
                crate::hints::iface_elsewhere(i)
            )));
        }
    }
    let kernel = fastpath::features::probe();
    let caps = capabilities();
    let bpffs = bpffs_mounted();
    let mut ifaces = Vec::new();
    for i in &names {
        let s = link_state(i).ok_or_else(|| env(anyhow!("-i {i}: gone while probing")))?;
        let dev = NetDev::by_name(i).map_err(|_| env(anyhow!("-i {i}: gone while probing")))?;
        let (xf, xf_note) = match xdp_features(s.ifindex) {
            Ok(x) => (x, None),
            Err(e) => (None, Some(format!("netdev dev-get: {e}"))),
        };
        let path = choose(xf.as_ref(), s.mtu, kernel);
        let attached = fastpath::bpf::query_xdp(s.ifindex).ok().flatten();
        let napis = match napi::napis(s.ifindex) {
            Ok(v) => json!(v),
            Err(e) => json!(e.to_string()),
        };
        ifaces.push(json!({
            "iface": i, "ifindex": s.ifindex, "driver": dev.driver().unwrap_or_default(), "mtu": s.mtu, "up": s.up,
            "rx_queues": dev.rx_queue_count().ok().flatten(), "tx_queues": dev.tx_queue_count().ok().flatten(),
            "xdp_features": xf, "xdp_features_error": xf_note,
            "xdp_attached": attached.map(|a| json!({"prog_id": a.id, "mode": a.mode})),
            "rx_vlan_offload": dev.rx_vlan_offload().ok(),
            "napi": napis,
            "path": path,
        }));
    }
    let profile = busy_poll_profile(kernel);
    if p.json {
        let caps_json: serde_json::Map<String, serde_json::Value> =
            caps.iter().map(|(n, on, _)| (n.to_string(), json!(on))).collect();
        println!(
            "{}",
            json!({"type": "probe", "kernel": kernel.kernel, "features": kernel.features,
                   "xdp_tracepoints": kernel.xdp_tracepoints,
                   "bpffs": {"path": "/sys/fs/bpf", "mounted": bpffs}, "privileges": caps_json,
                   "busy_poll_profile": profile,
                   "interfaces": ifaces})
        );
        return Ok(());
    }
    print!("{}", kernel.table());
    println!(
        "xdp tracepoints          {}",
        if kernel.xdp_tracepoints.is_empty() { "none".into() } else { kernel.xdp_tracepoints.join(", ") }
    );
    println!(
        "bpffs                    {}",
        if bpffs { "mounted at /sys/fs/bpf" } else { "not mounted (mount -t bpf bpf /sys/fs/bpf to pin maps)" }
    );
    println!("busy-poll profile        {}", profile["how"].as_str().unwrap_or(""));
    for (name, on, what) in &caps {
        println!("{name:<24} {:<4} {what}", if *on { "yes" } else { "no" });
    }
    for v in &ifaces {
        let xf = match &v["xdp_features"] {
            serde_json::Value::Null => "unknown (kernel < 6.3)".to_string(),
            x => {
                let list: Vec<&str> =
                    x["xdp"].as_array().map(|a| a.iter().filter_map(|s| s.as_str()).collect()).unwrap_or_default();
                let zc = x["zc_max_segs"].as_u64().map(|n| format!(", zero-copy max segments {n}")).unwrap_or_default();
                if list.is_empty() {
                    format!("none{zc}")
                } else {
                    format!("{}{zc}", list.join(" "))
                }
            }
        };
        println!(
            "\n{} (ifindex {}, driver {}, MTU {}, {}, {} rx / {} tx queues)",
            v["iface"].as_str().unwrap_or(""),
            v["ifindex"],
            v["driver"].as_str().unwrap_or(""),
            v["mtu"],
            if v["up"] == true { "up" } else { "down" },
            v["rx_queues"].as_u64().map(|n| n.to_string()).unwrap_or("?".into()),
            v["tx_queues"].as_u64().map(|n| n.to_string()).unwrap_or("?".into()),
        );
        println!("  xdp features   {xf}");
        let names = |key: &str| -> Option<String> {
            let list: Vec<&str> = v["xdp_features"][key].as_array()?.iter().filter_map(|s| s.as_str()).collect();
            Some(if list.is_empty() { "none".to_string() } else { list.join(" ") })
        };
        if let Some(rx) = names("rx_metadata") {
            println!("  rx metadata    {rx} (the driver's XDP metadata kfuncs: bench rxdrop --rx-meta)");
        }
        if let Some(tx) = names("xsk") {
            println!("  xsk tx meta    {tx} (AF_XDP TX metadata the driver implements)");
        }
        match &v["napi"] {
            serde_json::Value::Array(list) if list.is_empty() => println!("  napi           none"),
            serde_json::Value::Array(list) => {
                for n in list {
                    let opt = |k: &str| n[k].as_u64().map_or("-".to_string(), |x| x.to_string());
                    println!(
                        "  napi {:<9} defer-hard-irqs {}  gro-flush-timeout {} ns  irq-suspend-timeout {} ns{}",
                        n["id"],
                        opt("defer_hard_irqs"),
                        opt("gro_flush_timeout_ns"),
                        opt("irq_suspend_timeout_ns"),
                        n["pid"].as_u64().map(|p| format!("  thread pid {p}")).unwrap_or_default()
                    );
                }
            }
            other => println!("  napi           {}", other.as_str().unwrap_or("")),
        }
        if let serde_json::Value::Object(a) = &v["xdp_attached"] {
            println!("  attached       XDP program id {} ({})", a["prog_id"], a["mode"].as_str().unwrap_or(""));
        }
        let p = &v["path"];
        println!(
            "  fastpath path  AF_XDP {} mode, {} XDP{}",
            p["copy_mode"].as_str().unwrap_or(""),
            p["xdp_mode"].as_str().unwrap_or(""),
            if p["multi_buffer"] == true { ", multi-buffer" } else { "" }
        );
        println!("  because        {}", p["reason"].as_str().unwrap_or(""));
        if v["rx_vlan_offload"] == true {
            println!("  rx VLAN offload on: the outer tag is stripped before XDP, so `vlan` rules do not see it (`ethtool -K IF rxvlan off`)");
        }
    }
    Ok(())
}
