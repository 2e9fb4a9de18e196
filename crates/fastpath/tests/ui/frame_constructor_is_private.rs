// ...and so is its constructor.
use fastpath::xsk::Frame;

fn main() {
    let _f = Frame::new(0, 64, 1);
}
