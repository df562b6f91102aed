//! A UDP socket's part of an imp socket: imp's UDP socket, and a datagram taken early
//! to see that one was there (`poll` and epoll look; the next receive gets it).

use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::task::{Context, Poll};

use impnet::tokio::UdpSocket;

use crate::errno::errno;

/// The largest UDP payload (over IPv4: 65,535 less the IP and UDP headers).
const MAX_DATAGRAM: usize = 65_507;

/// A bound UDP socket.
pub(crate) struct Datagrams {
    pub socket: UdpSocket,
    /// A datagram taken to see readiness, and its source: the next receive's.
    held: Option<(Vec<u8>, SocketAddr)>,
    /// Room for the largest datagram, to receive into.
    scratch: Vec<u8>,
}

impl Datagrams {
    pub fn new(socket: UdpSocket) -> Datagrams {
        Datagrams {
            socket,
            held: None,
            scratch: Vec::new(),
        }
    }

    /// Receive one datagram into `bufs` in order (the rest of a longer one is
    /// dropped, as on Linux): its length as copied, and its source. `peek` leaves it
    /// to be received again.
    pub fn poll_recv(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &mut [&mut [u8]],
        peek: bool,
    ) -> Poll<io::Result<(usize, SocketAddr)>> {
        if self.held.is_none() {
            match self.poll_take(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        let Some((data, source)) = self.held.take() else {
            return Poll::Pending;
        };
        let copied = scatter(&data, bufs);
        if peek {
            self.held = Some((data, source));
        }
        Poll::Ready(Ok((copied, source)))
    }

    /// Whether a datagram (or an error) waits: takes one into `held` to see.
    pub fn poll_readable(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.held.is_some() {
            return Poll::Ready(Ok(()));
        }
        self.poll_take(cx)
    }

    fn poll_take(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.scratch.is_empty() {
            self.scratch = vec![0; MAX_DATAGRAM];
        }
        loop {
            return match self.socket.poll_recv_slice(cx, &mut self.scratch) {
                Poll::Ready(Ok((n, source))) => {
                    self.held = Some((self.scratch[..n].to_vec(), source));
                    Poll::Ready(Ok(()))
                }
                // udp(7): "all errors are reported only for connected sockets" (an
                // ICMP port unreachable for an earlier `sendto`, say); imp reports
                // them to every socket, once: passed over here.
                Poll::Ready(Err(_)) if self.socket.peer_addr().is_err() => continue,
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                Poll::Pending => Poll::Pending,
            };
        }
    }

    /// Send `bufs` as one datagram, to `to` or (None) the connected peer.
    pub fn poll_send(
        &self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
        to: Option<SocketAddr>,
    ) -> Poll<io::Result<usize>> {
        let target = match to {
            Some(target) => target,
            None => match self.socket.peer_addr() {
                Ok(peer) => peer,
                Err(_) => return Poll::Ready(Err(errno(libc::EDESTADDRREQ))),
            },
        };
        let whole;
        let data: &[u8] = match bufs {
            [one] => one,
            _ => {
                whole = bufs
                    .iter()
                    .flat_map(|b| b.iter().copied())
                    .collect::<Vec<u8>>();
                &whole
            }
        };
        if data.len() > MAX_DATAGRAM {
            return Poll::Ready(Err(errno(libc::EMSGSIZE)));
        }
        self.socket.poll_send_to(cx, data, target)
    }
}

/// Copy `data` into `bufs` in order; how much fit.
pub(crate) fn scatter(data: &[u8], bufs: &mut [&mut [u8]]) -> usize {
    let mut copied = 0;
    for buf in bufs.iter_mut() {
        let rest = &data[copied..];
        if rest.is_empty() {
            break;
        }
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        copied += n;
    }
    copied
}

#[cfg(test)]
mod tests {
    use super::scatter;

    #[test]
    fn scatter_fills_buffers_in_order_and_stops_when_full() {
        let (mut a, mut b) = ([0u8; 2], [0u8; 3]);
        let n = scatter(b"hello!", &mut [&mut a[..], &mut b[..]]);
        assert_eq!((n, &a, &b), (5, b"he", b"llo"));
        let (mut a, mut b) = ([0u8; 2], [0u8; 3]);
        let n = scatter(b"hi", &mut [&mut a[..], &mut b[..]]);
        assert_eq!((n, &a, &b), (2, b"hi", &[0u8; 3]));
    }
}
