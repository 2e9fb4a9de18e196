//! `fastpath capture`: pcapng files tshark reads without a warning, every frame once, the
//! statistics block at the end, copy mode leaving the traffic undisturbed, divert mode taking
//! it, rotation, stdout, and refusals.

mod common;

use std::time::Duration;

use common::*;
use fastpath_testbed::{Testbed, TestbedConfig};

fn bed() -> Testbed {
    Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("test bed")
}

/// tshark's warnings on stderr, less its note on running as root (about tshark, not the file).
fn tshark_warnings(stderr: &[u8]) -> String {
    String::from_utf8_lossy(stderr)
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.contains("Running as user \"root\""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `tshark -r file -T fields -e F...`'s output; fails the test if tshark fails or warns about
/// the file: every file a test writes is read through here.
fn tshark_fields(file: &str, fields: &[&str]) -> String {
    let mut args = vec!["-r", file, "-T", "fields"];
    for f in fields {
        args.extend(["-e", f]);
    }
    let o = std::process::Command::new("tshark")
        .args(&args)
        .output()
        .expect("tshark (apt-get install tshark; `make deps` does)");
    assert!(o.status.success(), "tshark -r {file}: {}", String::from_utf8_lossy(&o.stderr));
    let warn = tshark_warnings(&o.stderr);
    assert!(warn.is_empty(), "tshark warned about {file}: {warn}");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// tshark's reading of `file`: (packets, its warnings: always empty, tshark_fields fails on any).
fn tshark_count(file: &str) -> (u64, String) {
    let out = tshark_fields(file, &["frame.len", "frame.cap_len"]);
    (out.lines().filter(|l| !l.trim().is_empty()).count() as u64, String::new())
}

/// Frames by (frame.len, frame.cap_len) pairs as tshark reads them.
fn tshark_lens(file: &str) -> Vec<(u64, u64)> {
    tshark_fields(file, &["frame.len", "frame.cap_len"])
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace().map(|x| x.parse::<u64>().ok());
            Some((it.next()??, it.next()??))
        })
        .collect()
}

/// The interface statistics blocks of a pcapng file, read with the pcap-file crate:
/// (isb_ifrecv, isb_ifdrop, isb_usrdeliv) summed over the file's interfaces, and the number of
/// enhanced packet blocks.
fn pcapng_stats(file: &str) -> ((u64, u64, u64), u64) {
    use pcap_file::pcapng::blocks::interface_statistics::InterfaceStatisticsOption as O;
    use pcap_file::pcapng::{Block, PcapNgReader};
    let mut r = PcapNgReader::new(std::fs::File::open(file).unwrap()).expect("a pcapng file");
    let (mut recv, mut drop, mut deliv, mut packets) = (0, 0, 0, 0);
    while let Some(b) = r.next_block() {
        match b.expect("a valid block") {
            Block::EnhancedPacket(_) => packets += 1,
            Block::InterfaceStatistics(s) => {
                for o in &s.options {
                    match o {
                        O::IsbIfRecv(v) => recv += v,
                        O::IsbIfDrop(v) => drop += v,
                        O::IsbUsrDeliv(v) => deliv += v,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    ((recv, drop, deliv), packets)
}

/// Copy mode, 5,000 frames: capture stops at --count, tshark reads 5,000 packets with no
/// warning, the statistics block says 5,000 received, 0 dropped, 5,000 written, and b's UDP
/// stack still got every frame (copy mode passes them on).
#[test]
fn copy_mode_writes_every_frame_and_disturbs_nothing() {
    if !privileged("copy_mode_writes_every_frame_and_disturbs_nothing") {
        return;
    }
    let _s = serial();
    let bed = bed();
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let dir = std::env::temp_dir().join(format!("fpcap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("copy.pcapng").to_string_lossy().into_owned();
    let udp0 = udp_in(ns);
    let cap = Running::start(&[
        "capture",
        "--netns",
        ns,
        "-i",
        i,
        "-w",
        &file,
        "--count",
        "5000",
        "--json",
        "--duration",
        "60",
    ]);
    assert_eq!(cap.ready["mode"], "copy");
    let g = gen_xsk(&bed, &["--count", "5000", "--rate", "50000", "--json", "--duration", "30"]);
    assert!(g.status.success(), "{}", stderr(&g));
    let (s, st) = cap.finish();
    assert_json_keys("capture", &s);
    assert!(st.success(), "{s}");
    assert_eq!(n(&s["written"]), 5000, "{s}");
    let (count, warn) = tshark_count(&file);
    assert_eq!(count, 5000);
    assert!(warn.trim().is_empty(), "tshark warned: {warn}");
    assert!(tshark_lens(&file).iter().all(|&(l, c)| l == 64 && c == 64), "64-byte frames, whole");
    let ((recv, drop, deliv), packets) = pcapng_stats(&file);
    assert_eq!(packets, 5000);
    assert_eq!((drop, deliv), (0, 5000), "statistics block");
    assert!(recv >= 5000, "received {recv}");
    // Copy mode passes every frame on: b's UDP stack took them all (no listener on port 9).
    assert_eq!(udp_in(ns) - udp0, 5000, "every frame reached b's kernel");
    assert!(attached(ns, i).is_none(), "nothing left attached");
    let _ = std::fs::remove_dir_all(&dir);
}

/// --snaplen 60 keeps 60 bytes of each 100-byte frame (frame.len 100, frame.cap_len 60);
/// -w - goes to stdout, read by `tshark -r -`; --rotate-bytes splits 3,000 frames over several
/// files, each one tshark reads, 3,000 packets in all.
#[test]
fn snaplen_stdout_and_rotation() {
    if !privileged("snaplen_stdout_and_rotation") {
        return;
    }
    let _s = serial();
    let bed = bed();
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let dir = std::env::temp_dir().join(format!("fpcap2-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Snap length.
    let file = dir.join("snap.pcapng").to_string_lossy().into_owned();
    let cap = Running::start(&[
        "capture",
        "--netns",
        ns,
        "-i",
        i,
        "-w",
        &file,
        "--count",
        "1000",
        "--snaplen",
        "60",
        "--json",
        "--duration",
        "60",
    ]);
    let g = gen_xsk(&bed, &["--count", "1000", "--frame-len", "100", "--rate", "50000", "--duration", "30"]);
    assert!(g.status.success(), "{}", stderr(&g));
    let (_, st) = cap.finish();
    assert!(st.success());
    let lens = tshark_lens(&file);
    assert_eq!(lens.len(), 1000);
    assert!(lens.iter().all(|&(l, c)| l == 100 && c == 60), "{:?}", &lens[..3]);
    // Stdout into tshark.
    let fp = env!("CARGO_BIN_EXE_fastpath");
    let sh = format!(
        "{fp} capture --netns {ns} -i {i} -w - --count 1000 --duration 20 2>{} | tshark -r - -T fields -e frame.len",
        dir.join("capture.stderr").display()
    );
    let reader = std::thread::spawn(move || std::process::Command::new("sh").args(["-c", &sh]).output().unwrap());
    std::thread::sleep(Duration::from_millis(800));
    let g = gen_xsk(&bed, &["--count", "1000", "--rate", "50000", "--duration", "30"]);
    assert!(g.status.success());
    let o = reader.join().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lines = String::from_utf8_lossy(&o.stdout).lines().filter(|l| l.trim() == "64").count();
    assert_eq!(lines, 1000, "tshark -r - read every frame: {}", String::from_utf8_lossy(&o.stderr));
    // stderr is tshark's alone (capture's went to a file): no warning about the stream.
    let warn = tshark_warnings(&o.stderr);
    assert!(warn.is_empty(), "tshark warned about the -w - stream: {warn}");
    // Rotation.
    let file = dir.join("rot.pcapng").to_string_lossy().into_owned();
    let cap = Running::start(&[
        "capture",
        "--netns",
        ns,
        "-i",
        i,
        "-w",
        &file,
        "--count",
        "3000",
        "--rotate-bytes",
        "65536",
        "--json",
        "--duration",
        "60",
    ]);
    let g = gen_xsk(&bed, &["--count", "3000", "--rate", "50000", "--duration", "30"]);
    assert!(g.status.success());
    let (s, st) = cap.finish();
    assert!(st.success());
    let files: Vec<String> = s["files"].as_array().unwrap().iter().map(|f| f.as_str().unwrap().to_string()).collect();
    assert!(files.len() >= 3, "3,000 frames of ~100 bytes in 64 KiB files: {files:?}");
    assert_eq!(files[1], format!("{file}1"), "tcpdump -C names");
    let mut total = 0;
    for f in &files {
        let (c, warn) = tshark_count(f);
        assert!(warn.trim().is_empty(), "{f}: {warn}");
        total += c;
    }
    assert_eq!(total, 3000);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Divert mode: frames go to AF_XDP sockets and into the file, not to the kernel (b's kernel
/// sees none of them); tshark reads all.
#[test]
fn divert_mode_takes_the_frames_from_the_kernel() {
    if !privileged("divert_mode_takes_the_frames_from_the_kernel") {
        return;
    }
    let _s = serial();
    let bed = bed();
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let dir = std::env::temp_dir().join(format!("fpcap3-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("divert.pcapng").to_string_lossy().into_owned();
    let cap = Running::start(&[
        "capture",
        "--netns",
        ns,
        "-i",
        i,
        "-w",
        &file,
        "--count",
        "5000",
        "--mode",
        "divert",
        "--json",
        "--duration",
        "60",
    ]);
    assert_eq!(cap.ready["mode"], "divert");
    let snmp0 = udp_in(ns);
    let g = gen_xsk(&bed, &["--count", "5000", "--rate", "50000", "--json", "--duration", "30"]);
    assert!(g.status.success(), "{}", stderr(&g));
    let (s, st) = cap.finish();
    assert!(st.success(), "{s}");
    assert_eq!(n(&s["written"]), 5000, "{s}");
    let (count, warn) = tshark_count(&file);
    assert_eq!(count, 5000);
    assert!(warn.trim().is_empty(), "{warn}");
    let ((_, drop, deliv), _) = pcapng_stats(&file);
    assert_eq!((drop, deliv), (0, 5000));
    assert_eq!(udp_in(ns), snmp0, "diverted frames never reached b's UDP stack");
    let _ = std::fs::remove_dir_all(&dir);
}

/// UDP datagrams b's kernel took in (Udp InDatagrams + NoPorts + InErrors in /proc/net/snmp).
fn udp_in(ns: &str) -> u64 {
    let o = fastpath_testbed::ns_command(ns, "cat").arg("/proc/net/snmp").output().unwrap();
    let t = String::from_utf8_lossy(&o.stdout);
    let mut lines = t.lines().filter(|l| l.starts_with("Udp:"));
    let (h, v) = (lines.next().unwrap(), lines.next().unwrap());
    h.split_whitespace()
        .zip(v.split_whitespace())
        .filter(|(k, _)| matches!(*k, "InDatagrams" | "NoPorts" | "InErrors"))
        .map(|(_, v)| v.parse::<u64>().unwrap_or(0))
        .sum()
}

/// Bad input: one line, non-zero exit, nothing attached, no file left half-written.
#[test]
fn capture_refusals() {
    if !privileged("capture_refusals") {
        return;
    }
    let bed = bed();
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let o = run(&["capture", "--netns", ns, "-i", i, "-w", "/tmp/x.pcapng", "--snaplen", "70000"]);
    assert_one_line_refusal("snaplen 70000", &o, 2, &["--snaplen 70000", "1..=16384"]);
    let o = run(&["capture", "--netns", ns, "-i", i, "-w", "/nonexistent-dir/x.pcapng", "--count", "1"]);
    assert_one_line_refusal("bad dir", &o, 3, &["/nonexistent-dir/x.pcapng", "directory"]);
    let o = run(&["capture", "--netns", ns, "-i", i, "-w", "-", "--rotate-bytes", "10000"]);
    assert_one_line_refusal("rotate stdout", &o, 2, &["--rotate-bytes", "-w -"]);
    let o = run(&["capture", "--netns", ns, "-i", i, "-w", "/tmp/x.pcapng", "--mode", "mirror"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = run(&["capture", "--netns", ns, "-i", "fpnosuch0", "-w", "/tmp/fp-nosuch.pcapng", "--count", "1"]);
    assert_one_line_refusal("no such interface", &o, 2, &["fpnosuch0"]);
    assert!(!std::path::Path::new("/tmp/fp-nosuch.pcapng").exists(), "no file made for a refused run");
    assert!(attached(ns, i).is_none());
}

/// tshark's UDP destination ports of `file`, one per packet.
fn tshark_dports(file: &str) -> Vec<u16> {
    tshark_fields(file, &["udp.dstport"]).lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// With a rule (the classifier selects, the rule's action unused): copy mode writes only the
/// 2,000 frames to UDP port 9 of 3,000 sent (1,000 to port 10), and b's UDP stack still gets
/// all 3,000; divert mode takes the 2,000 port-9 frames away from the kernel, which gets only
/// the 1,000 others.
#[test]
fn rules_select_what_is_captured() {
    if !privileged("rules_select_what_is_captured") {
        return;
    }
    let _s = serial();
    let bed = bed();
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let dir = std::env::temp_dir().join(format!("fpcap4-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for mode in ["copy", "divert"] {
        let file = dir.join(format!("{mode}.pcapng")).to_string_lossy().into_owned();
        let udp0 = udp_in(ns);
        let cap = Running::start(&[
            "capture",
            "--netns",
            ns,
            "-i",
            i,
            "-w",
            &file,
            "--mode",
            mode,
            "--rule",
            "proto=udp,dst_port=9",
            "--json",
            "--duration",
            "60",
        ]);
        for (port, count) in [("9", "2000"), ("10", "1000")] {
            let g = gen_xsk(&bed, &["--dst-port", port, "--count", count, "--rate", "50000", "--duration", "30"]);
            assert!(g.status.success(), "{}", stderr(&g));
        }
        std::thread::sleep(Duration::from_millis(500));
        let (s, st) = cap.terminate();
        assert!(st.success(), "{s}");
        assert_eq!(n(&s["written"]), 2000, "{mode}: {s}");
        let ports = tshark_dports(&file);
        assert_eq!(ports.len(), 2000, "{mode}");
        assert!(ports.iter().all(|&p| p == 9), "{mode}: only the rule's frames");
        let to_kernel = udp_in(ns) - udp0;
        assert_eq!(to_kernel, if mode == "copy" { 3000 } else { 1000 }, "{mode}: frames b's UDP stack got");
        assert!(attached(ns, i).is_none());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Mode bits of `p` (no symlink followed).
fn mode(p: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

/// Output files are created new, mode 0600, never through a symlink: `capture -w` onto a
/// symlink to another file is refused (with --overwrite too) and the target is untouched; an
/// existing file is refused unless --overwrite, which replaces it; a planted rotation name
/// (FILE1 -> victim) stops the capture with an error instead of being followed; `demo
/// --output`, `compare --svg` and `bench ddos --svg` refuse the same before doing anything.
/// (Before: File::create followed the link, truncated the victim, and made 0644 files.)
#[test]
fn output_files_are_new_private_and_never_followed() {
    if !privileged("output_files_are_new_private_and_never_followed") {
        return;
    }
    let _s = serial();
    let bed = bed();
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let dir = std::env::temp_dir().join(format!("fpcap5-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let victim = dir.join("victim");
    std::fs::write(&victim, "precious").unwrap();
    let link = dir.join("x.pcapng");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let l = link.to_string_lossy().into_owned();
    for extra in [&[][..], &["--overwrite"][..]] {
        let o = run(&[&["capture", "--netns", ns, "-i", i, "-w", &l, "--duration", "1"][..], extra].concat());
        assert_one_line_refusal("symlink", &o, 2, &[&l, "symbolic link"]);
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious", "the link's target was written");
    }
    assert!(attached(ns, i).is_none());
    // A new file: 0600. Then the same name again: refused; with --overwrite: replaced, 0600.
    let f = dir.join("new.pcapng");
    let fs = f.to_string_lossy().into_owned();
    let o = run(&["capture", "--netns", ns, "-i", i, "-w", &fs, "--duration", "0.5"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(mode(&f), 0o600, "captured traffic is for its owner only");
    std::fs::write(&f, "old").unwrap();
    std::fs::set_permissions(&f, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let o = run(&["capture", "--netns", ns, "-i", i, "-w", &fs, "--duration", "0.5"]);
    assert_one_line_refusal("exists", &o, 2, &[&fs, "--overwrite"]);
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "old");
    let o = run(&["capture", "--netns", ns, "-i", i, "-w", &fs, "--duration", "0.5", "--overwrite"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_ne!(std::fs::read(&f).unwrap(), b"old");
    assert_eq!(mode(&f), 0o600);
    assert_eq!(tshark_count(&fs).0, 0, "the replacing capture is a valid, empty pcapng file");
    // Rotation: the second file's name is a planted symlink. Planted before the start, it is
    // refused then (with --overwrite too), nothing attached and no file made; planted once the
    // capture runs, the rotation stops there with an error instead of following it.
    let rot = dir.join("rot.pcapng");
    let rs = rot.to_string_lossy().into_owned();
    std::os::unix::fs::symlink(&victim, format!("{rs}1")).unwrap();
    for extra in [&[][..], &["--overwrite"][..]] {
        let args = ["capture", "--netns", ns, "-i", i, "-w", &rs, "--rotate-bytes", "65536", "--duration", "1"];
        let o = run(&[&args[..], extra].concat());
        assert_one_line_refusal("planted rotation symlink", &o, 2, &[&format!("{rs}1"), "symbolic link"]);
        assert!(!rot.exists(), "a refused capture made {rs}");
        assert!(attached(ns, i).is_none());
    }
    std::fs::remove_file(format!("{rs}1")).unwrap();
    let cap = Running::start(&[
        "capture",
        "--netns",
        ns,
        "-i",
        i,
        "-w",
        &rs,
        "--count",
        "3000",
        "--rotate-bytes",
        "65536",
        "--json",
        "--duration",
        "30",
    ]);
    std::os::unix::fs::symlink(&victim, format!("{rs}1")).unwrap();
    let g = gen_xsk(&bed, &["--count", "3000", "--rate", "50000", "--duration", "30"]);
    assert!(g.status.success());
    let mut child = cap.into_child();
    let st = child.wait().unwrap();
    assert_eq!(st.code(), Some(5), "a planted rotation name stops the capture with an error");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious", "a rotation file was written through the link");
    assert_eq!(mode(&rot), 0o600);
    assert!(tshark_count(&rs).0 > 0, "the first rotation file is whole and readable");
    assert!(attached(ns, i).is_none());
    // The report files of other commands: refused before anything is set up.
    let other = dir.join("report");
    std::fs::write(&other, "keep").unwrap();
    let os = other.to_string_lossy().into_owned();
    for (args, flag) in [
        (vec!["demo", "--duration", "0", "--output", &l], "--output"),
        (vec!["demo", "--duration", "0", "--output", &os], "--output"),
        (vec!["compare", "--duration", "0", "--runs", "1", "--svg", &l], "--svg"),
        (vec!["compare", "--duration", "0", "--runs", "1", "--svg", &os], "--svg"),
        (vec!["bench", "ddos", "--duration", "0", "--svg", &l], "--svg"),
    ] {
        let t = std::time::Instant::now();
        let o = run(&args);
        assert_one_line_refusal(&format!("{args:?}"), &o, 2, &[flag]);
        assert!(t.elapsed() < Duration::from_secs(2), "{args:?} refused only after running");
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert_eq!(std::fs::read_to_string(&other).unwrap(), "keep");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--rotate-bytes`: every name the run may take is checked at the start. A FILE2 left by an
/// earlier run (FILE1 absent) is refused before anything is attached, naming it, with no file
/// made; names that are not rotation names (FILE02, FILE.bak, FILE1x) do not matter. With
/// --overwrite the run goes ahead, a note names FILE2, and the capture replaces it on reaching
/// it. (Before: the capture started, wrote FILE and FILE1, then stopped with exit 5 at FILE2.)
#[test]
fn rotation_names_are_checked_before_anything_is_attached() {
    if !privileged("rotation_names_are_checked_before_anything_is_attached") {
        return;
    }
    let _s = serial();
    let bed = bed();
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let dir = std::env::temp_dir().join(format!("fpcap6-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let rot = dir.join("rot.pcapng");
    let rs = rot.to_string_lossy().into_owned();
    let old2 = format!("{rs}2");
    std::fs::write(&old2, "old").unwrap();
    for other in ["02", ".bak", "1x"] {
        std::fs::write(format!("{rs}{other}"), "other").unwrap();
    }
    let args = ["capture", "--netns", ns, "-i", i, "-w", &rs, "--rotate-bytes", "65536", "--duration", "20"];
    let t = std::time::Instant::now();
    let o = run(&args);
    assert_one_line_refusal("existing FILE2", &o, 2, &[&old2, "exists", "--overwrite", "file 3"]);
    assert!(t.elapsed() < Duration::from_secs(5), "refused only after capturing");
    assert!(!rot.exists(), "a refused capture made {rs}");
    assert!(!std::path::Path::new(&format!("{rs}1")).exists());
    assert!(attached(ns, i).is_none());
    assert_eq!(std::fs::read_to_string(&old2).unwrap(), "old");
    // --overwrite: FILE2 is named, then replaced when the capture reaches it.
    let err = dir.join("capture.stderr");
    let mut c = fastpath();
    c.args([&args[..], &["--overwrite", "--count", "3000", "--json"]].concat())
        .stderr(std::fs::File::create(&err).unwrap());
    let cap = Running::start_cmd(c);
    let g = gen_xsk(&bed, &["--count", "3000", "--rate", "50000", "--duration", "30"]);
    assert!(g.status.success());
    let (s, st) = cap.finish();
    let note = std::fs::read_to_string(&err).unwrap();
    assert!(st.success(), "{s} {note}");
    assert!(note.contains(&old2) && note.contains("replaced when the capture reaches it"), "{note}");
    let files: Vec<&str> = s["files"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    assert!(files.len() >= 3 && files[2] == old2, "{files:?}");
    assert!(tshark_count(&old2).0 > 0, "FILE2 now holds this run's frames");
    for other in ["02", ".bak", "1x"] {
        assert_eq!(std::fs::read_to_string(format!("{rs}{other}")).unwrap(), "other");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `capture -w -` whose reader has gone away (a closed pipe) fails: non-zero, one line saying
/// so, nothing left attached. (Before: exit 0 and "N frames written".)
#[test]
fn capture_to_a_closed_pipe_fails() {
    if !privileged("capture_to_a_closed_pipe_fails") {
        return;
    }
    let _s = serial();
    let bed = bed();
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let mut child = fastpath()
        .args(["capture", "--netns", ns, "-i", i, "-w", "-", "--count", "3000", "--duration", "5"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader goes away
    std::thread::sleep(Duration::from_millis(800));
    let g = gen_xsk(&bed, &["--count", "3000", "--rate", "50000", "--duration", "30"]);
    assert!(g.status.success());
    let o = child.wait_with_output().unwrap();
    assert_one_line_refusal("closed pipe", &o, 5, &["-w -", "EPIPE"]);
    assert!(!stderr(&o).contains("written"), "{}", stderr(&o));
    assert!(attached(ns, i).is_none());
}

/// A pcapng block: (type, offset in the file, length in bytes).
type BlockAt = (u32, usize, usize);
/// An enhanced packet block: (timestamp in ns, captured length, original length).
type Epb = (u64, u32, u32);

/// A pcapng file's blocks as written (little-endian, as this machine writes them): each
/// block's (type, offset in the file, length), and for each enhanced packet block its
/// (timestamp in ns: if_tsresol 9, captured length, original length).
fn pcapng_blocks(file: &str) -> (Vec<BlockAt>, Vec<Epb>) {
    let b = std::fs::read(file).unwrap();
    let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    let (mut blocks, mut packets, mut o) = (Vec::new(), Vec::new(), 0);
    while o + 12 <= b.len() {
        let (kind, len) = (u32_at(o), u32_at(o + 4) as usize);
        assert!(len >= 12 && o + len <= b.len(), "{file}: a block of {len} bytes at {o} runs past the end");
        if kind == 6 {
            let ts = (u64::from(u32_at(o + 12)) << 32) | u64::from(u32_at(o + 16));
            packets.push((ts, u32_at(o + 20), u32_at(o + 24)));
        }
        blocks.push((kind, o, len));
        o += len;
    }
    assert_eq!(o, b.len(), "{file}: trailing bytes");
    (blocks, packets)
}

/// The names in `dir` that start with `prefix`, sorted.
fn names_in(dir: &std::path::Path, prefix: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect();
    v.sort();
    v
}

/// tcpdump's -c and -s: `-c 10 -s 64` under a flood of 100-byte frames exits 0 on its own
/// with exactly 10 frames written, each 64 bytes captured of 100 (the original length
/// recorded); `-s 0` keeps whole frames (tcpdump's "the most").
#[test]
fn tcpdump_count_and_snaplen() {
    if !privileged("tcpdump_count_and_snaplen") {
        return;
    }
    let _s = serial();
    let bed = bed();
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let dir = std::env::temp_dir().join(format!("fpcap7-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (snap, kept) in [("64", 64), ("0", 100)] {
        let file = dir.join(format!("c10-s{snap}.pcapng")).to_string_lossy().into_owned();
        let cap = Running::start(&[
            "capture",
            "--netns",
            ns,
            "-i",
            i,
            "-w",
            &file,
            "-c",
            "10",
            "-s",
            snap,
            "--json",
            "--duration",
            "20",
        ]);
        let g = gen_xsk(&bed, &["--count", "20000", "--frame-len", "100", "--rate", "50000", "--duration", "10"]);
        assert!(g.status.success(), "{}", stderr(&g));
        let (s, st) = cap.finish();
        assert!(st.success(), "-s {snap}: {s}");
        assert_eq!(n(&s["written"]), 10, "-s {snap}: {s}");
        let (_, packets) = pcapng_blocks(&file);
        assert_eq!(packets.len(), 10, "-s {snap}: -c 10 writes 10 frames");
        assert!(packets.iter().all(|&(_, cap, orig)| cap == kept && orig == 100), "-s {snap}: {packets:?}");
        assert_eq!(tshark_lens(&file), vec![(100, u64::from(kept)); 10], "-s {snap}: tshark reads the same");
    }
    assert!(attached(ns, i).is_none());
    let _ = std::fs::remove_dir_all(&dir);
}

/// tcpdump's -C 1 -W 3: about 4.6 MB of 1,000-byte frames (4,500) make five files' worth, kept
/// as a ring of three named as tcpdump names them (FILE0, FILE1, FILE2: tcpdump 4.99.3 wrote
/// x0 x1 x2 for `-w x -C 1 -W 3`; no FILE, no FILE3). Each was started anew once the previous
/// was larger than 1,000,000 bytes (not 1,048,576): its last frame begins at or before byte
/// 1,000,000. The ring went round: the oldest surviving frames are in FILE2 (the third file),
/// then FILE0 (the fourth, over the first), then FILE1 (the fifth, with the last frame), and
/// fewer than the 4,500 frames written survive. Before, a FILE1 left by an earlier run is
/// refused (it would be file 2 of the ring) with nothing attached.
#[test]
fn tcpdump_ring_of_files() {
    if !privileged("tcpdump_ring_of_files") {
        return;
    }
    let _s = serial();
    let bed = bed();
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let dir = std::env::temp_dir().join(format!("fpcap8-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let ring = dir.join("ring.pcapng").to_string_lossy().into_owned();
    let args = [
        "capture",
        "--netns",
        ns,
        "-i",
        i,
        "-w",
        &ring,
        "-C",
        "1",
        "-W",
        "3",
        "-c",
        "4500",
        "--json",
        "--duration",
        "30",
    ];
    let old1 = format!("{ring}1");
    std::fs::write(&old1, "old").unwrap();
    let o = run(&args);
    assert_one_line_refusal("existing ring name", &o, 2, &[&old1, "exists", "file 2 of the ring"]);
    assert!(attached(ns, i).is_none());
    assert_eq!(names_in(&dir, "ring"), ["ring.pcapng1"], "a refused capture made a file");
    std::fs::remove_file(&old1).unwrap();
    let cap = Running::start(&args);
    let g = gen_xsk(&bed, &["--count", "4500", "--frame-len", "1000", "--rate", "20000", "--duration", "10"]);
    assert!(g.status.success(), "{}", stderr(&g));
    let (s, st) = cap.finish();
    assert!(st.success(), "{s}");
    assert_eq!(n(&s["written"]), 4500, "{s}");
    let names: Vec<String> = (0..3).map(|k| format!("ring.pcapng{k}")).collect();
    assert_eq!(names_in(&dir, "ring"), names, "tcpdump's ring names");
    let files: Vec<String> = s["files"].as_array().unwrap().iter().map(|f| f.as_str().unwrap().to_string()).collect();
    assert_eq!(files, names.iter().map(|n| dir.join(n).to_string_lossy().into_owned()).collect::<Vec<_>>());
    let mut first_ts = Vec::new();
    let (mut survived, mut last_ts) = (0, (0, String::new()));
    for f in &files {
        let (blocks, packets) = pcapng_blocks(f);
        let last_epb = blocks.iter().filter(|b| b.0 == 6).map(|b| b.1).max().unwrap();
        assert!(last_epb <= 1_000_000, "{f}: a frame written at byte {last_epb}, past 1,000,000");
        assert_eq!(tshark_count(f).0, packets.len() as u64, "{f}");
        assert_eq!(mode(std::path::Path::new(f)), 0o600, "{f}");
        survived += packets.len();
        first_ts.push(packets[0].0);
        let max = packets.iter().map(|p| p.0).max().unwrap();
        if max > last_ts.0 {
            last_ts = (max, f.clone());
        }
    }
    assert!(survived < 4500, "the ring overwrote its oldest files: {survived} frames left of 4,500");
    assert!(first_ts[2] < first_ts[0] && first_ts[0] < first_ts[1], "ring order 2, 0, 1: {first_ts:?}");
    assert_eq!(last_ts.1, files[1], "the newest file holds the last frame");
    assert!(attached(ns, i).is_none());
    let _ = std::fs::remove_dir_all(&dir);
}

/// tcpdump's -G: `-G 1 -w t-%H%M%S.pcapng` for 3.2 s makes a file per second of the clock (3.2 s
/// cross at least 3 whole-second boundaries: at least 3 files), each a valid pcapng, mode 0600,
/// named by strftime, together holding every frame written. `-G 1 -w plain.pcapng` (no time
/// format): each new file replaces the previous one (tcpdump's rule), so after 2.5 s the file
/// holds none of the frames sent in the first second, and the run succeeds. `-G 1 -W 2` ends on
/// its own, exit 0, after 2 files (long before its --duration 10).
#[test]
fn tcpdump_rotation_by_time() {
    if !privileged("tcpdump_rotation_by_time") {
        return;
    }
    let _s = serial();
    let bed = bed();
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let dir = std::env::temp_dir().join(format!("fpcap9-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let fmt = dir.join("t-%H%M%S.pcapng").to_string_lossy().into_owned();
    let cap =
        Running::start(&["capture", "--netns", ns, "-i", i, "-w", &fmt, "-G", "1", "--json", "--duration", "3.2"]);
    let g = gen_xsk(&bed, &["--count", "2500", "--rate", "1000", "--duration", "10"]);
    assert!(g.status.success(), "{}", stderr(&g));
    let (s, st) = cap.finish();
    assert!(st.success(), "{s}");
    let names = names_in(&dir, "t-");
    assert!(names.len() >= 3, "-G 1 over 3.2 s: {names:?}");
    let mut total = 0;
    for nm in &names {
        let digits = nm.strip_prefix("t-").and_then(|r| r.strip_suffix(".pcapng")).unwrap();
        assert!(digits.len() == 6 && digits.bytes().all(|c| c.is_ascii_digit()), "strftime name: {nm}");
        let f = dir.join(nm);
        assert_eq!(mode(&f), 0o600, "{nm}");
        total += tshark_count(&f.to_string_lossy()).0;
    }
    assert_eq!(total, n(&s["written"]), "every frame written is in one of the files: {s}");
    assert!(total > 0, "{s}");
    // No time format: each new file replaces the last.
    let plain = dir.join("plain.pcapng").to_string_lossy().into_owned();
    let cap =
        Running::start(&["capture", "--netns", ns, "-i", i, "-w", &plain, "-G", "1", "--json", "--duration", "2.5"]);
    let g = gen_xsk(&bed, &["--count", "500", "--rate", "50000", "--duration", "10"]);
    assert!(g.status.success(), "{}", stderr(&g));
    let (s, st) = cap.finish();
    assert!(st.success(), "a -G file replacing the run's own previous one: {s}");
    assert_eq!(n(&s["written"]), 500, "{s}");
    assert_eq!(names_in(&dir, "plain"), ["plain.pcapng"]);
    assert_eq!(tshark_count(&plain).0, 0, "the last period's file replaced the one with the frames");
    // -G 1 -W 2: the end after two files.
    let two = dir.join("w2-%H%M%S.pcapng").to_string_lossy().into_owned();
    let t = std::time::Instant::now();
    let o = run(&["capture", "--netns", ns, "-i", i, "-w", &two, "-G", "1", "-W", "2", "--duration", "10"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(t.elapsed() < Duration::from_secs(6), "-G 1 -W 2 ran {:?}", t.elapsed());
    assert_eq!(names_in(&dir, "w2-").len(), 2, "{:?}", names_in(&dir, "w2-"));
    assert!(attached(ns, i).is_none());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The tcpdump flags' bad values, each refused in one line naming it and what is accepted,
/// exit 2, with nothing attached and no file made: -W 0, -C 0, -C abc, -C 0.5 (tcpdump takes
/// whole numbers only), -G 0 (tcpdump: no rotation), -G 1.5 (tcpdump: 1), -s 70000 (tcpdump
/// takes up to 262144; the capture ring up to 16384), -c 0, -C with --rotate-bytes, rotation
/// with -w -, a -G name with an unknown conversion.
#[test]
fn tcpdump_flag_refusals() {
    if !privileged("tcpdump_flag_refusals") {
        return;
    }
    let bed = bed();
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let dir = std::env::temp_dir().join(format!("fpcap10-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("x.pcapng").to_string_lossy().into_owned();
    for (flags, needles) in [
        (&["-C", "1", "-W", "0"][..], &["-W 0", "1..=100000"][..]),
        (&["-C", "0"], &["-C 0", "1..=1000000", "millions of bytes"]),
        (&["-C", "abc"], &["-C abc", "1..=1000000"]),
        (&["-C", "0.5"], &["-C 0.5", "whole number"]),
        (&["-G", "0"], &["-G 0", "1..="]),
        (&["-G", "1.5"], &["-G 1.5", "whole seconds"]),
        (&["-s", "70000"], &["70000", "1..=16384", "0 for 16384"]),
        (&["-c", "0"], &["-c/--count 0", "1.."]),
        (&["-C", "1", "--rotate-bytes", "65536"], &["-C 1", "--rotate-bytes 65536", "give one"]),
        (&["-G", "1", "-w", "-"], &["-G 1", "-w -"]),
        (&["-C", "1", "-W", "3", "-w", "-"], &["-C 1", "-w -"]),
        (&["-G", "1", "-w", "/tmp/fp-%Q.pcapng"], &["%Q", "strftime"]),
    ] {
        let mut args = vec!["capture", "--netns", ns, "-i", i, "--duration", "1"];
        if !flags.contains(&"-w") {
            args.extend(["-w", &f]);
        }
        args.extend(flags);
        let o = run(&args);
        assert_one_line_refusal(&format!("{flags:?}"), &o, 2, needles);
        assert!(attached(ns, i).is_none(), "{flags:?}");
    }
    assert!(names_in(&dir, "").is_empty(), "a refused capture made {:?}", names_in(&dir, ""));
    let _ = std::fs::remove_dir_all(&dir);
}
