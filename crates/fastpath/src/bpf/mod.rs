//! XDP programs: skeleton loading, attach / detach through a bpf_link, typed map access.
//!
//! Every program is attached with `BPF_LINK_CREATE` (kernel >= 5.9). The link's only fd is held
//! by [`XdpLink`]; closing it detaches the program, so the kernel detaches it for us on every
//! exit path, even SIGKILL (Documentation/bpf/bpf_design_QA.rst, "bpf_link"). Needs
//! CAP_NET_ADMIN and CAP_BPF (or root).
//!
//! One file per program (`xsk_redirect`, `xdp_drop`, `xdp_gen`, `classifier`, `fwd`,
//! `cpumap`, `monitor`, `replay`, `capture`, `syncookie`), as aya keeps one per program type;
//! beside them `link` (attach plumbing, [`XdpLink`], the link and interface queries), `error`
//! ([`BpfError`]), `env` (privileges, bpffs, memlock, lock file), `maps` (typed map access),
//! `skel` (the generated skeletons) and [`names`].

mod env;
mod error;
mod link;
mod skel;
mod xdp_drop;
mod xdp_gen;
mod xsk_redirect;

#[cfg(feature = "capture")]
pub mod capture;
#[cfg(feature = "classifier")]
pub mod classifier;
#[cfg(feature = "cpumap")]
pub mod cpumap;
#[cfg(feature = "fwd")]
pub mod fwd;
pub mod maps;
pub mod monitor;
pub mod names;
#[cfg(feature = "replay")]
pub mod replay;
#[cfg(feature = "classifier")]
pub mod syncookie;

#[cfg(feature = "classifier")]
pub use classifier::{AttachedClassifier, Classifier, LoadedClassifier, PinRules, PinnedClassifier, SetIndex};
#[cfg(feature = "cpumap")]
pub use cpumap::{CpuDist, CpumapConfig, RedirectCpu, RemoteAction};
pub use env::{ensure_bpffs, have_privileges, lock_file, raise_memlock_limit};
pub use error::BpfError;
pub use link::{
    force_detach, link_info, prog_name, query_xdp, Attach, AttachOpts, Attached, AttachedMode, AttachedProg, LinkInfo,
    Loaded, XdpLink, XdpMode,
};
pub use monitor::{MonitorFilter, XdpMonitor, XdpMonitorStats};
#[cfg(feature = "replay")]
pub use replay::{ReplayTiming, XdpReplay};
pub use xdp_drop::XdpDrop;
pub use xdp_gen::XdpGen;
pub use xsk_redirect::{XskRedirect, XskRedirectOpts};
