//! Reading captures: classic pcap (either byte order, microsecond or nanosecond
//! timestamps) and pcapng (section header, interface description with `if_tsresol` and
//! `if_tsoffset`, enhanced, simple and obsolete packet blocks; several sections).
//!
//! [`PcapReader`] works on the whole file in memory and never panics: a damaged file
//! gives a [`PcapError`] naming the byte offset, after which the reader stops; a record
//! it cannot use (an unknown interface, a block type it does not know) is skipped and
//! counted ([`PcapReader::skipped`]). [`ip_payload`] takes a frame of any of the link
//! types tcpdump and tshark commonly write down to its IPv4 or IPv6 packet.

use std::fmt;

/// Magic number of a classic pcap file with microsecond timestamps.
pub const PCAP_MAGIC_MICROS: u32 = 0xa1b2_c3d4;
/// Link type of BSD loopback (a 4-byte address family in host order).
pub const LINKTYPE_NULL: u32 = 0;
/// Link type of raw IP (IPv4 or IPv6 by the version nibble).
pub const LINKTYPE_RAW: u32 = 101;
/// Link type of Linux cooked capture v1 (`tcpdump -i any`, older libpcap).
pub const LINKTYPE_LINUX_SLL: u32 = 113;
/// Link type of raw IPv4.
pub const LINKTYPE_IPV4: u32 = 228;
/// Link type of raw IPv6.
pub const LINKTYPE_IPV6: u32 = 229;
/// Link type of Linux cooked capture v2 (`tcpdump -i any`).
pub const LINKTYPE_LINUX_SLL2: u32 = 276;

const PCAPNG_SHB: u32 = 0x0a0d_0d0a;
const PCAPNG_BYTE_ORDER_MAGIC: u32 = 0x1a2b_3c4d;
const PCAPNG_IDB: u32 = 1;
const PCAPNG_OBSOLETE_PB: u32 = 2;
const PCAPNG_SPB: u32 = 3;
const PCAPNG_EPB: u32 = 6;

/// Why a capture could not be read further.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PcapError {
    /// The file does not start with a pcap or pcapng magic number.
    NotACapture {
        /// The first four bytes, as read big-endian.
        magic: u32,
    },
    /// The file ends inside a header, record or block.
    Truncated {
        /// Byte offset where the incomplete piece starts.
        offset: usize,
        /// Bytes that piece needs.
        need: usize,
        /// Bytes left in the file.
        have: usize,
    },
    /// A length field makes no sense (a pcapng block length not a multiple of 4 or
    /// below its minimum, a record longer than the snap length allows).
    Corrupt {
        /// Byte offset of the record or block.
        offset: usize,
        /// What is wrong.
        what: &'static str,
    },
}

impl fmt::Display for PcapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PcapError::NotACapture { magic } => {
                write!(f, "not a pcap or pcapng file (magic {magic:#010x})")
            }
            PcapError::Truncated { offset, need, have } => write!(
                f,
                "truncated at byte {offset}: {need} bytes needed, {have} left"
            ),
            PcapError::Corrupt { offset, what } => write!(f, "corrupt at byte {offset}: {what}"),
        }
    }
}

impl std::error::Error for PcapError {}

/// One captured frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// Capture time in nanoseconds since the Unix epoch (or the writer's epoch).
    pub ts_nanos: u64,
    /// The link type of the interface it was captured on.
    pub linktype: u32,
    /// The captured bytes (possibly cut to the snap length).
    pub data: &'a [u8],
    /// The frame's length on the wire.
    pub orig_len: u32,
}

#[derive(Debug, Clone, Copy)]
struct Interface {
    linktype: u32,
    snaplen: u32,
    /// Timestamp units: `Some(n)` for 10^-n seconds, else 2^-bits.
    resolution: Resolution,
    offset_secs: u64,
}

#[derive(Debug, Clone, Copy)]
enum Resolution {
    Decimal(u8),
    Binary(u8),
}

impl Resolution {
    fn to_nanos(self, ticks: u64) -> u64 {
        let nanos = match self {
            Resolution::Decimal(d) if d <= 9 => u128::from(ticks) * 10u128.pow(u32::from(9 - d)),
            Resolution::Decimal(d) => u128::from(ticks) / 10u128.pow(u32::from(d.min(38) - 9)),
            Resolution::Binary(b) => (u128::from(ticks) * 1_000_000_000) >> b.min(127),
        };
        u64::try_from(nanos).unwrap_or(u64::MAX)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    /// Classic pcap: byte order, nanosecond timestamps, link type, snap length.
    Classic {
        big_endian: bool,
        nanos: bool,
        linktype: u32,
        snaplen: u32,
    },
    /// pcapng; the byte order is the current section's.
    Ng { big_endian: bool },
}

/// Reads the records of a capture held in memory, in file order.
#[derive(Debug)]
pub struct PcapReader<'a> {
    data: &'a [u8],
    pos: usize,
    format: Format,
    interfaces: Vec<Interface>,
    last_ts: u64,
    skipped: u64,
    failed: bool,
}

fn u16_at(data: &[u8], at: usize, big: bool) -> u16 {
    let b = [data[at], data[at + 1]];
    if big {
        u16::from_be_bytes(b)
    } else {
        u16::from_le_bytes(b)
    }
}

fn u32_at(data: &[u8], at: usize, big: bool) -> u32 {
    let b = [data[at], data[at + 1], data[at + 2], data[at + 3]];
    if big {
        u32::from_be_bytes(b)
    } else {
        u32::from_le_bytes(b)
    }
}

impl<'a> PcapReader<'a> {
    /// Opens `data`, a whole pcap or pcapng file, and reads its file header (or first
    /// section header).
    pub fn new(data: &'a [u8]) -> Result<PcapReader<'a>, PcapError> {
        if data.len() < 4 {
            return Err(PcapError::Truncated {
                offset: 0,
                need: 4,
                have: data.len(),
            });
        }
        let magic_be = u32_at(data, 0, true);
        let magic_le = u32_at(data, 0, false);
        let mut reader = PcapReader {
            data,
            pos: 0,
            format: Format::Ng { big_endian: false },
            interfaces: Vec::new(),
            last_ts: 0,
            skipped: 0,
            failed: false,
        };
        if magic_be == PCAPNG_SHB {
            reader.read_shb()?;
            return Ok(reader);
        }
        let (big_endian, nanos) = match (magic_be, magic_le) {
            (PCAP_MAGIC_MICROS, _) => (true, false),
            (super::PCAP_MAGIC_NANOS, _) => (true, true),
            (_, PCAP_MAGIC_MICROS) => (false, false),
            (_, super::PCAP_MAGIC_NANOS) => (false, true),
            _ => return Err(PcapError::NotACapture { magic: magic_be }),
        };
        reader.need(0, 24)?;
        reader.format = Format::Classic {
            big_endian,
            nanos,
            // The upper bits of the link type field carry FCS information.
            linktype: u32_at(data, 20, big_endian) & 0x0fff_ffff,
            snaplen: u32_at(data, 16, big_endian),
        };
        reader.pos = 24;
        Ok(reader)
    }

    /// Records skipped so far: packets naming an interface not described, blocks of a
    /// type this reader does not use are not counted (they carry no packets).
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// Whether the file is pcapng (else classic pcap).
    pub fn is_pcapng(&self) -> bool {
        matches!(self.format, Format::Ng { .. })
    }

    /// The link type of a classic pcap file, or of a pcapng file's first interface.
    pub fn linktype(&self) -> Option<u32> {
        match self.format {
            Format::Classic { linktype, .. } => Some(linktype),
            Format::Ng { .. } => self.interfaces.first().map(|i| i.linktype),
        }
    }

    fn need(&self, offset: usize, need: usize) -> Result<(), PcapError> {
        let have = self.data.len().saturating_sub(offset);
        if have < need {
            return Err(PcapError::Truncated { offset, need, have });
        }
        Ok(())
    }

    /// The next record, `None` at the end of the file. After an error every later call
    /// returns `None`.
    pub fn next_record(&mut self) -> Option<Result<Record<'a>, PcapError>> {
        if self.failed || self.pos >= self.data.len() {
            return None;
        }
        let result = match self.format {
            Format::Classic {
                big_endian,
                nanos,
                linktype,
                snaplen,
            } => self
                .next_classic(big_endian, nanos, linktype, snaplen)
                .map(Some),
            Format::Ng { .. } => self.next_ng(),
        };
        match result {
            Ok(Some(record)) => Some(Ok(record)),
            Ok(None) => None,
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }

    fn next_classic(
        &mut self,
        big: bool,
        nanos: bool,
        linktype: u32,
        snaplen: u32,
    ) -> Result<Record<'a>, PcapError> {
        let at = self.pos;
        self.need(at, 16)?;
        let secs = u64::from(u32_at(self.data, at, big));
        let frac = u64::from(u32_at(self.data, at + 4, big));
        let caplen = u32_at(self.data, at + 8, big);
        let orig_len = u32_at(self.data, at + 12, big);
        // Some writers record a snap length of 0 or smaller than the frames; allow any
        // record up to 256 KiB beyond that (tcpdump's largest snap length).
        if caplen > snaplen.max(262_144) {
            return Err(PcapError::Corrupt {
                offset: at,
                what: "record longer than any snap length",
            });
        }
        let len = caplen as usize;
        self.need(at, 16 + len)?;
        let sub = if nanos { frac } else { frac * 1000 };
        self.pos = at + 16 + len;
        Ok(Record {
            ts_nanos: secs * 1_000_000_000 + sub,
            linktype,
            data: &self.data[at + 16..at + 16 + len],
            orig_len,
        })
    }

    fn ng_big(&self) -> bool {
        matches!(self.format, Format::Ng { big_endian: true })
    }

    /// Reads a section header block at `self.pos`: byte order, and a fresh interface
    /// list.
    fn read_shb(&mut self) -> Result<(), PcapError> {
        let at = self.pos;
        self.need(at, 12)?;
        let big = match u32_at(self.data, at + 8, true) {
            PCAPNG_BYTE_ORDER_MAGIC => true,
            m if m.swap_bytes() == PCAPNG_BYTE_ORDER_MAGIC => false,
            _ => {
                return Err(PcapError::Corrupt {
                    offset: at,
                    what: "section header without a byte-order magic",
                });
            }
        };
        self.format = Format::Ng { big_endian: big };
        let len = self.block_len(at, 28)?;
        self.interfaces.clear();
        self.pos = at + len;
        Ok(())
    }

    /// The total length of the block at `at`, checked against its minimum and the file.
    fn block_len(&self, at: usize, min: usize) -> Result<usize, PcapError> {
        self.need(at, 8)?;
        let len = u32_at(self.data, at + 4, self.ng_big()) as usize;
        if len < min.max(12) || !len.is_multiple_of(4) {
            return Err(PcapError::Corrupt {
                offset: at,
                what: "block length below its minimum or not a multiple of 4",
            });
        }
        self.need(at, len)?;
        Ok(len)
    }

    fn next_ng(&mut self) -> Result<Option<Record<'a>>, PcapError> {
        loop {
            let at = self.pos;
            if at >= self.data.len() {
                return Ok(None);
            }
            self.need(at, 8)?;
            let kind = u32_at(self.data, at, self.ng_big());
            if kind == PCAPNG_SHB {
                self.read_shb()?;
                continue;
            }
            let len = self.block_len(at, 12)?;
            self.pos = at + len;
            let body = &self.data[at + 8..at + len - 4];
            let record = match kind {
                PCAPNG_IDB => {
                    self.read_idb(at, body)?;
                    None
                }
                PCAPNG_EPB | PCAPNG_OBSOLETE_PB => self.read_epb(at, body, kind)?,
                PCAPNG_SPB => self.read_spb(at, body)?,
                _ => None,
            };
            if let Some(record) = record {
                return Ok(Some(record));
            }
        }
    }

    fn read_idb(&mut self, at: usize, body: &[u8]) -> Result<(), PcapError> {
        let big = self.ng_big();
        if body.len() < 8 {
            return Err(PcapError::Corrupt {
                offset: at,
                what: "interface description block too short",
            });
        }
        let mut iface = Interface {
            linktype: u32::from(u16_at(body, 0, big)),
            snaplen: u32_at(body, 4, big),
            resolution: Resolution::Decimal(6),
            offset_secs: 0,
        };
        let mut opt = 8;
        while opt + 4 <= body.len() {
            let code = u16_at(body, opt, big);
            let olen = usize::from(u16_at(body, opt + 2, big));
            let value = &body[opt + 4..(opt + 4 + olen).min(body.len())];
            match (code, value.len()) {
                (0, _) => break,
                (9, 1) => {
                    let v = value[0];
                    iface.resolution = if v & 0x80 == 0 {
                        Resolution::Decimal(v)
                    } else {
                        Resolution::Binary(v & 0x7f)
                    };
                }
                (14, 8) => {
                    let hi = u64::from(u32_at(value, 0, big));
                    let lo = u64::from(u32_at(value, 4, big));
                    iface.offset_secs = if big {
                        (hi << 32) | lo
                    } else {
                        (lo << 32) | hi
                    };
                }
                _ => {}
            }
            opt += 4 + olen.div_ceil(4) * 4;
        }
        self.interfaces.push(iface);
        Ok(())
    }

    fn read_epb(
        &mut self,
        at: usize,
        body: &'a [u8],
        kind: u32,
    ) -> Result<Option<Record<'a>>, PcapError> {
        let big = self.ng_big();
        if body.len() < 20 {
            return Err(PcapError::Corrupt {
                offset: at,
                what: "packet block too short",
            });
        }
        let iface_id = if kind == PCAPNG_EPB {
            u32_at(body, 0, big) as usize
        } else {
            usize::from(u16_at(body, 0, big))
        };
        let ticks = (u64::from(u32_at(body, 4, big)) << 32) | u64::from(u32_at(body, 8, big));
        let caplen = u32_at(body, 12, big) as usize;
        let orig_len = u32_at(body, 16, big);
        if caplen > body.len() - 20 {
            return Err(PcapError::Corrupt {
                offset: at,
                what: "captured length runs past the packet block",
            });
        }
        let Some(iface) = self.interfaces.get(iface_id).copied() else {
            self.skipped += 1;
            return Ok(None);
        };
        let ts_nanos = iface
            .resolution
            .to_nanos(ticks)
            .saturating_add(iface.offset_secs.saturating_mul(1_000_000_000));
        self.last_ts = ts_nanos;
        Ok(Some(Record {
            ts_nanos,
            linktype: iface.linktype,
            data: &body[20..20 + caplen],
            orig_len,
        }))
    }

    fn read_spb(&mut self, at: usize, body: &'a [u8]) -> Result<Option<Record<'a>>, PcapError> {
        let big = self.ng_big();
        if body.len() < 4 {
            return Err(PcapError::Corrupt {
                offset: at,
                what: "simple packet block too short",
            });
        }
        let Some(iface) = self.interfaces.first().copied() else {
            self.skipped += 1;
            return Ok(None);
        };
        let orig_len = u32_at(body, 0, big);
        let mut caplen = (orig_len as usize).min(body.len() - 4);
        if iface.snaplen != 0 {
            caplen = caplen.min(iface.snaplen as usize);
        }
        // A simple packet block has no timestamp: it takes the previous packet's.
        Ok(Some(Record {
            ts_nanos: self.last_ts,
            linktype: iface.linktype,
            data: &body[4..4 + caplen],
            orig_len,
        }))
    }
}

impl<'a> Iterator for PcapReader<'a> {
    type Item = Result<Record<'a>, PcapError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_record()
    }
}

/// The IPv4 or IPv6 packet inside a frame of link type `linktype` (Ethernet with up to
/// two VLAN tags, raw IP, BSD loopback, Linux cooked v1 and v2), or `None` when the
/// frame carries something else or is too short to say. The packet's version nibble
/// agrees with the link layer's type.
pub fn ip_payload(linktype: u32, frame: &[u8]) -> Option<&[u8]> {
    const IPV4: u16 = 0x0800;
    const IPV6: u16 = 0x86dd;
    /// Raw IP: the version nibble decides.
    const ANY: u16 = 0;
    let be16 = |at: usize| -> Option<u16> {
        Some(u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]))
    };
    let (ethertype, start) = match linktype {
        super::LINKTYPE_ETHERNET => {
            let mut at = 12;
            let mut ty = be16(at)?;
            while ty == 0x8100 || ty == 0x88a8 {
                at += 4;
                ty = be16(at)?;
            }
            (ty, at + 2)
        }
        LINKTYPE_RAW | 12 | 14 => (ANY, 0),
        LINKTYPE_IPV4 => (IPV4, 0),
        LINKTYPE_IPV6 => (IPV6, 0),
        LINKTYPE_NULL => {
            let family = frame.get(..4)?;
            let le = u32::from_le_bytes([family[0], family[1], family[2], family[3]]);
            let be = u32::from_be_bytes([family[0], family[1], family[2], family[3]]);
            // AF_INET is 2 everywhere; AF_INET6 is 24, 28 or 30 on the BSDs and 10 on Linux.
            let family = if le < 0x100 { le } else { be };
            match family {
                2 => (IPV4, 4),
                10 | 24 | 28 | 30 => (IPV6, 4),
                _ => return None,
            }
        }
        LINKTYPE_LINUX_SLL => (be16(14)?, 16),
        LINKTYPE_LINUX_SLL2 => (be16(0)?, 20),
        _ => return None,
    };
    let ip = frame.get(start..)?;
    let version = ip.first()? >> 4;
    let ok = match ethertype {
        IPV4 => version == 4,
        IPV6 => version == 6,
        ANY => version == 4 || version == 6,
        _ => false,
    };
    ok.then_some(ip)
}
