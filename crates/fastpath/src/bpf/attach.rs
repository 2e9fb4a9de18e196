//! Attaching an XDP program with mode fallback: the one function every command uses.

use super::{query_xdp, BpfError, XdpMode};

/// A program attached with mode fallback, and what was obtained.
#[derive(Debug)]
pub struct Attached<T> {
    /// The program; dropping it detaches it.
    pub prog: T,
    /// The mode the kernel reports after attaching (never merely the one asked for).
    pub mode: XdpMode,
    /// Fallbacks taken, one line each.
    pub notes: Vec<String>,
}

/// Attaches with `attach(mode)`: the one mode asked for, or with `None` native then skb. The
/// mode is read back from the kernel (`query_xdp`). Errors: as `attach`, or
/// [`BpfError::AllModesRefused`] listing each mode's error.
pub fn attach_with_fallback<T>(
    iface: &str,
    ifindex: u32,
    mode: Option<XdpMode>,
    attach: impl FnMut(XdpMode) -> Result<T, BpfError>,
) -> Result<Attached<T>, BpfError> {
    let modes: &[XdpMode] = match mode {
        Some(XdpMode::Native) => &[XdpMode::Native],
        Some(XdpMode::Skb) => &[XdpMode::Skb],
        None => &[XdpMode::Native, XdpMode::Skb],
    };
    let (prog, asked, notes) = super::attach_first(iface, modes, attach)?;
    let mode = match query_xdp(ifindex) {
        Ok(Some(p)) if p.mode == "skb" => XdpMode::Skb,
        Ok(Some(p)) if p.mode == "native" => XdpMode::Native,
        _ => asked,
    };
    Ok(Attached { prog, mode, notes })
}
