//! HyperLogLog (placeholder).
