//! AF_XDP sockets: UMEM, the four rings, binding, mode negotiation and XDP_STATISTICS.
//!
//! Source for kernel behaviour: Documentation/networking/af_xdp.rst and
//! include/uapi/linux/if_xdp.h. AF_XDP needs kernel >= 4.18; need_wakeup >= 5.4;
//! SO_PREFER_BUSY_POLL / SO_BUSY_POLL_BUDGET >= 5.11; XDP_MAX_TX_SKB_BUDGET >= 6.17.
//! Creating a socket needs CAP_NET_RAW; attaching its XDP program needs CAP_NET_ADMIN + CAP_BPF.

pub mod ring;
mod socket;

pub use ring::{ConsRing, HeapRing, ProdRing, RawRing, XdpDesc};
pub use socket::{BusyPoll, CopyMode, XskConfig, XskError, XskSocket, XskStats};
