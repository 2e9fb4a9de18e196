// A frame token is not Copy: using it after a move is refused.
use fastpath::xsk::Frame;

fn twice(f: Frame) -> (Frame, Frame) {
    let g = f;
    (g, f)
}

fn main() {}
