// A frame cannot be given to a ring while its bytes are borrowed.
use fastpath::xsk::{FillRing, Frame, Umem};

fn fill(umem: &Umem, fq: &mut FillRing, mut f: Frame) {
    let bytes = umem.data_mut(&mut f);
    fq.reserve(1).push(f);
    bytes[0] = 1;
}

fn main() {}
