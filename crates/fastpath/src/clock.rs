//! The clocks a program compares with the kernel's: CLOCK_MONOTONIC (what `bpf_ktime_get_ns()`
//! reads, so user-space and BPF timestamps compare directly) and CLOCK_TAI (the clock of
//! copy-mode AF_XDP TX completion timestamps).

/// CLOCK_MONOTONIC in nanoseconds: the clock `bpf_ktime_get_ns()` reads, so user-space and
/// BPF timestamps compare directly.
#[inline]
pub fn monotonic_ns() -> u64 {
    crate::sys::monotonic_ns()
}

/// CLOCK_TAI in nanoseconds: the clock of copy-mode AF_XDP TX timestamps
/// ([`crate::xsk::Umem::tx_completion_timestamp`]).
#[inline]
pub fn tai_ns() -> u64 {
    crate::sys::tai_ns()
}
