//! The kernel/user ABI of fastpath's BPF programs, generated from the one source,
//! `bpf/include/fastpath_abi.h`.
//!
//! `build.rs` runs bindgen over the header (with the same include paths the BPF programs are
//! compiled with) into `OUT_DIR/fastpath_abi.rs`; this module includes it. Every map key and
//! value the library writes or reads is one of these `#[repr(C)]` structs, turned into bytes
//! with [`bytemuck`] ([`bytemuck::bytes_of`], [`bytemuck::cast_slice`]) and back with
//! [`read`]. No byte offset is written by hand anywhere in the library.
//!
//! **Why bindgen, not libbpf-cargo's skeleton types.** The skeleton (`OUT_DIR/*.skel.rs`,
//! `types` module) only holds the types that appear in some program's BTF as a map key or
//! value or a global: it has no `#define` constants at all (`FP_ACT_*`, `FP_STAT_*`,
//! `FP_CLS_MAX_*`, `FP_PAYLOAD_*`), it lacks `struct fp_payload` (used through a pointer
//! only), each program's skeleton has its own copy of the shared structs (`xdp_drop`'s
//! `fp_pkt_stats` is not the classifier's), it drops `aligned(64)` from `fp_pkt_stats`, and its
//! structs are not `Pod`. bindgen covers every struct and constant of the header once, and
//! lets `build.rs` derive [`bytemuck::Pod`] on each struct, whose derive refuses to compile a
//! struct with implicit padding (bytes the kernel would see uninitialised).
//!
//! **Checks.** The header `_Static_assert`s the size of every struct (checked when the BPF
//! programs are compiled for `-target bpf`); the same sizes are `const` assertions here
//! (checked for the host target), so the two compilers must agree. `bpf::classifier` also
//! refuses pins whose map value sizes differ ([`crate::bpf::BpfError::OtherVersion`]).
//!
//! Names are the C names; bindgen renames a field that is a Rust keyword (2024 edition)
//! with a trailing underscore: `fp_cls_config.gen` is `gen_`.
//!
//! Byte order: map keys and values are host order (the BPF program runs on the same CPU);
//! [`fp_payload`] travels on the wire and is little-endian ([`crate::packet`]).
//! Build requirement: libclang (Debian `libclang-dev`, installed by `scripts/deps.sh`).

#[allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    missing_docs,
    clippy::all,
    clippy::pedantic,
    clippy::undocumented_unsafe_blocks
)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/fastpath_abi.rs"));
}

pub use generated::*;

use std::mem::size_of;

// SAFETY: a union of a c_int and a __u32 (include/uapi/linux/bpf.h, `bpf_prog` of
// bpf_cpumap_val): 4 bytes, no padding, every bit pattern is a valid value of both members.
unsafe impl bytemuck::Pod for bpf_cpumap_val__bindgen_ty_1 {}
// SAFETY: as above, the `bpf_prog` union of bpf_devmap_val.
unsafe impl bytemuck::Pod for bpf_devmap_val__bindgen_ty_1 {}

// The sizes fastpath_abi.h asserts with _Static_assert, checked again for the host target.
const _: () = assert!(size_of::<fp_pkt_stats>() == 64 && std::mem::align_of::<fp_pkt_stats>() == 64);
const _: () = assert!(size_of::<fp_payload>() == FP_PAYLOAD_LEN as usize);
const _: () = assert!(size_of::<fp_rx_meta>() == 24);
const _: () = assert!(size_of::<fp_cls_key>() == 56);
const _: () = assert!(size_of::<fp_cls_tuple>() == 48);
const _: () = assert!(size_of::<fp_cls_slot>() == 64);
const _: () = assert!(size_of::<fp_cls_action>() == 24);
const _: () = assert!(size_of::<fp_gen_pace>() == 56);
const _: () = assert!(size_of::<fp_replay_frame_hdr>() == 16);
const _: () = assert!(size_of::<fp_replay_state>() == 64);
const _: () = assert!(size_of::<fp_cls_config>() == 48);
const _: () = assert!(size_of::<fp_flow_key>() == 48);
const _: () = assert!(size_of::<fp_cache_slot>() == 56);
const _: () = assert!(size_of::<fp_cpu_set>() == 4 + 4 * FP_CLS_MAX_CPUS as usize);
const _: () = assert!(size_of::<fp_rate_key>() == 20);
const _: () = assert!(size_of::<fp_rate_bucket>() == 16);
const _: () = assert!(size_of::<fp_rate_total>() == 24);
// include/uapi/linux/bpf.h: CPUMAP and DEVMAP values with their program member (>= 5.9/5.8).
const _: () = assert!(size_of::<bpf_cpumap_val>() == 8 && size_of::<bpf_devmap_val>() == 8);
const _: () = assert!(size_of::<fp_cap_hdr>() == 24 && size_of::<fp_cap_stats>() == 32);

/// Reads a `T` from the first `size_of::<T>()` bytes of `bytes` (a map value as libbpf returns
/// it; per-CPU values are padded to 8 bytes). `None` if `bytes` is shorter.
pub fn read<T: bytemuck::Pod>(bytes: &[u8]) -> Option<T> {
    bytes.get(..size_of::<T>()).map(bytemuck::pod_read_unaligned)
}
