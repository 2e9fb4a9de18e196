//! What the test bed's API refuses at compile time, with the compiler's message pinned in
//! `tests/ui/*.stderr` (trybuild).

#[test]
fn testbed_guard_is_not_send() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
