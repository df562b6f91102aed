//! DHCPv4 on the stack: one [`DhcpClient`] per interface that asked for one, its
//! messages sent from port 68 (from 0.0.0.0 before it has an address, RFC 2131 §4.1),
//! replies to port 68 handed to it, and its leases applied: the address and its
//! connected route, the default route through the lease's router, the DNS servers.
//! A lost lease takes all three away again.

use alloc::vec::Vec;
use core::net::Ipv4Addr;

use impnet_wire::dhcp;
use impnet_wire::ipv4::{self, Cidr, Protocol};
use impnet_wire::udp;

use crate::dhcp::{DhcpClient, DhcpError, DhcpEvent, DhcpTransmit, Lease};
use crate::iface::IfaceId;
use crate::neighbor::Origin;
use crate::stack::ip::OutputError;
use crate::stack::ipv4::{OutputRoute, SendOptions};
use crate::stack::{Event, Stack};
use crate::time::Instant;

/// One interface's client and the lease applied to the stack.
#[derive(Debug)]
pub(crate) struct DhcpSlot {
    iface: IfaceId,
    client: DhcpClient,
    /// The lease whose address, route and servers are configured (invariant: what the
    /// stack holds from DHCP on this interface, nothing more).
    applied: Option<Lease>,
}

impl Stack {
    /// Run a DHCPv4 client on `iface` (an Ethernet interface): it sends DHCPDISCOVER at
    /// once and from then on keeps a lease, configuring its address, default route and
    /// DNS servers ([`Stack::dns_servers`]); each change is an [`Event::Dhcp`].
    pub fn dhcp_start(&mut self, now: Instant, iface: IfaceId) -> Result<(), DhcpError> {
        let interface = self
            .ifaces
            .get(iface.index())
            .ok_or(DhcpError::NoInterface)?;
        if interface.is_ip_level() {
            return Err(DhcpError::NotEthernet);
        }
        if self.dhcp.iter().any(|s| s.iface == iface) {
            return Err(DhcpError::AlreadyRunning);
        }
        let seed = self.dhcp_seed ^ u64::from(iface.0);
        let client = DhcpClient::new(now, interface.mac, seed);
        self.dhcp.push(DhcpSlot {
            iface,
            client,
            applied: None,
        });
        self.dhcp_flush(now);
        Ok(())
    }

    /// Give `iface`'s lease back (DHCPRELEASE) and stop its client; the address and
    /// routes go at once.
    pub fn dhcp_release(&mut self, now: Instant, iface: IfaceId) {
        if let Some(slot) = self.dhcp.iter_mut().find(|s| s.iface == iface) {
            slot.client.release(now);
        }
        self.dhcp_flush(now);
    }

    /// The lease `iface` holds, if any.
    pub fn dhcp_lease(&self, iface: IfaceId) -> Option<&Lease> {
        self.dhcp
            .iter()
            .find(|s| s.iface == iface)
            .and_then(|s| s.applied.as_ref())
    }

    /// The DNS servers the leases named, in order.
    pub fn dns_servers(&self) -> Vec<Ipv4Addr> {
        self.dhcp
            .iter()
            .filter_map(|s| s.applied.as_ref())
            .flat_map(|l| l.dns_servers.as_slice().iter().copied())
            .collect()
    }

    /// The earliest deadline of the DHCP clients.
    pub(crate) fn dhcp_poll_timeout(&self) -> Option<Instant> {
        (self.dhcp.iter()).fold(None, |next, slot| {
            Instant::earliest(next, slot.client.poll_timeout())
        })
    }

    /// Fire the clients' timers.
    pub(crate) fn dhcp_handle_timeout(&mut self, now: Instant) {
        if self.dhcp.is_empty() {
            return;
        }
        for slot in &mut self.dhcp {
            slot.client.handle_timeout(now);
        }
        self.dhcp_flush(now);
    }

    /// A UDP datagram from port 67 to port 68: a reply for one of our clients? Returns
    /// false when none runs, so that a socket bound to port 68 gets it.
    pub(crate) fn dhcp_input(&mut self, now: Instant, repr: &udp::Repr<'_>) -> bool {
        if self.dhcp.is_empty()
            || repr.dst_port != dhcp::CLIENT_PORT
            || repr.src_port != dhcp::SERVER_PORT
        {
            return false;
        }
        if let Ok(message) = dhcp::Repr::parse(repr.payload) {
            for slot in &mut self.dhcp {
                slot.client.handle_message(now, &message);
            }
        } else {
            self.stats.udp.rx_malformed += 1;
        }
        self.dhcp_flush(now);
        true
    }

    /// Send what the clients queued and apply their lease events.
    fn dhcp_flush(&mut self, now: Instant) {
        for index in 0..self.dhcp.len() {
            let iface = self.dhcp[index].iface;
            while let Some(transmit) = self.dhcp[index].client.poll_transmit() {
                // A full queue loses this message; the client's retransmission
                // timer sends it again.
                let _ = self.dhcp_send(now, iface, &transmit);
            }
            while let Some(event) = self.dhcp[index].client.poll_event() {
                self.dhcp_apply(now, index, event);
                self.push_event(Event::Dhcp { iface, event });
            }
        }
    }

    /// Configure (or tear down) what a lease event says.
    fn dhcp_apply(&mut self, now: Instant, index: usize, event: DhcpEvent) {
        let iface = self.dhcp[index].iface;
        match event {
            DhcpEvent::Bound(lease) | DhcpEvent::Renewed(lease) => {
                let unchanged = self.dhcp[index].applied.is_some_and(|old| {
                    (old.addr, old.prefix_len, old.router)
                        == (lease.addr, lease.prefix_len, lease.router)
                });
                if unchanged {
                    // A renewal of the same configuration: nothing to redo (no
                    // gratuitous ARP, no route churn), only the times change.
                    self.dhcp[index].applied = Some(lease);
                    return;
                }
                if let Some(old) = self.dhcp[index].applied.take() {
                    self.dhcp_unconfigure(iface, &old);
                }
                let cidr = Cidr {
                    address: lease.addr,
                    prefix_len: lease.prefix_len,
                };
                self.add_address(now, iface, cidr);
                if let Some(router) = lease.router {
                    self.routes_mut().add_default(router, iface);
                }
                self.dhcp[index].applied = Some(lease);
            }
            DhcpEvent::Lost(_) => {
                if let Some(old) = self.dhcp[index].applied.take() {
                    self.dhcp_unconfigure(iface, &old);
                }
            }
        }
    }

    /// Remove a lease's address, connected route and default route (if it is still
    /// the one the lease added).
    fn dhcp_unconfigure(&mut self, iface: IfaceId, lease: &Lease) {
        self.remove_address(
            iface,
            Cidr {
                address: lease.addr,
                prefix_len: lease.prefix_len,
            },
        );
        let ours = lease.router.is_some()
            && self.routes.iter().any(|r| {
                r.cidr == Cidr::DEFAULT_ROUTE && r.iface == iface && r.gateway == lease.router
            });
        if ours {
            self.routes_mut().remove(Cidr::DEFAULT_ROUTE);
        }
    }

    /// One client message as UDP from port 68 to 67. A broadcast leaves `iface`
    /// directly (from 0.0.0.0 while there is no address: route lookup would find no
    /// source); a unicast to the server takes the ordinary route.
    fn dhcp_send(
        &mut self,
        now: Instant,
        iface: IfaceId,
        transmit: &DhcpTransmit,
    ) -> Result<(), OutputError> {
        let route = if transmit.dst.is_broadcast() {
            let mtu = self
                .ifaces
                .get(iface.index())
                .ok_or(OutputError::NoRoute)?
                .mtu;
            OutputRoute {
                iface,
                next_hop: transmit.dst,
                src: transmit.src,
                mtu,
            }
        } else {
            self.route_output(transmit.dst, Some(transmit.src))?
        };
        let repr = udp::Repr {
            src_port: dhcp::CLIENT_PORT,
            dst_port: dhcp::SERVER_PORT,
            payload: &transmit.payload,
        };
        let mut packet = self.pool.take();
        packet.resize(ipv4::HEADER_LEN + repr.buffer_len(), 0);
        let mut view = udp::Packet::new_unchecked(&mut packet[ipv4::HEADER_LEN..]);
        repr.emit(&mut view, &route.src, &transmit.dst);
        let options = SendOptions {
            protocol: Protocol::Udp,
            dont_frag: false,
            origin: Origin::Stack,
            ip_options: &[],
            ttl: None,
        };
        self.send_ipv4(now, &route, transmit.dst, options, packet)?;
        self.stats.udp.tx_datagrams += 1;
        Ok(())
    }
}
