//! Packet capture in the pcap format (with nanosecond timestamps), which Wireshark and
//! tshark open: [`PcapWriter`] writes a file, [`Pcap`] tees every frame a device passes.
//!
//! Format: the IETF draft draft-ietf-opsawg-pcap (revision 03). Fields are
//! written little-endian; readers detect the byte order from the magic number.
//! [`PcapReader`] reads pcap and pcapng files (`reader.rs`).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use impnet_core::Instant;

use crate::device::{Device, DeviceError};

mod reader;
pub use reader::{
    LINKTYPE_IPV4, LINKTYPE_IPV6, LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2, LINKTYPE_NULL,
    LINKTYPE_RAW, PCAP_MAGIC_MICROS, PcapError, PcapReader, Record, ip_payload,
};

/// Magic number of a pcap file whose timestamps carry nanoseconds (not microseconds).
pub const PCAP_MAGIC_NANOS: u32 = 0xa1b2_3c4d;
/// pcap format major version written.
pub const PCAP_VERSION_MAJOR: u16 = 2;
/// pcap format minor version written.
pub const PCAP_VERSION_MINOR: u16 = 4;
/// Longest frame prefix recorded; longer frames are truncated (their original length is
/// still recorded).
pub const PCAP_SNAPLEN: u32 = 65535;
/// Link type of Ethernet frames.
pub const LINKTYPE_ETHERNET: u32 = 1;

/// Writes a pcap stream: the file header on creation, then one record per packet.
///
/// Each record is two writes; give a buffered writer (as [`PcapWriter::create`] does)
/// rather than a bare `File`.
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    out: W,
}

impl PcapWriter<BufWriter<File>> {
    /// Creates (or truncates) the file at `path` and writes the pcap header to it.
    pub fn create(path: impl AsRef<Path>) -> io::Result<PcapWriter<BufWriter<File>>> {
        PcapWriter::new(BufWriter::new(File::create(path)?))
    }

    /// As [`PcapWriter::create`], for frames of `link_type` ([`LINKTYPE_RAW`] for the
    /// bare IP packets of a TUN).
    pub fn create_with_link_type(
        path: impl AsRef<Path>,
        link_type: u32,
    ) -> io::Result<PcapWriter<BufWriter<File>>> {
        PcapWriter::with_link_type(BufWriter::new(File::create(path)?), link_type)
    }
}

impl<W: Write> PcapWriter<W> {
    /// Writes the pcap file header to `out`: nanosecond magic, version 2.4, time zone 0,
    /// snaplen 65535, Ethernet link type.
    pub fn new(out: W) -> io::Result<PcapWriter<W>> {
        PcapWriter::with_link_type(out, LINKTYPE_ETHERNET)
    }

    /// As [`PcapWriter::new`], for frames of `link_type` ([`LINKTYPE_RAW`]: IP packets
    /// with no link-layer header, as a TUN device passes).
    pub fn with_link_type(mut out: W, link_type: u32) -> io::Result<PcapWriter<W>> {
        let mut header = [0u8; 24];
        header[0..4].copy_from_slice(&PCAP_MAGIC_NANOS.to_le_bytes());
        header[4..6].copy_from_slice(&PCAP_VERSION_MAJOR.to_le_bytes());
        header[6..8].copy_from_slice(&PCAP_VERSION_MINOR.to_le_bytes());
        // 8..12 thiszone (GMT offset) and 12..16 sigfigs stay zero, as the format asks.
        header[16..20].copy_from_slice(&PCAP_SNAPLEN.to_le_bytes());
        header[20..24].copy_from_slice(&link_type.to_le_bytes());
        out.write_all(&header)?;
        Ok(PcapWriter { out })
    }

    /// Records `frame` as captured at `ts` (seconds and nanoseconds since the driver's
    /// epoch), truncated to the snaplen.
    pub fn write_packet(&mut self, ts: Instant, frame: &[u8]) -> io::Result<()> {
        let nanos = ts.as_nanos();
        let secs = u32::try_from(nanos / 1_000_000_000).unwrap_or(u32::MAX);
        let subsec = (nanos % 1_000_000_000) as u32;
        let captured = frame.len().min(PCAP_SNAPLEN as usize);
        let orig_len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        let mut record = [0u8; 16];
        record[0..4].copy_from_slice(&secs.to_le_bytes());
        record[4..8].copy_from_slice(&subsec.to_le_bytes());
        record[8..12].copy_from_slice(&(captured as u32).to_le_bytes());
        record[12..16].copy_from_slice(&orig_len.to_le_bytes());
        self.out.write_all(&record)?;
        self.out.write_all(&frame[..captured])
    }

    /// Flushes the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// The underlying writer.
    pub fn get_ref(&self) -> &W {
        &self.out
    }

    /// The underlying writer, mutably.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.out
    }

    /// The underlying writer (not flushed: a `BufWriter` flushes when dropped, or call
    /// [`PcapWriter::flush`] first to see errors).
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// Wraps a device and records every frame sent or received through it, stamped with the
/// `now` of the call, before passing it on.
#[derive(Debug)]
pub struct Pcap<D: Device, W: Write> {
    inner: D,
    writer: PcapWriter<W>,
}

impl<D: Device, W: Write> Pcap<D, W> {
    /// Wraps `inner`, recording to `writer`.
    pub fn new(inner: D, writer: PcapWriter<W>) -> Pcap<D, W> {
        Pcap { inner, writer }
    }

    /// The wrapped device.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The wrapped device, mutably.
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// The capture writer.
    pub fn writer(&self) -> &PcapWriter<W> {
        &self.writer
    }

    /// The capture writer, mutably (to flush it).
    pub fn writer_mut(&mut self) -> &mut PcapWriter<W> {
        &mut self.writer
    }

    /// The wrapped device and the capture writer.
    pub fn into_parts(self) -> (D, PcapWriter<W>) {
        (self.inner, self.writer)
    }
}

impl<D: Device, W: Write> Device for Pcap<D, W> {
    /// A failure to write the capture is reported as [`DeviceError::Io`]; the frame is
    /// lost to the caller then, as the capture must not silently miss frames.
    fn recv(&mut self, now: Instant, buf: &mut [u8]) -> Result<Option<usize>, DeviceError> {
        let received = self.inner.recv(now, buf)?;
        if let Some(len) = received {
            self.writer.write_packet(now, &buf[..len])?;
        }
        Ok(received)
    }

    /// The frame is recorded only once the inner device has taken it: a frame refused
    /// with `Ok(false)` is offered again later and must appear once in the capture. A
    /// failure to write the capture is reported as [`DeviceError::Io`] even though the
    /// frame has gone.
    fn send(&mut self, now: Instant, frame: &[u8]) -> Result<bool, DeviceError> {
        let taken = self.inner.send(now, frame)?;
        if taken {
            self.writer.write_packet(now, frame)?;
        }
        Ok(taken)
    }

    fn flush(&mut self, now: Instant) -> Result<(), DeviceError> {
        self.inner.flush(now)
    }

    fn mtu(&self) -> usize {
        self.inner.mtu()
    }

    fn poll_at(&self) -> Option<Instant> {
        self.inner.poll_at()
    }
}

#[cfg(test)]
mod tests;
