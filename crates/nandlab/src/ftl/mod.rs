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

pub mod block;
pub mod buggy;
pub mod crash_bugs;
pub mod dftl;
pub mod hybrid;
pub mod map_table;
pub mod optr;
pub mod page;
pub mod policy;

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

/// Counters an FTL reports. `extra` holds FTL-specific metrics.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FtlStats {
    /// Garbage-collection cycles (victims collected).
    pub gc_runs: u64,
    /// Device DRAM the FTL's own structures use, in bytes.
    pub dram_bytes: u64,
    /// FTL-specific metrics (mapping cache, merges, wear …).
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// Errors an FTL returns.
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
    /// One step of background work (e.g. collect one victim) while the host is idle.
    fn idle(&mut self, flash: &mut dyn Flash) -> Result<IdleOutcome, FtlError>;
    /// Clean power-off: persist whatever a later mount needs.
    fn shutdown(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError>;
    fn stats(&self) -> FtlStats;
    /// A hint that a request for these sectors comes soon (the simulator
    /// looks ahead in the workload). An FTL may prefetch its map into the
    /// CPU cache; it must not change state or touch flash. Default: nothing.
    fn prefetch(&mut self, _flash: &dyn Flash, _lba: u64, _sectors: u32) {}
}

/// Check what an FTL declares it needs of the geometry (its [`FtlInfo`])
/// against a device: the spare bytes it writes per page must fit the
/// page's OOB. Returns the geometry field and the reason on a mismatch.
pub fn check_geometry(info: &FtlInfo, geometry: &Geometry) -> Result<(), (&'static str, String)> {
    if info.oob_bytes > geometry.oob_size_bytes() {
        return Err((
            "oob_size_bytes",
            format!(
                "ftl `{}` stores {} bytes of OOB (spare area) per page, but the geometry has {}; \
                 set oob_size_bytes to at least {}",
                info.name,
                info.oob_bytes,
                geometry.oob_size_bytes(),
                info.oob_bytes
            ),
        ));
    }
    Ok(())
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
    use crate::workload::size::exact_bytes;
    format!(
        "{} of device DRAM but the device has {}; raise `device.dram_bytes`",
        exact_bytes(needed_bytes),
        exact_bytes(budget_bytes)
    )
}

/// An FTL's options as written in the `[ftl]` table or given with
/// `--ftl-opt key=value`; each FTL parses them into its own typed struct.
pub type FtlOptions = toml::Table;

/// Documentation of one FTL option (for `nandlab ftls`).
#[derive(Copy, Clone, Debug)]
pub struct OptionDoc {
    pub name: &'static str,
    pub default: &'static str,
    pub help: &'static str,
}

/// An FTL that ships with nandlab.
pub struct FtlDescriptor {
    pub name: &'static str,
    pub summary: &'static str,
    pub options: &'static [OptionDoc],
    pub build: fn(&FtlEnv, &FtlOptions) -> Result<Box<dyn Ftl>, String>,
}

/// Every FTL nandlab ships.
pub fn registry() -> &'static [FtlDescriptor] {
    static REGISTRY: [FtlDescriptor; 6] = [
        page::DESCRIPTOR,
        dftl::DESCRIPTOR,
        hybrid::DESCRIPTOR,
        block::DESCRIPTOR,
        optr::DESCRIPTOR,
        buggy::DESCRIPTOR,
    ];
    &REGISTRY
}

pub fn descriptor(name: &str) -> Option<&'static FtlDescriptor> {
    registry().iter().find(|d| d.name == name)
}

/// Build an FTL by name with its options.
pub fn build(name: &str, env: &FtlEnv, options: &FtlOptions) -> Result<Box<dyn Ftl>, String> {
    let d = descriptor(name).ok_or_else(|| {
        let names: Vec<_> = registry().iter().map(|d| d.name).collect();
        format!("unknown FTL `{name}` (available: {})", names.join(", "))
    })?;
    (d.build)(env, options)
}

/// Parse an FTL's typed options from its option table, naming the bad field.
pub fn parse_options<T: for<'de> Deserialize<'de>>(ftl: &str, options: &FtlOptions) -> Result<T, String> {
    // Round-trip through TOML text so the error carries a span: the line
    // of the offending option, from which its name is read back.
    let text = toml::to_string(options).map_err(|e| format!("ftl `{ftl}` options: {e}"))?;
    toml::from_str::<T>(&text).map_err(|e| {
        let message = e.message().trim();
        if let Some((name, valid)) = unknown_option(message) {
            return format!("ftl `{ftl}`: unknown option `{name}` (valid options: {valid})");
        }
        match e.span().and_then(|s| key_of_line_at(&text, s.start)) {
            Some(k) => format!("ftl `{ftl}` option `{k}`: {message}"),
            None => format!("ftl `{ftl}` options: {message}"),
        }
    })
}

/// serde's "unknown field `x`, expected one of `a`, `b`" as (`x`, "`a`, `b`").
fn unknown_option(message: &str) -> Option<(&str, &str)> {
    let (name, rest) = message.strip_prefix("unknown field `")?.split_once('`')?;
    let rest = rest.trim_start_matches(',').trim();
    let valid = rest.strip_prefix("expected one of ").or_else(|| rest.strip_prefix("expected ")).unwrap_or("none");
    Some((name, valid))
}

/// The key set on the line that holds byte `at` of TOML `text`.
fn key_of_line_at(text: &str, at: usize) -> Option<String> {
    let at = at.min(text.len());
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line = text[start..].lines().next()?;
    let key = line.split('=').next()?.trim();
    (!key.is_empty() && !key.starts_with('[')).then(|| key.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Opts {
        gc_policy: Option<String>,
        copyback: Option<bool>,
    }

    fn parse(text: &str) -> Result<Opts, String> {
        parse_options("page", &toml::from_str::<FtlOptions>(text).unwrap())
    }

    /// `op=5` next to a valid option was blamed on the valid one.
    #[test]
    fn an_unknown_option_is_named_with_the_valid_ones() {
        let e = parse("gc_policy = \"greedy\"\nop = 5").unwrap_err();
        assert!(e.contains("unknown option `op`"), "{e}");
        assert!(e.contains("valid options: `gc_policy` or `copyback`"), "lists the valid options: {e}");
        assert!(!e.contains("option `gc_policy`"), "{e}");
    }

    #[test]
    fn a_bad_value_names_its_own_option() {
        let e = parse("gc_policy = \"greedy\"\ncopyback = 3").unwrap_err();
        assert!(e.starts_with("ftl `page` option `copyback`:"), "{e}");
        let e = parse("copyback = true\ngc_policy = 7").unwrap_err();
        assert!(e.starts_with("ftl `page` option `gc_policy`:"), "{e}");
    }
}
