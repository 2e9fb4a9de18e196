// A frame given to the TX ring cannot be touched afterwards: the kernel owns it.
use fastpath::xsk::{Frame, TxRing, Umem};

fn send(umem: &Umem, tx: &mut TxRing, mut f: Frame) {
    let mut batch = tx.reserve(1);
    batch.push(f);
    umem.data_mut(&mut f)[0] = 1;
}

fn main() {}
