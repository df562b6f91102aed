//! Packet formats for imp: zero-copy views over byte slices plus plain `Repr` structs.
//!
//! # The contract: `Packet` views and `Repr` structs
//!
//! Every format (Ethernet, ARP, IPv4, ICMPv4, IGMP, UDP, TCP; IPv6 and its extension headers,
//! ICMPv6, NDP, MLD) has the same two halves (DHCP and DNS, application payloads, have
//! a `Repr` or a checked `Message` only: see [`dhcp`] and [`dns`]):
//!
//! - **`Packet<T: AsRef<[u8]>>`**, a view over the bytes, copying nothing. A `mod field`
//!   names each field's byte range. `new_unchecked` wraps any buffer; `new_checked` wraps
//!   it and runs `check_len`, which checks that the buffer holds the fixed header and that
//!   every length field (header length, total length, option lengths) fits the buffer.
//!   Getters need `T: AsRef<[u8]>`, setters `T: AsMut<[u8]>`.
//!   **Once `check_len` has passed, no accessor panics**, whatever the bytes say: a
//!   header length or an option that does not fit was rejected by `check_len`.
//!   On a view made with `new_unchecked`, accessors may panic on a short buffer: that is
//!   what the unchecked constructor is for (building a packet into a buffer known to be
//!   large enough).
//! - **`Repr`**, the packet's meaning as a plain struct. `Repr::parse` takes a view,
//!   checks it (lengths, version, checksum where asked) and **never panics on any input**:
//!   every malformed packet is a typed [`Error`] that says what was wrong
//!   ([`Error::Truncated`] with how much was needed and what was there,
//!   [`Error::BadChecksum`], [`Error::BadOption`] with the kind and length, ...).
//!   `Repr::buffer_len` tells how many bytes `Repr::emit` writes; `emit` writes header,
//!   options and checksum into a view over a buffer at least that long.
//!
//! Parsing, emitting and parsing again gives the same `Repr`; the proptests in
//! `tests/proptest.rs` check that for every format, and that no input makes `parse`
//! or a checked view's accessors panic; the fuzz targets check the same under libFuzzer.
//!
//! ```
//! use core::net::Ipv4Addr;
//! use impnet_wire::{Error, udp};
//!
//! let (src, dst) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
//! let repr = udp::Repr { src_port: 40000, dst_port: 7, payload: b"hello" };
//!
//! // Emit into a buffer of exactly `buffer_len` bytes, through a view.
//! let mut bytes = vec![0u8; repr.buffer_len()];
//! repr.emit(&mut udp::Packet::new_unchecked(&mut bytes[..]), &src, &dst);
//!
//! // Parse it back: a checked view first, then the Repr (checksum verified).
//! let packet = udp::Packet::new_checked(&bytes[..])?;
//! assert_eq!(packet.dst_port(), 7);
//! assert_eq!(udp::Repr::parse(&packet, &src, &dst, true)?, repr);
//!
//! // A short buffer is an error that says how short, never a panic.
//! assert_eq!(
//!     udp::Packet::new_checked(&bytes[..5]).unwrap_err(),
//!     Error::Truncated { need: 8, have: 5 }
//! );
//! // A length field larger than the buffer is refused by `check_len`, so the
//! // accessors of a checked view never index past the end.
//! bytes[4..6].copy_from_slice(&200u16.to_be_bytes());
//! assert_eq!(udp::Packet::new_checked(&bytes[..]).unwrap_err(), Error::BadLength(200));
//! // A flipped bit fails the checksum.
//! bytes[4..6].copy_from_slice(&13u16.to_be_bytes());
//! bytes[12] ^= 1;
//! let packet = udp::Packet::new_checked(&bytes[..])?;
//! assert_eq!(udp::Repr::parse(&packet, &src, &dst, true), Err(Error::BadChecksum));
//! # Ok::<(), Error>(())
//! ```
//!
//! # IPv6
//!
//! [`ipv6`] is the fixed header, prefixes ([`ipv6::Cidr`]) and the address helpers
//! neighbour discovery needs (solicited-node groups, multicast MACs, modified EUI-64
//! and SLAAC addresses). [`ipv6ext::walk`] goes through the extension headers to the
//! upper layer and says, per RFC 8200 §4, which Parameter Problem (code and pointer) a
//! bad chain calls for. [`icmpv6`] parses every ICMPv6 message with its pseudo-header
//! checksum and hands neighbour discovery to [`ndp`] and multicast listener messages to
//! [`mld`]. UDP and TCP take IPv6 addresses for their checksums
//! ([`checksum::PseudoHeader`]).
//!
//! ```
//! use core::net::Ipv6Addr;
//! use impnet_wire::{Error, icmpv6, ipv6, ipv6ext};
//!
//! let src: Ipv6Addr = "fe80::1".parse().unwrap();
//! let dst: Ipv6Addr = "fe80::2".parse().unwrap();
//! let echo = icmpv6::Repr::EchoRequest { ident: 1, seq_no: 7, data: b"ping" };
//! let ip = ipv6::Repr {
//!     src_addr: src,
//!     dst_addr: dst,
//!     next_header: ipv6::NextHeader::Icmpv6,
//!     payload_len: echo.buffer_len(),
//!     hop_limit: 64,
//!     dscp: 0,
//!     ecn: 0,
//!     flow_label: 0,
//! };
//! let mut bytes = vec![0u8; ip.buffer_len()];
//! ip.emit(&mut ipv6::Packet::new_unchecked(&mut bytes[..]));
//! let message = &mut bytes[ipv6::HEADER_LEN..];
//! echo.emit(&mut icmpv6::Packet::new_unchecked(message), &src, &dst);
//!
//! // Receive: check the header, walk the (here empty) extension-header chain, parse.
//! let packet = ipv6::Packet::new_checked(&bytes[..])?;
//! let walk = ipv6ext::walk(packet.packet()).expect("no extension headers to refuse");
//! assert_eq!((walk.protocol, walk.offset), (ipv6::NextHeader::Icmpv6, 40));
//! let message = icmpv6::Packet::new_checked(&packet.packet()[walk.offset..])?;
//! assert_eq!(icmpv6::Repr::parse(&message, &src, &dst)?, echo);
//! // The checksum covers the addresses: the same bytes to another host fail it.
//! let other: Ipv6Addr = "fe80::3".parse().unwrap();
//! assert_eq!(icmpv6::Repr::parse(&message, &src, &other), Err(Error::BadChecksum));
//! # Ok::<(), Error>(())
//! ```
#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod arp;
pub mod checksum;
pub mod dhcp;
pub mod dns;
mod error;
pub mod ethernet;
pub mod group_record;
pub mod icmpv4;
pub mod icmpv6;
pub mod igmp;
pub mod ipv4;
pub mod ipv6;
pub mod ipv6ext;
pub mod mld;
pub mod ndp;
pub mod tcp;
pub mod udp;

pub use error::{Error, Result};
