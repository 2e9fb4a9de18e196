//! AF_XDP: the UMEM, the four rings, sockets (shared UMEM in both kernel modes), mode
//! negotiation and XDP_STATISTICS.
//!
//! Source for kernel behaviour: Documentation/networking/af_xdp.rst and
//! include/uapi/linux/if_xdp.h. Minimum kernels: AF_XDP 4.18; need_wakeup 5.4; a shared UMEM
//! with per-socket FILL/COMPLETION rings 5.10; SO_PREFER_BUSY_POLL / SO_BUSY_POLL_BUDGET 5.11;
//! XDP_MAX_TX_SKB_BUDGET 6.17. Creating a socket needs CAP_NET_RAW; attaching its XDP program
//! needs CAP_NET_ADMIN + CAP_BPF.
//!
//! # Who owns a frame
//!
//! Every frame of a [`Umem`] is, at any moment, owned by exactly one party. User space owns a
//! frame exactly while a [`Frame`] token for it exists; the token is not `Copy` or `Clone`, and
//! it is given up by value when the frame goes to the kernel. Frame bytes are reached only
//! through a token ([`Umem::data`], [`Umem::data_mut`], [`Umem::resize`], [`Umem::resize_at`]), so safe code cannot
//! read or write a frame the kernel owns.
//!
//! ```text
//!   where the frame is            owner    how it gets there              token
//!   ---------------------------   ------   ----------------------------   ------------------------
//!   Umem::new's Vec<Frame>        user     created once per frame          Frame (addr, len 0)
//!   FILL ring                     kernel   FillBatch::push(Frame)          consumed
//!   being received into           kernel   (kernel took it from FILL)      -
//!   RX ring                       user*    kernel wrote a descriptor       RxBatch yields Frame
//!   TX ring / being sent          kernel   TxBatch::push(Frame)            consumed
//!   COMPLETION ring               user*    kernel finished sending         CompBatch yields Frame
//!   dropped token                 nobody   drop(Frame)                     frame out of circulation
//! ```
//! (*) the slot is user-side once published; the token is made when the batch yields it, and the
//! slot is released to the kernel when the batch goes.
//!
//! Sockets that share a UMEM share its frames: a frame received on one socket may be sent on
//! another (the DPDK l2fwd model), or put on the FILL ring of another; the token moves with it
//! (it is `Send`). A token of one UMEM is refused (panic) by another UMEM's rings and memory.
//!
//! Refill, reap and TX wake-up are written once (`datapath.rs`), for both the port of the port
//! API (`io::afxdp`) and [`XskPair`].
//!
//! The unsafe code of this module is in `ring.rs` (the index protocol, descriptor reads and
//! writes), `umem.rs` (frame bytes) and one place of `socket.rs` (the rings built over their
//! mmap'ed memory). Elsewhere in the crate: `sys/` (every raw system call), `io/tpacket.rs`
//! and `io/tap_uring.rs` (their own rings). Every unsafe block carries a SAFETY comment (a
//! lint enforces it).
//!
//! The compiler enforces these rules; each is a case of `tests/compile_fail.rs` (trybuild), its
//! expected message pinned in `tests/ui/*.stderr`: a frame given to a ring cannot be touched
//! afterwards (E0382), nor given while its bytes are borrowed (E0505); a token cannot be cloned
//! (E0599), copied (E0382) or made from numbers (private fields E0451, private constructor
//! E0624); bytes are reached through a token, never an address (E0308); and a ring has one
//! batch at a time (E0499). For example, this is refused:
//! ```text
//! fn send(umem: &Umem, tx: &mut TxRing, mut f: Frame) {
//!     tx.reserve(1).push(f);
//!     umem.data_mut(&mut f)[0] = 1; // error[E0382]: borrow of moved value: `f`
//! }
//! ```
//! while the same code with the order fixed compiles:
//! ```
//! fn send(umem: &fastpath::xsk::Umem, tx: &mut fastpath::xsk::TxRing, mut f: fastpath::xsk::Frame) {
//!     umem.resize(&mut f, 60)[0] = 1;
//!     tx.reserve(1).push(f);
//! }
//! ```

pub(crate) mod datapath;
#[cfg(feature = "netlink")]
pub mod diag;
mod pair;
pub(crate) mod ring;
pub mod rx_meta;
mod socket;
pub mod tx_meta;
mod umem;

pub use pair::{DirStats, XskPair};
pub use ring::{
    CompBatch, CompRing, FillBatch, FillRing, RxBatch, RxRing, TxBatch, TxRing, XdpDesc, XDP_PKT_CONTD,
    XDP_RING_NEED_WAKEUP,
};
pub use rx_meta::{KfuncErrno, RssType, RxMeta, Timestamp, VlanTag, RX_META_LEN};
pub use socket::{BusyPoll, CopyMode, RxQueues, Sharing, SocketConfig, XskConfig, XskError, XskSocket, XskStats};
pub use tx_meta::{TxCsum, TxMeta, XskFeatureNeed, TX_META_LEN, XDP_TX_METADATA};
pub(crate) use umem::FrameIndexer;
pub use umem::{Frame, Umem, UmemConfig};

pub use crate::sys::uapi::XDP_PACKET_HEADROOM;

/// The page size in bytes (`sysconf(_SC_PAGESIZE)`): a UMEM is page-aligned, and a live-frames
/// generator's frame (its `XDP_PACKET_HEADROOM` and the kernel's `skb_shared_info` included)
/// must fit one page.
pub fn page_size() -> usize {
    crate::sys::page_size()
}
