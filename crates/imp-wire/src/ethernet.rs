//! TODO(wire helper): ethernet
