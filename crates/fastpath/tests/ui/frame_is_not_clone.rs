// A frame token cannot be duplicated by clone().
use fastpath::xsk::Frame;

fn twice(f: Frame) -> (Frame, Frame) {
    (f.clone(), f)
}

fn main() {}
