//! `fastpath capture EXPRESSION` against tcpdump on the same frames: crafted frames (see
//! tests/common/pcapfilter_frames.rs) replayed by `fastpath gen --pcap` out of a veth, captured
//! on its peer with each expression, and compared with what `tcpdump -r in.pcap -w out.pcap
//! EXPRESSION` keeps of the same file: the same frames, byte for byte, in order. And the
//! refusals: libpcap's syntax error, divert with an expression the classifier cannot decide
//! exactly, an expression with --rule.

mod common;
#[path = "common/pcapfilter_frames.rs"]
mod frames;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;
use fastpath_testbed::{Testbed, TestbedConfig};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::pcapng::{Block, PcapNgReader};
use pcap_file::DataLink;

fn bed() -> Testbed {
    Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("test bed")
}

fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let h = PcapHeader { datalink: DataLink::ETHERNET, snaplen: 65535, ..Default::default() };
    let mut w = PcapWriter::with_header(std::fs::File::create(path).unwrap(), h).unwrap();
    for (i, f) in frames.iter().enumerate() {
        let ts = Duration::from_micros(1_000_000 + i as u64 * 100);
        w.write_packet(&PcapPacket::new(ts, f.len() as u32, f)).unwrap();
    }
}

/// What tcpdump keeps of `input` with `expr` (its own -w file, read back).
fn tcpdump(input: &Path, out: &Path, expr: &str) -> Vec<Vec<u8>> {
    let o = Command::new("tcpdump")
        .arg("-r")
        .arg(input)
        .arg("-w")
        .arg(out)
        .arg(expr)
        .output()
        .expect("tcpdump (apt-get install tcpdump; scripts/deps.sh test does)");
    assert!(o.status.success(), "tcpdump {expr}: {}", stderr(&o));
    let mut r = PcapReader::new(std::fs::File::open(out).unwrap()).expect("tcpdump's pcap");
    let mut v = Vec::new();
    while let Some(p) = r.next_packet() {
        v.push(p.expect("a packet").data.into_owned());
    }
    v
}

/// The frames of a pcapng file `fastpath capture` wrote (each captured whole).
fn captured(file: &str) -> Vec<Vec<u8>> {
    let mut r = PcapNgReader::new(std::fs::File::open(file).unwrap()).expect("a pcapng file");
    let mut v = Vec::new();
    while let Some(b) = r.next_block() {
        if let Block::EnhancedPacket(p) = b.expect("a valid block") {
            assert_eq!(p.original_len as usize, p.data.len(), "captured whole");
            v.push(p.data.into_owned());
        }
    }
    v
}

/// `fastpath capture [--mode MODE] EXPR` on b while `gen --pcap input` replays the file out of
/// a: the frames written, the ready line and the summary.
fn capture_round(
    bed: &Testbed,
    input: &Path,
    out: &str,
    mode: &str,
    expr: Option<&str>,
) -> (Vec<Vec<u8>>, serde_json::Value, serde_json::Value) {
    let (ready, s) = capture_round_with(bed, input, out, mode, &[], expr);
    (captured(out), ready, s)
}

/// [`capture_round`] with `extra` options before the expression, the frames left in `out`:
/// the ready line and the summary.
fn capture_round_with(
    bed: &Testbed,
    input: &Path,
    out: &str,
    mode: &str,
    extra: &[&str],
    expr: Option<&str>,
) -> (serde_json::Value, serde_json::Value) {
    let mut args = vec![
        "capture",
        "--netns",
        bed.ns_b(),
        "-i",
        bed.iface_b(),
        "-w",
        out,
        "--overwrite",
        "--json",
        "--mode",
        mode,
        "--duration",
        "30",
    ];
    args.extend_from_slice(extra);
    // tcpdump's way: the expression as the last words.
    args.extend(expr.map(|e| e.split_whitespace().collect::<Vec<_>>()).unwrap_or_default());
    let cap = Running::start(&args);
    let ready = cap.ready.clone();
    let f = input.to_string_lossy();
    let g = run(&["gen", "--pcap", &f, "--netns", bed.ns_a(), "-i", bed.iface_a(), "--topspeed", "--engine", "xsk"]);
    assert!(g.status.success(), "gen: {}", stderr(&g));
    std::thread::sleep(Duration::from_millis(150));
    let (s, st) = cap.terminate();
    assert!(st.success(), "capture {expr:?}: {s}");
    assert_eq!(n(&s["dropped"]), 0, "{s}");
    (ready, s)
}

/// Every expression of the list, on the same crafted frames: the capture holds exactly the
/// frames tcpdump keeps (same bytes, same count, same order). Before it, the bed itself: a
/// capture without expression holds every frame as sent. The ready line says which part ran
/// where (`ip6` wholly at the driver, `tcp[tcpflags] & tcp-syn != 0` wholly after the copy);
/// the frames libpcap rejected after the copy are counted (written + rejected = the frames the
/// driver selected, which include every frame tcpdump keeps); expressions the classifier
/// narrows leave frames at the driver. Divert with an exact expression (`ip6 or arp`) takes
/// exactly tcpdump's frames, none rejected after the copy.
#[test]
fn capture_expression_keeps_exactly_what_tcpdump_keeps() {
    if !privileged("capture_expression_keeps_exactly_what_tcpdump_keeps") {
        return;
    }
    let _s = serial();
    let bed = bed();
    let d = std::env::temp_dir().join(format!("fpcapexpr-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let input = d.join("in.pcap");
    let sent: Vec<Vec<u8>> = frames::sample_frames().into_iter().map(|(_, f)| f).collect();
    write_pcap(&input, &sent);
    let out = d.join("out.pcapng").to_string_lossy().into_owned();
    let (all, ready, s) = capture_round(&bed, &input, &out, "copy", None);
    assert_eq!(all, sent, "the bed delivers every frame as sent");
    assert_eq!(ready["filter"], "at the driver: every frame; after the copy: nothing", "{ready}");
    assert_eq!(n(&s["filter_rejected_frames"]), 0);
    let total = sent.len() as u64;
    let mut narrowed = 0;
    let mut table = Vec::new();
    for (k, expr) in frames::EXPRESSIONS.iter().enumerate() {
        let want = tcpdump(&input, &d.join(format!("td{k}.pcap")), expr);
        let (got, ready, s) = capture_round(&bed, &input, &out, "copy", Some(expr));
        let (written, rejected) = (n(&s["written"]), n(&s["filter_rejected_frames"]));
        table.push(format!(
            "{expr:?}: tcpdump {}, fastpath {written}, driver selected {}",
            want.len(),
            written + rejected
        ));
        assert_eq!(got.len(), want.len(), "`{expr}`: frames captured vs tcpdump's\n{ready}\n{s}");
        assert_eq!(got, want, "`{expr}`: the frames differ from tcpdump's");
        assert_eq!(written, want.len() as u64, "{s}");
        assert!(ready["filter"].as_str().unwrap().ends_with(&format!("after the copy: libpcap \"{expr}\"")), "{ready}");
        assert_eq!(ready["filter"], s["filter"]);
        assert!(written + rejected <= total, "{s}");
        narrowed += usize::from(written + rejected < total);
        match *expr {
            "ip6" => assert_eq!(
                ready["filter"],
                "at the driver: untagged,eth_type=ipv6 -> copy; * -> skip; after the copy: libpcap \"ip6\"",
                "wholly at the driver"
            ),
            "tcp[tcpflags] & tcp-syn != 0" | "not port 53" => {
                assert!(ready["filter"].as_str().unwrap().starts_with("at the driver: every frame;"), "{ready}");
                assert_eq!(written + rejected, total, "every frame copied, libpcap decides: {s}");
            }
            _ => {}
        }
    }
    eprintln!("capture EXPRESSION vs tcpdump on {total} frames:\n  {}", table.join("\n  "));
    assert!(narrowed >= 8, "the driver narrowed only {narrowed} of {} expressions", frames::EXPRESSIONS.len());
    // Divert with an exact translation: exactly tcpdump's frames, nothing rejected after.
    let want = tcpdump(&input, &d.join("td-divert.pcap"), "ip6 or arp");
    let (got, ready, s) = capture_round(&bed, &input, &out, "divert", Some("ip6 or arp"));
    assert_eq!(got, want, "divert `ip6 or arp`: {ready}\n{s}");
    assert_eq!(n(&s["filter_rejected_frames"]), 0, "{s}");
    assert!(attached(bed.ns_b(), bed.iface_b()).is_none(), "nothing left attached");
    let _ = std::fs::remove_dir_all(&d);
}

/// Refused in one line, exit 2, nothing attached, no file: libpcap's syntax error naming the
/// expression; divert with an expression the classifier cannot decide exactly, naming the
/// part; an expression with --rule.
#[test]
fn capture_expression_refusals() {
    if !privileged("capture_expression_refusals") {
        return;
    }
    let _s = serial();
    let bed = bed();
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let file = format!("/tmp/fpcapexpr-refused-{}.pcapng", std::process::id());
    // --duration: a run that is not refused ends by itself.
    let o = run(&["capture", "--netns", ns, "-i", i, "-w", &file, "--duration", "1", "udp", "prot", "53"]);
    assert_one_line_refusal("syntax", &o, 2, &["\"udp prot 53\"", "libpcap", "syntax error"]);
    let o = run(&[
        "capture",
        "--netns",
        ns,
        "-i",
        i,
        "-w",
        &file,
        "--duration",
        "1",
        "--mode",
        "divert",
        "udp port 53 and ip6",
    ]);
    assert_one_line_refusal("divert inexact", &o, 2, &["--mode divert", "`udp port 53`", "--mode copy"]);
    let o = run(&[
        "capture",
        "--netns",
        ns,
        "-i",
        i,
        "-w",
        &file,
        "--duration",
        "1",
        "--mode",
        "divert",
        "host",
        "10.99.0.1",
    ]);
    assert_one_line_refusal("divert host", &o, 2, &["--mode divert", "`host 10.99.0.1`", "ARP"]);
    let o = run(&["capture", "--netns", ns, "-i", i, "-w", &file, "--duration", "1", "--rule", "proto=udp", "udp"]);
    assert_one_line_refusal("expression and rule", &o, 2, &["\"udp\"", "--rule"]);
    assert!(!Path::new(&file).exists(), "no file made for a refused run");
    assert!(attached(ns, i).is_none(), "nothing attached");
}

/// The frames of a pcapng file, each as (length on the wire, captured bytes).
fn captured_snapped(file: &str) -> Vec<(u32, Vec<u8>)> {
    let mut r = PcapNgReader::new(std::fs::File::open(file).unwrap()).expect("a pcapng file");
    let mut v = Vec::new();
    while let Some(b) = r.next_block() {
        if let Block::EnhancedPacket(p) = b.expect("a valid block") {
            v.push((p.original_len, p.data.into_owned()));
        }
    }
    v
}

/// What tcpdump -s SNAP keeps live: the frames the expression selects, judged whole (the
/// kernel runs the filter on the whole packet; the snap length only cuts what is stored),
/// each cut to `snap` bytes.
fn tcpdump_snapped(input: &Path, out: &Path, expr: &str, snap: usize) -> Vec<(u32, Vec<u8>)> {
    tcpdump(input, out, expr).into_iter().map(|f| (f.len() as u32, f[..f.len().min(snap)].to_vec())).collect()
}

/// The two short-snap-length cases' round: the sample frames replayed through `capture -s 40
/// --mode MODE "ip6 dst host fd99::2"` on a bed of its own; returns the expression, the scratch
/// directory, the output file, tcpdump's frames cut to 40 bytes (at least 5), the ready line
/// and the summary.
#[allow(clippy::type_complexity)]
fn short_snaplen_round(
    mode: &str,
) -> (&'static str, std::path::PathBuf, String, Vec<(u32, Vec<u8>)>, serde_json::Value, serde_json::Value) {
    let bed = bed();
    let d = std::env::temp_dir().join(format!("fpcapsnap-{mode}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let input = d.join("in.pcap");
    let sent: Vec<Vec<u8>> = frames::sample_frames().into_iter().map(|(_, f)| f).collect();
    write_pcap(&input, &sent);
    let out = d.join("out.pcapng").to_string_lossy().into_owned();
    let expr = "ip6 dst host fd99::2";
    let want = tcpdump_snapped(&input, &d.join("td.pcap"), expr, 40);
    assert!(want.len() >= 5, "the sample holds IPv6 frames to fd99::2: {}", want.len());
    let (ready, s) = capture_round_with(&bed, &input, &out, mode, &["-s", "40"], Some(expr));
    (expr, d, out, want, ready, s)
}

/// Review of issue 35: `-s 40` with an expression that reads past byte 40 (`ip6 dst host`
/// reads bytes 38..54). In divert mode the classifier takes the frames away from the kernel,
/// so each must be written: before the fix, libpcap judged only the 40 captured bytes,
/// rejected every one, and the frames were neither written nor left to the kernel (lost).
#[test]
fn capture_divert_short_snaplen_writes_every_frame_it_takes() {
    if !privileged("capture_divert_short_snaplen_writes_every_frame_it_takes") {
        return;
    }
    let _s = serial();
    let (expr, d, out, want, ready, s) = short_snaplen_round("divert");
    assert_eq!(n(&s["filter_rejected_frames"]), 0, "frames taken from the kernel and not written: {ready}\n{s}");
    assert_eq!(captured_snapped(&out), want, "divert -s 40 `{expr}`: {s}");
    let _ = std::fs::remove_dir_all(&d);
}

/// Review of issue 35: `fastpath capture -s 40 ip6 dst host fd99::2` (copy mode) keeps what
/// `tcpdump -s 40 ip6 dst host fd99::2` keeps, each frame cut to 40 bytes: its filter judges the
/// whole frame. (Before the fix the program copied only the snap length and libpcap rejected
/// every such frame: nothing was written.)
#[test]
fn capture_copy_short_snaplen_keeps_what_tcpdump_keeps() {
    if !privileged("capture_copy_short_snaplen_keeps_what_tcpdump_keeps") {
        return;
    }
    let _s = serial();
    let (expr, d, out, want, ready, s) = short_snaplen_round("copy");
    assert_eq!(captured_snapped(&out), want, "copy -s 40 `{expr}`: {ready}\n{s}");
    let _ = std::fs::remove_dir_all(&d);
}
