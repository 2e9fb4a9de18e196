//! The `netdev` generic netlink family (Documentation/netlink/specs/netdev.yaml,
//! include/uapi/linux/netdev.h; kernel 6.3 or later), spoken through netlink-sys and
//! netlink-packet-generic (the rust-netlink project, as for rtnetlink in `watch.rs`): one
//! socket, the family id resolved once, and `do` (one answer), `ack` (a request answered only
//! by its acknowledgement) and `dump` (every answer until NLMSG_DONE) requests, and
//! [`Netdev::queue_get`] (`queue-get` of one queue). Used by [`super::xdp_features`] (dev-get)
//! [`super::napi`] (napi-get, napi-set, queue-get) and the feature probes of `crate::features`
//! (napi-get, napi-set).

use std::io;

use netlink_packet_core::{
    DecodeError, Emitable, NetlinkBuffer, NetlinkMessage, NetlinkPayload, NlasIterator, ParseableParametrized,
    NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_generic::ctrl::nlas::GenlCtrlAttrs;
use netlink_packet_generic::ctrl::{GenlCtrl, GenlCtrlCmd};
use netlink_packet_generic::{GenlFamily, GenlHeader, GenlMessage};
use netlink_sys::{protocols::NETLINK_GENERIC, Socket, SocketAddr};

/// NETDEV_CMD_QUEUE_GET and enum netdev_a_queue (include/uapi/linux/netdev.h).
const QUEUE_GET: u8 = 10;
const QUEUE_A_ID: u16 = 1;
const QUEUE_A_IFINDEX: u16 = 2;
const QUEUE_A_TYPE: u16 = 3;
/// `napi-id` of a `queue-get` answer.
pub(crate) const QUEUE_A_NAPI_ID: u16 = 4;

/// NETDEV_CMD_NAPI_GET and NETDEV_CMD_NAPI_SET (include/uapi/linux/netdev.h): what
/// [`super::napi`] sends, and the feature probes (`crate::features`) too.
pub(crate) const NAPI_GET: u8 = 11;
pub(crate) const NAPI_SET: u8 = 14;
/// enum netdev_a_napi.
pub(crate) const NAPI_A_IFINDEX: u16 = 1;
pub(crate) const NAPI_A_ID: u16 = 2;
pub(crate) const NAPI_A_IRQ: u16 = 3;
pub(crate) const NAPI_A_PID: u16 = 4;
pub(crate) const NAPI_A_DEFER_HARD_IRQS: u16 = 5;
pub(crate) const NAPI_A_GRO_FLUSH_TIMEOUT: u16 = 6;
pub(crate) const NAPI_A_IRQ_SUSPEND_TIMEOUT: u16 = 7;

/// Attributes of one message: (type, value bytes), in the order received.
pub(crate) type Attrs = Vec<(u16, Vec<u8>)>;

/// A `netdev` family message: the command and its attributes as (type, bytes).
#[derive(Debug, Clone)]
pub(crate) struct NetdevMsg {
    pub(crate) cmd: u8,
    pub(crate) attrs: Attrs,
}

impl GenlFamily for NetdevMsg {
    fn family_name() -> &'static str {
        "netdev"
    }
    fn command(&self) -> u8 {
        self.cmd
    }
    fn version(&self) -> u8 {
        1
    }
}

impl Emitable for NetdevMsg {
    fn buffer_len(&self) -> usize {
        self.attrs.iter().map(|(_, v)| (4 + v.len()).div_ceil(4) * 4).sum()
    }
    fn emit(&self, buffer: &mut [u8]) {
        let mut off = 0;
        for (kind, v) in &self.attrs {
            let len = 4 + v.len();
            buffer[off..off + 2].copy_from_slice(&(len as u16).to_ne_bytes());
            buffer[off + 2..off + 4].copy_from_slice(&kind.to_ne_bytes());
            buffer[off + 4..off + len].copy_from_slice(v);
            let padded = len.div_ceil(4) * 4;
            buffer[off + len..off + padded].fill(0);
            off += padded;
        }
    }
}

impl ParseableParametrized<[u8], GenlHeader> for NetdevMsg {
    fn parse_with_param(buf: &[u8], header: GenlHeader) -> Result<Self, DecodeError> {
        let mut attrs = Vec::new();
        for nla in NlasIterator::new(buf) {
            let nla = nla?;
            attrs.push((nla.kind(), nla.value().to_vec()));
        }
        Ok(Self { cmd: header.cmd, attrs })
    }
}

fn bad(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

fn send<F>(sock: &Socket, msg: GenlMessage<F>, flags: u16) -> io::Result<()>
where
    F: GenlFamily + Emitable + ParseableParametrized<[u8], GenlHeader> + std::fmt::Debug,
{
    let mut nl = NetlinkMessage::from(msg);
    nl.header.flags = flags;
    nl.finalize();
    let mut tx = vec![0u8; nl.buffer_len()];
    nl.serialize(&mut tx);
    sock.send(&tx, 0)?;
    Ok(())
}

/// One request, one answer (or a netlink error as `io::Error`).
fn request<F>(sock: &Socket, msg: GenlMessage<F>) -> io::Result<GenlMessage<F>>
where
    F: GenlFamily + Emitable + ParseableParametrized<[u8], GenlHeader> + std::fmt::Debug,
{
    send(sock, msg, NLM_F_REQUEST)?;
    let mut rx = Vec::with_capacity(8192);
    sock.recv(&mut rx, 0)?;
    let msg = NetlinkMessage::<GenlMessage<F>>::deserialize(&rx).map_err(|e| bad(format!("netlink answer: {e}")))?;
    match msg.payload {
        NetlinkPayload::InnerMessage(m) => Ok(m),
        NetlinkPayload::Error(e) => Err(e.to_io()),
        other => Err(bad(format!("unexpected netlink answer {other:?}"))),
    }
}

/// A NETLINK_GENERIC socket with the `netdev` family's id.
#[derive(Debug)]
pub(crate) struct Netdev {
    sock: Socket,
    family: u16,
}

impl Netdev {
    /// Opens the socket and resolves the family: `None` where the kernel has no `netdev`
    /// family (< 6.3). Works in the calling thread's network namespace; no privileges.
    pub(crate) fn open() -> io::Result<Option<Self>> {
        let mut sock = Socket::new(NETLINK_GENERIC)?;
        sock.bind_auto()?;
        sock.connect(&SocketAddr::new(0, 0))?;
        let mut m = GenlMessage::from_payload(GenlCtrl {
            cmd: GenlCtrlCmd::GetFamily,
            nlas: vec![GenlCtrlAttrs::FamilyName("netdev".into())],
        });
        m.finalize();
        let family = match request(&sock, m) {
            Ok(a) => a.payload.nlas.iter().find_map(|n| match n {
                GenlCtrlAttrs::FamilyId(id) => Some(*id),
                _ => None,
            }),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => None,
            Err(e) => return Err(e),
        };
        Ok(family.map(|family| Self { sock, family }))
    }

    fn message(&self, cmd: u8, attrs: Attrs) -> GenlMessage<NetdevMsg> {
        let mut m = GenlMessage::from_payload(NetdevMsg { cmd, attrs });
        m.set_resolved_family_id(self.family);
        m.finalize();
        m
    }

    /// A `do` request answered by one message: its attributes.
    pub(crate) fn get(&self, cmd: u8, attrs: Attrs) -> io::Result<Attrs> {
        Ok(request(&self.sock, self.message(cmd, attrs))?.payload.attrs)
    }

    /// `queue-get` of one queue (NETDEV_CMD_QUEUE_GET = 10, kernel >= 6.8): the attributes of
    /// queue `id` of type `kind` (NETDEV_QUEUE_TYPE_RX = 0, TX = 1) of interface `ifindex`
    /// (enum netdev_a_queue: id 1, ifindex 2, type 3, napi-id 4). The kernel puts `napi-id`
    /// in only when the driver linked the queue to a NAPI (`netif_queue_set_napi`).
    pub(crate) fn queue_get(&self, ifindex: u32, kind: u32, id: u32) -> io::Result<Attrs> {
        self.get(
            QUEUE_GET,
            vec![
                (QUEUE_A_ID, id.to_ne_bytes().to_vec()),
                (QUEUE_A_IFINDEX, ifindex.to_ne_bytes().to_vec()),
                (QUEUE_A_TYPE, kind.to_ne_bytes().to_vec()),
            ],
        )
    }

    /// A `do` request answered only by its acknowledgement (NLM_F_ACK): Ok, or the kernel's
    /// errno as `io::Error`.
    pub(crate) fn ack(&self, cmd: u8, attrs: Attrs) -> io::Result<()> {
        send(&self.sock, self.message(cmd, attrs), NLM_F_REQUEST | NLM_F_ACK)?;
        loop {
            let mut rx = Vec::with_capacity(8192);
            self.sock.recv(&mut rx, 0)?;
            let msg = NetlinkMessage::<GenlMessage<NetdevMsg>>::deserialize(&rx)
                .map_err(|e| bad(format!("netlink answer: {e}")))?;
            match msg.payload {
                NetlinkPayload::Error(e) if e.code.is_none() => return Ok(()),
                NetlinkPayload::Error(e) => return Err(e.to_io()),
                // A reply before the acknowledgement: read on.
                NetlinkPayload::InnerMessage(_) => continue,
                other => return Err(bad(format!("unexpected netlink answer {other:?}"))),
            }
        }
    }

    /// A `dump` request: the attributes of every answer until NLMSG_DONE.
    pub(crate) fn dump(&self, cmd: u8, attrs: Attrs) -> io::Result<Vec<Attrs>> {
        send(&self.sock, self.message(cmd, attrs), NLM_F_REQUEST | NLM_F_DUMP)?;
        let mut out = Vec::new();
        loop {
            let mut rx = Vec::with_capacity(1 << 16);
            self.sock.recv(&mut rx, 0)?;
            if dump_chunk(&rx, &mut out)? {
                return Ok(out);
            }
        }
    }
}

/// Reads one received buffer of a dump into `out`: true once NLMSG_DONE (or an
/// acknowledgement) ends the dump. An error code, in an error message or in NLMSG_DONE's
/// payload (the dump callback's errno, e.g. -ENODEV for an unknown ifindex), is the error.
fn dump_chunk(rx: &[u8], out: &mut Vec<Attrs>) -> io::Result<bool> {
    let mut off = 0;
    while off < rx.len() {
        let len =
            NetlinkBuffer::new_checked(&rx[off..]).map_err(|e| bad(format!("netlink answer: {e}")))?.length() as usize;
        if len == 0 {
            break;
        }
        let msg = NetlinkMessage::<GenlMessage<NetdevMsg>>::deserialize(&rx[off..off + len])
            .map_err(|e| bad(format!("netlink answer: {e}")))?;
        match msg.payload {
            NetlinkPayload::InnerMessage(m) => out.push(m.payload.attrs),
            NetlinkPayload::Done(d) if d.code < 0 => return Err(io::Error::from_raw_os_error(-d.code)),
            NetlinkPayload::Done(_) => return Ok(true),
            NetlinkPayload::Error(e) if e.code.is_none() => return Ok(true),
            NetlinkPayload::Error(e) => return Err(e.to_io()),
            _ => {}
        }
        off += len.div_ceil(4) * 4;
    }
    Ok(false)
}

/// The value of attribute `kind` as an unsigned number of 1, 2, 4 or 8 bytes (NLA_UINT is 4 or
/// 8 bytes, include/net/netlink.h nla_put_uint).
pub(crate) fn uint(attrs: &[(u16, Vec<u8>)], kind: u16) -> Option<u64> {
    let (_, v) = attrs.iter().find(|(t, _)| *t == kind)?;
    Some(match v.len() {
        1 => v[0] as u64,
        2 => u16::from_ne_bytes([v[0], v[1]]) as u64,
        4 => u32::from_ne_bytes([v[0], v[1], v[2], v[3]]) as u64,
        8 => u64::from_ne_bytes(v[..8].try_into().ok()?),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NLMSG_DONE (type 3, NLM_F_MULTI) with `code` as its payload.
    fn done(code: i32) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&20u32.to_ne_bytes());
        m.extend_from_slice(&3u16.to_ne_bytes());
        m.extend_from_slice(&2u16.to_ne_bytes());
        m.extend_from_slice(&[0; 8]);
        m.extend_from_slice(&code.to_ne_bytes());
        m
    }

    #[test]
    fn done_with_an_errno_is_that_error() {
        let mut out = Vec::new();
        let e = dump_chunk(&done(-libc::ENODEV), &mut out).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENODEV));
        assert!(dump_chunk(&done(0), &mut out).unwrap());
        assert!(out.is_empty());
    }
}
