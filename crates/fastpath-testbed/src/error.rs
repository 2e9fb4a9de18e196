//! The test bed's error type.

/// Everything that can go wrong while building, using or tearing down a test bed.
///
/// Every message is one line that names the bad value or the failed command, and the
/// underlying cause is part of that line (no separate `source()` chain to print).
#[derive(thiserror::Error, Debug)]
#[non_exhaustive]
pub enum TestbedError {
    /// A test bed name that cannot be used for namespace and interface names.
    #[error("invalid test bed name `{name}`: {reason}; accepted: 1 to 12 ASCII letters or digits")]
    InvalidName {
        /// The rejected name.
        name: String,
        /// Why it was rejected.
        reason: &'static str,
    },

    /// A queue count outside what a veth accepts.
    #[error("invalid queue count {queues}: accepted 1 to {max}")]
    InvalidQueues {
        /// The rejected count.
        queues: u32,
        /// The largest accepted count.
        max: u32,
    },

    /// An external command (`ip`, `ethtool`, `tc`, `sh`) exited unsuccessfully.
    #[error("command `{cmd}` failed ({status}): {stderr}")]
    Command {
        /// The command line as run.
        cmd: String,
        /// `exit N` or `killed by signal N`.
        status: String,
        /// Its standard error, folded into one line.
        stderr: String,
    },

    /// An external command failed because the caller lacks privileges.
    #[error(
        "command `{cmd}` failed ({status}): {stderr}; network namespaces need root (CAP_SYS_ADMIN and CAP_NET_ADMIN)"
    )]
    NeedsRoot {
        /// The command line as run.
        cmd: String,
        /// `exit N` or `killed by signal N`.
        status: String,
        /// Its standard error, folded into one line.
        stderr: String,
    },

    /// An external command could not be started at all (for example not installed).
    #[error("cannot run `{cmd}`: {cause}{hint}")]
    Spawn {
        /// The command line that was attempted.
        cmd: String,
        /// The error from the operating system.
        cause: std::io::Error,
        /// A hint such as which package provides the program (may be empty).
        hint: &'static str,
    },

    /// An adopted test bed (or one of its namespaces) does not exist.
    #[error("test bed `{name}` not found: network namespace `{missing}` does not exist")]
    NotFound {
        /// The test bed name.
        name: String,
        /// The namespace that is missing.
        missing: String,
    },

    /// A file operation failed.
    #[error("{op} `{path}` failed: {cause}")]
    Io {
        /// What was attempted, e.g. `read`.
        op: &'static str,
        /// The path it was attempted on.
        path: String,
        /// The error from the operating system.
        cause: std::io::Error,
    },

    /// Entering a network namespace failed.
    #[error("cannot enter network namespace `{ns}`: {op} failed: {cause}{hint}")]
    Netns {
        /// The namespace name.
        ns: String,
        /// The failed step, e.g. `open /var/run/netns/x` or `setns(CLONE_NEWNET)`.
        op: String,
        /// The errno.
        cause: nix::Error,
        /// A hint (may be empty).
        hint: &'static str,
    },

    /// A command's output could not be understood.
    #[error("unexpected output from `{cmd}`: {detail}")]
    Parse {
        /// The command line as run.
        cmd: String,
        /// What was expected and not found.
        detail: String,
    },

    /// Threaded NAPI was enabled but no NAPI kernel thread for the interface appeared.
    #[error("no kernel thread named `napi/{iface}-<id>` appeared within 1 s after enabling threaded NAPI on `{iface}` in `{ns}`")]
    NoNapiThreads {
        /// The namespace of the interface.
        ns: String,
        /// The interface.
        iface: String,
    },

    /// Setting the CPU affinity of a NAPI kernel thread failed.
    #[error("sched_setaffinity(pid={pid} `{comm}`, cpu={cpu}) failed: {cause}{hint}")]
    Affinity {
        /// The kernel thread's id.
        pid: i32,
        /// The kernel thread's name.
        comm: String,
        /// The requested CPU.
        cpu: usize,
        /// The errno.
        cause: nix::Error,
        /// A hint (may be empty).
        hint: &'static str,
    },

    /// Setting the scheduling policy of a NAPI kernel thread failed.
    #[error("sched_setscheduler(pid={pid} `{comm}`, SCHED_FIFO, priority {priority}) failed: {cause} (priority 1..=99, needs CAP_SYS_NICE)")]
    Scheduler {
        /// The kernel thread's id.
        pid: i32,
        /// The kernel thread's name.
        comm: String,
        /// The requested priority.
        priority: i32,
        /// The errno.
        cause: nix::Error,
    },
}

impl TestbedError {
    /// True when the error means the caller lacks root / the needed capabilities, so a CLI
    /// can map it to its "environment/privilege" exit code.
    pub fn needs_root(&self) -> bool {
        match self {
            TestbedError::NeedsRoot { .. } => true,
            TestbedError::Netns { cause, .. }
            | TestbedError::Affinity { cause, .. }
            | TestbedError::Scheduler { cause, .. } => {
                matches!(cause, nix::Error::EPERM | nix::Error::EACCES)
            }
            TestbedError::Io { cause, .. } => cause.kind() == std::io::ErrorKind::PermissionDenied,
            _ => false,
        }
    }
}
