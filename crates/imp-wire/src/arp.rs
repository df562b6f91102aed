//! TODO(wire helper): arp
