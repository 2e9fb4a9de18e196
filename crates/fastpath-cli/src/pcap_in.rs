//! Reading a capture for `fastpath gen --pcap FILE`: pcap (micro- or nanosecond, either byte
//! order) or pcapng (any if_tsresol, several interfaces and sections), parsed with the
//! `pcap-file` crate. Every frame must be a whole Ethernet frame: the replay sends it byte for
//! byte, so a frame cut by a snap length or another link type is refused, naming the frame.
//!
//! Memory: the file is read as a stream (a buffer of [`READ_CHUNK_BYTES`], larger only for a
//! record larger than that) and its frames are kept packed in one buffer
//! ([`PackedFrames`]): the frames' bytes plus 12 bytes a frame (its end offset and timestamp).
//! Every record in the file takes at least 12 bytes more than its frame (a pcap record header
//! is 16, a pcapng packet block 16 to 32), so what is held is less than the file's size, at
//! most [`MAX_FILE_BYTES`]: 1 GiB of 14-byte frames (36 million) holds about 0.9 GiB.

use std::borrow::Cow;
use std::io::Read;
use std::path::Path;

use anyhow::anyhow;
use pcap_file::pcap::PcapParser;
use pcap_file::pcapng::blocks::interface_description::{InterfaceDescriptionBlock, InterfaceDescriptionOption};
use pcap_file::pcapng::{Block, PcapNgParser};
use pcap_file::{DataLink, PcapError, TsResolution};

use fastpath_tools::replay::PackedFrames;

use crate::error::{usage, CliResult};

/// The frames of a capture, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capture {
    /// "pcap" or "pcapng".
    pub format: &'static str,
    /// Whole Ethernet frames (14 bytes or more, without FCS as captured), packed.
    pub frames: PackedFrames,
    /// Each frame's timestamp, ns since the epoch as the file gives it (or an arbitrary
    /// origin: only the differences are used).
    pub ts_ns: Vec<u64>,
}

/// pcapng's section header magic (byte-order independent), and pcap's in both byte orders
/// and both resolutions (micro- and nanoseconds).
const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];
const PCAP_MAGICS: [[u8; 4]; 4] =
    [[0xd4, 0xc3, 0xb2, 0xa1], [0xa1, 0xb2, 0xc3, 0xd4], [0x4d, 0x3c, 0xb2, 0xa1], [0xa1, 0xb2, 0x3c, 0x4d]];

/// The largest capture [`read`] takes: 1 GiB (its frames are held in memory, packed: less
/// than the file's size, see the module docs).
pub const MAX_FILE_BYTES: u64 = 1 << 30;

/// What [`read`] reads from the file at a time: 1 MiB.
pub const READ_CHUNK_BYTES: usize = 1 << 20;

/// Reads `path` as a stream. Errors (usage, exit 2), each one line naming the file and, where
/// one is at fault, the frame (from 1): unreadable, not a regular file (after symbolic links: a
/// device, FIFO or directory), larger than [`MAX_FILE_BYTES`], empty, neither pcap nor
/// pcapng, a link type other than Ethernet, a frame cut by the snap length or shorter than an
/// Ethernet header, a record the file ends inside (truncated), no frames at all.
pub fn read(path: &Path) -> CliResult<Capture> {
    let shown = format!("{path:?}");
    let mut st = Stream::open(path)?;
    st.fill_to(4)?;
    if st.unread().is_empty() {
        return Err(usage(anyhow!("--pcap {shown} is empty: use a pcap or pcapng file with Ethernet frames")));
    }
    let magic: [u8; 4] = st.unread().get(..4).and_then(|m| m.try_into().ok()).unwrap_or([0; 4]);
    let cap = if magic == PCAPNG_MAGIC {
        read_pcapng(&mut st, path)?
    } else if PCAP_MAGICS.contains(&magic) {
        read_pcap(&mut st, path)?
    } else {
        return Err(usage(anyhow!(
            "--pcap {shown} is not a pcap or pcapng file (it starts with {}): use a capture as fastpath capture, tcpdump -w or tshark -w write it",
            st.unread().iter().take(4).map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" ")
        )));
    };
    if cap.frames.is_empty() {
        return Err(usage(anyhow!("--pcap {shown} holds no frames: nothing to replay")));
    }
    Ok(cap)
}

/// The file read as a stream: `buf[pos..]` is read and not yet parsed.
struct Stream<'p> {
    path: &'p Path,
    file: std::io::Take<std::fs::File>,
    buf: Vec<u8>,
    pos: usize,
    /// The file's bytes read so far.
    read_bytes: u64,
    eof: bool,
}

impl<'p> Stream<'p> {
    /// `path`, a regular file of at most [`MAX_FILE_BYTES`] (see [`open_regular`]).
    fn open(path: &'p Path) -> CliResult<Self> {
        let file = open_regular(path)?.take(MAX_FILE_BYTES + 1);
        Ok(Stream { path, file, buf: Vec::new(), pos: 0, read_bytes: 0, eof: false })
    }

    /// The bytes read and not yet parsed.
    fn unread(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    /// `n` bytes parsed.
    fn consume(&mut self, n: usize) {
        self.pos += n;
    }

    /// Reads more of the file: the unread bytes moved to the front, then up to
    /// [`READ_CHUNK_BYTES`] more (the buffer doubles if the unread bytes fill it: a record larger
    /// than that). False at the end of the file. No more than [`MAX_FILE_BYTES`] are read,
    /// should the file grow meanwhile.
    fn more(&mut self) -> CliResult<bool> {
        if self.eof {
            return Ok(false);
        }
        self.buf.drain(..self.pos);
        self.pos = 0;
        let have = self.buf.len();
        let room = if have >= READ_CHUNK_BYTES { have } else { READ_CHUNK_BYTES - have };
        self.buf.resize(have + room, 0);
        let n = loop {
            match self.file.read(&mut self.buf[have..]) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => break r,
            }
        };
        let n = n.map_err(|e| usage(anyhow!("--pcap {:?} cannot be read: {e}", self.path)))?;
        self.buf.truncate(have + n);
        self.read_bytes += n as u64;
        if self.read_bytes > MAX_FILE_BYTES {
            return Err(usage(anyhow!("--pcap {:?} grew past {MAX_FILE_BYTES} bytes (1 GiB) while read", self.path)));
        }
        self.eof = n == 0;
        Ok(!self.eof)
    }

    /// Reads until `n` bytes are unread or the file ends.
    fn fill_to(&mut self, n: usize) -> CliResult<()> {
        while self.unread().len() < n && self.more()? {}
        Ok(())
    }
}

/// `path`, a regular file of at most [`MAX_FILE_BYTES`]: opened without blocking (a FIFO would
/// wait for a writer, ignoring signals) and checked with fstat on that descriptor.
fn open_regular(path: &Path) -> CliResult<std::fs::File> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let cant = |e: std::io::Error| usage(anyhow!("--pcap {path:?} cannot be read: {e}"));
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path).map_err(cant)?;
    let meta = file.metadata().map_err(cant)?;
    let t = meta.file_type();
    if !t.is_file() {
        let kind = if t.is_dir() {
            "a directory"
        } else if t.is_fifo() {
            "a FIFO"
        } else if t.is_char_device() {
            "a character device"
        } else if t.is_block_device() {
            "a block device"
        } else if t.is_socket() {
            "a socket"
        } else {
            "not a regular file"
        };
        return Err(usage(anyhow!(
            "--pcap {path:?} is {kind}: use a regular pcap or pcapng file (a capture written to disk)"
        )));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(usage(anyhow!(
            "--pcap {path:?} is {} bytes: at most {MAX_FILE_BYTES} (1 GiB) are read, its frames are held in memory; cut it (editcap -c, tcpdump -r ... -C)",
            meta.len()
        )));
    }
    Ok(file)
}

/// The one-line message of a parse error at frame `frame` (the next one, from 1).
fn parse_error(path: &Path, frame: usize, e: &PcapError) -> crate::error::CliError {
    let shown = format!("{path:?}");
    match e {
        PcapError::IncompleteBuffer => usage(anyhow!(
            "--pcap {shown} is truncated: it ends inside the record of frame {frame} (a capture still being written, or a cut copy)"
        )),
        e => usage(anyhow!("--pcap {shown}: the record of frame {frame} cannot be read: {e}")),
    }
}

/// Checks one frame (number `i` from 1) and adds it.
fn push(cap: &mut Capture, path: &Path, (link, data, orig_len, ts_ns): (DataLink, &[u8], u32, u64)) -> CliResult<()> {
    let i = cap.frames.len() + 1;
    let shown = format!("{path:?}");
    if link != DataLink::ETHERNET {
        return Err(usage(anyhow!(
            "--pcap {shown}: frame {i} has link type {link:?} ({}): only Ethernet frames (LINKTYPE_ETHERNET, 1) can be replayed",
            u32::from(link)
        )));
    }
    if (data.len() as u64) < u64::from(orig_len) {
        return Err(usage(anyhow!(
            "--pcap {shown}: frame {i} was cut to {} of its {orig_len} bytes when captured (snap length): it cannot be sent as it was; capture again without a snap length (fastpath capture's default, tcpdump -s 0)",
            data.len()
        )));
    }
    if data.len() < 14 {
        return Err(usage(anyhow!(
            "--pcap {shown}: frame {i} is {} bytes, shorter than an Ethernet header (14)",
            data.len()
        )));
    }
    // The file is at most 1 GiB: its frames fit the packing's 4 GiB.
    cap.frames.push(data).map_err(|e| usage(anyhow!("--pcap {shown}: frame {i}: {e}")))?;
    cap.ts_ns.push(ts_ns);
    Ok(())
}

/// What a record's parse needs of the loop: more of the file (the record is not whole in the
/// buffer yet), or the run ends with an error.
enum Step {
    More,
    Fail(crate::error::CliError),
}

impl From<crate::error::CliError> for Step {
    fn from(e: crate::error::CliError) -> Self {
        Step::Fail(e)
    }
}

/// Parses the stream's records with `record` (the bytes unread; Ok: how many it used) until the
/// file ends, reading more whenever a record is not whole. `next` is the frame number a
/// truncation is reported at.
fn each_record(
    st: &mut Stream,
    path: &Path,
    next: &dyn Fn() -> usize,
    record: &mut dyn FnMut(&[u8]) -> Result<usize, Step>,
) -> CliResult<()> {
    loop {
        if st.unread().is_empty() && !st.more()? {
            return Ok(());
        }
        match record(st.unread()) {
            Ok(used) => st.consume(used),
            Err(Step::More) => {
                if !st.more()? {
                    return Err(parse_error(path, next(), &PcapError::IncompleteBuffer));
                }
            }
            Err(Step::Fail(e)) => return Err(e),
        }
    }
}

/// pcap: the records read raw (`pcap-file`'s checked reader refuses a record whose orig_len
/// exceeds the header's snaplen before its length can be compared: every frame a `tcpdump -s
/// 96` cut); the header's snaplen is not used, each record's incl_len and orig_len are.
fn read_pcap(st: &mut Stream, path: &Path) -> CliResult<Capture> {
    st.fill_to(24)?;
    let (rest, parser) = PcapParser::new(st.unread()).map_err(|e| match e {
        PcapError::IncompleteBuffer => {
            usage(anyhow!("--pcap {path:?} is truncated: it ends inside the pcap file header (24 bytes)"))
        }
        e => usage(anyhow!("--pcap {path:?}: its pcap file header cannot be read: {e}")),
    })?;
    st.consume(st.unread().len() - rest.len());
    let header = parser.header();
    let frac_ns: u64 = match header.ts_resolution {
        TsResolution::MicroSecond => 1000,
        TsResolution::NanoSecond => 1,
    };
    let cap = std::cell::RefCell::new(Capture { format: "pcap", frames: PackedFrames::default(), ts_ns: Vec::new() });
    let next = || cap.borrow().frames.len() + 1;
    each_record(st, path, &next, &mut |buf| {
        let i = next();
        let (r, p) = match parser.next_raw_packet(buf) {
            Ok(x) => x,
            Err(PcapError::IncompleteBuffer) => return Err(Step::More),
            Err(e) => return Err(Step::Fail(parse_error(path, i, &e))),
        };
        if p.incl_len > p.orig_len {
            return Err(Step::Fail(usage(anyhow!(
                "--pcap {path:?}: the record of frame {i} says {} bytes captured of {} on the wire (more than were sent): the file is damaged",
                p.incl_len,
                p.orig_len
            ))));
        }
        let ts = u64::from(p.ts_sec) * 1_000_000_000 + u64::from(p.ts_frac) * frac_ns;
        push(&mut cap.borrow_mut(), path, (header.datalink, &p.data, p.orig_len, ts))?;
        Ok(buf.len() - r.len())
    })?;
    Ok(cap.into_inner())
}

/// Nanoseconds of `raw` timestamp units of interface `idb` (if_tsresol: 10^-n s, or 2^-n s
/// with the high bit set; 10^-6 s without the option, pcapng's default), plus its if_tsoffset
/// (seconds, signed), saturating at 0 and `u64::MAX`. The `pcap-file` crate hands the raw
/// 64-bit count over as if it were nanoseconds. Err(if_tsresol) for units finer than 10^-19 s
/// or 2^-63 s, where a 64-bit count spans less than a second or two and the times would
/// collapse to 0.
fn ts_ns(raw: u64, idb: Option<&InterfaceDescriptionBlock<'_>>) -> Result<u64, u8> {
    let opts = idb.map(|i| i.options.as_slice()).unwrap_or_default();
    let resol = opts
        .iter()
        .find_map(|o| match o {
            InterfaceDescriptionOption::IfTsResol(r) => Some(*r),
            _ => None,
        })
        .unwrap_or(6);
    let offset_s = opts
        .iter()
        .find_map(|o| match o {
            InterfaceDescriptionOption::IfTsOffset(s) => Some(*s as i64),
            _ => None,
        })
        .unwrap_or(0);
    let n = u32::from(resol & 0x7f);
    let ns = if resol & 0x80 != 0 {
        if n > 63 {
            return Err(resol);
        }
        (u128::from(raw) * 1_000_000_000) >> n
    } else {
        if n > 19 {
            return Err(resol);
        }
        u128::from(raw) * 1_000_000_000 / 10u128.pow(n)
    };
    let ns = ns as i128 + i128::from(offset_s) * 1_000_000_000;
    Ok(u64::try_from(ns.max(0)).unwrap_or(u64::MAX))
}

fn read_pcapng(st: &mut Stream, path: &Path) -> CliResult<Capture> {
    let mut parser = loop {
        let unread = st.unread().len();
        match PcapNgParser::new(st.unread()).map(|(rest, parser)| (unread - rest.len(), parser)) {
            Ok((used, parser)) => {
                st.consume(used);
                break parser;
            }
            Err(PcapError::IncompleteBuffer) if st.more()? => continue,
            Err(PcapError::IncompleteBuffer) => {
                return Err(usage(anyhow!("--pcap {path:?} is truncated: it ends inside its section header block")))
            }
            Err(e) => return Err(usage(anyhow!("--pcap {path:?}: its section header block cannot be read: {e}"))),
        }
    };
    let cap = std::cell::RefCell::new(Capture { format: "pcapng", frames: PackedFrames::default(), ts_ns: Vec::new() });
    let next = || cap.borrow().frames.len() + 1;
    let no_iface = |id: u32, i: usize| {
        usage(anyhow!("--pcap {path:?}: frame {i} names interface {id}, which the file does not describe"))
    };
    let bad_resol = |id: u32, r: u8, i: usize| {
        let unit = if r & 0x80 != 0 { format!("2^-{}", r & 0x7f) } else { format!("10^-{r}") };
        usage(anyhow!(
            "--pcap {path:?}: frame {i}'s interface {id} has if_tsresol {r:#04x} ({unit} s units): fastpath takes units of 10^-0..=10^-19 s or 2^-0..=2^-63 s"
        ))
    };
    let mut last_ts = 0u64;
    each_record(st, path, &next, &mut |buf| {
        let next = next();
        let (rest, block) = match parser.next_block(buf) {
            Ok(x) => x,
            Err(PcapError::IncompleteBuffer) => return Err(Step::More),
            Err(e) => return Err(Step::Fail(parse_error(path, next, &e))),
        };
        let used = buf.len() - rest.len();
        let ifaces = parser.interfaces();
        let (link, data, orig, ts) = match block {
            Block::EnhancedPacket(p) => {
                let idb = ifaces.get(p.interface_id as usize).ok_or_else(|| no_iface(p.interface_id, next))?;
                let raw = u64::try_from(p.timestamp.as_nanos()).unwrap_or(u64::MAX);
                let ts = ts_ns(raw, Some(idb)).map_err(|r| bad_resol(p.interface_id, r, next))?;
                (idb.linktype, p.data, p.original_len, ts)
            }
            Block::Packet(p) => {
                let id = u32::from(p.interface_id);
                let idb = ifaces.get(id as usize).ok_or_else(|| no_iface(id, next))?;
                // The timestamp is two 32-bit words, high first, each in the section's byte
                // order (as in an EPB; pcapng spec, Packet Block): pcap-file 2.0.0 reads them as
                // one u64, which swaps the words in a little-endian section.
                let raw = match parser.section().endianness {
                    pcap_file::Endianness::Little => p.timestamp.rotate_left(32),
                    pcap_file::Endianness::Big => p.timestamp,
                };
                let ts = ts_ns(raw, Some(idb)).map_err(|r| bad_resol(id, r, next))?;
                (idb.linktype, p.data, p.original_len, ts)
            }
            Block::SimplePacket(p) => {
                // No timestamp: right after the frame before it. Interface 0; the block's data
                // may carry padding beyond the frame.
                // The block's data is padded to 4 bytes: the frame is the original length, or
                // the interface's snap length if that is shorter (then it was cut; push says so).
                let idb = ifaces.first().ok_or_else(|| no_iface(0, next))?;
                let captured = match idb.snaplen {
                    0 => p.original_len,
                    snap => p.original_len.min(snap),
                } as usize;
                if p.data.len() < captured {
                    return Err(Step::Fail(usage(anyhow!(
                        "--pcap {path:?}: the simple packet block of frame {next} holds {} bytes, less than the {captured} its frame has: the file is damaged",
                        p.data.len()
                    ))));
                }
                let d = match p.data {
                    Cow::Borrowed(b) => Cow::Borrowed(&b[..captured]),
                    Cow::Owned(mut v) => {
                        v.truncate(captured);
                        Cow::Owned(v)
                    }
                };
                (idb.linktype, d, p.original_len, last_ts)
            }
            _ => return Ok(used),
        };
        last_ts = ts;
        push(&mut cap.borrow_mut(), path, (link, &data, orig, ts))?;
        Ok(used)
    })?;
    Ok(cap.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn tmp(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("fp-pcap-in-{}-{name}", std::process::id()));
        std::fs::write(&p, bytes).unwrap();
        p
    }

    fn pcap(link: DataLink, frames: &[(u64, &[u8], u32)]) -> Vec<u8> {
        use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
        let h = PcapHeader { datalink: link, ..Default::default() };
        let mut w = PcapWriter::with_header(Vec::new(), h).unwrap();
        for (us, d, orig) in frames {
            w.write_packet(&PcapPacket::new(Duration::from_micros(*us), *orig, d)).unwrap();
        }
        w.into_writer()
    }

    fn err(p: &Path) -> String {
        format!("{:#}", read(p).unwrap_err().err)
    }

    #[test]
    fn pcap_frames_and_times() {
        let a = [1u8; 60];
        let b = [2u8; 1514];
        let p = tmp("ok.pcap", &pcap(DataLink::ETHERNET, &[(1_000_000, &a, 60), (1_200_000, &b, 1514)]));
        let c = read(&p).unwrap();
        assert_eq!(c.format, "pcap");
        assert_eq!(c.frames.iter().collect::<Vec<_>>(), vec![&a[..], &b[..]]);
        assert_eq!(c.ts_ns, vec![1_000_000_000, 1_200_000_000]);
        let _ = std::fs::remove_file(p);
    }

    /// The file is read a chunk at a time: records that straddle a chunk's edge, and one larger
    /// than a chunk (a 1.5 MiB frame), come out whole and in order, in pcap and in pcapng; a
    /// file cut inside such a record is still reported as truncated at that frame.
    #[test]
    fn records_across_and_larger_than_a_read_chunk() {
        let big: Vec<u8> = (0..READ_CHUNK_BYTES + READ_CHUNK_BYTES / 2).map(|i| (i % 251) as u8).collect();
        // 100,001 frames of 14..=113 bytes before the big one: records fall across every edge.
        let small: Vec<Vec<u8>> = (0..100_001u32).map(|i| vec![(i % 256) as u8; 14 + (i % 100) as usize]).collect();
        let mut want: Vec<&[u8]> = small.iter().map(Vec::as_slice).collect();
        want.insert(50_000, &big);
        // Raw records (header snap length 0): pcap-file's writer refuses frames past 65,535 bytes.
        let recs: Vec<(u32, u32, &[u8], u32)> =
            want.iter().enumerate().map(|(i, f)| (0, i as u32, *f, f.len() as u32)).collect();
        let bytes = raw_pcap(0, &recs);
        assert!(bytes.len() > 4 * READ_CHUNK_BYTES);
        let p = tmp("chunks.pcap", &bytes);
        let c = read(&p).unwrap_or_else(|e| panic!("{:#}", e.err));
        assert_eq!(c.frames.len(), want.len());
        assert!(c.frames.iter().eq(want.iter().copied()), "pcap frames differ");
        assert_eq!(c.ts_ns[100_001], 100_001, "nanosecond pcap");
        let cut = tmp("chunks-cut.pcap", &bytes[..bytes.len() - 7]);
        assert!(
            err(&cut).contains(&format!("truncated: it ends inside the record of frame {}", want.len())),
            "{}",
            err(&cut)
        );
        let mut ng_bytes = [ng::shb(), ng::idb(0, &[(9, &[9])])].concat();
        for (i, f) in want.iter().enumerate() {
            ng_bytes.extend_from_slice(&ng::epb(i as u64, f));
        }
        let p2 = tmp("chunks.pcapng", &ng_bytes);
        let c = read(&p2).unwrap_or_else(|e| panic!("{:#}", e.err));
        assert!(c.frames.iter().eq(want.iter().copied()), "pcapng frames differ");
        assert_eq!(c.ts_ns[want.len() - 1], want.len() as u64 - 1);
        for p in [p, cut, p2] {
            let _ = std::fs::remove_file(p);
        }
    }

    #[test]
    fn refusals_name_the_file_and_frame() {
        let a = [1u8; 60];
        let p = tmp("empty", b"");
        assert!(err(&p).contains("is empty"), "{}", err(&p));
        let p2 = tmp("text", b"hello world, not a capture");
        assert!(err(&p2).contains("not a pcap or pcapng file (it starts with 68 65 6c 6c)"), "{}", err(&p2));
        let p3 = tmp("raw.pcap", &pcap(DataLink::RAW, &[(0, &a, 60)]));
        assert!(err(&p3).contains("frame 1 has link type RAW (101)"), "{}", err(&p3));
        let p4 = tmp("snap.pcap", &pcap(DataLink::ETHERNET, &[(0, &a, 60), (1, &a[..40], 60)]));
        assert!(err(&p4).contains("frame 2 was cut to 40 of its 60 bytes"), "{}", err(&p4));
        let full = pcap(DataLink::ETHERNET, &[(0, &a, 60), (1, &a, 60)]);
        let p5 = tmp("trunc.pcap", &full[..full.len() - 10]);
        assert!(err(&p5).contains("truncated: it ends inside the record of frame 2"), "{}", err(&p5));
        let p6 = tmp("hdr.pcap", &full[..24]);
        assert!(err(&p6).contains("holds no frames"), "{}", err(&p6));
        let p7 = tmp("short.pcap", &pcap(DataLink::ETHERNET, &[(0, &a[..10], 10)]));
        assert!(err(&p7).contains("frame 1 is 10 bytes, shorter than an Ethernet header"), "{}", err(&p7));
        let p8 = tmp("cuthdr.pcap", &full[..12]);
        assert!(err(&p8).contains("truncated: it ends inside the pcap file header"), "{}", err(&p8));
        for p in [p, p2, p3, p4, p5, p6, p7, p8] {
            assert!(!err(&p).contains('\n'), "one line");
            let _ = std::fs::remove_file(p);
        }
    }

    /// A pcap file as `tcpdump -s 96 -w` writes it (nanosecond magic, little-endian, header
    /// snaplen 96), of records (sec, ns, captured bytes, orig_len).
    fn raw_pcap(snaplen: u32, recs: &[(u32, u32, &[u8], u32)]) -> Vec<u8> {
        let mut v = Vec::new();
        for x in
            [0xa1b2_3c4d_u32.to_le_bytes(), [2, 0, 4, 0], [0; 4], [0; 4], snaplen.to_le_bytes(), 1u32.to_le_bytes()]
        {
            v.extend_from_slice(&x);
        }
        for (sec, ns, d, orig) in recs {
            for x in [*sec, *ns, d.len() as u32, *orig] {
                v.extend_from_slice(&x.to_le_bytes());
            }
            v.extend_from_slice(d);
        }
        v
    }

    #[test]
    fn pcap_cut_by_a_snap_length_gets_the_snap_length_message() {
        let f = [5u8; 1000];
        // tcpdump -s 96: the header's snaplen is 96, the frame 1000 bytes on the wire.
        let p = tmp("s96.pcap", &raw_pcap(96, &[(1, 0, &f[..96], 1000)]));
        assert!(err(&p).contains("frame 1 was cut to 96 of its 1000 bytes"), "{}", err(&p));
        // A header snaplen of 0 or smaller than the frames does not refuse whole frames.
        for snap in [0, 50] {
            let p2 = tmp("s0.pcap", &raw_pcap(snap, &[(1, 5, &f[..60], 60), (2, 7, &f[..100], 100)]));
            let c = read(&p2).unwrap_or_else(|e| panic!("snaplen {snap}: {:#}", e.err));
            assert_eq!(c.frames.len(), 2);
            assert_eq!(c.ts_ns, vec![1_000_000_005, 2_000_000_007], "nanosecond pcap");
            let _ = std::fs::remove_file(p2);
        }
        let p3 = tmp("incl.pcap", &raw_pcap(0, &[(1, 0, &f[..100], 60)]));
        assert!(err(&p3).contains("frame 1 says 100 bytes captured of 60 on the wire"), "{}", err(&p3));
        for p in [p, p3] {
            let _ = std::fs::remove_file(p);
        }
    }

    /// pcapng blocks, little-endian, as mk.py of the review builds them.
    mod ng {
        pub fn blk(t: u32, mut body: Vec<u8>) -> Vec<u8> {
            body.resize(body.len().div_ceil(4) * 4, 0);
            let l = (body.len() + 12) as u32;
            let mut v = [t.to_le_bytes(), l.to_le_bytes()].concat();
            v.extend_from_slice(&body);
            v.extend_from_slice(&l.to_le_bytes());
            v
        }
        pub fn shb() -> Vec<u8> {
            let mut b = 0x1A2B_3C4D_u32.to_le_bytes().to_vec();
            b.extend_from_slice(&[1, 0, 0, 0]);
            b.extend_from_slice(&(-1i64).to_le_bytes());
            blk(0x0A0D_0D0A, b)
        }
        /// An Ethernet interface with snap length `snap` and options (code, value).
        pub fn idb(snap: u32, opts: &[(u16, &[u8])]) -> Vec<u8> {
            let mut b = [1u16.to_le_bytes(), [0, 0]].concat();
            b.extend_from_slice(&snap.to_le_bytes());
            for (code, val) in opts {
                b.extend_from_slice(&code.to_le_bytes());
                b.extend_from_slice(&(val.len() as u16).to_le_bytes());
                b.extend_from_slice(val);
                b.resize(b.len().div_ceil(4) * 4, 0);
            }
            if !opts.is_empty() {
                b.extend_from_slice(&[0; 4]);
            }
            blk(1, b)
        }
        pub fn epb(ts: u64, data: &[u8]) -> Vec<u8> {
            let mut b = Vec::new();
            for x in [0, (ts >> 32) as u32, ts as u32, data.len() as u32, data.len() as u32] {
                b.extend_from_slice(&x.to_le_bytes());
            }
            b.extend_from_slice(data);
            blk(6, b)
        }
        pub fn spb(orig: u32, data: &[u8]) -> Vec<u8> {
            let mut b = orig.to_le_bytes().to_vec();
            b.extend_from_slice(data);
            blk(3, b)
        }
        /// An obsolete Packet Block: interface 0, timestamp high 32 bits first.
        pub fn pb(ts: u64, data: &[u8]) -> Vec<u8> {
            let mut b = vec![0, 0, 0, 0];
            for x in [(ts >> 32) as u32, ts as u32, data.len() as u32, data.len() as u32] {
                b.extend_from_slice(&x.to_le_bytes());
            }
            b.extend_from_slice(data);
            blk(2, b)
        }
    }

    #[test]
    fn pcapng_simple_packet_blocks_padding_and_snap_length() {
        let f: Vec<u8> = (0..63u8).collect();
        // No snap length: the 63-byte frame, not its padding.
        let ok = [ng::shb(), ng::idb(0, &[]), ng::spb(63, &f), ng::spb(20, &f[..20])].concat();
        let p = tmp("spb.pcapng", &ok);
        assert_eq!(read(&p).unwrap().frames.iter().collect::<Vec<_>>(), vec![&f[..], &f[..20]]);
        // Snap length 60: the block holds 60 bytes and 2 of padding of a 63-byte frame: cut.
        let cut = [ng::shb(), ng::idb(60, &[]), ng::spb(63, &f[..62])].concat();
        let p2 = tmp("spbsnap.pcapng", &cut);
        assert!(err(&p2).contains("frame 1 was cut to 60 of its 63 bytes"), "{}", err(&p2));
        // A block shorter than its frame.
        let short = [ng::shb(), ng::idb(0, &[]), ng::spb(100, &f[..40])].concat();
        let p3 = tmp("spbshort.pcapng", &short);
        assert!(err(&p3).contains("holds 40 bytes, less than the 100"), "{}", err(&p3));
        for p in [p, p2, p3] {
            let _ = std::fs::remove_file(p);
        }
    }

    #[test]
    fn pcapng_obsolete_packet_block_timestamps_high_word_first() {
        let f = [9u8; 60];
        // 1 us apart across a 2^32 boundary of the raw count (microseconds by default).
        let t = (1u64 << 32) - 1;
        let b = [ng::shb(), ng::idb(0, &[]), ng::pb(t, &f), ng::pb(t + 1, &f), ng::epb(t + 2, &f)].concat();
        let p = tmp("pb.pcapng", &b);
        let c = read(&p).unwrap();
        assert_eq!(c.ts_ns, vec![t * 1000, (t + 1) * 1000, (t + 2) * 1000], "as the EPB's");
        let _ = std::fs::remove_file(p);
    }

    #[test]
    fn a_file_name_with_a_newline_keeps_the_message_on_one_line() {
        let p = std::env::temp_dir().join("no\nsuch\rfile.pcap");
        let e = err(&p);
        assert!(e.contains("no\\nsuch\\rfile.pcap") && e.contains("cannot be read"), "{e}");
        assert!(!e.contains('\n') && !e.contains('\r'), "{e}");
        let p2 = tmp("new\nline.pcap", b"hello world, not a capture");
        let e = err(&p2);
        assert!(e.contains("new\\nline.pcap") && !e.contains('\n'), "{e}");
        let _ = std::fs::remove_file(p2);
    }

    #[test]
    fn only_regular_files_up_to_the_cap() {
        let e = err(Path::new("/dev/zero"));
        assert!(e.contains("\"/dev/zero\" is a character device: use a regular pcap or pcapng file"), "{e}");
        let e = err(Path::new("/tmp"));
        assert!(e.contains("is a directory"), "{e}");
        let fifo = std::env::temp_dir().join(format!("fp-pcap-in-{}-fifo", std::process::id()));
        let _ = std::fs::remove_file(&fifo);
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success(), "mkfifo");
        // No writer: opening it must not block.
        let e = err(&fifo);
        assert!(e.contains("is a FIFO"), "{e}");
        let _ = std::fs::remove_file(&fifo);
        // A symbolic link to a regular file is followed.
        let a = [1u8; 60];
        let real = tmp("real.pcap", &pcap(DataLink::ETHERNET, &[(0, &a, 60)]));
        let link = std::env::temp_dir().join(format!("fp-pcap-in-{}-link.pcap", std::process::id()));
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert_eq!(read(&link).unwrap().frames.len(), 1);
        // Over 1 GiB (sparse): refused before anything is read.
        let big = tmp("big.pcap", b"");
        std::fs::File::options().write(true).open(&big).unwrap().set_len(MAX_FILE_BYTES + 1).unwrap();
        let e = err(&big);
        assert!(e.contains(&format!("is {} bytes: at most {MAX_FILE_BYTES} (1 GiB)", MAX_FILE_BYTES + 1)), "{e}");
        for p in [real, link, big] {
            let _ = std::fs::remove_file(p);
        }
    }

    #[test]
    fn pcapng_resolutions_and_interfaces() {
        use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
        use pcap_file::pcapng::PcapNgWriter;
        let mut w = PcapNgWriter::new(Vec::new()).unwrap();
        // Interface 0: nanoseconds (as fastpath capture writes); interface 1: the default
        // microseconds.
        let mut ns = InterfaceDescriptionBlock::new(DataLink::ETHERNET, 0);
        ns.options.push(InterfaceDescriptionOption::IfTsResol(9));
        w.write_pcapng_block(ns).unwrap();
        w.write_pcapng_block(InterfaceDescriptionBlock::new(DataLink::ETHERNET, 0)).unwrap();
        let f = [7u8; 64];
        let epb = |iface, raw| EnhancedPacketBlock {
            interface_id: iface,
            timestamp: Duration::from_nanos(raw),
            original_len: 64,
            data: std::borrow::Cow::Borrowed(&f[..]),
            options: vec![],
        };
        w.write_pcapng_block(epb(0, 5_000_000_000)).unwrap();
        w.write_pcapng_block(epb(1, 5_000_100)).unwrap();
        let p = tmp("ok.pcapng", &w.into_inner());
        let c = read(&p).unwrap();
        assert_eq!(c.format, "pcapng");
        assert_eq!(c.ts_ns, vec![5_000_000_000, 5_000_100_000]);
        assert_eq!(c.frames.len(), 2);
        let _ = std::fs::remove_file(p);
        assert_eq!(ts_ns(3, None), Ok(3000), "microseconds by default");
        let mut bin = InterfaceDescriptionBlock::new(DataLink::ETHERNET, 0);
        bin.options.push(InterfaceDescriptionOption::IfTsResol(0x80 | 10));
        assert_eq!(ts_ns(1024, Some(&bin)), Ok(1_000_000_000), "2^-10 s units");
    }

    #[test]
    fn pcapng_unrepresentable_resolutions_refused_and_offsets_applied() {
        let f = [3u8; 60];
        for (r, ok) in [
            (0u8, true),
            (19, true),
            (0x80 | 63, true),
            (20, false),
            (38, false),
            (39, false),
            (64, false),
            (127, false),
            (0x80 | 64, false),
            (255, false),
        ] {
            let b = [ng::shb(), ng::idb(0, &[(9, &[r])]), ng::epb(1, &f), ng::epb(2, &f)].concat();
            let p = tmp(&format!("resol{r}.pcapng"), &b);
            if ok {
                assert!(read(&p).is_ok(), "if_tsresol {r:#x}: {:#}", read(&p).unwrap_err().err);
            } else {
                let e = err(&p);
                assert!(
                    e.contains(&format!("interface 0 has if_tsresol {r:#04x}"))
                        && e.contains("10^-0..=10^-19 s or 2^-0..=2^-63 s"),
                    "{e}"
                );
            }
            let _ = std::fs::remove_file(p);
        }
        // if_tsoffset (seconds, signed): interface 0 at +10 s, interface 1 at -1 s.
        let b = [
            ng::shb(),
            ng::idb(0, &[(9, &[9]), (14, &10i64.to_le_bytes())]),
            ng::idb(0, &[(9, &[9]), (14, &(-1i64).to_le_bytes())]),
            ng::epb(5, &f),
            {
                let mut e = ng::epb(2_000_000_000, &f);
                e[8] = 1; // interface 1
                e
            },
        ]
        .concat();
        let p = tmp("offset.pcapng", &b);
        assert_eq!(read(&p).unwrap().ts_ns, vec![10_000_000_005, 1_000_000_000]);
        let _ = std::fs::remove_file(p);
    }
}
