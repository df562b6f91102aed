//! TODO(wire helper): icmpv4
