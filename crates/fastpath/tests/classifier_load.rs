//! Smoke: the classifier passes the verifier and classifies one frame.
#[test]
fn loads_and_runs() {
    if fastpath::sys::geteuid() != 0 {
        assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "needs root");
        eprintln!("SKIPPED: needs root");
        return;
    }
    let c = fastpath::bpf::Classifier::load().unwrap_or_else(|e| panic!("{e:#}"));
    let set = fastpath::rules::parse_toml("t", "[[rule]]\nproto=\"udp\"\ndst_port=9\naction=\"drop\"\n").unwrap();
    let comp = fastpath::rules::compile::compile("t", &set).unwrap();
    c.swap_in(&comp, &|i| fastpath::sys::if_nametoindex(i)).unwrap();
    let mut f = vec![0u8; 64];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&50u16.to_be_bytes());
    f[23] = 17;
    f[36..38].copy_from_slice(&9u16.to_be_bytes());
    assert_eq!(c.test_run(&f).unwrap(), 1, "XDP_DROP");
    f[37] = 10;
    assert_eq!(c.test_run(&f).unwrap(), 2, "XDP_PASS");
    // The flow cache now holds both frames' verdicts; a reload must not reuse them.
    for (rules, port9, port10) in [
        ("[[rule]]\nproto=\"udp\"\ndst_port=10\naction=\"drop\"\n", 2, 1),
        ("[[rule]]\nproto=\"udp\"\naction=\"tx\"\n", 3, 3),
        ("[[rule]]\nproto=\"udp\"\ndst_port=9\naction=\"drop\"\n", 1, 2),
    ] {
        let set = fastpath::rules::parse_toml("t", rules).unwrap();
        c.swap_in(&fastpath::rules::compile::compile("t", &set).unwrap(), &|i| fastpath::sys::if_nametoindex(i)).unwrap();
        for _ in 0..2 {
            f[37] = 9;
            assert_eq!(c.test_run(&f).unwrap(), port9, "port 9 after reload to {rules:?}");
            f[37] = 10;
            assert_eq!(c.test_run(&f).unwrap(), port10, "port 10 after reload to {rules:?}");
        }
    }
}
