// One batch of a ring at a time: a second peek while the first batch lives is refused.
use fastpath::xsk::RxRing;

fn two(rx: &mut RxRing) {
    let a = rx.peek(1);
    let b = rx.peek(1);
    drop(a);
    drop(b);
}

fn main() {}
