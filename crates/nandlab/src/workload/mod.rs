//! Workloads: the host I/O that drives a run.
//!
//! A [`Workload`] yields [`HostRequest`]s one at a time, so a workload of
//! any length runs in bounded memory. [`synthetic`] generates fio-style
//! patterns; [`trace`] reads recorded block traces (one reader per format),
//! [`transform`] fits them to a device, and [`trace::replay`] turns them
//! into host requests.

pub mod distribution;
pub mod synthetic;
pub mod trace;
pub mod transform;

use thiserror::Error;

/// What a host request asks for.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HostOp {
    Read,
    Write,
    Trim,
    Flush,
}

impl HostOp {
    /// Every operation, in [`HostOp::index`] order.
    pub const ALL: [HostOp; 4] = [HostOp::Read, HostOp::Write, HostOp::Trim, HostOp::Flush];

    /// Position in [`HostOp::ALL`], for per-operation arrays.
    pub fn index(self) -> usize {
        match self {
            HostOp::Read => 0,
            HostOp::Write => 1,
            HostOp::Trim => 2,
            HostOp::Flush => 3,
        }
    }

    /// The lowercase name (as in `--trace-op`).
    pub fn name(self) -> &'static str {
        match self {
            HostOp::Read => "read",
            HostOp::Write => "write",
            HostOp::Trim => "trim",
            HostOp::Flush => "flush",
        }
    }
}

impl std::str::FromStr for HostOp {
    type Err = String;
    /// A lowercase name, as [`HostOp::name`] writes it.
    fn from_str(s: &str) -> Result<HostOp, String> {
        HostOp::ALL
            .into_iter()
            .find(|op| op.name() == s)
            .ok_or_else(|| format!("unknown operation `{s}` (read, write, trim, flush)"))
    }
}

/// One host request: `sectors` sectors from `lba` (both 0 for a flush).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct HostRequest {
    pub op: HostOp,
    pub lba: u64,
    pub sectors: u32,
    /// Arrival time in ns for open-loop replay (0 when the workload has none).
    pub arrival_ns: u64,
    /// The job (flow) that issued it.
    pub job: u32,
}

/// How far a workload has got, in its own unit (bytes of I/O or of a file).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct WorkloadProgress {
    pub done: u64,
    pub total: Option<u64>,
}

/// A failure while producing the next request (a bad trace line, an I/O error).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{0}")]
pub struct WorkloadError(pub String);

/// A stream of host requests.
pub trait Workload {
    fn next_request(&mut self) -> Result<Option<HostRequest>, WorkloadError>;
    fn progress(&self) -> WorkloadProgress;
    /// The largest power-of-two sector count every request offset and size is
    /// a multiple of (1 if unknown): the oracle tracks versions at this grain.
    fn alignment_sectors(&self) -> u32;
    /// A one-line description for reports.
    fn describe(&self) -> String;
    /// Workload-specific figures for the report (e.g. a trace's skipped lines).
    fn report(&self) -> Option<WorkloadReport> {
        None
    }
}

/// Workload-specific figures of a run, for its summary and its JSON report.
#[derive(Clone, Debug, PartialEq)]
pub enum WorkloadReport {
    /// A trace replay: what the reader and the transforms did.
    Trace(trace::replay::TraceReplayReport),
}

impl WorkloadReport {
    /// Why the workload issued nothing, if it issued nothing.
    pub fn warnings(&self) -> &[String] {
        match self {
            WorkloadReport::Trace(t) => &t.warnings,
        }
    }
}

impl serde::Serialize for WorkloadReport {
    /// `{"kind": "trace", …}`, every object's keys in sorted order: the
    /// JSON reports have always listed them so (they were built as a JSON
    /// map), and a report's layout does not change with its Rust types.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(serde::Serialize)]
        #[serde(tag = "kind", rename_all = "lowercase")]
        enum Tagged<'a> {
            Trace(&'a trace::replay::TraceReplayReport),
        }
        let tagged = match self {
            WorkloadReport::Trace(t) => Tagged::Trace(t),
        };
        serde_json::to_value(tagged).map_err(serde::ser::Error::custom)?.serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_read_back_their_names() {
        for op in HostOp::ALL {
            assert_eq!(op.name().parse::<HostOp>(), Ok(op));
        }
        assert_eq!("erase".parse::<HostOp>().unwrap_err(), "unknown operation `erase` (read, write, trim, flush)");
    }
}
