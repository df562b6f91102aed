//! Segment-level tests.
