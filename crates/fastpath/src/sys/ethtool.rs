//! ETHTOOL requests (`ioctl(SIOCETHTOOL)`), each a safe function with its request struct built
//! here, the only place that knows their layouts (include/uapi/linux/ethtool.h: struct
//! ethtool_value, ethtool_channels, ethtool_drvinfo, ethtool_sset_info, ethtool_gstrings,
//! ethtool_stats; the libc crate does not export them). Needs no privileges; answers for the
//! calling thread's network namespace.

use super::SysError;

const ETHTOOL_GDRVINFO: u32 = 0x03;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSTATS: u32 = 0x1d;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETHTOOL_GCHANNELS: u32 = 0x3c;
const ETHTOOL_GGRO: u32 = 0x2b;
/// ETHTOOL_GFLAGS and its ETH_FLAG_RXVLAN bit (include/uapi/linux/ethtool.h).
const ETHTOOL_GFLAGS: u32 = 0x25;
const ETH_FLAG_RXVLAN: u32 = 1 << 8;

/// struct ethtool_value (include/uapi/linux/ethtool.h).
#[repr(C)]
#[derive(Default)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}
const ETH_SS_STATS: u32 = 1;
const ETH_GSTRING_LEN: usize = 32;

/// struct ethtool_channels.
#[repr(C)]
#[derive(Default, Debug, Clone, Copy)]
pub struct Channels {
    cmd: u32,
    /// Most receive-only channels the driver could have.
    pub max_rx: u32,
    /// Most transmit-only channels.
    pub max_tx: u32,
    /// Most other channels.
    pub max_other: u32,
    /// Most combined channels.
    pub max_combined: u32,
    /// Receive-only channels now.
    pub rx_count: u32,
    /// Transmit-only channels now.
    pub tx_count: u32,
    /// Other channels now.
    pub other_count: u32,
    /// Combined (receive and transmit) channels now.
    pub combined_count: u32,
}

#[repr(C)]
struct EthtoolDrvinfo {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    n_priv_flags: u32,
    n_stats: u32,
    testinfo_len: u32,
    eedump_len: u32,
    regdump_len: u32,
}

/// An `ioctl(SIOCETHTOOL)` on `iface` with the request `data` (its first u32 is the command).
///
/// # Safety
/// `data` must point to an ethtool request of the layout the command expects, large enough for
/// everything the kernel writes back (include/uapi/linux/ethtool.h).
unsafe fn ioctl(iface: &str, data: *mut libc::c_void, label: &str) -> Result<(), SysError> {
    // SAFETY: the caller's contract is this function's.
    unsafe { super::ifreq::ethtool_ioctl(iface, data, label) }
}

/// ETHTOOL_GCHANNELS: the queue counts; `None` when the driver does not report channels
/// (EOPNOTSUPP).
pub fn channels(iface: &str) -> Result<Option<Channels>, SysError> {
    let mut ch = Channels { cmd: ETHTOOL_GCHANNELS, ..Default::default() };
    // SAFETY: ch is an ethtool_channels request the kernel fills in.
    match unsafe { ioctl(iface, (&mut ch as *mut Channels).cast(), "ETHTOOL_GCHANNELS") } {
        Ok(()) => Ok(Some(ch)),
        Err(e) if e.errno == libc::EOPNOTSUPP => Ok(None),
        Err(e) => Err(e),
    }
}

fn value(iface: &str, cmd: u32, label: &str) -> Result<u32, SysError> {
    let mut v = EthtoolValue { cmd, data: 0 };
    // SAFETY: v is an ethtool_value request the kernel fills in (every command passed here
    // answers with one).
    unsafe { ioctl(iface, (&mut v as *mut EthtoolValue).cast(), label)? };
    Ok(v.data)
}

/// ETHTOOL_GGRO: true if generic receive offload is on.
pub fn gro(iface: &str) -> Result<bool, SysError> {
    Ok(value(iface, ETHTOOL_GGRO, "ETHTOOL_GGRO")? != 0)
}

/// ETHTOOL_GFLAGS, bit ETH_FLAG_RXVLAN: true if rx VLAN offload is on.
pub fn rx_vlan_offload(iface: &str) -> Result<bool, SysError> {
    Ok(value(iface, ETHTOOL_GFLAGS, "ETHTOOL_GFLAGS")? & ETH_FLAG_RXVLAN != 0)
}

/// ETHTOOL_GDRVINFO: the driver's name.
pub fn driver(iface: &str) -> Result<String, SysError> {
    // SAFETY: all-zero is a valid drvinfo.
    let mut info: EthtoolDrvinfo = unsafe { std::mem::zeroed() };
    info.cmd = ETHTOOL_GDRVINFO;
    // SAFETY: info is an ethtool_drvinfo request the kernel fills in.
    unsafe { ioctl(iface, (&mut info as *mut EthtoolDrvinfo).cast(), "ETHTOOL_GDRVINFO")? };
    Ok(cstr(&info.driver))
}

/// The driver's counters (what `ethtool -S` shows), in the driver's order and names:
/// ETHTOOL_GSSET_INFO, then ETHTOOL_GSTRINGS and ETHTOOL_GSTATS.
pub fn stats(iface: &str) -> Result<Vec<(String, u64)>, SysError> {
    // Since a December 2025 fix to net/ethtool/ioctl.c (backported to stable) the kernel
    // answers a count other than ours with 0 and writes nothing; older kernels ignore ours
    // and write their current count. So: tell it n, keep room for more (older kernels), and
    // read only when both answers match n; otherwise ask again from GSSET_INFO.
    for _ in 0..3 {
        let n = sset_count(iface)?;
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut strings = GstringsReq::new(n);
        // SAFETY: the buffer holds the header and room for GstringsReq::room(n) strings,
        // at least the n the header announces.
        unsafe { ioctl(iface, strings.as_mut_ptr(), "ETHTOOL_GSTRINGS")? };
        let mut stats = GstatsReq::new(n);
        // SAFETY: the buffer holds the header and room for at least the n counters the
        // header announces.
        unsafe { ioctl(iface, stats.as_mut_ptr(), "ETHTOOL_GSTATS")? };
        if let (Some(names), Some(values)) = (strings.strings(), stats.counters()) {
            return Ok(names.zip(values.iter().copied()).collect());
        };
    }
    Err(SysError { call: format!("ethtool stats of {iface}: the counter count keeps changing"), errno: libc::EAGAIN })
}

fn sset_count(iface: &str) -> Result<u32, SysError> {
    // ethtool_sset_info: cmd, reserved, sset_mask (u64), then one u32 per set in the mask.
    let mut sset = [0u32; 5];
    sset[0] = ETHTOOL_GSSET_INFO;
    sset[2] = 1 << ETH_SS_STATS; // low half of the u64 mask (little-endian)
                                 // SAFETY: sset is large enough for the header plus one data word.
    unsafe { ioctl(iface, sset.as_mut_ptr().cast(), "ETHTOOL_GSSET_INFO")? };
    Ok(if sset[2] & (1 << ETH_SS_STATS) != 0 { sset[4] } else { 0 })
}

/// Room for counters beyond the count announced: an older kernel writes its own current count
/// whatever we say, so a count that grew a little since GSSET_INFO still lands in the buffer.
fn room(n: u32) -> usize {
    n as usize * 2 + 16
}

/// An ETHTOOL_GSTATS request: the count announced and the buffer are made from one value, so
/// the kernel is never told of more counters than the buffer holds.
struct GstatsReq {
    n: u32,
    buf: Vec<u64>,
}

impl GstatsReq {
    fn new(n: u32) -> Self {
        // ethtool_stats: cmd, n_stats, then u64 data (8-byte aligned: a u64 buffer).
        let mut buf = vec![0u64; 1 + room(n)];
        buf[0] = u64::from(ETHTOOL_GSTATS) | (u64::from(n) << 32);
        Self { n, buf }
    }
    fn as_mut_ptr(&mut self) -> *mut libc::c_void {
        self.buf.as_mut_ptr().cast()
    }
    /// The counters if the kernel answered for exactly the count announced.
    fn counters(&self) -> Option<&[u64]> {
        let got = (self.buf[0] >> 32) as u32;
        (got == self.n).then(|| &self.buf[1..1 + self.n as usize])
    }
}

/// An ETHTOOL_GSTRINGS request of the stats names, built like [`GstatsReq`].
struct GstringsReq {
    n: u32,
    buf: Vec<u8>,
}

impl GstringsReq {
    fn new(n: u32) -> Self {
        // ethtool_gstrings: cmd, string_set, len, then len * 32 bytes.
        let mut buf = vec![0u8; 12 + room(n) * ETH_GSTRING_LEN];
        buf[0..4].copy_from_slice(&ETHTOOL_GSTRINGS.to_ne_bytes());
        buf[4..8].copy_from_slice(&ETH_SS_STATS.to_ne_bytes());
        buf[8..12].copy_from_slice(&n.to_ne_bytes());
        Self { n, buf }
    }
    fn as_mut_ptr(&mut self) -> *mut libc::c_void {
        self.buf.as_mut_ptr().cast()
    }
    fn strings(&self) -> Option<impl Iterator<Item = String> + '_> {
        let got = u32::from_ne_bytes(self.buf[8..12].try_into().expect("4 bytes"));
        (got == self.n).then(|| self.buf[12..12 + self.n as usize * ETH_GSTRING_LEN].chunks(ETH_GSTRING_LEN).map(cstr))
    }
}

fn cstr(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ethtool_requests_never_announce_more_than_they_hold() {
        for n in [1u32, 7, 300] {
            let mut g = GstatsReq::new(n);
            assert_eq!(g.buf[0] >> 32, u64::from(n));
            assert!(g.buf.len() > n as usize);
            // A newer kernel's answer to a count that changed: 0 and nothing written.
            g.buf[0] &= 0xffff_ffff;
            assert!(g.counters().is_none());
            // An older kernel's answer with a grown count: not read as ours.
            g.buf[0] |= u64::from(n + 1) << 32;
            assert!(g.counters().is_none());
            g.buf[0] = u64::from(ETHTOOL_GSTATS) | (u64::from(n) << 32);
            assert_eq!(g.counters().map(|c| c.len()), Some(n as usize));
            let s = GstringsReq::new(n);
            assert_eq!(u32::from_ne_bytes(s.buf[8..12].try_into().unwrap()), n);
            assert!(s.buf.len() >= 12 + n as usize * ETH_GSTRING_LEN);
            assert_eq!(s.strings().map(|i| i.count()), Some(n as usize));
        }
    }
}
