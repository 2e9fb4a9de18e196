//! Single scenarios in one mode each, as plain tests (root: namespaces, XDP, AF_XDP), so that
//! each check the conformance run relies on can be shown to fail on its own
//! (scripts/mutants/conformance.toml): the skb mode really is generic XDP, poll's results are
//! checked, completions are pinned to the running kernel.

use fastpath::bpf::XdpMode;
use fastpath_conformance::{scenarios, xsk, Mode, Napi, Outcome};

/// Runs scenario `name` in `mode` on a bed of its own.
fn run(name: &str, mode: Mode) -> Outcome {
    let bed = xsk::bed().expect("test bed (root)");
    let s = scenarios::all().into_iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no scenario {name}"));
    (s.run)(&bed, mode)
}

fn assert_pass(name: &str, mode: Mode) {
    let o = run(name, mode);
    assert!(matches!(o, Outcome::Pass(_)), "{name} in {}: {} {}", mode.name(), o.word(), o.detail());
}

const SKB: Mode = Mode { xdp: XdpMode::Skb, napi: Napi::Softirq };
const DRV: Mode = Mode { xdp: XdpMode::Native, napi: Napi::Softirq };

#[test]
fn the_four_modes_are_the_kernels() {
    let mut seen: Vec<(bool, bool)> =
        Mode::ALL.iter().map(|m| (m.xdp == XdpMode::Skb, m.napi == Napi::BusyPoll)).collect();
    seen.sort_unstable();
    assert_eq!(seen, vec![(false, false), (false, true), (true, false), (true, true)], "{:?}", Mode::ALL);
}

/// The redirect program of an skb-mode run is attached as generic XDP (checked against what
/// the kernel reports), and traffic passes through it.
#[test]
fn skb_mode_redirect_is_generic_xdp() {
    assert_pass("SEND_RECEIVE", SKB);
}

/// The same for the scenarios' own programs.
#[test]
fn skb_mode_test_prog_is_generic_xdp() {
    assert_pass("XDP_DROP_HALF", SKB);
}

/// POLL_RX reads the RX ring only after poll(POLLIN) said so, and checks what poll said.
#[test]
fn poll_rx_checks_poll() {
    assert_pass("POLL_RX", DRV);
}

/// POLL_TX drives transmission with poll(POLLOUT) and checks what poll said.
#[test]
fn poll_tx_checks_poll() {
    assert_pass("POLL_TX", SKB);
}

/// Every completion of the aligned table is the one the running kernel gives.
#[test]
fn aligned_inv_desc_pins_completions() {
    assert_pass("ALIGNED_INV_DESC", DRV);
}
