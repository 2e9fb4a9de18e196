//! `--metrics ADDR:PORT`: the Prometheus endpoint of the long-running commands, scraped while
//! they run, its numbers checked against the command's own summary, and its text validated by
//! `promtool check metrics` (Debian package prometheus, installed by `make deps`).

mod common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::*;
use fastpath_testbed::{Testbed, TestbedConfig};

/// A local port free at the time of the call.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// GET /metrics: (status line, body).
fn scrape(port: u16) -> (String, String) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect to the metrics endpoint");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).unwrap();
    let (head, body) = r.split_once("\r\n\r\n").expect("an HTTP answer");
    (head.lines().next().unwrap_or("").to_string(), body.to_string())
}

/// The value of the sample of `name` whose labels include every `k="v"` of `labels` (comma
/// separated, any order).
fn sample(body: &str, name: &str, labels: &str) -> Option<u64> {
    let want: Vec<&str> = labels.split(',').collect();
    body.lines().find_map(|l| {
        let rest = l.strip_prefix(name)?.strip_prefix('{')?;
        let (ls, v) = rest.split_once("} ")?;
        let have: Vec<&str> = ls.split(',').collect();
        want.iter().all(|w| have.contains(w)).then(|| v.trim().parse::<f64>().ok().map(|v| v as u64))?
    })
}

/// `promtool check metrics` on `body`: it must pass (exit 0, no lint problem). The tool missing
/// fails the test: CI installs it.
fn promtool_ok(body: &str) {
    let mut c = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool (apt-get install prometheus; `make deps` does)");
    c.stdin.take().unwrap().write_all(body.as_bytes()).unwrap();
    let o = c.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "promtool check metrics: {}{}\n{body}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// rxdrop with --metrics under 20,000 frames: scraped while it runs, the endpoint's
/// rx_packets equals what rxdrop's summary then reports; XDP_STATISTICS are there per port;
/// promtool accepts the text. A port already in use, `bench ddos --metrics` and
/// `filter load --detach --metrics` are refused in one line.
#[test]
fn bench_metrics_match_the_summary_and_pass_promtool() {
    if !privileged("bench_metrics_match_the_summary_and_pass_promtool") {
        return;
    }
    let _s = serial();
    let bed = Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("test bed");
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let rx =
        Running::start(&["bench", "rxdrop", "--netns", ns, "-i", i, "--json", "--duration", "60", "--metrics", &addr]);
    // The first publish follows the ready line within the monitor's first 100 ms.
    let label = format!("port=\"{i}:q0\"");
    let t = Instant::now();
    let (status, body) = loop {
        let (status, body) = scrape(port);
        if sample(&body, "fastpath_rx_packets_total", &label).is_some() || t.elapsed() > Duration::from_secs(3) {
            break (status, body);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.contains("200"), "{status}");
    assert_eq!(sample(&body, "fastpath_rx_packets_total", &label), Some(0), "{body}");
    let g = gen_xsk(&bed, &["--count", "20000", "--rate", "100000", "--json", "--duration", "30"]);
    assert!(g.status.success(), "{}", stderr(&g));
    wait_rx_settled(ns, i);
    // Published at most every 100 ms.
    std::thread::sleep(Duration::from_millis(300));
    let (_, body) = scrape(port);
    promtool_ok(&body);
    let scraped = sample(&body, "fastpath_rx_packets_total", &label).expect("rx_packets");
    assert!(sample(&body, "fastpath_rx_bytes_total", &label).is_some_and(|b| b == scraped * 64), "{body}");
    assert!(sample(&body, "fastpath_xsk_rx_dropped_frames_total", &label).is_some(), "{body}");
    assert!(sample(&body, "fastpath_xsk_rx_fill_ring_empty_descs_total", &label).is_some(), "{body}");
    let (s, st) = rx.terminate();
    assert!(st.success());
    assert_eq!(scraped, n(&s["totals"]["rx_packets"]), "the endpoint and the summary agree");
    assert!(scraped >= 20_000, "{scraped}");
    // The endpoint goes with the command.
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err(), "still listening after exit");

    // Refusals.
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = busy.local_addr().unwrap().to_string();
    let o = run(&["bench", "rxdrop", "--netns", ns, "-i", i, "--duration", "1", "--metrics", &taken]);
    assert_one_line_refusal("port in use", &o, 3, &["--metrics", &taken]);
    assert!(attached(ns, i).is_none(), "nothing attached after the refusal");
    let o = run(&["bench", "ddos", "--duration", "1", "--metrics", &addr]);
    assert_one_line_refusal("ddos", &o, 2, &["--metrics", "bench ddos"]);
    let o = run(&[
        "filter",
        "load",
        "--netns",
        ns,
        "-i",
        i,
        "--rule",
        "proto=udp,action=drop",
        "--detach",
        "--metrics",
        &addr,
    ]);
    assert_one_line_refusal("detach", &o, 2, &["--metrics", "--detach"]);
    assert!(attached(ns, i).is_none());
}

/// The forwarder's and the classifier's metrics: per port and reason for `fwd`, per rule for
/// `filter load`, equal to their summaries after the traffic; promtool accepts both.
#[test]
fn fwd_and_filter_metrics_match_their_summaries() {
    if !privileged("fwd_and_filter_metrics_match_their_summaries") {
        return;
    }
    let _s = serial();
    let bed = Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("test bed");
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    // The classifier: one rule dropping UDP to port 9.
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let f = Running::start(&[
        "filter",
        "load",
        "--netns",
        ns,
        "-i",
        i,
        "--rule",
        "proto=udp,dst_port=9,action=drop",
        "--json",
        "--duration",
        "60",
        "--metrics",
        &addr,
    ]);
    let g = gen_xsk(&bed, &["--count", "5000", "--rate", "50000", "--json", "--duration", "30"]);
    assert!(g.status.success(), "{}", stderr(&g));
    wait_rx_settled(ns, i);
    std::thread::sleep(Duration::from_millis(300));
    let (_, body) = scrape(port);
    promtool_ok(&body);
    let rule = sample(&body, "fastpath_filter_rule_packets_total", &format!("iface=\"{i}\",rule=\"0\""));
    let (s, st) = f.terminate();
    assert!(st.success());
    let rules = s["rules"].as_array().expect("rules");
    assert_eq!(rule, Some(n(&rules[0]["packets"])), "{body}\n{s}");
    assert!(rule.unwrap() >= 5000);

    // The forwarder (L2, b's veth and its loopback): what arrives on the veth is forwarded.
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let fw = Running::start(&[
        "fwd",
        "--netns",
        ns,
        "-i",
        i,
        "-i",
        "lo",
        "--mode",
        "l2",
        "--json",
        "--duration",
        "60",
        "--metrics",
        &addr,
    ]);
    let g = gen_xsk(&bed, &["--count", "5000", "--rate", "50000", "--json", "--duration", "30"]);
    assert!(g.status.success(), "{}", stderr(&g));
    let t = Instant::now();
    let mut last = None;
    while t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(300));
        let (_, body) = scrape(port);
        last = sample(&body, "fastpath_fwd_packets_total", &format!("port=\"{i}\",reason=\"forwarded\""));
        if last.is_some_and(|v| v >= 5000) {
            promtool_ok(&body);
            break;
        }
    }
    let (s, st) = fw.terminate();
    assert!(st.success());
    let p = s["ports"].as_array().unwrap().iter().find(|p| p["iface"] == i).unwrap().clone();
    assert_eq!(last, Some(n(&p["counters"]["forwarded"])), "{s}");
}
