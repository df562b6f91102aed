//! Addresses as the sockets take them: an address, an (address, port) pair, or a string
//! `"host:port"` whose host is an address or the name of a simulated host
//! (`"server:9999"`), which [`lookup`] turns into that host's address. Names never reach
//! the machine's resolver: a run depends on nothing outside the simulation.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use crate::world;

/// What the sockets accept as an address: the types `tokio::net` takes, where a
/// string's host part may also name a simulated host.
pub trait ToSocketAddrs {
    /// The one address meant, names resolved in the current simulation.
    fn to_socket_addr(&self) -> io::Result<SocketAddr>;
}

impl ToSocketAddrs for SocketAddr {
    fn to_socket_addr(&self) -> io::Result<SocketAddr> {
        Ok(*self)
    }
}

impl ToSocketAddrs for SocketAddrV4 {
    fn to_socket_addr(&self) -> io::Result<SocketAddr> {
        Ok((*self).into())
    }
}

impl ToSocketAddrs for SocketAddrV6 {
    fn to_socket_addr(&self) -> io::Result<SocketAddr> {
        Ok((*self).into())
    }
}

impl ToSocketAddrs for (IpAddr, u16) {
    fn to_socket_addr(&self) -> io::Result<SocketAddr> {
        Ok((*self).into())
    }
}

impl ToSocketAddrs for (Ipv4Addr, u16) {
    fn to_socket_addr(&self) -> io::Result<SocketAddr> {
        Ok((*self).into())
    }
}

impl ToSocketAddrs for (Ipv6Addr, u16) {
    fn to_socket_addr(&self) -> io::Result<SocketAddr> {
        Ok((*self).into())
    }
}

impl ToSocketAddrs for (&str, u16) {
    fn to_socket_addr(&self) -> io::Result<SocketAddr> {
        Ok(SocketAddr::new(lookup(self.0)?, self.1))
    }
}

impl ToSocketAddrs for (String, u16) {
    fn to_socket_addr(&self) -> io::Result<SocketAddr> {
        (self.0.as_str(), self.1).to_socket_addr()
    }
}

impl ToSocketAddrs for str {
    fn to_socket_addr(&self) -> io::Result<SocketAddr> {
        if let Ok(addr) = self.parse() {
            return Ok(addr);
        }
        let (host, port) = self.rsplit_once(':').ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{self:?}: an address needs a port (\"host:port\")"),
            )
        })?;
        let port = port.parse().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{self:?}: the port is not a number from 0 to 65535"),
            )
        })?;
        (host, port).to_socket_addr()
    }
}

impl ToSocketAddrs for String {
    fn to_socket_addr(&self) -> io::Result<SocketAddr> {
        self.as_str().to_socket_addr()
    }
}

impl<T: ToSocketAddrs + ?Sized> ToSocketAddrs for &T {
    fn to_socket_addr(&self) -> io::Result<SocketAddr> {
        (**self).to_socket_addr()
    }
}

/// The address of the simulated host named `host` (its first link's address), or
/// `host` itself when it is an address. Works inside a simulated host's tasks; an
/// unknown name is `NotFound`.
pub fn lookup(host: &str) -> io::Result<IpAddr> {
    if let Ok(ip) = host.parse() {
        return Ok(ip);
    }
    world::lookup(host)?.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("no simulated host is named {host:?}"),
        )
    })
}
