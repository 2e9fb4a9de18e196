//! Exit codes per error class and the one-line error report.

use fastpath::bpf::BpfError;
use fastpath::xsk::XskError;

/// Bad value on the command line (clap uses 2 as well).
pub const EXIT_USAGE: i32 = 2;
/// Environment: missing privileges, namespace or tool.
pub const EXIT_ENV: i32 = 3;
/// The kernel or the BPF side refused (load, attach, bind).
pub const EXIT_KERNEL: i32 = 4;
/// Failure while running.
pub const EXIT_RUNTIME: i32 = 5;
/// The running kernel lacks a feature the command needs (`fastpath::features::Unsupported`:
/// "<feature> is not supported by this kernel (needs Linux >= X)").
pub const EXIT_UNSUPPORTED: i32 = 6;

/// An error with its exit code.
#[derive(Debug)]
pub struct CliError {
    pub code: i32,
    pub err: anyhow::Error,
}

pub type CliResult<T> = Result<T, CliError>;

pub fn usage(e: impl Into<anyhow::Error>) -> CliError {
    CliError { code: EXIT_USAGE, err: e.into() }
}
pub fn env(e: impl Into<anyhow::Error>) -> CliError {
    CliError { code: EXIT_ENV, err: e.into() }
}
pub fn kernel(e: impl Into<anyhow::Error>) -> CliError {
    CliError { code: EXIT_KERNEL, err: e.into() }
}
pub fn runtime(e: impl Into<anyhow::Error>) -> CliError {
    CliError { code: EXIT_RUNTIME, err: e.into() }
}
pub fn unsupported(e: impl Into<anyhow::Error>) -> CliError {
    CliError { code: EXIT_UNSUPPORTED, err: e.into() }
}

impl From<fastpath::features::Unsupported> for CliError {
    fn from(e: fastpath::features::Unsupported) -> Self {
        unsupported(e)
    }
}

impl From<fastpath::netdev::NoSuchInterface> for CliError {
    fn from(e: fastpath::netdev::NoSuchInterface) -> Self {
        XskError::from(e).into()
    }
}

impl From<XskError> for CliError {
    fn from(e: XskError) -> Self {
        match e {
            XskError::NoSuchInterface(ref n) => {
                let elsewhere = crate::hints::iface_elsewhere(&n.iface);
                usage(anyhow::anyhow!("{e}{elsewhere}"))
            }
            XskError::QueueOutOfRange { .. }
            | XskError::BadSize { .. }
            | XskError::BadUnalignedFrameSize { .. }
            | XskError::UnalignedZeroCopy { .. }
            | XskError::BadHeadroom { .. }
            | XskError::BadTxMeta(_) => usage(e),
            XskError::Unsupported(_) | XskError::DriverLacks { .. } => unsupported(e),
            XskError::NoZeroCopy { .. } => {
                kernel(anyhow::anyhow!("{e}; use --copy-mode copy, or auto to fall back to copy mode"))
            }
            _ => kernel(e),
        }
    }
}

impl From<fastpath::io::PortError> for CliError {
    fn from(e: fastpath::io::PortError) -> Self {
        use fastpath::io::PortError;
        match e {
            PortError::Config { .. } | PortError::UnknownPath(_) => usage(e),
            PortError::Xsk(x) => x.into(),
            PortError::Bpf(b) => b.into(),
            other => kernel(other),
        }
    }
}

impl From<BpfError> for CliError {
    fn from(e: BpfError) -> Self {
        match e {
            // fastpath's own classifier: the commands that change or remove it, never --force.
            BpfError::PinnedClassifier { ref iface, .. } => {
                let hint = crate::hints::pinned_hint(iface);
                env(anyhow::anyhow!("{e}: {hint}"))
            }
            // The library states what is there; the option that replaces it is the CLI's.
            BpfError::Occupied { .. } => env(anyhow::anyhow!("{e}; pass --force to replace it")),
            BpfError::ModeUnsupported { mode: fastpath::bpf::XdpMode::Native, .. } => {
                kernel(anyhow::anyhow!("{e}; try --xdp-mode skb"))
            }
            BpfError::MtuTooLarge { ref iface, ref max_hint, .. } => {
                let fix = crate::hints::in_entered_ns(&format!(
                    "lower the MTU (ip link set dev {iface} mtu {max_hint}) or use --xdp-mode skb"
                ));
                kernel(anyhow::anyhow!("{e}; {fix}"))
            }
            BpfError::UntrustedPinDir { .. } | BpfError::Stale { .. } | BpfError::OtherVersion { .. } => env(e),
            BpfError::Unsupported(_) | BpfError::MissingFeature { .. } => unsupported(e),
            BpfError::BadValue { .. } => usage(e),
            _ => kernel(e),
        }
    }
}

impl From<fastpath::rules::RuleError> for CliError {
    fn from(e: fastpath::rules::RuleError) -> Self {
        usage(e)
    }
}

impl From<fastpath_testbed::TestbedError> for CliError {
    fn from(e: fastpath_testbed::TestbedError) -> Self {
        if e.needs_root() {
            env(e)
        } else {
            runtime(e)
        }
    }
}

impl From<fastpath_lab::LabError> for CliError {
    fn from(e: fastpath_lab::LabError) -> Self {
        use fastpath_lab::LabError;
        match e {
            LabError::Usage(e) => usage(e),
            LabError::Environment(e) => env(e),
            LabError::Kernel(e) => kernel(e),
            LabError::Unsupported(e) => unsupported(e),
            LabError::Runtime(e) => runtime(e),
            LabError::Bpf(e) => e.into(),
            LabError::Testbed(e) => e.into(),
        }
    }
}

/// The lab's error of the same class (the exit code) and text: what a path the CLI opens for a
/// lab experiment (its [`crate::session::Session`]) returns through the lab.
impl From<CliError> for fastpath_lab::LabError {
    fn from(e: CliError) -> Self {
        use fastpath_lab::LabError;
        match e.code {
            EXIT_USAGE => LabError::Usage(e.err),
            EXIT_ENV => LabError::Environment(e.err),
            EXIT_KERNEL => LabError::Kernel(e.err),
            EXIT_UNSUPPORTED => LabError::Unsupported(e.err),
            _ => LabError::Runtime(e.err),
        }
    }
}

/// Refuses to go on without the privileges AF_XDP and XDP need.
pub fn require_privileges(what: &str) -> CliResult<()> {
    if fastpath::bpf::have_privileges() {
        return Ok(());
    }
    Err(env(anyhow::anyhow!("fastpath {what} needs root, or CAP_NET_ADMIN + CAP_BPF + CAP_NET_RAW (try sudo)")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use fastpath::features::{Feature, Unsupported};

    #[test]
    fn a_missing_kernel_feature_has_its_own_exit_code_and_one_line() {
        let u = Unsupported::of(Feature::LiveFrames);
        let e = CliError::from(BpfError::Unsupported(u));
        assert_eq!(e.code, EXIT_UNSUPPORTED);
        assert!(![EXIT_USAGE, EXIT_ENV, EXIT_KERNEL, EXIT_RUNTIME].contains(&EXIT_UNSUPPORTED));
        let msg = format!("{:#}", e.err);
        assert!(!msg.contains('\n') && msg.ends_with("(needs Linux >= 5.18)"), "{msg}");
        assert_eq!(CliError::from(u).code, EXIT_UNSUPPORTED);
    }
}
