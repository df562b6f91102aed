//! A connection's two addresses, packed: what every connection keeps of its 4-tuple.

use alloc::boxed::Box;
use core::net::{IpAddr, SocketAddr, SocketAddrV4};

use super::FourTuple;

/// The local and remote address of one connection. Two IPv4 ends (the usual case)
/// stay in place, 12 bytes; anything else (IPv6) goes out of line. 16 bytes where two
/// `SocketAddr`s take 64 (each is as large as an IPv6 one, 32 bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ends {
    /// (local, remote), both IPv4.
    V4(SocketAddrV4, SocketAddrV4),
    /// (local, remote), at least one not IPv4.
    Other(Box<FourTuple>),
}

impl Ends {
    /// `local` and `remote`, packed.
    pub fn new(local: SocketAddr, remote: SocketAddr) -> Ends {
        match (local, remote) {
            (SocketAddr::V4(local), SocketAddr::V4(remote)) => Ends::V4(local, remote),
            _ => Ends::Other(Box::new((local, remote))),
        }
    }
    /// Our address.
    #[inline]
    pub fn local(&self) -> SocketAddr {
        match self {
            Ends::V4(local, _) => SocketAddr::V4(*local),
            Ends::Other(ends) => ends.0,
        }
    }
    /// The peer's address.
    #[inline]
    pub fn remote(&self) -> SocketAddr {
        match self {
            Ends::V4(_, remote) => SocketAddr::V4(*remote),
            Ends::Other(ends) => ends.1,
        }
    }
    /// (local, remote).
    #[inline]
    pub fn tuple(&self) -> FourTuple {
        match self {
            Ends::V4(local, remote) => (SocketAddr::V4(*local), SocketAddr::V4(*remote)),
            Ends::Other(ends) => **ends,
        }
    }
    /// (our IP address, the peer's): what a segment's checksum covers.
    #[inline]
    pub fn ips(&self) -> (IpAddr, IpAddr) {
        match self {
            Ends::V4(local, remote) => (IpAddr::V4(*local.ip()), IpAddr::V4(*remote.ip())),
            Ends::Other(ends) => (ends.0.ip(), ends.1.ip()),
        }
    }
    /// Whether these are `local` and `remote` (compared in place, as the demultiplexing
    /// table asks of each candidate).
    #[inline]
    pub fn is(&self, local: &SocketAddr, remote: &SocketAddr) -> bool {
        match (self, local, remote) {
            (Ends::V4(ours, theirs), SocketAddr::V4(local), SocketAddr::V4(remote)) => {
                ours == local && theirs == remote
            }
            (Ends::Other(ends), _, _) => ends.0 == *local && ends.1 == *remote,
            // Two IPv4 ends never equal an IPv6 one.
            _ => false,
        }
    }
    /// Our port.
    #[inline]
    pub fn local_port(&self) -> u16 {
        match self {
            Ends::V4(local, _) => local.port(),
            Ends::Other(ends) => ends.0.port(),
        }
    }
    /// The peer's port.
    #[inline]
    pub fn remote_port(&self) -> u16 {
        match self {
            Ends::V4(_, remote) => remote.port(),
            Ends::Other(ends) => ends.1.port(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every pair reads back as given and matches itself only, packed or not.
    #[test]
    fn packs_and_reads_back() {
        let v4a: SocketAddr = "10.0.0.1:80".parse().unwrap();
        let v4b: SocketAddr = "10.0.0.2:4000".parse().unwrap();
        let v6a: SocketAddr = "[fe80::1%3]:80".parse().unwrap();
        let v6b: SocketAddr = "[2001:db8::2]:4000".parse().unwrap();
        let all = [v4a, v4b, v6a, v6b];
        for local in all {
            for remote in all {
                let ends = Ends::new(local, remote);
                let packed = matches!(ends, Ends::V4(..));
                assert_eq!(packed, local.is_ipv4() && remote.is_ipv4());
                assert_eq!((ends.local(), ends.remote()), (local, remote));
                assert_eq!(ends.tuple(), (local, remote));
                assert_eq!(ends.ips(), (local.ip(), remote.ip()));
                assert_eq!(ends.local_port(), local.port());
                assert_eq!(ends.remote_port(), remote.port());
                for a in all {
                    for b in all {
                        assert_eq!(ends.is(&a, &b), (a, b) == (local, remote));
                    }
                }
            }
        }
    }
}
