// A frame cannot be made from numbers: its fields are private...
use fastpath::xsk::Frame;

fn main() {
    let _f = Frame { addr: 0, len: 64, umem_id: 1, contd: false, tx_meta: false };
}
