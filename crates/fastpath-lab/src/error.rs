//! The lab's error: one variant per class of failure, so that a front end (the `fastpath`
//! command) can choose its exit code by the variant. At the bottom: no other module of the lab
//! is used here.

use fastpath::bpf::BpfError;
use fastpath_testbed::TestbedError;

/// Why an experiment failed. The message is the error's `{:#}` text (one line, its causes
/// joined by ": ").
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// A value given to the experiment is not accepted (the command line's fault).
    #[error("{0:#}")]
    Usage(anyhow::Error),
    /// The environment lacks something: a program (sockperf, iperf3, nft...), a namespace,
    /// privileges, CPUs.
    #[error("{0:#}")]
    Environment(anyhow::Error),
    /// The kernel or the BPF side refused (load, attach, bind).
    #[error("{0:#}")]
    Kernel(anyhow::Error),
    /// The running kernel lacks a feature the experiment needs.
    #[error("{0:#}")]
    Unsupported(anyhow::Error),
    /// Failure while running (a program failed, a thread panicked, interrupted).
    #[error("{0:#}")]
    Runtime(anyhow::Error),
    /// The BPF side failed; its own kind tells the class (occupied, unsupported, refused...).
    #[error(transparent)]
    Bpf(#[from] BpfError),
    /// The test bed failed; [`TestbedError::needs_root`] tells missing privileges from the rest.
    #[error(transparent)]
    Testbed(#[from] TestbedError),
}

/// The lab's result.
pub type LabResult<T> = Result<T, LabError>;

/// A [`LabError::Usage`].
pub fn usage(e: impl Into<anyhow::Error>) -> LabError {
    LabError::Usage(e.into())
}
/// A [`LabError::Environment`].
pub fn env(e: impl Into<anyhow::Error>) -> LabError {
    LabError::Environment(e.into())
}
/// A [`LabError::Kernel`].
pub fn kernel(e: impl Into<anyhow::Error>) -> LabError {
    LabError::Kernel(e.into())
}
/// A [`LabError::Runtime`].
pub fn runtime(e: impl Into<anyhow::Error>) -> LabError {
    LabError::Runtime(e.into())
}
