//! Sockets for unprivileged programs (root): `filter load --xsk-handoff` serves the
//! classifier's XSKMAP, `bench rxdrop --xsk-handoff` run as an unprivileged user with only
//! CAP_NET_RAW receives through it.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use fastpath_testbed::{Testbed, TestbedConfig};

/// The uid and gid the receiving side runs as (nobody).
const NOBODY: &str = "65534";
/// Frames of the UMEM of the unprivileged side: 1024 x 4096 bytes = 4 MiB, under the default
/// RLIMIT_MEMLOCK of 8 MiB (the 4096-frame default, 16 MiB, is refused with ENOBUFS).
const FRAMES: &str = "1024";

fn bed() -> Testbed {
    Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("test bed")
}

/// A socket path in a directory of its own (removed when dropped).
struct Dir(std::path::PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let p = std::env::temp_dir().join(format!("fastpath-handoff-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Dir(p)
    }
    fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn bin() -> String {
    std::env::var("FASTPATH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_fastpath").to_string())
}

/// fastpath in `ns` as `uid` with CAP_NET_RAW and nothing else (bounding set included).
fn unprivileged(ns: &str, uid: &str, args: &[&str]) -> Command {
    let mut c = fastpath_testbed::ns_command(ns, "setpriv");
    c.args([
        &format!("--reuid={uid}"),
        &format!("--regid={uid}"),
        "--clear-groups",
        "--inh-caps=-all,+net_raw",
        "--ambient-caps=-all,+net_raw",
        "--bounding-set=-all,+net_raw",
        "--",
        &bin(),
    ]);
    c.args(args);
    c
}

/// `bench rxdrop` through the map served at `sock`, as `NOBODY` with only CAP_NET_RAW, in the
/// bed's receiving namespace, on a UMEM of `FRAMES` frames; `extra` follows.
fn handed_rxdrop(bed: &Testbed, sock: &str, extra: &[&str]) -> Command {
    let mut args = vec!["bench", "rxdrop", "-i", bed.iface_b(), "--xsk-handoff", sock, "--frame-count", FRAMES];
    args.extend_from_slice(extra);
    unprivileged(bed.ns_b(), NOBODY, &args)
}

/// `filter load` steering UDP port 9 to the XSKMAP, serving it at `sock` to `allow`.
fn serve(bed: &Testbed, sock: &str, allow: &str, err: std::fs::File) -> Running {
    let mut c = fastpath();
    c.args([
        "filter",
        "load",
        "--rule",
        "proto=udp,dst_port=9,action=xsk",
        "--netns",
        bed.ns_b(),
        "-i",
        bed.iface_b(),
        "--xsk-handoff",
        sock,
        "--xsk-handoff-allow",
        allow,
        "--json",
        "--duration",
        "120",
    ])
    .stderr(Stdio::from(err));
    Running::start_cmd(c)
}

#[test]
fn an_unprivileged_socket_receives_exactly_the_steered_flow() {
    if !privileged("an_unprivileged_socket_receives_exactly_the_steered_flow") {
        return;
    }
    let _g = serial();
    let bed = bed();
    let dir = Dir::new("rx");
    let sock = dir.path("xsk.sock");
    let log = dir.path("server.log");
    let server = serve(&bed, &sock, NOBODY, std::fs::File::create(&log).unwrap());
    let mut c = handed_rxdrop(&bed, &sock, &["--verify", "--json", "--duration", "60"]);
    c.stderr(Stdio::piped());
    let rx = Running::start_cmd(c);
    assert!(rx.ready["path"]["xdp_mode"].is_null(), "the unprivileged side attached no program: {}", rx.ready);
    let before = udp_counters(bed.ns_b(), false);
    for (port, count) in [("9", "3000"), ("7000", "500")] {
        let g = gen_xsk(&bed, &["--dst-port", port, "--count", count, "--rate", "20000", "--duration", "30"]);
        assert!(g.status.success(), "{}", stderr(&g));
    }
    wait_rx_settled(bed.ns_b(), bed.iface_b());
    let after = udp_counters(bed.ns_b(), false);
    let (s, status) = rx.terminate();
    assert!(status.success(), "bench rxdrop --xsk-handoff: {status}");
    let v = &s["verify"];
    assert_eq!(n(&v["unique"]), 3000, "every port-9 frame reached the unprivileged socket: {v}");
    assert_eq!(n(&v["frames"]), 3000, "and nothing else did: {v}");
    assert_eq!(
        after["NoPorts"] - before["NoPorts"],
        500,
        "the port-7000 frames went to the kernel (no listener there): {before:?} -> {after:?}"
    );
    let (_, st) = server.terminate();
    assert!(st.success());
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(
        log.contains(&format!("uid {NOBODY} pid"))
            && log.contains("\"/xsk_map_fd,")
            && log.contains("-> /fd_ack")
            && log.contains("\"/fin\" -> /fin_ack"),
        "the server logs the session: {log}"
    );
    assert!(!std::path::Path::new(&sock).exists(), "the server removed its socket");
    assert!(attached(bed.ns_b(), bed.iface_b()).is_none());
}

#[test]
fn a_peer_not_on_the_allow_list_gets_error_and_nothing_else() {
    if !privileged("a_peer_not_on_the_allow_list_gets_error_and_nothing_else") {
        return;
    }
    let _g = serial();
    let bed = bed();
    let dir = Dir::new("deny");
    let sock = dir.path("xsk.sock");
    let log = dir.path("server.log");
    // Only root (the default would be the same): nobody is refused.
    let server = serve(&bed, &sock, "0", std::fs::File::create(&log).unwrap());
    let o = handed_rxdrop(&bed, &sock, &["--duration", "2"]).output().unwrap();
    // The server refuses at accept and closes; whether its close comes before or after the
    // client's /connect, the client reads the queued "/error": exit 3, one line, no map.
    assert_one_line_refusal("a refused uid", &o, 3, &[&sock, "/connect,", "\"/error\""]);
    let (_, st) = server.terminate();
    assert!(st.success());
    let log = std::fs::read_to_string(&log).unwrap();
    let refused: Vec<&str> = log.lines().filter(|l| l.contains("refused")).collect();
    assert_eq!(refused.len(), 1, "one log line for the refused peer: {log}");
    assert!(
        refused[0].contains(&format!("uid {NOBODY}"))
            && refused[0].contains("not among the allowed uids 0")
            && refused[0].ends_with("-> /error"),
        "{log}"
    );
    assert!(!log.contains("/fd_ack"), "no descriptor went out: {log}");

    // Root is no exception: a list without uid 0 refuses a root client too.
    let sock = dir.path("xsk-root.sock");
    let log = dir.path("server-root.log");
    let server = serve(&bed, &sock, NOBODY, std::fs::File::create(&log).unwrap());
    let mut root = fastpath_testbed::ns_command(bed.ns_b(), &bin());
    root.args(["bench", "rxdrop", "-i", bed.iface_b(), "--xsk-handoff", &sock, "--frame-count", FRAMES]);
    let o = root.args(["--duration", "2"]).output().unwrap();
    assert_one_line_refusal("a root client not on the list", &o, 3, &[&sock, "/connect,", "\"/error\""]);
    let (_, st) = server.terminate();
    assert!(st.success());
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("refused uid 0 ") && l.contains(&format!("not among the allowed uids {NOBODY}"))),
        "{log}"
    );
    assert!(!log.contains("/fd_ack"), "no descriptor went to root: {log}");
}

#[test]
fn no_server_or_a_dead_one_is_a_clear_error_not_a_hang() {
    if !privileged("no_server_or_a_dead_one_is_a_clear_error_not_a_hang") {
        return;
    }
    let _g = serial();
    let bed = bed();
    let dir = Dir::new("gone");
    let sock = dir.path("xsk.sock");
    let rx = |path: &str| {
        let t0 = Instant::now();
        let o = handed_rxdrop(&bed, path, &["--duration", "2"]).output().unwrap();
        assert!(t0.elapsed() < Duration::from_secs(10), "answered in time");
        o
    };
    assert_one_line_refusal(
        "nothing at the path",
        &rx(&sock),
        3,
        &[&sock, "no XSKMAP server", "ENOENT", "--xsk-handoff"],
    );
    // A server killed without cleaning up leaves its socket file: nobody listens there.
    let server = serve(&bed, &sock, NOBODY, std::fs::File::create(dir.path("server.log")).unwrap());
    let mut child = server.into_child();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(std::path::Path::new(&sock).exists());
    assert_one_line_refusal("a dead server", &rx(&sock), 3, &[&sock, "no XSKMAP server", "ECONNREFUSED"]);
    // A new server replaces that stale socket.
    let server = serve(&bed, &sock, NOBODY, std::fs::File::create(dir.path("server2.log")).unwrap());
    // The default UMEM (4096 frames of 4096 bytes, 16 MiB) is more than the default
    // RLIMIT_MEMLOCK (8 MiB) of an unprivileged user: one line saying so and what to change.
    let o = unprivileged(
        bed.ns_b(),
        NOBODY,
        &["bench", "rxdrop", "-i", bed.iface_b(), "--xsk-handoff", &sock, "--duration", "2"],
    )
    .output()
    .unwrap();
    if !o.status.success() {
        let e = stderr(&o);
        assert_eq!(e.trim_end().lines().count(), 1, "{e}");
        assert!(e.contains("ENOBUFS") && e.contains("RLIMIT_MEMLOCK") && e.contains("--frame-count"), "{e}");
    }
    // Without CAP_NET_RAW: one line naming it.
    let mut c = fastpath_testbed::ns_command(bed.ns_b(), "setpriv");
    c.args([
        &format!("--reuid={NOBODY}"),
        &format!("--regid={NOBODY}"),
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--",
        &bin(),
    ]);
    c.args([
        "bench",
        "rxdrop",
        "-i",
        bed.iface_b(),
        "--xsk-handoff",
        &sock,
        "--frame-count",
        FRAMES,
        "--duration",
        "1",
    ]);
    assert_one_line_refusal("no CAP_NET_RAW", &c.output().unwrap(), 4, &["EPERM", "CAP_NET_RAW"]);
    let (_, st) = server.terminate();
    assert!(st.success());
}

#[test]
fn the_serving_side_ending_ends_the_reader_with_one_line() {
    if !privileged("the_serving_side_ending_ends_the_reader_with_one_line") {
        return;
    }
    let _g = serial();
    let bed = bed();
    let dir = Dir::new("end");
    let sock = dir.path("xsk.sock");
    let server = serve(&bed, &sock, NOBODY, std::fs::File::create(dir.path("server.log")).unwrap());
    let mut c = handed_rxdrop(&bed, &sock, &["--json", "--duration", "60"]);
    c.stderr(Stdio::piped());
    let rx = Running::start_cmd(c);
    let (_, st) = server.terminate();
    assert!(st.success());
    let t0 = Instant::now();
    let o = rx.into_child().wait_with_output().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(5), "the reader noticed within a second or so, not at --duration");
    assert_one_line_refusal("the serving side ended", &o, 3, &["left", bed.iface_b(), &sock, "filter load"]);
}

#[test]
fn bad_handoff_options_are_refused_with_nothing_attached() {
    if !privileged("bad_handoff_options_are_refused_with_nothing_attached") {
        return;
    }
    let _g = serial();
    let bed = bed();
    let dir = Dir::new("bad");
    let file = dir.path("file");
    std::fs::write(&file, "x").unwrap();
    let link = dir.path("link");
    std::os::unix::fs::symlink(dir.path("elsewhere"), &link).unwrap();
    let load = |extra: &[&str]| {
        let mut a = vec![
            "filter",
            "load",
            "--rule",
            "proto=udp,dst_port=9,action=xsk",
            "--netns",
            bed.ns_b(),
            "-i",
            bed.iface_b(),
            "--duration",
            "1",
        ];
        a.extend_from_slice(extra);
        run(&a)
    };
    assert_one_line_refusal("a regular file", &load(&["--xsk-handoff", &file]), 2, &[&file, "not a socket"]);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x", "the file is untouched");
    assert_one_line_refusal("a symlink", &load(&["--xsk-handoff", &link]), 2, &[&link, "symlink"]);
    assert!(!std::path::Path::new(&dir.path("elsewhere")).exists(), "the symlink was not followed");
    assert_one_line_refusal("with --detach", &load(&["--xsk-handoff", &dir.path("s"), "--detach"]), 2, &["--detach"]);
    let o = load(&["--xsk-handoff", &dir.path("s"), "--xsk-handoff-allow", "root"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("\"root\" is not a uid"), "{}", stderr(&o));
    assert!(attached(bed.ns_b(), bed.iface_b()).is_none(), "nothing left attached");
    assert!(!std::path::Path::new(&dir.path("s")).exists());
    let o = run(&["bench", "txonly", "--netns", bed.ns_b(), "-i", bed.iface_b(), "--xsk-handoff", &dir.path("s")]);
    assert_one_line_refusal("txonly", &o, 2, &["--xsk-handoff is for rxdrop"]);
}
