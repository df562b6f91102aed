use core::fmt;

/// Why a packet could not be parsed or emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The buffer is shorter than the format (or a length field) requires.
    Truncated {
        /// Bytes the packet needs.
        need: usize,
        /// Bytes the buffer holds.
        have: usize,
    },
    /// The checksum field does not match the contents.
    BadChecksum,
    /// The version field names a protocol version this parser does not handle.
    BadVersion(u8),
    /// A header-length field is smaller than the fixed header or larger than the packet.
    BadHeaderLen(usize),
    /// A total- or payload-length field contradicts the header or buffer.
    BadLength(usize),
    /// A TCP or IP option has an impossible length (kind, length byte).
    BadOption {
        /// Option kind.
        kind: u8,
        /// The length byte found (0 when it was missing).
        len: u8,
    },
    /// A field holds a value the format forbids (the field's name).
    BadField(&'static str),
    /// The packet is well formed but of a kind this parser does not represent
    /// (e.g. ARP for a hardware type other than Ethernet).
    Unsupported(&'static str),
}

/// Result of parsing or emitting a packet.
pub type Result<T> = core::result::Result<T, Error>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated { need, have } => {
                write!(f, "truncated packet: need {need} bytes, have {have}")
            }
            Error::BadChecksum => write!(f, "checksum does not match the contents"),
            Error::BadVersion(v) => write!(f, "unsupported protocol version {v}"),
            Error::BadHeaderLen(l) => write!(f, "header length {l} is impossible"),
            Error::BadLength(l) => write!(f, "length field {l} contradicts the packet"),
            Error::BadOption { kind, len } => {
                write!(f, "option kind {kind} has impossible length {len}")
            }
            Error::BadField(name) => write!(f, "field `{name}` holds a forbidden value"),
            Error::Unsupported(what) => write!(f, "unsupported: {what}"),
        }
    }
}

impl core::error::Error for Error {}
