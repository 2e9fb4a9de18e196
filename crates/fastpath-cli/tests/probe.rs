//! `fastpath probe`: what it says of the kernel and of each interface, and that the path it
//! predicts is the path `bench rxdrop` then obtains (modes read back from the kernel).

mod common;

use common::*;
use fastpath_testbed::{Testbed, TestbedConfig};
use serde_json::Value;

fn probe(ns: &str, ifaces: &[&str]) -> Value {
    let mut args = vec!["probe", "--netns", ns, "--json"];
    for i in ifaces {
        args.extend(["-i", i]);
    }
    let o = run(&args);
    assert!(o.status.success(), "probe: {}", stderr(&o));
    last_json(&o)
}

/// What rxdrop obtains on `iface` with every mode left to auto: (xdp_mode, copy_mode,
/// multi_buffer) as read back after attach and bind.
fn obtained(ns: &str, iface: &str) -> (Value, Value, Value) {
    let o = run(&["bench", "rxdrop", "--netns", ns, "-i", iface, "--duration", "0", "--json"]);
    assert!(o.status.success(), "rxdrop on {iface}: {}", stderr(&o));
    let p = last_json(&o)["path"].clone();
    (p["xdp_mode"].clone(), p["copy_mode"].clone(), p["multi_buffer"].clone())
}

fn predicted(p: &Value) -> (Value, Value, Value) {
    (p["xdp_mode"].clone(), p["copy_mode"].clone(), p["multi_buffer"].clone())
}

/// A veth: the driver's XDP features as the netdev family gives them (native XDP, redirect,
/// multi-buffer receive, no zero-copy), and the predicted path (native, copy; multi-buffer at
/// MTU 9000) is what rxdrop obtains. Loopback has no native XDP: skb mode, predicted and
/// obtained. The kernel part lists every feature with its minimum kernel, the privileges and
/// bpffs. An interface that does not exist: one line, exit 3.
#[test]
fn probe_predicts_the_path_rxdrop_obtains() {
    if !privileged("probe_predicts_the_path_rxdrop_obtains") {
        return;
    }
    let _s = serial();
    let bed = Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("test bed");
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let v = probe(ns, &[i]);
    assert_json_keys("probe", &v);
    let uname = std::process::Command::new("uname").arg("-r").output().unwrap();
    assert_eq!(v["kernel"], String::from_utf8_lossy(&uname.stdout).trim(), "{v}");
    let keys: Vec<&str> = v["features"].as_array().unwrap().iter().filter_map(|f| f["feature"].as_str()).collect();
    for k in ["need_wakeup", "busy_poll", "shared_umem", "multi_buffer", "live_frames", "xdp_tracepoints"] {
        assert!(keys.contains(&k), "feature {k} missing: {keys:?}");
    }
    assert_eq!(v["privileges"]["cap_net_admin"], true, "the tests run as root: {v}");
    assert!(v["bpffs"]["mounted"].is_boolean(), "{v}");
    let ifs = v["interfaces"].as_array().unwrap();
    assert_eq!(ifs.len(), 1, "only the interface asked for: {v}");
    let veth = &ifs[0];
    assert_eq!(veth["driver"], "veth");
    let xdp: Vec<&str> = veth["xdp_features"]["xdp"].as_array().unwrap().iter().filter_map(|s| s.as_str()).collect();
    for f in ["basic", "redirect", "rx-sg"] {
        assert!(xdp.contains(&f), "veth advertises {f}: {xdp:?}");
    }
    assert!(!xdp.contains(&"xsk-zerocopy"), "veth has no AF_XDP zero-copy: {xdp:?}");
    assert_eq!(predicted(&veth["path"]), obtained(ns, i), "probe's path vs rxdrop's: {veth}");
    assert_eq!(veth["path"]["copy_mode"], "copy");
    assert!(veth["path"]["reason"].as_str().unwrap().contains("xsk-zerocopy"), "{veth}");
    bed.set_mtu(9000).expect("mtu");
    let veth = probe(ns, &[i])["interfaces"][0].clone();
    assert_eq!(veth["path"]["multi_buffer"], true, "{veth}");
    assert_eq!(predicted(&veth["path"]), obtained(ns, i), "at MTU 9000: {veth}");
    // Every interface of the namespace by default: lo and the veth.
    let all = probe(ns, &[]);
    let lo = all["interfaces"].as_array().unwrap().iter().find(|x| x["iface"] == "lo").expect("lo listed").clone();
    assert_eq!(lo["path"]["xdp_mode"], "skb", "{lo}");
    assert_eq!(predicted(&lo["path"]), obtained(ns, "lo"), "lo: {lo}");
    let o = run(&["probe", "--netns", ns, "-i", "fpnosuch0"]);
    assert_one_line_refusal("no such interface", &o, 3, &["fpnosuch0", "no interface"]);
}

/// Where the NIC strips VLAN tags before XDP (rx VLAN offload), `vlan` rules cannot see them:
/// `probe` reports the offload as ethtool does (on by default on a veth, off after `ethtool -K
/// rxvlan off`), and `filter check` and `filter load` with a `vlan` rule say what that means.
#[test]
fn vlan_rules_name_the_rx_vlan_offload() {
    if !privileged("vlan_rules_name_the_rx_vlan_offload") {
        return;
    }
    let bed = Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("test bed");
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let ethtool_k = || {
        let o = fastpath_testbed::ns_command(ns, "ethtool").args(["-k", i]).output().expect("ethtool");
        String::from_utf8_lossy(&o.stdout).contains("rx-vlan-offload: on")
    };
    let on = probe(ns, &[i])["interfaces"][0]["rx_vlan_offload"].clone();
    assert_eq!(on, Value::Bool(ethtool_k()), "probe agrees with ethtool -k");
    assert_eq!(on, true, "a veth starts with rx VLAN offload on");
    let o = run(&["probe", "--netns", ns, "-i", i]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("rx VLAN offload on"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let o = run(&["filter", "load", "--netns", ns, "-i", i, "--rule", "vlan=100,action=drop", "--duration", "0"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains(&format!("{i} has rx VLAN offload on")), "filter load says it: {}", stderr(&o));
    let o = run(&["filter", "check", "--rule", "vlan=100,action=drop"]);
    assert!(o.status.success() && stderr(&o).contains("rxvlan off"), "filter check says it: {}", stderr(&o));
    let o = run(&["filter", "check", "--rule", "proto=udp,action=drop"]);
    assert!(!stderr(&o).contains("rxvlan"), "no note without vlan rules: {}", stderr(&o));

    let o = fastpath_testbed::ns_command(ns, "ethtool").args(["-K", i, "rxvlan", "off"]).output().unwrap();
    assert!(o.status.success(), "ethtool -K rxvlan off: {}", String::from_utf8_lossy(&o.stderr));
    let off = probe(ns, &[i])["interfaces"][0]["rx_vlan_offload"].clone();
    assert_eq!(off, false, "after ethtool -K rxvlan off");
    assert!(!ethtool_k());
    let o = run(&["filter", "load", "--netns", ns, "-i", i, "--rule", "vlan=100,action=drop", "--duration", "0"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("rx VLAN offload on"), "nothing to say with the offload off: {}", stderr(&o));
}
