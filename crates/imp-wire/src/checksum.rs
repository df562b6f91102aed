//! TODO(wire helper): checksum
