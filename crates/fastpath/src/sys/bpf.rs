//! bpffs.

use std::ffi::CString;

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
