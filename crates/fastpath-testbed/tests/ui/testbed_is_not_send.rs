// A Testbed guard stays on the thread that made it (network-namespace state belongs to a thread).
fn assert_send<T: Send>() {}

fn main() {
    assert_send::<fastpath_testbed::Testbed>();
}
