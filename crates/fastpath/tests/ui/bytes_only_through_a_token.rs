// Frame bytes are reached only through a token, never by address.
use fastpath::xsk::Umem;

fn peek(umem: &Umem) -> u8 {
    umem.data(&4096u64)[0]
}

fn main() {}
