//! The FTL interface, and the registry of FTLs that ship with nandlab.
//!
//! An FTL is built from an [`FtlEnv`] (geometry, logical capacity, DRAM
//! budget, its own seed) and its options, then powered on either for the
//! first time ([`Ftl::format`]) or over existing flash ([`Ftl::mount`]).
//! After that it serves host reads, writes, trims and flushes, does
//! background work when the host is idle, and persists what it must on a
//! clean [`Ftl::shutdown`]. Nothing in the FTL's memory survives a power
//! cycle: a mount must rebuild its state from flash alone.
//!
//! The FTL reaches data only through [`Flash`]; host data arrives and
//! leaves in buffers it never looks inside (see [`crate::nand::payload`]).
//! That is what lets the same FTL run untimed (`stress`), timed (`perf`),
//! under power cuts (`crash`) and with real bytes, and what keeps the
//! interface expressible over a C ABI: no generics, no closures, plain
//! integers and byte slices.
//!
//! # Over a C ABI
//!
//! `include/nandlab.h` is this mapping as a C header, and [`foreign`]
//! loads an FTL library built against it (`--ftl-lib`); a test keeps the
//! two from drifting. The mapping:
//!
//! - **The FTL** is an opaque `void *` returned by a `create(env, options)`
//!   function; each [`Ftl`] method is a function taking it and a `flash`
//!   handle, returning an `int32_t` error code (0 = success) and writing a
//!   message into a caller-provided `char` buffer on failure. [`FtlEnv`],
//!   [`FtlInfo`] and [`IoRequest`] are plain structs of integers (the FTL
//!   name a `const char *`).
//! - **The flash** ([`Flash`]) is a table of function pointers over plain
//!   integers: page and block addresses are `uint64_t`, a [`Cause`](crate::flash::Cause)
//!   is a `uint8_t`, a buffer handle ([`BufId::raw`]) is a `uint64_t`, OOB
//!   and metadata are `(uint8_t *, size_t)` pairs; each returns a
//!   [`FlashError`] code (`int32_t`, 0 = success).
//! - **Options** are `KEY=VALUE` strings exactly as `--ftl-opt` takes them:
//!   an array of `(const char *key, const char *value)`, the value being the
//!   TOML text of a scalar (`3`, `true`, `greedy`). The FTL parses and
//!   validates them itself and fails `create` with a message naming the
//!   option, as [`parse_options`] does for the Rust FTLs.
//! - **Stats** are a key/value list of numbers: the FTL fills a
//!   caller-provided array of `(const char *key, double value)`.
//!   [`FtlStats::numbers`] is that list for a Rust FTL: `gc_runs`,
//!   `dram_bytes`, every numeric entry of `extra`, and arrays flattened to
//!   `key.0`, `key.1`, …; the strings some Rust FTLs add (their policy
//!   names) echo options and are not stats.
//! - **Errors** are a stable code plus the message, [`FtlError::code`]:
//!
//! | code    | error                                   | meaning                                        |
//! |---------|-----------------------------------------|------------------------------------------------|
//! | 0       | —                                       | success                                        |
//! | 1 … 10  | [`FtlError::Flash`]                     | a flash operation failed: the [`FlashError`] code, passed through |
//! | 101     | [`FtlError::OutOfRange`]                | the request is beyond the logical capacity (a C shim rebuilds the range from the request it passed) |
//! | 102     | [`FtlError::NoSpace`]                   | no free space (no block to write or collect)   |
//! | 103     | [`FtlError::Mount`]                     | mount / recovery failed                        |
//! | 104     | [`FtlError::Dram`]                      | not enough device DRAM                         |
//! | other   | [`FtlError::Other`]                     | a library FTL's own code, passed on with its message |
//!
//! Codes are never reused or renumbered; new errors get new codes.
//!
//! # Where things are
//!
//! - This file: the interface — [`Ftl`], [`FtlEnv`], [`IoRequest`],
//!   [`FtlError`], [`FtlStats`]. `options.rs`: option tables, their
//!   parsing and documentation. `registry.rs`: the FTLs that ship, [`build`]
//!   by name, [`check_geometry`].
//! - One module per FTL: [`page`], [`dftl`], [`hybrid`], [`block`],
//!   [`optr`]. An FTL of one file is `name.rs`; an FTL of several files is
//!   a folder `name/` whose `mod.rs` holds the FTL itself and whose other
//!   files its parts (`page/recovery.rs`, `dftl/cmt.rs`, …).
//! - [`kit`]: what more than one FTL uses (the data plane of `page` and
//!   `dftl`, the policies, whole-page I/O, mount-scan pieces, the map
//!   table).
//! - [`mutants`]: every deliberate bug ([`mutants::Mutant`]), switched on
//!   through each FTL's `with_mutant` constructor, and the `buggy` FTL
//!   built for them; they prove that the checkers catch what they claim.
//!
//! Every module with children is `name/mod.rs`; there are no `#[path]`
//! attributes and no `name.rs` beside a `name/` folder.

pub mod block;
pub mod dftl;
pub mod foreign;
pub mod hybrid;
pub mod kit;
pub mod mutants;
mod options;
pub mod optr;
pub mod page;
mod registry;
#[cfg(test)]
pub(crate) mod write_hooked;

pub use options::{concat_option_docs, parse_options, split_options, FtlOptions, OptionDoc};
pub use registry::{build, check_geometry, descriptor, registry, FtlDescriptor};

use crate::flash::{BufId, Flash, FlashError};
use crate::nand::Geometry;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use thiserror::Error;

/// What an FTL is built with.
#[derive(Clone, Debug)]
pub struct FtlEnv {
    pub geometry: Geometry,
    /// Logical capacity exported to the host, in sectors.
    pub logical_sectors: u64,
    /// Device DRAM the FTL may use for maps, caches and buffers, in bytes.
    pub dram_budget_bytes: u64,
    /// Seed of the FTL's own random stream (derived from the run seed).
    pub seed: u64,
}

/// A host read or write as the FTL receives it: sectors `lba .. lba+sectors`,
/// with data in (write) or to be placed in (read) `buf`, sector 0 of the
/// buffer being `lba`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct IoRequest {
    pub id: u64,
    pub lba: u64,
    pub sectors: u32,
    pub buf: BufId,
}

/// Whether a completed write survives a power cut.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// On flash: survives a power cut.
    Durable,
    /// Acknowledged from a volatile cache: durable only after a flush.
    Volatile,
}

/// The crash guarantee an FTL claims (checked by `crash` mode).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Guarantee {
    /// Flushed writes are durable; every sector reads as some version
    /// written to it no older than its last flushed one.
    Baseline,
    /// Baseline plus prefix semantics and request atomicity (OPTR).
    Optr,
}

/// Static facts about an FTL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FtlInfo {
    pub name: &'static str,
    pub guarantee: Guarantee,
    /// Bytes of each page's OOB the FTL writes (the NAND stores this many).
    pub oob_bytes: u32,
}

/// Counters an FTL reports.
///
/// What other layers read is a typed field (`free_blocks` for
/// preconditioning, `mount` for a remount's summary); `extra` holds the
/// FTL-specific metrics for display only (JSON, summaries, [`FtlStats::numbers`])
/// and is never read by key. [`FtlStats::with_typed_in_extra`] lists the
/// typed figures in `extra` too, under their names, so a report shows every
/// figure in one map.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FtlStats {
    /// Garbage-collection cycles (victims collected).
    pub gc_runs: u64,
    /// Device DRAM the FTL's own structures use, in bytes.
    pub dram_bytes: u64,
    /// Free blocks (erased, ready to be written) now; `None` if the FTL
    /// does not count them. Preconditioning watches it for steady state.
    #[serde(skip)]
    pub free_blocks: Option<u64>,
    /// What the last mount did, as (name, count) pairs whose names start
    /// with `mount_` (each FTL has its own: pages scanned, merges finished,
    /// …); empty if the FTL reports none.
    #[serde(skip)]
    pub mount: Vec<(&'static str, u64)>,
    /// FTL-specific metrics (mapping cache, merges, wear …), for display.
    pub extra: BTreeMap<String, serde_json::Value>,
}

impl FtlStats {
    /// These stats with the typed figures (`free_blocks`, `mount`) also
    /// listed in `extra` under their names.
    pub fn with_typed_in_extra(mut self) -> FtlStats {
        if let Some(free) = self.free_blocks {
            self.extra.insert("free_blocks".into(), serde_json::json!(free));
        }
        for &(name, count) in &self.mount {
            debug_assert!(name.starts_with("mount_"), "{name}");
            self.extra.insert(name.into(), serde_json::json!(count));
        }
        self
    }

    /// The stats as a key/value list of numbers, as a C FTL reports them
    /// (see the module docs): `gc_runs`, `dram_bytes`, then `extra` in key
    /// order, arrays flattened to `key.0`, `key.1`, …; non-numbers skipped.
    pub fn numbers(&self) -> Vec<(String, f64)> {
        let mut out = vec![("gc_runs".to_string(), self.gc_runs as f64), ("dram_bytes".into(), self.dram_bytes as f64)];
        for (key, value) in &self.extra {
            match value {
                serde_json::Value::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        if let Some(x) = item.as_f64() {
                            out.push((format!("{key}.{i}"), x));
                        }
                    }
                }
                v => {
                    if let Some(x) = v.as_f64() {
                        out.push((key.clone(), x));
                    }
                }
            }
        }
        out
    }
}

/// Errors an FTL returns. Each has a stable numeric code for a C ABI
/// ([`FtlError::code`], table in the module docs); the message is kept.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum FtlError {
    #[error("flash operation failed: {0}")]
    Flash(#[from] FlashError),
    #[error("request beyond the logical capacity: sectors {lba}..{end} of {capacity}")]
    OutOfRange { lba: u64, end: u64, capacity: u64 },
    #[error("no free space: {0}")]
    NoSpace(String),
    #[error("mount failed: {0}")]
    Mount(String),
    #[error("not enough device DRAM: {0}")]
    Dram(String),
    /// A code include/nandlab.h does not define, returned by a library FTL
    /// (e.g. the Jasmine layer's own failures): the code and the message.
    #[error("error code {code}, which include/nandlab.h does not define: {message}")]
    Other { code: i32, message: String },
}

impl FtlError {
    /// Code of [`FtlError::OutOfRange`].
    pub const CODE_OUT_OF_RANGE: i32 = 101;
    /// Code of [`FtlError::NoSpace`].
    pub const CODE_NO_SPACE: i32 = 102;
    /// Code of [`FtlError::Mount`].
    pub const CODE_MOUNT: i32 = 103;
    /// Code of [`FtlError::Dram`].
    pub const CODE_DRAM: i32 = 104;

    /// The stable numeric code of this error (never 0): a flash failure
    /// passes its [`FlashError`] code (1 … 10) through; the FTL's own
    /// errors are 101 and up. See the table in the module docs.
    pub fn code(&self) -> i32 {
        match self {
            FtlError::Flash(e) => e.code(),
            FtlError::OutOfRange { .. } => Self::CODE_OUT_OF_RANGE,
            FtlError::NoSpace(_) => Self::CODE_NO_SPACE,
            FtlError::Mount(_) => Self::CODE_MOUNT,
            FtlError::Dram(_) => Self::CODE_DRAM,
            FtlError::Other { code, .. } => *code,
        }
    }
}

/// What [`Ftl::idle`] did.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum IdleOutcome {
    /// Did a step of background work; call again if time allows.
    Worked,
    /// Nothing to do.
    Nothing,
}

/// A flash translation layer. See the module docs.
pub trait Ftl {
    fn info(&self) -> FtlInfo;
    /// First power-on: erase what must be erased and build empty state.
    fn format(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError>;
    /// Power-on over existing flash: rebuild all state from flash alone.
    fn mount(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError>;
    /// Place the current data of `req`'s sectors into `req.buf`.
    fn read(&mut self, flash: &mut dyn Flash, req: &IoRequest) -> Result<(), FtlError>;
    /// Store `req.buf` as the data of `req`'s sectors.
    fn write(&mut self, flash: &mut dyn Flash, req: &IoRequest) -> Result<Durability, FtlError>;
    /// Discard sectors; afterwards they read as zeros.
    fn trim(&mut self, flash: &mut dyn Flash, lba: u64, sectors: u64) -> Result<(), FtlError>;
    /// Make every completed write durable.
    fn flush(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError>;
    /// The power is failing on a drive with power-loss protection (its
    /// capacitors hold it up a little longer): make every completed write
    /// durable before the power is gone. The instance is dropped afterwards
    /// and a fresh one mounts. `crash` calls it when the
    /// `write_cache_lost` power-cut effect is off. Default: [`Ftl::flush`];
    /// firmware with a faster emergency path (a cache dump to a reserved
    /// area, no GC) overrides it.
    fn emergency_flush(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.flush(flash)
    }
    /// One step of background work (e.g. collect one victim) while the host is idle.
    fn idle(&mut self, flash: &mut dyn Flash) -> Result<IdleOutcome, FtlError>;
    /// Clean power-off: persist whatever a later mount needs.
    fn shutdown(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError>;
    fn stats(&self) -> FtlStats;
    /// Path counters: how often each branch of the FTL's own algorithms
    /// ran that its statistics do not tell apart (which kind of GC victim,
    /// which kind of cache eviction). Not in any report: `hunt`'s coverage
    /// guidance steers by them (see `run/hunt/coverage.rs`). Default: none.
    fn paths(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
    /// A hint that a request for these sectors comes soon (the simulator
    /// looks ahead in the workload). An FTL may prefetch its map into the
    /// CPU cache; it must not change state or touch flash. Default: nothing.
    fn prefetch(&mut self, _flash: &dyn Flash, _lba: u64, _sectors: u32) {}
}

/// Check a request against the logical capacity.
pub fn check_range(lba: u64, sectors: u64, capacity: u64) -> Result<(), FtlError> {
    match lba.checked_add(sectors) {
        Some(end) if end <= capacity => Ok(()),
        _ => Err(FtlError::OutOfRange { lba, end: lba.saturating_add(sectors), capacity }),
    }
}

/// The tail of a "not enough device DRAM" message: exact byte counts with a
/// readable unit (a budget of a few KiB must not print as "0 MiB"), and the
/// configuration field to raise.
pub fn dram_shortfall(needed_bytes: u64, budget_bytes: u64) -> String {
    use crate::util::size::exact_bytes;
    format!(
        "{} of device DRAM but the device has {}; raise `device.dram_bytes`",
        exact_bytes(needed_bytes),
        exact_bytes(budget_bytes)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The codes are part of the C ABI contract: these exact numbers.
    #[test]
    fn ftl_errors_have_stable_distinct_codes_and_keep_their_message() {
        let errors = [
            (FtlError::Flash(FlashError::BadBlock), 2),
            (FtlError::Flash(FlashError::InvalidArgument), 10),
            (FtlError::OutOfRange { lba: 8, end: 16, capacity: 10 }, 101),
            (FtlError::NoSpace("no free block".into()), 102),
            (FtlError::Mount("no checkpoint".into()), 103),
            (FtlError::Dram("map".into()), 104),
            (FtlError::Other { code: 900, message: "layer".into() }, 900),
        ];
        for (e, code) in &errors {
            assert_eq!(e.code(), *code, "{e}");
        }
        assert_eq!(errors[3].0.to_string(), "no free space: no free block");
        for f in FlashError::ALL {
            assert_eq!(FtlError::Flash(f).code(), f.code());
            assert_eq!(FlashError::from_code(f.code()), Some(f));
            assert!(f.code() > 0 && f.code() < FtlError::CODE_OUT_OF_RANGE);
        }
        assert_eq!(FlashError::from_code(0), None);
    }

    #[test]
    fn stats_map_to_a_list_of_numbers() {
        let mut extra = BTreeMap::new();
        extra.insert("cmt_hit_ratio".to_string(), serde_json::json!(0.5));
        extra.insert("gc_policy".to_string(), serde_json::json!("greedy"));
        extra.insert("stream_pages".to_string(), serde_json::json!([3, 4]));
        let s = FtlStats { gc_runs: 7, dram_bytes: 4096, extra, ..Default::default() };
        let expected = [
            ("gc_runs", 7.0),
            ("dram_bytes", 4096.0),
            ("cmt_hit_ratio", 0.5),
            ("stream_pages.0", 3.0),
            ("stream_pages.1", 4.0),
        ];
        let expected: Vec<(String, f64)> = expected.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        assert_eq!(s.numbers(), expected, "the policy name is not a number");
    }
}
