//! Every libbpf-sys call of the library outside the feature probes ([`super::probe`]): XDP
//! links (create, info, detach, walk), `bpf_xdp_query`/`bpf_xdp_detach`, BPF_PROG_TEST_RUN,
//! pinning in bpffs (and mounting it), kernel BTF lookups, batch map updates of per-CPU maps.

use std::ffi::CString;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::ptr::NonNull;

use libbpf_rs::libbpf_sys;

use super::SysError;

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

#[cfg(feature = "cpumap")]
pub use libbpf_sys::XDP_PASS;
/// The libbpf-sys constants the BPF modules and the feature probes name.
pub use libbpf_sys::{
    BPF_F_TEST_XDP_LIVE_FRAMES, BPF_PROG_TYPE_TRACING, BPF_PROG_TYPE_XDP, BPF_TRACE_RAW_TP, BTF_KIND_STRUCT,
    BTF_KIND_TYPEDEF, XDP_ATTACHED_DRV, XDP_ATTACHED_HW, XDP_ATTACHED_NONE, XDP_ATTACHED_SKB, XDP_DROP,
    XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE,
};

/// What `bpf_link_get_info_by_fd` says about a link.
#[derive(Debug, Clone, Copy)]
pub struct LinkInfo {
    /// Link id.
    pub id: u32,
    /// Id of the program the link holds.
    pub prog_id: u32,
    /// True for an XDP link.
    pub is_xdp: bool,
    /// For an XDP link: its interface (0 once detached); 0 otherwise.
    pub ifindex: u32,
}

/// Reads a link's info (`bpf_obj_get_info_by_fd`).
pub fn link_info(fd: BorrowedFd<'_>) -> Result<LinkInfo, SysError> {
    // SAFETY: all-zero is a valid bpf_link_info.
    let mut info: libbpf_sys::bpf_link_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libbpf_sys::bpf_link_info>() as u32;
    // SAFETY: info/len describe a valid buffer.
    let rc = unsafe { libbpf_sys::bpf_link_get_info_by_fd(fd.as_raw_fd(), &mut info, &mut len) };
    if rc < 0 {
        return Err(SysError { call: "bpf_obj_get_info_by_fd(link)".into(), errno: -rc });
    }
    let is_xdp = info.type_ == libbpf_sys::BPF_LINK_TYPE_XDP;
    // SAFETY: the xdp member is the one the kernel fills for BPF_LINK_TYPE_XDP.
    let ifindex = if is_xdp { unsafe { info.__bindgen_anon_1.xdp.ifindex } } else { 0 };
    Ok(LinkInfo { id: info.id, prog_id: info.prog_id, is_xdp, ifindex })
}

/// The XDP program on `ifindex` (`bpf_xdp_query`, netlink): its id and the kernel's attach
/// mode (`XDP_ATTACHED_*`); `None` if none.
pub fn xdp_query(ifindex: u32) -> Result<Option<(u32, u32)>, SysError> {
    // SAFETY: all-zero is a valid bpf_xdp_query_opts; sz is set below.
    let mut opts: libbpf_sys::bpf_xdp_query_opts = unsafe { std::mem::zeroed() };
    opts.sz = std::mem::size_of::<libbpf_sys::bpf_xdp_query_opts>() as _;
    // SAFETY: opts is a valid, sized options struct.
    let rc = unsafe { libbpf_sys::bpf_xdp_query(ifindex as i32, 0, &mut opts) };
    if rc < 0 {
        return Err(SysError { call: format!("bpf_xdp_query(ifindex={ifindex})"), errno: -rc });
    }
    let mode = u32::from(opts.attach_mode);
    if mode == libbpf_sys::XDP_ATTACHED_NONE {
        return Ok(None);
    }
    let id = [opts.prog_id, opts.drv_prog_id, opts.skb_prog_id].into_iter().find(|&i| i != 0).unwrap_or(0);
    Ok(Some((id, mode)))
}

/// `bpf_map_update_batch` (BPF_MAP_UPDATE_BATCH, kernel >= 5.6, kernel/bpf/syscall.c
/// `generic_map_update_batch` for arrays): writes `count` elements, `keys` holding `count` keys
/// of the map's key size and `values` `count` values as the kernel lays them out (for per-CPU
/// maps: one value per possible CPU, each rounded up to 8 bytes). `label` names the call in
/// errors. Panics if the slices are shorter than `count` elements of `key_size`/`value_len`.
pub fn map_update_batch(
    fd: BorrowedFd<'_>,
    keys: &[u8],
    key_size: usize,
    values: &[u8],
    value_len: usize,
    count: u32,
    label: impl FnOnce() -> String,
) -> Result<(), SysError> {
    assert!(keys.len() >= key_size * count as usize && values.len() >= value_len * count as usize);
    // SAFETY: all-zero is a valid bpf_map_batch_opts; sz is set below.
    let mut opts: libbpf_sys::bpf_map_batch_opts = unsafe { std::mem::zeroed() };
    opts.sz = std::mem::size_of::<libbpf_sys::bpf_map_batch_opts>() as _;
    let mut n = count;
    // SAFETY: keys and values hold `count` elements each (asserted above); the kernel reads
    // exactly that many; n and opts are valid for the call.
    let rc = unsafe {
        libbpf_sys::bpf_map_update_batch(fd.as_raw_fd(), keys.as_ptr().cast(), values.as_ptr().cast(), &mut n, &opts)
    };
    if rc < 0 {
        return Err(SysError {
            call: format!("bpf_map_update_batch({}, count={count}, done={n})", label()),
            errno: -rc,
        });
    }
    Ok(())
}

/// `bpf_map_update_elem(fd, &key, &value, BPF_ANY)` of a map with u32 keys and values (an
/// XSKMAP: key the queue id, value an AF_XDP socket fd). The kernel checks the rights of the
/// map fd (`map_get_sys_perms`: the fd must be open for writing), no capability.
pub fn map_update_u32(fd: BorrowedFd<'_>, key: u32, value: u32, label: &str) -> Result<(), SysError> {
    // SAFETY: key and value are live u32s, the sizes of the map's key and value (checked by
    // the kernel against the map); the kernel only reads them.
    let rc = unsafe {
        libbpf_sys::bpf_map_update_elem(
            fd.as_raw_fd(),
            (&key as *const u32).cast(),
            (&value as *const u32).cast(),
            libbpf_sys::BPF_ANY as u64,
        )
    };
    if rc < 0 {
        return Err(SysError { call: format!("bpf_map_update_elem({label}, key={key}, value={value})"), errno: -rc });
    }
    Ok(())
}

/// `BPF_MAP_TYPE_XSKMAP` (include/uapi/linux/bpf.h), for [`map_info`]'s type.
pub const MAP_TYPE_XSKMAP: u32 = libbpf_sys::BPF_MAP_TYPE_XSKMAP;

/// A map's type, key size, value size and max entries (`bpf_map_get_info_by_fd`).
pub fn map_info(fd: BorrowedFd<'_>) -> Result<(u32, u32, u32, u32), SysError> {
    // SAFETY: bpf_map_info is plain integers and byte arrays: valid when all-zero.
    let mut info: libbpf_sys::bpf_map_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libbpf_sys::bpf_map_info>() as u32;
    // SAFETY: info is a live bpf_map_info and len its size; the kernel writes at most len bytes.
    let rc = unsafe { libbpf_sys::bpf_map_get_info_by_fd(fd.as_raw_fd(), &mut info, &mut len) };
    if rc < 0 {
        return Err(SysError { call: format!("bpf_map_get_info_by_fd({})", fd.as_raw_fd()), errno: -rc });
    }
    Ok((info.type_, info.key_size, info.value_size, info.max_entries))
}

/// The next BPF link id after `id` (`bpf_link_get_next_id`); `None` at the end.
pub fn link_next_id(id: u32) -> Option<u32> {
    let mut next = 0u32;
    // SAFETY: next is a valid out pointer.
    if unsafe { libbpf_sys::bpf_link_get_next_id(id, &mut next) } < 0 {
        return None;
    }
    Some(next)
}

/// An fd for link `id` (`bpf_link_get_fd_by_id`); `None` if it is gone or not ours to open.
pub fn link_fd_by_id(id: u32) -> Option<OwnedFd> {
    // SAFETY: plain syscall wrapper; the fd is checked and owned below.
    let fd = unsafe { libbpf_sys::bpf_link_get_fd_by_id(id) };
    if fd < 0 {
        return None;
    }
    // SAFETY: fd is a fresh descriptor we own.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `bpf_link_detach` (BPF_LINK_DETACH, kernel >= 5.9); errors name the link as `label`.
pub fn link_detach(fd: BorrowedFd<'_>, label: &str) -> Result<(), SysError> {
    // SAFETY: fd is a valid link fd.
    let rc = unsafe { libbpf_sys::bpf_link_detach(fd.as_raw_fd()) };
    if rc < 0 {
        return Err(SysError { call: format!("bpf_link_detach({label})"), errno: -rc });
    }
    Ok(())
}

/// `bpf_xdp_detach` of a netlink-attached program on `ifindex`, native then skb mode; errors
/// (nothing attached in that mode) are ignored.
pub fn xdp_detach_netlink(ifindex: u32) {
    for flags in [libbpf_sys::XDP_FLAGS_DRV_MODE, libbpf_sys::XDP_FLAGS_SKB_MODE] {
        // SAFETY: plain wrapper; errors (nothing attached in that mode) are ignored.
        unsafe { libbpf_sys::bpf_xdp_detach(ifindex as i32, flags, std::ptr::null()) };
    }
}

/// `bpf_link_create(prog_fd, ifindex, BPF_XDP)` with XDP `flags`; `label` names the call in
/// errors.
pub fn link_create_xdp(
    prog_fd: RawFd,
    ifindex: u32,
    flags: u32,
    label: impl FnOnce() -> String,
) -> Result<OwnedFd, SysError> {
    // SAFETY: all-zero is a valid bpf_link_create_opts; sz and flags are set below.
    let mut opts: libbpf_sys::bpf_link_create_opts = unsafe { std::mem::zeroed() };
    opts.sz = std::mem::size_of::<libbpf_sys::bpf_link_create_opts>() as _;
    opts.flags = flags;
    // SAFETY: prog_fd is a loaded XDP program; opts is valid.
    let fd = unsafe { libbpf_sys::bpf_link_create(prog_fd, ifindex as i32, libbpf_sys::BPF_XDP, &opts) };
    if fd < 0 {
        return Err(SysError { call: label(), errno: -fd });
    }
    // SAFETY: fd is a fresh link descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// One BPF_PROG_TEST_RUN of `prog` over `data` that also returns the frame as the program left
/// it (at most `data.len() + 256` bytes: room for a grown tail). `label` names the call in errors.
pub fn prog_test_run_out(
    prog: BorrowedFd<'_>,
    data: &[u8],
    label: impl FnOnce() -> String,
) -> Result<(u32, Vec<u8>), SysError> {
    let mut out = vec![0u8; data.len() + 256];
    // SAFETY: all-zero is a valid bpf_test_run_opts; sz and fields are set below.
    let mut opts: libbpf_sys::bpf_test_run_opts = unsafe { std::mem::zeroed() };
    opts.sz = std::mem::size_of::<libbpf_sys::bpf_test_run_opts>() as _;
    opts.data_in = data.as_ptr().cast();
    opts.data_size_in = data.len() as u32;
    opts.data_out = out.as_mut_ptr().cast();
    opts.data_size_out = out.len() as u32;
    opts.repeat = 1;
    // SAFETY: data and out outlive the call; the kernel reads data and writes at most
    // data_size_out bytes to out.
    let rc = unsafe { libbpf_sys::bpf_prog_test_run_opts(prog.as_raw_fd(), &mut opts) };
    if rc < 0 {
        return Err(SysError { call: label(), errno: -rc });
    }
    out.truncate((opts.data_size_out as usize).min(out.len()));
    Ok((opts.retval, out))
}

/// `bpf_link_create(prog_fd, ifindex, BPF_TCX_INGRESS)`: a tc ingress program as a link (tcx,
/// Linux >= 6.6; no qdisc), detached when the last descriptor or pin of the link goes. `label`
/// names the call in errors.
pub fn link_create_tcx_ingress(
    prog_fd: RawFd,
    ifindex: u32,
    label: impl FnOnce() -> String,
) -> Result<OwnedFd, SysError> {
    // SAFETY: all-zero is a valid bpf_link_create_opts (append at the end of the chain); sz is set.
    let mut opts: libbpf_sys::bpf_link_create_opts = unsafe { std::mem::zeroed() };
    opts.sz = std::mem::size_of::<libbpf_sys::bpf_link_create_opts>() as _;
    // SAFETY: prog_fd is a loaded SCHED_CLS program; opts is valid.
    let fd = unsafe { libbpf_sys::bpf_link_create(prog_fd, ifindex as i32, libbpf_sys::BPF_TCX_INGRESS, &opts) };
    if fd < 0 {
        return Err(SysError { call: label(), errno: -fd });
    }
    // SAFETY: fd is a fresh link descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// How many programs are attached at tcx ingress of `ifindex` (`bpf_prog_query_opts` with
/// BPF_TCX_INGRESS, Linux >= 6.6), in the calling thread's network namespace.
pub fn tcx_ingress_count(ifindex: u32) -> Result<u32, SysError> {
    // SAFETY: all-zero is a valid bpf_prog_query_opts; sz is set (no id arrays: count only).
    let mut opts: libbpf_sys::bpf_prog_query_opts = unsafe { std::mem::zeroed() };
    opts.sz = std::mem::size_of::<libbpf_sys::bpf_prog_query_opts>() as _;
    // SAFETY: opts is valid; the kernel writes only count and revision (no arrays given).
    let rc = unsafe { libbpf_sys::bpf_prog_query_opts(ifindex as i32, libbpf_sys::BPF_TCX_INGRESS, &mut opts) };
    if rc < 0 {
        return Err(SysError { call: format!("bpf_prog_query(ifindex {ifindex}, BPF_TCX_INGRESS)"), errno: -rc });
    }
    // SAFETY: `count` (alias `prog_cnt`) is the member the kernel wrote.
    Ok(unsafe { opts.__bindgen_anon_1.count })
}

/// `bpf_prog_test_run_opts` (BPF_PROG_TEST_RUN) of `prog` over `data`, `repeat` times, with
/// `flags` and `batch_size` (0: the kernel's default); returns the program's return value.
/// `label` names the call in errors.
pub fn prog_test_run(
    prog: BorrowedFd<'_>,
    data: &[u8],
    repeat: u32,
    flags: u32,
    batch_size: u32,
    label: impl FnOnce() -> String,
) -> Result<u32, SysError> {
    // SAFETY: all-zero is a valid bpf_test_run_opts; sz and fields are set below.
    let mut opts: libbpf_sys::bpf_test_run_opts = unsafe { std::mem::zeroed() };
    opts.sz = std::mem::size_of::<libbpf_sys::bpf_test_run_opts>() as _;
    opts.data_in = data.as_ptr().cast();
    opts.data_size_in = data.len() as u32;
    opts.repeat = repeat as i32;
    opts.flags = flags;
    opts.batch_size = batch_size;
    // SAFETY: opts points to data, which outlives the call; the kernel only reads it.
    let rc = unsafe { libbpf_sys::bpf_prog_test_run_opts(prog.as_raw_fd(), &mut opts) };
    if rc < 0 {
        return Err(SysError { call: label(), errno: -rc });
    }
    Ok(opts.retval)
}

fn path_cstring(path: &Path, call: &str) -> Result<CString, SysError> {
    CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| SysError { call: format!("{call}({})", path.display()), errno: libc::EINVAL })
}

/// `bpf_obj_pin(fd, path)`: pins a BPF object (here a link) in bpffs; errors name it `what`.
pub fn obj_pin(fd: BorrowedFd<'_>, path: &Path, what: &str) -> Result<(), SysError> {
    let p = path_cstring(path, "bpf_obj_pin")?;
    // SAFETY: a valid fd and a NUL-terminated path.
    let rc = unsafe { libbpf_sys::bpf_obj_pin(fd.as_raw_fd(), p.as_ptr()) };
    if rc < 0 {
        return Err(SysError { call: format!("bpf_obj_pin({what}, {})", path.display()), errno: -rc });
    }
    Ok(())
}

/// `bpf_obj_get(path)`: opens a pinned BPF object (follows symlinks).
pub fn obj_get(path: &Path) -> Result<OwnedFd, SysError> {
    let p = path_cstring(path, "bpf_obj_get")?;
    // SAFETY: a NUL-terminated path.
    let fd = unsafe { libbpf_sys::bpf_obj_get(p.as_ptr()) };
    if fd < 0 {
        return Err(SysError { call: format!("bpf_obj_get({})", path.display()), errno: -fd });
    }
    // SAFETY: a fresh fd we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A BTF object parsed by libbpf (`btf__parse`), freed on drop.
#[derive(Debug)]
pub struct Btf(NonNull<libbpf_sys::btf>);

impl Btf {
    /// Parses the BTF at `path` (e.g. `/sys/kernel/btf/vmlinux`); `None` if it cannot.
    pub fn parse(path: &Path) -> Option<Self> {
        let c = CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
        // SAFETY: c is a NUL-terminated path that outlives the call; returns an owned object
        // or NULL (errno set).
        let p = unsafe { libbpf_sys::btf__parse(c.as_ptr(), std::ptr::null_mut()) };
        NonNull::new(p).map(Self)
    }

    /// True if a type `name` of `kind` (`BTF_KIND_TYPEDEF`, `BTF_KIND_STRUCT`, ...) exists.
    pub fn has_type(&self, name: &str, kind: u32) -> bool {
        let Ok(c) = CString::new(name) else { return false };
        // SAFETY: self.0 is a live BTF object; c is a NUL-terminated string that outlives the call.
        unsafe { libbpf_sys::btf__find_by_name_kind(self.0.as_ptr(), c.as_ptr(), kind) >= 0 }
    }
}

impl Drop for Btf {
    fn drop(&mut self) {
        // SAFETY: the pointer came from btf__parse and is freed once, here.
        unsafe { libbpf_sys::btf__free(self.0.as_ptr()) };
    }
}

/// `bpf_link_update` (BPF_LINK_UPDATE): makes `link` run `new_prog` from the next packet on,
/// atomically; with `old_prog`, only if the link still holds that program (BPF_F_REPLACE,
/// else EPERM). XDP links: Linux >= 5.9 (net/core/dev.c `bpf_xdp_link_update`); tcx links:
/// Linux >= 6.6. Errors name the call as `label`.
pub fn link_update(
    link: BorrowedFd<'_>,
    new_prog: BorrowedFd<'_>,
    old_prog: Option<BorrowedFd<'_>>,
    label: impl FnOnce() -> String,
) -> Result<(), SysError> {
    // SAFETY: all-zero is a valid bpf_link_update_opts; sz, flags and old_prog_fd are set below.
    let mut opts: libbpf_sys::bpf_link_update_opts = unsafe { std::mem::zeroed() };
    opts.sz = std::mem::size_of::<libbpf_sys::bpf_link_update_opts>() as _;
    if let Some(old) = old_prog {
        opts.flags = libbpf_sys::BPF_F_REPLACE;
        opts.old_prog_fd = old.as_raw_fd() as u32;
    }
    // SAFETY: link and new_prog are live descriptors; opts is valid for the call.
    let rc = unsafe { libbpf_sys::bpf_link_update(link.as_raw_fd(), new_prog.as_raw_fd(), &opts) };
    if rc < 0 {
        return Err(SysError { call: label(), errno: -rc });
    }
    Ok(())
}

/// A descriptor of the loaded program with id `id` (`bpf_prog_get_fd_by_id`; needs CAP_SYS_ADMIN).
pub fn prog_fd_by_id(id: u32) -> Result<OwnedFd, SysError> {
    // SAFETY: plain syscall wrapper.
    let fd = unsafe { libbpf_sys::bpf_prog_get_fd_by_id(id) };
    if fd < 0 {
        return Err(SysError { call: format!("bpf_prog_get_fd_by_id({id})"), errno: -fd });
    }
    // SAFETY: fd is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The id of the program behind `prog` (`bpf_prog_get_info_by_fd`).
pub fn prog_info_id(prog: BorrowedFd<'_>) -> Result<u32, SysError> {
    // SAFETY: bpf_prog_info is plain integers and pointers left null: valid when all-zero.
    let mut info: libbpf_sys::bpf_prog_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libbpf_sys::bpf_prog_info>() as u32;
    // SAFETY: info is a live bpf_prog_info and len its size; the kernel writes at most len bytes.
    let rc = unsafe { libbpf_sys::bpf_prog_get_info_by_fd(prog.as_raw_fd(), &mut info, &mut len) };
    if rc < 0 {
        return Err(SysError { call: format!("bpf_prog_get_info_by_fd({})", prog.as_raw_fd()), errno: -rc });
    }
    Ok(info.id)
}
