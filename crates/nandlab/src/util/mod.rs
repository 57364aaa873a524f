//! Generic helpers that are not nandlab's subject: containers and
//! arithmetic the layers share, and sizes as people write them.
//!
//! - [`assignment`]: `KEY=VALUE` as options give them, values read as TOML.
//! - [`codec`]: little-endian fields on a byte stream, lengths checked before allocating.
//! - [`duration`]: durations such as `10s` or `500ms`, in nanoseconds.
//! - [`size`]: fio-style sizes (`4k`, `50%`, `2x`) and byte counts for messages.
//! - [`fast_div`]: division by a fixed divisor with one multiply.
//! - [`prefetch`]: memory prefetch hints and fallible large allocations.
//! - [`recency`]: an intrusive least-recently-used queue over dense indices.
//! - [`sparse_table`]: a table of mostly-absent entries stored by chunks.

pub mod assignment;
pub mod codec;
pub mod duration;
pub mod fast_div;
pub mod prefetch;
pub mod recency;
pub mod size;
pub mod sparse_table;
