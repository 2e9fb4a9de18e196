//! The only place in fastpath that calls raw system calls.
//!
//! Every wrapper returns [`SysError`], which repeats the call and its arguments,
//! so an error printed at the top of the program says exactly what the kernel refused.

pub mod packet;
pub mod probe;
pub mod tun;

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;

/// A failed system call: the call with its arguments, and the errno.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{call} failed: {}", errno_text(*.errno))]
pub struct SysError {
    /// The call as written in C, with its arguments, e.g. `setsockopt(SOL_XDP, XDP_UMEM_REG, len=8388608)`.
    pub call: String,
    /// The errno value.
    pub errno: i32,
}

impl SysError {
    fn last(call: impl Into<String>) -> Self {
        Self { call: call.into(), errno: std::io::Error::last_os_error().raw_os_error().unwrap_or(0) }
    }
}

/// `EINVAL (Invalid argument)` style text for an errno.
pub fn errno_text(errno: i32) -> String {
    let name = match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EINTR => "EINTR",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::ENODEV => "ENODEV",
        libc::EINVAL => "EINVAL",
        libc::ENOSPC => "ENOSPC",
        libc::ENOPROTOOPT => "ENOPROTOOPT",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EAFNOSUPPORT => "EAFNOSUPPORT",
        libc::ENXIO => "ENXIO",
        libc::ENOBUFS => "ENOBUFS",
        libc::ENETDOWN => "ENETDOWN",
        libc::EACCES => "EACCES",
        libc::E2BIG => "E2BIG",
        libc::EFAULT => "EFAULT",
        libc::ERANGE => "ERANGE",
        libc::ENOLINK => "ENOLINK",
        libc::ELOOP => "ELOOP",
        _ => "",
    };
    let text = std::io::Error::from_raw_os_error(errno).to_string();
    let text = text.split(" (os error").next().unwrap_or("").to_string();
    if name.is_empty() {
        text
    } else {
        format!("{name} ({text})")
    }
}

/// `socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0)`. Needs CAP_NET_RAW. Kernel >= 4.18.
pub fn socket_xdp() -> Result<OwnedFd, SysError> {
    // SAFETY: plain syscall with constant arguments; the result is checked.
    let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(SysError::last("socket(AF_XDP, SOCK_RAW, 0)"));
    }
    // SAFETY: fd is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt(fd, level, name, value)`; `label` is how the call is named in errors,
/// e.g. `SOL_XDP, XDP_RX_RING` (the value's length is appended).
pub fn setsockopt<T>(fd: &impl AsRawFd, level: i32, name: i32, value: &T, label: &str) -> Result<(), SysError> {
    let len = std::mem::size_of::<T>();
    // SAFETY: value points to a live T of len bytes; the kernel only reads it.
    let rc =
        unsafe { libc::setsockopt(fd.as_raw_fd(), level, name, (value as *const T).cast(), len as libc::socklen_t) };
    if rc < 0 {
        return Err(SysError::last(format!("setsockopt({label}, len={len})")));
    }
    Ok(())
}

/// `setsockopt` of an `int` value; errors read `setsockopt(SOL_SOCKET, SO_BUSY_POLL, 20)`.
pub fn setsockopt_int(fd: &impl AsRawFd, level: i32, name: i32, value: i32, label: &str) -> Result<(), SysError> {
    // SAFETY: value is a live c_int; the kernel only reads it.
    let rc = unsafe { libc::setsockopt(fd.as_raw_fd(), level, name, (&value as *const i32).cast(), 4) };
    if rc < 0 {
        return Err(SysError::last(format!("setsockopt({label}, {value})")));
    }
    Ok(())
}

/// `getsockopt(fd, level, name)` into a `T`; returns the value and the length the kernel wrote
/// (older kernels write shorter versions of some structs, e.g. `xdp_statistics`).
pub fn getsockopt<T: Pod>(fd: &impl AsRawFd, level: i32, name: i32, label: &str) -> Result<(T, usize), SysError> {
    // SAFETY: Pod types are valid when all-zero.
    let mut value: T = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: value is a live T and len its size; the kernel writes at most len bytes.
    let rc = unsafe { libc::getsockopt(fd.as_raw_fd(), level, name, (&mut value as *mut T).cast(), &mut len) };
    if rc < 0 {
        return Err(SysError::last(format!("getsockopt({label})")));
    }
    Ok((value, len as usize))
}

/// Plain C structs that are valid when all-zero and may be filled by the kernel.
///
/// # Safety
/// Implement only for `repr(C)` types of integers (no pointers, references or enums).
pub unsafe trait Pod: Copy {}
// SAFETY: repr(C) structs of u64/u32 (include/uapi/linux/if_xdp.h).
unsafe impl Pod for libc::xdp_statistics {}
// SAFETY: as above.
unsafe impl Pod for libc::xdp_mmap_offsets {}
// SAFETY: as above.
unsafe impl Pod for libc::xdp_options {}
// SAFETY: a plain integer.
unsafe impl Pod for i32 {}

/// `bind(fd, sockaddr_xdp)`.
pub fn bind_xdp(fd: &impl AsRawFd, addr: &libc::sockaddr_xdp) -> Result<(), SysError> {
    // SAFETY: addr is a valid sockaddr_xdp and the length matches it.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (addr as *const libc::sockaddr_xdp).cast(),
            std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(SysError::last(format!(
            "bind(AF_XDP, ifindex={}, queue_id={}, flags={:#x})",
            addr.sxdp_ifindex, addr.sxdp_queue_id, addr.sxdp_flags
        )));
    }
    Ok(())
}

/// TX kick: `sendto(fd, NULL, 0, MSG_DONTWAIT, NULL, 0)`. EAGAIN, EBUSY and ENOBUFS mean
/// "the kernel is busy, try again" (Documentation/networking/af_xdp.rst) and are not errors.
#[inline]
pub fn kick_tx(fd: RawFd) -> Result<(), SysError> {
    // SAFETY: a zero-length send with null buffers is how AF_XDP is kicked.
    let rc = unsafe { libc::sendto(fd, std::ptr::null(), 0, libc::MSG_DONTWAIT, std::ptr::null(), 0) };
    if rc < 0 {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        if matches!(errno, libc::EAGAIN | libc::EBUSY | libc::ENOBUFS | libc::ENETDOWN | libc::EINTR) {
            return Ok(());
        }
        return Err(SysError { call: "sendto(xsk, NULL, 0, MSG_DONTWAIT)".into(), errno });
    }
    Ok(())
}

/// RX kick / busy-poll driver: `recvfrom(fd, NULL, 0, MSG_DONTWAIT, NULL, NULL)`; errors are ignored
/// (EAGAIN is the normal answer).
#[inline]
pub fn kick_rx(fd: RawFd) {
    // SAFETY: a zero-length receive with null buffers only drives NAPI / wakes the driver.
    unsafe {
        libc::recvfrom(fd, std::ptr::null_mut(), 0, libc::MSG_DONTWAIT, std::ptr::null_mut(), std::ptr::null_mut());
    }
}

/// `poll([fd], events, timeout_ms)`; returns the revents (0 on timeout). EINTR is reported as 0.
pub fn poll_one(fd: RawFd, events: i16, timeout_ms: i32) -> Result<i16, SysError> {
    let mut pfd = libc::pollfd { fd, events, revents: 0 };
    // SAFETY: pfd is a valid array of one pollfd.
    let rc = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
    if rc < 0 {
        let e = SysError::last(format!("poll(xsk, events={events:#x}, timeout={timeout_ms})"));
        if e.errno == libc::EINTR {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(pfd.revents)
}

/// `poll([fd], POLLIN, timeout_ms)`: true if readable.
pub fn poll_readable(fd: RawFd, timeout_ms: i32) -> Result<bool, SysError> {
    Ok(poll_one(fd, libc::POLLIN, timeout_ms)? & libc::POLLIN != 0)
}

/// An anonymous or file-backed shared mapping, unmapped on drop.
#[derive(Debug)]
pub struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory; synchronisation of its contents is the user's job
// (the ring module uses atomics for the shared indices).
unsafe impl Send for Mmap {}

impl Mmap {
    /// `mmap(NULL, len, PROT_READ|PROT_WRITE, MAP_SHARED|MAP_POPULATE, fd, offset)`: maps an AF_XDP ring.
    pub fn ring(fd: &impl AsRawFd, len: usize, offset: u64, label: &str) -> Result<Self, SysError> {
        // SAFETY: a fresh shared mapping; the result is checked against MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                offset as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(SysError::last(format!("mmap({label}, len={len}, offset={offset:#x})")));
        }
        Ok(Self { ptr: NonNull::new(p.cast()).expect("mmap returned NULL"), len })
    }

    /// Page-aligned anonymous private memory for a UMEM, optionally on huge pages
    /// (`MAP_HUGETLB`, needs pages reserved in /proc/sys/vm/nr_hugepages).
    pub fn anonymous(len: usize, huge_pages: bool) -> Result<Self, SysError> {
        // munmap of a huge-page mapping needs a length that is a multiple of the huge page size
        // (2 MiB on x86-64): round up so drop really unmaps it.
        const HUGE_PAGE: usize = 2 << 20;
        let len = if huge_pages { len.div_ceil(HUGE_PAGE) * HUGE_PAGE } else { len };
        let mut flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE;
        if huge_pages {
            flags |= libc::MAP_HUGETLB;
        }
        // SAFETY: a fresh anonymous mapping; the result is checked against MAP_FAILED.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0) };
        if p == libc::MAP_FAILED {
            let what = if huge_pages {
                "MAP_ANONYMOUS|MAP_HUGETLB; are huge pages reserved in /proc/sys/vm/nr_hugepages?"
            } else {
                "MAP_ANONYMOUS"
            };
            return Err(SysError::last(format!("mmap({what}, len={len})")));
        }
        Ok(Self { ptr: NonNull::new(p.cast()).expect("mmap returned NULL"), len })
    }

    /// `mlock` the mapping (needs CAP_IPC_LOCK or enough RLIMIT_MEMLOCK).
    pub fn mlock(&self) -> Result<(), SysError> {
        // SAFETY: the range is our own live mapping.
        if unsafe { libc::mlock(self.ptr.as_ptr().cast(), self.len) } < 0 {
            return Err(SysError::last(format!("mlock(len={})", self.len)));
        }
        Ok(())
    }

    /// `madvise(MADV_DONTDUMP)`: keep packet memory out of core dumps.
    pub fn dont_dump(&self) -> Result<(), SysError> {
        // SAFETY: the range is our own live mapping.
        if unsafe { libc::madvise(self.ptr.as_ptr().cast(), self.len, libc::MADV_DONTDUMP) } < 0 {
            return Err(SysError::last(format!("madvise(len={}, MADV_DONTDUMP)", self.len)));
        }
        Ok(())
    }

    /// Start of the mapping.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if the mapping is empty (never, for a successful mmap).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: we own this mapping and nobody uses it after drop.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// `if_nametoindex(name)` in the calling thread's network namespace.
pub fn if_nametoindex(name: &str) -> Result<u32, SysError> {
    let c =
        CString::new(name).map_err(|_| SysError { call: format!("if_nametoindex({name:?})"), errno: libc::EINVAL })?;
    // SAFETY: c is a valid NUL-terminated string.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        return Err(SysError::last(format!("if_nametoindex({name:?})")));
    }
    Ok(idx)
}

/// `sched_setaffinity(0, {cpu})`: pin the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> Result<(), SysError> {
    // SAFETY: cpu_set_t is plain data; CPU_SET only writes inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
            return Err(SysError { call: format!("sched_setaffinity(0, cpu={cpu})"), errno: libc::EINVAL });
        }
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) < 0 {
            return Err(SysError::last(format!("sched_setaffinity(0, cpu={cpu})")));
        }
    }
    Ok(())
}

/// Number of CPUs this process may run on (`sched_getaffinity`).
pub fn online_cpus() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// CLOCK_MONOTONIC in nanoseconds: the clock `bpf_ktime_get_ns()` reads.
#[inline]
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec to write to.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Effective user id (0 = root).
pub fn geteuid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
}

/// True if the process has capability `cap` (CAP_* number) in its effective set,
/// read from /proc/self/status `CapEff`.
pub fn has_capability(cap: u32) -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|mask| mask & (1u64 << cap) != 0)
}

/// Raise RLIMIT_MEMLOCK to infinity if allowed. Failure is returned but callers treat it as a
/// warning: with CAP_IPC_LOCK the limit does not apply (and kernels >= 5.11 charge BPF maps to memcg).
pub fn raise_memlock_limit() -> Result<(), SysError> {
    let lim = libc::rlimit { rlim_cur: libc::RLIM_INFINITY, rlim_max: libc::RLIM_INFINITY };
    // SAFETY: lim is a valid rlimit.
    if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) } < 0 {
        return Err(SysError::last("setrlimit(RLIMIT_MEMLOCK, RLIM_INFINITY)"));
    }
    Ok(())
}

/// `ioctl(request)` with an `ifreq` naming `iface` (and `data` in its union, if given), on a
/// throwaway AF_INET datagram socket in the calling thread's netns; returns the ifreq the kernel
/// filled. `label` names the call in errors.
fn ifreq_ioctl(
    iface: &str,
    request: libc::Ioctl,
    data: Option<*mut libc::c_void>,
    label: &str,
) -> Result<libc::ifreq, SysError> {
    let call = || format!("ioctl({label}, {iface:?})");
    // SAFETY: ifreq is plain data.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    if iface.len() >= ifr.ifr_name.len() {
        return Err(SysError { call: call(), errno: libc::EINVAL });
    }
    for (d, s) in ifr.ifr_name.iter_mut().zip(iface.as_bytes()) {
        *d = *s as libc::c_char;
    }
    if let Some(p) = data {
        ifr.ifr_ifru.ifru_data = p.cast();
    }
    // SAFETY: plain socket creation; checked below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(SysError::last("socket(AF_INET, SOCK_DGRAM)"));
    }
    // SAFETY: fd is fresh and ours.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifr is a valid ifreq; any data pointer in it is vouched for by our callers.
    if unsafe { libc::ioctl(fd.as_raw_fd(), request, &mut ifr) } < 0 {
        return Err(SysError::last(call()));
    }
    Ok(ifr)
}

/// Sets the interface administratively up (`SIOCGIFFLAGS` then `SIOCSIFFLAGS` with IFF_UP), in
/// the calling thread's netns. Needs CAP_NET_ADMIN.
pub fn set_link_up(iface: &str) -> Result<(), SysError> {
    let mut ifr = ifreq_ioctl(iface, libc::SIOCGIFFLAGS, None, "SIOCGIFFLAGS")?;
    // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
    let flags = unsafe { ifr.ifr_ifru.ifru_flags };
    ifr.ifr_ifru.ifru_flags = flags | libc::IFF_UP as i16;
    // SAFETY: plain socket creation; checked below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(SysError::last("socket(AF_INET, SOCK_DGRAM)"));
    }
    // SAFETY: fd is fresh and ours.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifr is a valid ifreq naming the interface with the new flags.
    if unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCSIFFLAGS, &mut ifr) } < 0 {
        return Err(SysError::last(format!("ioctl(SIOCSIFFLAGS, {iface:?}, IFF_UP)")));
    }
    Ok(())
}

/// The interface's MTU (`ioctl(SIOCGIFMTU)`), in the calling thread's netns.
pub fn if_mtu(iface: &str) -> Result<u32, SysError> {
    let ifr = ifreq_ioctl(iface, libc::SIOCGIFMTU, None, "SIOCGIFMTU")?;
    // SAFETY: SIOCGIFMTU filled the mtu member of the union.
    Ok(unsafe { ifr.ifr_ifru.ifru_mtu } as u32)
}

/// The interface's flags (`ioctl(SIOCGIFFLAGS)`: IFF_UP, IFF_RUNNING, ...), in the calling
/// thread's netns.
pub fn if_flags(iface: &str) -> Result<u32, SysError> {
    let ifr = ifreq_ioctl(iface, libc::SIOCGIFFLAGS, None, "SIOCGIFFLAGS")?;
    // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
    Ok(unsafe { ifr.ifr_ifru.ifru_flags } as u16 as u32)
}

/// The page size (`sysconf(_SC_PAGESIZE)`).
pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory arguments.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

/// The interface's hardware address (`ioctl(SIOCGIFHWADDR)`), in the calling thread's netns.
pub fn if_hwaddr(iface: &str) -> Result<[u8; 6], SysError> {
    let ifr = ifreq_ioctl(iface, libc::SIOCGIFHWADDR, None, "SIOCGIFHWADDR")?;
    // SAFETY: SIOCGIFHWADDR filled the hwaddr member of the union.
    let sa = unsafe { ifr.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (d, s) in mac.iter_mut().zip(sa.sa_data.iter()) {
        *d = *s as u8;
    }
    Ok(mac)
}

/// An `ioctl(SIOCETHTOOL)` on `iface`, in the calling thread's netns.
/// `data` is the ethtool command struct (its first u32 is the command).
///
/// # Safety
/// `data` must point to an ethtool request of the layout the command expects, large enough for
/// everything the kernel writes back (include/uapi/linux/ethtool.h).
pub unsafe fn ethtool_ioctl(iface: &str, data: *mut libc::c_void, label: &str) -> Result<(), SysError> {
    ifreq_ioctl(iface, libc::SIOCETHTOOL, Some(data), &format!("SIOCETHTOOL, {label}")).map(|_| ())
}

extern "C" fn noop_handler(_: libc::c_int) {}

/// Installs a handler for SIGUSR1 that does nothing, without SA_RESTART, so a thread blocked in
/// a long system call (a BPF_PROG_RUN of millions of repetitions) returns EINTR when
/// [`interrupt_thread`] signals it. Idempotent.
pub fn install_interrupt_handler() -> Result<(), SysError> {
    // SAFETY: sigaction is plain data; the handler is async-signal-safe (it does nothing).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = noop_handler as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        sa.sa_flags = 0;
        if libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()) < 0 {
            return Err(SysError::last("sigaction(SIGUSR1)"));
        }
    }
    Ok(())
}

/// Sends SIGUSR1 to one thread of this process (`pthread_kill`); see [`install_interrupt_handler`].
/// `thread` comes from `std::os::unix::thread::JoinHandleExt::as_pthread_t` of a live thread.
pub fn interrupt_thread(thread: libc::pthread_t) {
    // SAFETY: the caller passes the pthread_t of a thread it has not joined yet; with the
    // handler installed SIGUSR1 only interrupts a blocking call.
    unsafe { libc::pthread_kill(thread, libc::SIGUSR1) };
}

/// Mounts bpffs at `path` unless a bpffs is already mounted there (needs CAP_SYS_ADMIN).
pub fn ensure_bpffs(path: &std::path::Path) -> Result<(), SysError> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let p = path.to_string_lossy();
    if mounts.lines().any(|l| {
        let mut f = l.split_whitespace();
        let (_, mnt, fstype) = (f.next(), f.next(), f.next());
        mnt == Some(&*p) && fstype == Some("bpf")
    }) {
        return Ok(());
    }
    let target =
        CString::new(p.as_bytes()).map_err(|_| SysError { call: format!("mount({p:?})"), errno: libc::EINVAL })?;
    let fstype = CString::new("bpf").expect("no NUL");
    // SAFETY: valid NUL-terminated strings; no data argument.
    let rc = unsafe { libc::mount(fstype.as_ptr(), target.as_ptr(), fstype.as_ptr(), 0, std::ptr::null()) };
    if rc < 0 {
        return Err(SysError::last(format!("mount(\"bpf\", {p:?}, \"bpf\")")));
    }
    Ok(())
}

/// Batched UDP receive with `recvmmsg(2)`: preallocated buffers, one system call for up to
/// `batch` datagrams (kernel >= 2.6.33).
#[derive(Debug)]
pub struct RecvMmsg {
    bufs: Vec<[u8; 2048]>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
}

// SAFETY: the raw pointers inside point into `bufs`/`iovs`, owned by the same value.
unsafe impl Send for RecvMmsg {}

impl RecvMmsg {
    /// Buffers for `batch` datagrams of up to 2048 bytes.
    pub fn new(batch: usize) -> Self {
        let mut bufs = vec![[0u8; 2048]; batch];
        let mut iovs: Vec<libc::iovec> =
            bufs.iter_mut().map(|b| libc::iovec { iov_base: b.as_mut_ptr().cast(), iov_len: b.len() }).collect();
        let hdrs = iovs
            .iter_mut()
            .map(|iov| {
                // SAFETY: all-zero is a valid msghdr; the iovec pointer is set below.
                let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                h.msg_hdr.msg_iov = iov;
                h.msg_hdr.msg_iovlen = 1;
                h
            })
            .collect();
        Self { bufs, iovs, hdrs }
    }

    /// Receives up to `batch` datagrams without blocking (`MSG_DONTWAIT`); returns how many
    /// (0 when none are queued).
    pub fn recv(&mut self, fd: &impl AsRawFd) -> Result<usize, SysError> {
        let _ = (&self.bufs, &self.iovs);
        // SAFETY: hdrs/iovs/bufs are live and consistent; the kernel writes into bufs and the
        // msg_len fields only.
        let n = unsafe {
            libc::recvmmsg(
                fd.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                self.hdrs.len() as u32,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            let e = SysError::last("recvmmsg(udp, MSG_DONTWAIT)");
            if e.errno == libc::EAGAIN || e.errno == libc::EINTR {
                return Ok(0);
            }
            return Err(e);
        }
        Ok(n as usize)
    }
}

/// Takes an exclusive advisory lock (`flock(LOCK_EX)`) on `path` (created if absent), held
/// until the returned fd is dropped: serialises concurrent `fastpath filter reload`s. Waits
/// for another holder with `LOCK_NB` retries every 20 ms, giving up with EINTR once `stop` is
/// set (a signal), so a blocked wait never outlives Ctrl-C.
pub fn lock_file(path: &std::path::Path, stop: &std::sync::atomic::AtomicBool) -> Result<OwnedFd, SysError> {
    if let Some(d) = path.parent() {
        let _ = std::fs::create_dir_all(d);
    }
    let f =
        std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(path).map_err(|e| SysError {
            call: format!("open({})", path.display()),
            errno: e.raw_os_error().unwrap_or(0),
        })?;
    let fd: OwnedFd = f.into();
    loop {
        // SAFETY: fd is a valid open file.
        if unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(fd);
        }
        let e = SysError::last(format!("flock({}, LOCK_EX)", path.display()));
        if e.errno != libc::EWOULDBLOCK && e.errno != libc::EINTR {
            return Err(e);
        }
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(SysError { call: format!("flock({}, LOCK_EX)", path.display()), errno: libc::EINTR });
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
