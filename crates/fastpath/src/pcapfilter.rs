//! A pcap-filter expression (tcpdump's language, pcap-filter(7)) compiled and run by libpcap
//! itself, so that it means exactly what it means to tcpdump: `pcap_compile()` on a dead
//! handle (`pcap_open_dead(DLT_EN10MB, snaplen)`, netmask 0 as `tcpdump -r` has it), then
//! `pcap_offline_filter()` on each frame in user space.
//!
//! A minimal binding of five libpcap functions (libpcap >= 1.0; Debian: libpcap0.8 at run time,
//! libpcap-dev to build). No capture handle is opened: nothing here needs privileges.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};

/// `struct bpf_program` (pcap/bpf.h).
#[repr(C)]
struct BpfProgram {
    bf_len: c_uint,
    bf_insns: *mut c_void,
}

/// `struct pcap_pkthdr` (pcap/pcap.h).
#[repr(C)]
struct PcapPkthdr {
    ts: libc::timeval,
    caplen: u32,
    len: u32,
}

/// `DLT_EN10MB`: Ethernet.
const DLT_EN10MB: c_int = 1;

#[link(name = "pcap")]
extern "C" {
    fn pcap_open_dead(linktype: c_int, snaplen: c_int) -> *mut c_void;
    fn pcap_compile(p: *mut c_void, fp: *mut BpfProgram, s: *const c_char, optimize: c_int, netmask: u32) -> c_int;
    fn pcap_geterr(p: *mut c_void) -> *mut c_char;
    fn pcap_close(p: *mut c_void);
    fn pcap_freecode(fp: *mut BpfProgram);
    fn pcap_offline_filter(fp: *const BpfProgram, h: *const PcapPkthdr, pkt: *const u8) -> c_int;
}

/// Why an expression was not compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PcapFilterError {
    /// libpcap refused it; `msg` is libpcap's own message (pcap_geterr), e.g. "syntax error".
    #[error("libpcap: {msg}")]
    Compile {
        /// libpcap's message.
        msg: String,
    },
    /// The expression holds a NUL byte, which no C string can carry.
    #[error("it holds a NUL byte")]
    Nul,
    /// pcap_open_dead() returned NULL (out of memory).
    #[error("libpcap: pcap_open_dead failed (out of memory)")]
    Open,
}

/// A compiled pcap-filter expression for Ethernet frames.
///
/// # Examples
///
/// ```
/// use fastpath::packet::{build_udp_frame, UdpFrameSpec};
/// use fastpath::pcapfilter::PcapFilter;
///
/// let spec = UdpFrameSpec {
///     src_mac: [2, 0, 0, 0, 0, 1],
///     dst_mac: [2, 0, 0, 0, 0, 2],
///     src_ip: "10.99.0.1".parse()?,
///     dst_ip: "10.99.0.2".parse()?,
///     src_port: 9000,
///     dst_port: 9,
///     frame_len: 64,
/// };
/// let mut frame = [0u8; 64];
/// build_udp_frame(&spec, &mut frame);
/// let f = PcapFilter::compile("udp dst port 9 and src host 10.99.0.1", 65535)?;
/// assert!(f.matches(&frame, 64));
/// assert!(!PcapFilter::compile("tcp", 65535)?.matches(&frame, 64));
/// assert!(PcapFilter::compile("udp port", 65535).is_err()); // libpcap: syntax error
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct PcapFilter {
    prog: BpfProgram,
    expr: String,
}

impl std::fmt::Debug for PcapFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PcapFilter").field("expr", &self.expr).field("insns", &self.prog.bf_len).finish()
    }
}

impl PcapFilter {
    /// Compiles `expr` (optimized, as tcpdump does) for Ethernet frames captured with `snaplen`
    /// bytes (1..; larger values are capped at `i32::MAX`).
    ///
    /// # Errors
    ///
    /// [`PcapFilterError::Compile`] with libpcap's message for an expression libpcap refuses
    /// (syntax, unknown host or port name, ...); [`PcapFilterError::Nul`]; [`PcapFilterError::Open`].
    pub fn compile(expr: &str, snaplen: u32) -> Result<PcapFilter, PcapFilterError> {
        let c = CString::new(expr).map_err(|_| PcapFilterError::Nul)?;
        let snap = c_int::try_from(snaplen).unwrap_or(c_int::MAX);
        // SAFETY: pcap_open_dead takes plain integers and returns an owned handle or NULL.
        let p = unsafe { pcap_open_dead(DLT_EN10MB, snap) };
        if p.is_null() {
            return Err(PcapFilterError::Open);
        }
        let mut prog = BpfProgram { bf_len: 0, bf_insns: std::ptr::null_mut() };
        // SAFETY: `p` is a live handle, `prog` a writable bpf_program, `c` a NUL-terminated
        // string that outlives the call.
        let rc = unsafe { pcap_compile(p, &mut prog, c.as_ptr(), 1, 0) };
        let out = if rc == 0 {
            Ok(PcapFilter { prog, expr: expr.to_string() })
        } else {
            // SAFETY: pcap_geterr returns the handle's NUL-terminated error buffer, valid until
            // the handle is closed (below, after the copy).
            let msg = unsafe { CStr::from_ptr(pcap_geterr(p)) }.to_string_lossy().trim().replace('\n', " ");
            Err(PcapFilterError::Compile { msg })
        };
        // SAFETY: `p` came from pcap_open_dead and is closed once; the program does not refer
        // to the handle.
        unsafe { pcap_close(p) };
        out
    }

    /// The expression as given.
    pub fn expr(&self) -> &str {
        &self.expr
    }

    /// Whether the expression accepts the frame whose first `data.len()` bytes (the captured
    /// part) are `data` and whose length on the wire was `wire_len` bytes (at least
    /// `data.len()`; `len`, `greater` and `less` look at it).
    pub fn matches(&self, data: &[u8], wire_len: u32) -> bool {
        let caplen = u32::try_from(data.len()).unwrap_or(u32::MAX);
        let h = PcapPkthdr { ts: libc::timeval { tv_sec: 0, tv_usec: 0 }, caplen, len: wire_len.max(caplen) };
        // SAFETY: the program is a valid compiled filter owned by self; `h` says how many bytes
        // of `data` may be read (caplen = data.len()), and the BPF interpreter checks every
        // load against caplen.
        unsafe { pcap_offline_filter(&self.prog, &h, data.as_ptr()) != 0 }
    }
}

impl Drop for PcapFilter {
    fn drop(&mut self) {
        // SAFETY: the program came from pcap_compile and is freed once.
        unsafe { pcap_freecode(&mut self.prog) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiles_matches_and_reports_libpcap_errors() {
        let f = PcapFilter::compile("arp", 16384).unwrap();
        let mut arp = vec![0xffu8; 6];
        arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06]);
        arp.resize(42, 0);
        assert!(f.matches(&arp, 42));
        arp[13] = 0x00;
        assert!(!f.matches(&arp, 42));
        let g = PcapFilter::compile("greater 100", 64).unwrap();
        assert!(g.matches(&arp, 200), "the wire length, not the captured one");
        assert!(!g.matches(&arp, 42));
        let e = PcapFilter::compile("udp prot 53", 16384).unwrap_err();
        assert!(matches!(&e, PcapFilterError::Compile { msg } if msg.contains("syntax error")), "{e}");
    }
}
