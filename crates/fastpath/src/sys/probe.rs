//! The system calls of the kernel feature probes ([`crate::features`]): loading a tiny BPF
//! program from raw instructions, BPF_PROG_RUN, `bpf_raw_tracepoint_open`, kernel BTF lookups,
//! `uname` and `unshare(CLONE_NEWNET)`. AF_XDP sockets, socket options and `bind` use the
//! wrappers of [`crate::sys`].

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use libbpf_rs::libbpf_sys;

use super::SysError;

/// One BPF instruction (`struct bpf_insn`, include/uapi/linux/bpf.h): opcode, registers (dst in
/// the low nibble on little-endian, src in the high one), offset, immediate.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct Insn {
    /// Opcode.
    pub code: u8,
    /// Registers; 0 = r0, r0 for every instruction the probes use.
    pub regs: u8,
    /// Signed offset.
    pub off: i16,
    /// Signed immediate.
    pub imm: i32,
}

const _: () = assert!(std::mem::size_of::<Insn>() == std::mem::size_of::<libbpf_sys::bpf_insn>());

impl Insn {
    /// `r0 = imm` (BPF_ALU64 | BPF_MOV | BPF_K).
    pub const fn mov_r0(imm: i32) -> Self {
        Self { code: 0xb7, regs: 0, off: 0, imm }
    }
    /// `exit` (BPF_JMP | BPF_EXIT).
    pub const fn exit() -> Self {
        Self { code: 0x95, regs: 0, off: 0, imm: 0 }
    }
}

/// What to load: program type, expected attach type and (for BTF-enabled tracing programs)
/// the target's BTF id in vmlinux.
#[derive(Debug, Clone, Copy)]
pub struct ProgSpec<'a> {
    /// `BPF_PROG_TYPE_*`.
    pub prog_type: libbpf_sys::bpf_prog_type,
    /// `BPF_*` attach type (0 when the type needs none).
    pub expected_attach_type: libbpf_sys::bpf_attach_type,
    /// BTF id of the attach target in vmlinux (0 for none).
    pub attach_btf_id: u32,
    /// Program name (up to 15 bytes), shown by `bpftool prog`.
    pub name: &'a str,
    /// The instructions.
    pub insns: &'a [Insn],
}

/// `bpf(BPF_PROG_LOAD)` of `spec` with license "Dual MIT/GPL" (the one of bpf/*.bpf.c). Needs
/// CAP_BPF (or root); kernel >= 3.18, tracing programs >= 5.5.
pub fn prog_load(spec: &ProgSpec<'_>) -> Result<OwnedFd, SysError> {
    let name = CString::new(spec.name).expect("no NUL in a program name");
    let license = c"Dual MIT/GPL";
    let mut opts = libbpf_sys::bpf_prog_load_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_prog_load_opts>() as _,
        expected_attach_type: spec.expected_attach_type,
        attach_btf_id: spec.attach_btf_id,
        ..Default::default()
    };
    // SAFETY: name and license are NUL-terminated; insns points to insns.len() instructions of
    // the kernel's layout (size checked above); opts is a sized options struct. All outlive the call.
    let fd = unsafe {
        libbpf_sys::bpf_prog_load(
            spec.prog_type,
            name.as_ptr(),
            license.as_ptr(),
            spec.insns.as_ptr().cast(),
            spec.insns.len() as _,
            &mut opts,
        )
    };
    if fd < 0 {
        return Err(SysError {
            call: format!(
                "bpf(BPF_PROG_LOAD, type={}, attach_type={}, attach_btf_id={}, insns={})",
                spec.prog_type,
                spec.expected_attach_type,
                spec.attach_btf_id,
                spec.insns.len()
            ),
            errno: -fd,
        });
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `bpf(BPF_PROG_TEST_RUN)` of `prog` over `data`, `repeat` times, with `flags`
/// (e.g. `BPF_F_TEST_XDP_LIVE_FRAMES`, kernel >= 5.18). Returns the program's return value.
pub fn prog_test_run(prog: &OwnedFd, data: &[u8], repeat: u32, flags: u32) -> Result<u32, SysError> {
    let mut opts = libbpf_sys::bpf_test_run_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_test_run_opts>() as _,
        data_in: data.as_ptr().cast(),
        data_size_in: data.len() as u32,
        repeat: repeat as i32,
        flags,
        ..Default::default()
    };
    // SAFETY: opts points to data, which outlives the call; the kernel only reads it.
    let rc = unsafe { libbpf_sys::bpf_prog_test_run_opts(prog.as_raw_fd(), &mut opts) };
    if rc < 0 {
        return Err(SysError {
            call: format!("bpf(BPF_PROG_TEST_RUN, len={}, repeat={repeat}, flags={flags:#x})", data.len()),
            errno: -rc,
        });
    }
    Ok(opts.retval)
}

/// `bpf(BPF_RAW_TRACEPOINT_OPEN)` of a BTF-enabled tracing program (`tp_btf`; its target is the
/// attach_btf_id it was loaded with). Kernel >= 5.5. Closing the returned fd detaches it.
pub fn raw_tracepoint_open(prog: &OwnedFd) -> Result<OwnedFd, SysError> {
    // SAFETY: a NULL name is how a tracing program with an attach_btf_id is attached.
    let fd = unsafe { libbpf_sys::bpf_raw_tracepoint_open(std::ptr::null(), prog.as_raw_fd()) };
    if fd < 0 {
        return Err(SysError { call: "bpf(BPF_RAW_TRACEPOINT_OPEN, name=NULL)".into(), errno: -fd });
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// BTF ids of the typedefs `names` in the kernel's BTF (`/sys/kernel/btf/vmlinux`, needs
/// CONFIG_DEBUG_INFO_BTF; kernel >= 5.4), `None` for a name it lacks. A tracepoint `tp` is there
/// as typedef `btf_trace_<tp>` (include/trace/bpf_probe.h).
pub fn vmlinux_typedef_ids(names: &[&str]) -> Result<Vec<Option<u32>>, SysError> {
    // SAFETY: no arguments; the result is checked below and freed once.
    let btf = unsafe { libbpf_sys::btf__load_vmlinux_btf() };
    // SAFETY: libbpf_get_error accepts any pointer libbpf returned.
    let err = unsafe { libbpf_sys::libbpf_get_error(btf.cast()) };
    if btf.is_null() || err != 0 {
        let errno = if err != 0 { (-err) as i32 } else { libc::ENOENT };
        return Err(SysError { call: "btf__load_vmlinux_btf(/sys/kernel/btf/vmlinux)".into(), errno });
    }
    let ids = names
        .iter()
        .map(|n| {
            let c = CString::new(*n).expect("no NUL in a type name");
            // SAFETY: btf is a live BTF object and c NUL-terminated.
            let id = unsafe { libbpf_sys::btf__find_by_name_kind(btf, c.as_ptr(), libbpf_sys::BTF_KIND_TYPEDEF) };
            u32::try_from(id).ok().filter(|&i| i > 0)
        })
        .collect();
    // SAFETY: btf came from btf__load_vmlinux_btf and is not used after this.
    unsafe { libbpf_sys::btf__free(btf) };
    Ok(ids)
}

/// The running kernel's release (`uname -r`), e.g. `6.18.44`.
pub fn kernel_release() -> Result<String, SysError> {
    // SAFETY: all-zero is a valid utsname.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: u is a live utsname the kernel fills.
    if unsafe { libc::uname(&mut u) } < 0 {
        return Err(SysError::last("uname()"));
    }
    // SAFETY: the kernel NUL-terminates release within its array.
    let r = unsafe { std::ffi::CStr::from_ptr(u.release.as_ptr()) };
    Ok(r.to_string_lossy().into_owned())
}

/// `unshare(CLONE_NEWNET)`: moves the calling THREAD into a new, empty network namespace (only
/// `lo`, down). Needs CAP_SYS_ADMIN. Call it on a thread of its own that ends afterwards: the
/// namespace goes away with its last socket and thread.
pub fn unshare_netns() -> Result<(), SysError> {
    // SAFETY: plain syscall; affects only the calling thread's namespaces.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } < 0 {
        return Err(SysError::last("unshare(CLONE_NEWNET)"));
    }
    Ok(())
}

/// `socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)`: a plain socket for SOL_SOCKET option probes.
pub fn socket_udp() -> Result<OwnedFd, SysError> {
    // SAFETY: plain syscall with constant arguments; the result is checked.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(SysError::last("socket(AF_INET, SOCK_DGRAM, 0)"));
    }
    // SAFETY: fd is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
