//! Interface ioctls on an `ifreq` (flags, MTU, hardware address, link up, ethtool) and
//! `if_nametoindex`, all in the calling thread's network namespace.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::SysError;

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

/// `if_indextoname(ifindex)` in the calling thread's network namespace (`SIOCGIFNAME`).
pub fn if_indextoname(ifindex: u32) -> Result<String, SysError> {
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: buf has the IF_NAMESIZE bytes if_indextoname writes at most (with the NUL).
    let p = unsafe { libc::if_indextoname(ifindex, buf.as_mut_ptr()) };
    if p.is_null() {
        return Err(SysError::last(format!("if_indextoname({ifindex})")));
    }
    // SAFETY: on success buf holds a NUL-terminated name.
    Ok(unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned())
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

/// Every interface of the calling thread's network namespace as (name, ifindex), from
/// if_nameindex(3).
pub fn if_nameindex() -> Result<Vec<(String, u32)>, SysError> {
    // SAFETY: if_nameindex returns a heap array ended by a zero entry, or null on error; it is
    // freed once, below, after the names are copied.
    unsafe {
        let list = libc::if_nameindex();
        if list.is_null() {
            return Err(SysError::last("if_nameindex()"));
        }
        let mut out = Vec::new();
        let mut p = list;
        while (*p).if_index != 0 {
            out.push((std::ffi::CStr::from_ptr((*p).if_name).to_string_lossy().into_owned(), (*p).if_index));
            p = p.add(1);
        }
        libc::if_freenameindex(list);
        Ok(out)
    }
}
