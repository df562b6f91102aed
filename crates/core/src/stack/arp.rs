//! ARP (RFC 826) on the stack: answering requests for our addresses, learning from
//! what we hear, asking for neighbours, announcing our addresses, and failing the
//! packets of neighbours that never answer.

use alloc::collections::VecDeque;
use core::net::Ipv4Addr;

use impnet_wire::arp::{self, Operation};
use impnet_wire::ethernet::{self, EtherType};

use crate::icmp::{IcmpError, IcmpHandle};
use crate::iface::IfaceId;
use crate::neighbor::{Origin, Pending, SocketKind};
use crate::stack::{Event, Outgoing, Stack};
use crate::time::Instant;
use crate::udp::{UdpError, UdpHandle};

impl Stack {
    /// An ARP packet arrived on `iface`.
    #[inline(never)]
    pub(crate) fn handle_arp(&mut self, now: Instant, iface: IfaceId, bytes: &[u8]) {
        let Ok(repr) = arp::Packet::new_checked(bytes).and_then(|p| arp::Repr::parse(&p)) else {
            self.stats.arp.rx_malformed += 1;
            return;
        };
        match repr.operation {
            Operation::Request => self.stats.arp.rx_requests += 1,
            Operation::Reply => self.stats.arp.rx_replies += 1,
            Operation::Unknown(_) => {
                self.stats.arp.rx_malformed += 1;
                return;
            }
        }
        let interface = &self.ifaces[iface.index()];
        let our_mac = interface.mac;
        let for_us = interface.has_addr(repr.target_protocol_addr);
        let sender = repr.source_protocol_addr;
        let sender_ok = repr.source_hardware_addr.is_unicast()
            && !sender.is_unspecified()
            && !interface.has_addr(sender)
            && !interface.is_broadcast(sender);
        if sender_ok {
            // RFC 826: "If the pair <protocol type, sender protocol address> is already
            // in my translation table, update the sender hardware address field ...
            // If Merge_flag is false [and] I am the target protocol address, add the
            // triplet."
            let mac = repr.source_hardware_addr;
            if let Some(queued) = self
                .neighbors
                .handle_mapping(now, iface, sender, mac, for_us)
            {
                self.flush_resolved(iface, mac, queued);
            }
            self.stats.arp.cache_updates += 1;
        }
        // RFC 826: "If the opcode is ares_op$REQUEST ... swap fields, putting the local
        // hardware and protocol addresses in the sender fields ... send the packet to
        // the (new) target hardware address."
        if for_us && repr.operation == Operation::Request {
            let reply = arp::Repr {
                operation: Operation::Reply,
                source_hardware_addr: our_mac,
                source_protocol_addr: repr.target_protocol_addr,
                target_hardware_addr: repr.source_hardware_addr,
                target_protocol_addr: repr.source_protocol_addr,
            };
            if self.send_arp(iface, repr.source_hardware_addr, &reply) {
                self.stats.arp.tx_replies += 1;
            }
        }
    }

    /// The packets waiting for `mac` can go now.
    fn flush_resolved(
        &mut self,
        iface: IfaceId,
        mac: ethernet::Address,
        queued: VecDeque<Pending>,
    ) {
        for pending in queued {
            let frame = Outgoing {
                iface,
                dst_mac: mac,
                ethertype: EtherType::Ipv4,
                payload: pending.packet,
                gso_size: 0,
            };
            let _ = self.enqueue_frame(frame);
        }
    }

    /// Broadcast "who has `addr`?" from `iface`.
    pub(crate) fn send_arp_request(&mut self, iface: IfaceId, addr: Ipv4Addr) {
        let Some(interface) = self.ifaces.get(iface.index()) else {
            return;
        };
        let request = arp::Repr {
            operation: Operation::Request,
            source_hardware_addr: interface.mac,
            source_protocol_addr: interface.source_for(addr).unwrap_or(Ipv4Addr::UNSPECIFIED),
            target_hardware_addr: ethernet::Address([0; 6]),
            target_protocol_addr: addr,
        };
        if self.send_arp(iface, ethernet::Address::BROADCAST, &request) {
            self.stats.arp.tx_requests += 1;
        }
    }

    /// RFC 5227 §2.3 ARP announcement: a broadcast request with our address as both
    /// sender and target, so every cache holding it updates.
    pub(crate) fn send_arp_announcement(&mut self, iface: IfaceId, addr: Ipv4Addr) {
        let Some(interface) = self.ifaces.get(iface.index()) else {
            return;
        };
        let announcement = arp::Repr {
            operation: Operation::Request,
            source_hardware_addr: interface.mac,
            source_protocol_addr: addr,
            target_hardware_addr: ethernet::Address([0; 6]),
            target_protocol_addr: addr,
        };
        if self.send_arp(iface, ethernet::Address::BROADCAST, &announcement) {
            self.stats.arp.tx_gratuitous += 1;
        }
    }

    /// Queue an ARP packet; false when none went (the queue is full, or the interface
    /// is IP-level: no link layer, nothing to resolve or announce).
    fn send_arp(&mut self, iface: IfaceId, dst_mac: ethernet::Address, repr: &arp::Repr) -> bool {
        if self
            .ifaces
            .get(iface.index())
            .is_none_or(|i| i.is_ip_level())
        {
            return false;
        }
        let mut payload = self.pool.take();
        payload.resize(repr.buffer_len(), 0);
        repr.emit(&mut arp::Packet::new_unchecked(&mut payload[..]));
        self.enqueue_frame(Outgoing {
            iface,
            dst_mac,
            ethertype: EtherType::Arp,
            payload,
            gso_size: 0,
        })
        .is_ok()
    }

    /// Resolution of `addr` failed: drop and count its packets, tell their sockets.
    pub(crate) fn on_neighbor_failed(
        &mut self,
        now: Instant,
        iface: IfaceId,
        addr: Ipv4Addr,
        dropped: VecDeque<Pending>,
    ) {
        self.stats.arp.resolution_failed += 1;
        self.push_event(Event::NeighbourFailed { iface, addr });
        // A connect whose SYN waits on this neighbour fails now: every connection still
        // opening to a remote reached through it.
        let routes = &self.routes;
        let via = |remote: core::net::IpAddr| match remote {
            core::net::IpAddr::V4(remote) => routes
                .lookup(remote)
                .is_some_and(|route| route.iface == iface && route.next_hop(remote) == addr),
            core::net::IpAddr::V6(_) => false,
        };
        self.tcp
            .fail_opens(now, via, crate::tcp::TcpError::HostUnreachable);
        for pending in dropped {
            self.stats.arp.dropped_unresolved += 1;
            let readable = match pending.origin {
                Origin::Socket(SocketKind::Udp, slot) => {
                    let handle = UdpHandle(slot);
                    self.udp
                        .set_error_by_handle(handle, UdpError::HostUnreachable)
                        .then_some(Event::Udp(handle))
                }
                Origin::Socket(SocketKind::Icmp, slot) => {
                    let handle = IcmpHandle(slot);
                    self.icmp
                        .set_error(handle, IcmpError::HostUnreachable)
                        .then_some(Event::Icmp(handle))
                }
                Origin::Forwarded => {
                    self.forward_unresolved(now, &pending.packet);
                    None
                }
                Origin::Stack | Origin::Tcp | Origin::Socket(SocketKind::Raw, _) => None,
            };
            if let Some(event) = readable {
                self.push_event(event);
            }
            self.pool.give(pending.packet);
        }
    }
}
