//! What the frame-ownership API refuses at compile time (crates/fastpath/src/xsk/mod.rs, "Who
//! owns a frame"), one case per rule, each pinned to the compiler's message in a committed
//! `tests/ui/*.stderr` (trybuild): a case that starts to compile, or fails for another reason
//! (a renamed item, a new field), fails this test.

#[test]
fn frame_ownership_rules_are_enforced_by_the_compiler() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
