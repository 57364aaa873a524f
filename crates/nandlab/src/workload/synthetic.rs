//! Synthetic workloads in fio's vocabulary.
//!
//! | option                | meaning (as in fio unless marked)                                      |
//! |-----------------------|-------------------------------------------------------------------------|
//! | `rw`                  | read, write, randread, randwrite, rw (readwrite), randrw, trim, randtrim |
//! | `bs` / `bsrange`      | request size, or sizes drawn uniformly among multiples of the minimum   |
//! | `blockalign`          | alignment of random offsets (default: the minimum size)                 |
//! | `rwmixread`           | percentage of reads in rw/randrw (ignored by the other modes, as in fio) |
//! | `offset`, `size`      | the region I/O goes to (default: the whole logical device)              |
//! | `io_size`             | bytes read + written per job before it stops (default: `size`)          |
//! | `write_size`          | *nandlab*: bytes written per job before it stops (overrides `io_size`)  |
//! | `random_distribution` | random (uniform), zipf:θ, pareto:h — see [`super::distribution`]        |
//! | `fsync`               | a flush after every N writes                                            |
//! | `trim_percent`        | *nandlab*: share of requests that are trims of the chosen range         |
//! | `iodepth`             | outstanding requests per job: `perf` only (`stress` runs one at a time)  |
//! | `numjobs`             | jobs, each with its own random stream and its own io_size / write_size  |
//!
//! Sizes take fio's suffixes (`4k`, `64KiB`, `1g`) and, where relative to the
//! device, `50%` or `4x` (times the logical capacity).
//!
//! Decisions where fio is silent or different: the default `rw` is
//! `randwrite` (fio's is `read`, useless on an empty drive); random offsets
//! are drawn with replacement (fio's `norandommap`); a sequential job keeps
//! one offset for reads and writes and wraps at the end of its region; jobs
//! interleave their requests round-robin, each with its own random stream.
//!
//! Every workload must be able to reach its stop condition: a combination
//! that can never reach it (`write_size` when no request can write —
//! `rw = read`, `rwmixread = 100`, `trim_percent = 100` — or an `io_size`
//! that only trims would count, outside the trim modes) is rejected naming
//! the options involved, never left to run forever. `iodepth` has no effect
//! in `stress`, which executes requests one at a time; `perf` keeps that
//! many requests outstanding per job.

use super::distribution::{Distribution, PositionSampler};
use super::{HostOp, HostRequest, Workload, WorkloadError, WorkloadProgress};
use crate::seed::{rng_for, Rng};
use crate::util::size::{parse_range, SizeSpec};
use rand::RngExt;
use serde::{Deserialize, Serialize};

/// fio's `rw` modes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum RwMode {
    Read,
    Write,
    #[serde(alias = "randread")]
    RandRead,
    #[default]
    #[serde(alias = "randwrite")]
    RandWrite,
    #[serde(alias = "readwrite")]
    Rw,
    #[serde(alias = "randrw")]
    RandRw,
    Trim,
    #[serde(alias = "randtrim")]
    RandTrim,
}

impl RwMode {
    pub fn is_random(self) -> bool {
        matches!(self, RwMode::RandRead | RwMode::RandWrite | RwMode::RandRw | RwMode::RandTrim)
    }
    /// Whether the mode issues writes (trims and reads do not).
    pub fn writes(self) -> bool {
        matches!(self, RwMode::Write | RwMode::RandWrite | RwMode::Rw | RwMode::RandRw)
    }
    pub fn name(self) -> &'static str {
        match self {
            RwMode::Read => "read",
            RwMode::Write => "write",
            RwMode::RandRead => "randread",
            RwMode::RandWrite => "randwrite",
            RwMode::Rw => "rw",
            RwMode::RandRw => "randrw",
            RwMode::Trim => "trim",
            RwMode::RandTrim => "randtrim",
        }
    }
}

impl std::str::FromStr for RwMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "read" => RwMode::Read,
            "write" => RwMode::Write,
            "randread" => RwMode::RandRead,
            "randwrite" => RwMode::RandWrite,
            "rw" | "readwrite" => RwMode::Rw,
            "randrw" => RwMode::RandRw,
            "trim" => RwMode::Trim,
            "randtrim" => RwMode::RandTrim,
            other => {
                return Err(format!(
                    "unknown rw mode `{other}` (read, write, randread, randwrite, rw, randrw, trim, randtrim)"
                ))
            }
        })
    }
}

/// A synthetic workload as configured (the `[workload]` table or CLI flags).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SyntheticSpec {
    pub rw: RwMode,
    pub bs: SizeSpec,
    pub bsrange: Option<String>,
    pub blockalign: Option<SizeSpec>,
    pub rwmixread: u32,
    pub offset: SizeSpec,
    pub size: Option<SizeSpec>,
    pub io_size: Option<SizeSpec>,
    pub write_size: Option<SizeSpec>,
    pub random_distribution: Distribution,
    pub fsync: u32,
    pub trim_percent: f64,
    pub iodepth: u32,
    pub numjobs: u32,
}

impl Default for SyntheticSpec {
    fn default() -> Self {
        SyntheticSpec {
            rw: RwMode::RandWrite,
            bs: SizeSpec::Bytes(4096),
            bsrange: None,
            blockalign: None,
            rwmixread: 50,
            offset: SizeSpec::Bytes(0),
            size: None,
            io_size: None,
            write_size: None,
            random_distribution: Distribution::Uniform,
            fsync: 0,
            trim_percent: 0.0,
            iodepth: 1,
            numjobs: 1,
        }
    }
}

/// The resolved parameters shared by all jobs.
#[derive(Clone, Debug)]
struct Params {
    rw: RwMode,
    sector_bytes: u64,
    bs_min: u64,
    bs_steps: u64,
    align: u64,
    region_start: u64,
    region_end: u64,
    limit_bytes: u64,
    limit_is_writes: bool,
    rwmixread: u32,
    fsync: u32,
    trim_percent: f64,
}

struct Job {
    id: u32,
    rng: Rng,
    cursor: u64,
    counted_bytes: u64,
    writes_since_flush: u32,
    flush_due: bool,
    finished: bool,
}

/// A running synthetic workload.
pub struct SyntheticWorkload {
    params: Params,
    spec: SyntheticSpec,
    sampler: PositionSampler,
    jobs: Vec<Job>,
    next_job: usize,
}

fn option_error(option: &str, reason: impl std::fmt::Display) -> String {
    format!("workload option `{option}`: {reason}")
}

fn options_error(options: &[&str], reason: impl std::fmt::Display) -> String {
    let names: Vec<String> = options.iter().map(|o| format!("`{o}`")).collect();
    format!("workload options {}: {reason}", names.join(" and "))
}

/// Reject a workload whose stop condition can never be reached: each job
/// stops after `write_size` bytes written, or after `io_size` bytes of
/// requests that count (writes, reads, and trims only in the trim modes).
fn check_stop_is_reachable(spec: &SyntheticSpec, limit_is_writes: bool) -> Result<(), String> {
    let rw = spec.rw.name();
    let mixed = matches!(spec.rw, RwMode::Rw | RwMode::RandRw);
    let all_trims = spec.trim_percent >= 100.0;
    if limit_is_writes {
        if !spec.rw.writes() {
            return Err(option_error("write_size", format!("`rw = {rw}` never writes, so the run would never end")));
        }
        if all_trims {
            return Err(options_error(
                &["write_size", "trim_percent"],
                "with trim_percent = 100 every request is a trim, so write_size is never reached; \
                 lower trim_percent or use rw = trim / randtrim with io_size",
            ));
        }
        if mixed && spec.rwmixread >= 100 {
            return Err(options_error(
                &["write_size", "rwmixread"],
                format!(
                    "with `rw = {rw}` and rwmixread = 100 every request is a read, so write_size is never \
                     reached; lower rwmixread or give io_size instead"
                ),
            ));
        }
    } else if all_trims && !matches!(spec.rw, RwMode::Trim | RwMode::RandTrim) {
        return Err(options_error(
            &["io_size", "trim_percent"],
            format!(
                "with trim_percent = 100 every request is a trim, and trims count towards io_size only with \
                 rw = trim / randtrim (not `rw = {rw}`), so the run would never end"
            ),
        ));
    }
    Ok(())
}

impl SyntheticWorkload {
    /// Resolve `spec` for a device of `capacity_bytes` with `sector_bytes` sectors.
    pub fn new(spec: &SyntheticSpec, capacity_bytes: u64, sector_bytes: u32, seed: u64) -> Result<Self, String> {
        let sector = u64::from(sector_bytes);
        let (bs_min, bs_max) = match &spec.bsrange {
            Some(r) => parse_range(r).map_err(|e| option_error("bsrange", e))?,
            None => {
                let b = spec.bs.resolve(capacity_bytes);
                (b, b)
            }
        };
        let bs_name = if spec.bsrange.is_some() { "bsrange" } else { "bs" };
        if bs_min == 0 || bs_min % sector != 0 || bs_max % sector != 0 {
            return Err(option_error(bs_name, format!("sizes must be non-zero multiples of the {sector}-byte sector")));
        }
        if bs_max / sector > u64::from(u32::MAX) {
            return Err(option_error(bs_name, "requests must be under 2^32 sectors"));
        }
        let align = spec.blockalign.map_or(bs_min, |a| a.resolve(capacity_bytes));
        if align == 0 || align % sector != 0 {
            return Err(option_error("blockalign", format!("must be a non-zero multiple of the {sector}-byte sector")));
        }
        let region_start = spec.offset.resolve(capacity_bytes);
        if region_start % sector != 0 || region_start >= capacity_bytes {
            return Err(option_error("offset", "must be sector-aligned and inside the device"));
        }
        let region_len = spec.size.map_or(capacity_bytes - region_start, |s| s.resolve(capacity_bytes));
        let region_end = region_start.checked_add(region_len).filter(|&e| e <= capacity_bytes).ok_or_else(|| {
            option_error("size", format!("offset + size exceeds the logical capacity of {capacity_bytes} bytes"))
        })?;
        if region_len < bs_max {
            return Err(option_error(
                "size",
                format!("the region of {region_len} bytes is smaller than the largest request ({bs_max} bytes)"),
            ));
        }
        // The usable region ends at the last aligned position a request can start at.
        let region_end = region_start + (region_end - region_start) / align * align;
        if region_end - region_start < bs_max {
            return Err(option_error(
                "blockalign",
                format!(
                    "{align}-byte alignment leaves {} bytes of the {region_len}-byte region, \
                     less than the largest request ({bs_max} bytes)",
                    region_end - region_start
                ),
            ));
        }
        if spec.rwmixread > 100 {
            return Err(option_error("rwmixread", "must be within 0..=100"));
        }
        if !(0.0..=100.0).contains(&spec.trim_percent) {
            return Err(option_error("trim_percent", "must be within 0..=100"));
        }
        if spec.numjobs == 0 || spec.numjobs > 4096 {
            return Err(option_error("numjobs", "must be within 1..=4096"));
        }
        if spec.iodepth == 0 || spec.iodepth > 65535 {
            return Err(option_error("iodepth", "must be within 1..=65535"));
        }
        let limit_is_writes = spec.write_size.is_some();
        check_stop_is_reachable(spec, limit_is_writes)?;
        let limit_bytes = match spec.write_size {
            Some(w) => w.resolve(capacity_bytes),
            None => spec.io_size.map_or(region_end - region_start, |s| s.resolve(capacity_bytes)),
        };
        if limit_bytes == 0 {
            return Err(option_error(if limit_is_writes { "write_size" } else { "io_size" }, "must be positive"));
        }
        let positions = (region_end - region_start - bs_min) / align + 1;
        let sampler = PositionSampler::new(spec.random_distribution, positions)
            .map_err(|e| option_error("random_distribution", e))?;
        let params = Params {
            rw: spec.rw,
            sector_bytes: sector,
            bs_min,
            bs_steps: bs_max / bs_min,
            align,
            region_start,
            region_end,
            limit_bytes,
            limit_is_writes,
            rwmixread: spec.rwmixread,
            fsync: spec.fsync,
            trim_percent: spec.trim_percent,
        };
        let jobs = (0..spec.numjobs)
            .map(|id| Job {
                id,
                rng: rng_for(seed, &format!("workload.job{id}")),
                cursor: region_start,
                counted_bytes: 0,
                writes_since_flush: 0,
                flush_due: false,
                finished: false,
            })
            .collect();
        Ok(SyntheticWorkload { params, spec: spec.clone(), sampler, jobs, next_job: 0 })
    }

    pub fn spec(&self) -> &SyntheticSpec {
        &self.spec
    }

    fn job_next(p: &Params, sampler: &PositionSampler, job: &mut Job) -> Option<HostRequest> {
        if job.flush_due {
            job.flush_due = false;
            return Some(HostRequest { op: HostOp::Flush, lba: 0, sectors: 0, arrival_ns: 0, job: job.id });
        }
        if job.finished {
            return None;
        }
        let op = Self::pick_op(p, &mut job.rng);
        let size = if p.bs_steps > 1 { p.bs_min * job.rng.random_range(1..=p.bs_steps) } else { p.bs_min };
        let offset = if p.rw.is_random() {
            let pos = p.region_start + sampler.sample(&mut job.rng) * p.align;
            if pos + size > p.region_end {
                p.region_start + (p.region_end - size - p.region_start) / p.align * p.align
            } else {
                pos
            }
        } else {
            if job.cursor + size > p.region_end {
                job.cursor = p.region_start;
            }
            let pos = job.cursor;
            job.cursor += size;
            pos
        };
        if op == HostOp::Write {
            job.writes_since_flush += 1;
            if p.fsync > 0 && job.writes_since_flush >= p.fsync {
                job.writes_since_flush = 0;
                job.flush_due = true;
            }
        }
        // Writes count towards either limit, reads towards io_size, and
        // trims only in the trim modes (a trim share rides along for free).
        let counted = match op {
            HostOp::Write => true,
            HostOp::Read => !p.limit_is_writes,
            HostOp::Trim => matches!(p.rw, RwMode::Trim | RwMode::RandTrim),
            HostOp::Flush => false,
        };
        if counted {
            job.counted_bytes += size;
        }
        if job.counted_bytes >= p.limit_bytes {
            job.finished = true;
        }
        Some(HostRequest {
            op,
            lba: offset / p.sector_bytes,
            sectors: (size / p.sector_bytes) as u32,
            arrival_ns: 0,
            job: job.id,
        })
    }

    fn pick_op(p: &Params, rng: &mut Rng) -> HostOp {
        if p.trim_percent > 0.0 && rng.random::<f64>() * 100.0 < p.trim_percent {
            return HostOp::Trim;
        }
        match p.rw {
            RwMode::Read | RwMode::RandRead => HostOp::Read,
            RwMode::Write | RwMode::RandWrite => HostOp::Write,
            RwMode::Trim | RwMode::RandTrim => HostOp::Trim,
            RwMode::Rw | RwMode::RandRw => {
                if rng.random_range(0..100) < p.rwmixread {
                    HostOp::Read
                } else {
                    HostOp::Write
                }
            }
        }
    }
}

impl Workload for SyntheticWorkload {
    fn next_request(&mut self) -> Result<Option<HostRequest>, WorkloadError> {
        let n = self.jobs.len();
        for _ in 0..n {
            let j = self.next_job;
            self.next_job = (self.next_job + 1) % n;
            if let Some(r) = Self::job_next(&self.params, &self.sampler, &mut self.jobs[j]) {
                return Ok(Some(r));
            }
        }
        Ok(None)
    }

    fn progress(&self) -> WorkloadProgress {
        WorkloadProgress {
            done: self.jobs.iter().map(|j| j.counted_bytes.min(self.params.limit_bytes)).sum(),
            total: Some(self.params.limit_bytes * self.jobs.len() as u64),
        }
    }

    fn alignment_sectors(&self) -> u32 {
        let p = &self.params;
        let mut g = gcd(gcd(p.bs_min, p.align), p.region_start.max(1));
        if p.region_start == 0 {
            g = gcd(p.bs_min, p.align);
        }
        let sectors = (g / p.sector_bytes).max(1);
        1 << sectors.trailing_zeros().min(16)
    }

    fn describe(&self) -> String {
        let s = &self.spec;
        let sizes = match &s.bsrange {
            Some(r) => format!("bsrange={r}"),
            None => format!("bs={}", s.bs),
        };
        let limit = match (s.write_size, s.io_size) {
            (Some(w), _) => format!(" write_size={w}"),
            (None, Some(i)) => format!(" io_size={i}"),
            _ => String::new(),
        };
        let mut d = format!("rw={} {sizes}{limit}", s.rw.name());
        if s.rw.is_random() {
            d += &format!(" random_distribution={}", s.random_distribution);
        }
        if matches!(s.rw, RwMode::Rw | RwMode::RandRw) {
            d += &format!(" rwmixread={}", s.rwmixread);
        }
        if s.fsync > 0 {
            d += &format!(" fsync={}", s.fsync);
        }
        if s.trim_percent > 0.0 {
            d += &format!(" trim_percent={}", s.trim_percent);
        }
        if s.iodepth > 1 {
            d += &format!(" iodepth={}", s.iodepth);
        }
        if s.numjobs > 1 {
            d += &format!(" numjobs={}", s.numjobs);
        }
        d
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(f: impl FnOnce(&mut SyntheticSpec)) -> SyntheticSpec {
        let mut s = SyntheticSpec::default();
        f(&mut s);
        s
    }

    fn collect(w: &mut SyntheticWorkload) -> Vec<HostRequest> {
        let mut v = Vec::new();
        while let Some(r) = w.next_request().unwrap() {
            v.push(r);
        }
        v
    }

    #[test]
    fn sequential_writes_cover_the_region_in_order_and_stop_at_io_size() {
        let s = spec(|s| {
            s.rw = RwMode::Write;
            s.bs = SizeSpec::Bytes(8192);
        });
        let mut w = SyntheticWorkload::new(&s, 64 * 1024, 512, 1).unwrap();
        let reqs = collect(&mut w);
        assert_eq!(reqs.len(), 8);
        for (i, r) in reqs.iter().enumerate() {
            assert_eq!((r.op, r.lba, r.sectors), (HostOp::Write, i as u64 * 16, 16));
        }
        assert_eq!(w.alignment_sectors(), 16);
    }

    #[test]
    fn bsrange_sizes_are_multiples_of_the_minimum_and_offsets_aligned() {
        let s = spec(|s| {
            s.bsrange = Some("8k-64k".into());
            s.write_size = Some(SizeSpec::TimesCapacity(2.0));
        });
        let cap = 1 << 20;
        let mut w = SyntheticWorkload::new(&s, cap, 512, 3).unwrap();
        let reqs = collect(&mut w);
        let written: u64 = reqs.iter().map(|r| u64::from(r.sectors) * 512).sum();
        assert!(written >= 2 * cap && written < 2 * cap + 65536);
        let mut sizes = std::collections::BTreeSet::new();
        for r in &reqs {
            assert_eq!(r.sectors % 16, 0);
            assert_eq!(r.lba % 16, 0);
            assert!((r.lba + u64::from(r.sectors)) * 512 <= cap);
            sizes.insert(r.sectors);
        }
        assert_eq!(sizes.len(), 8, "all eight sizes 8k..64k appear");
    }

    #[test]
    fn rwmixread_fsync_and_trims_appear_in_proportion() {
        let s = spec(|s| {
            s.rw = RwMode::RandRw;
            s.rwmixread = 20;
            s.fsync = 10;
            s.trim_percent = 5.0;
            s.io_size = Some(SizeSpec::Bytes(4096 * 20_000));
        });
        let mut w = SyntheticWorkload::new(&s, 1 << 26, 512, 5).unwrap();
        let reqs = collect(&mut w);
        let count = |op| reqs.iter().filter(|r| r.op == op).count() as f64;
        let (r, wr, t, f) = (count(HostOp::Read), count(HostOp::Write), count(HostOp::Trim), count(HostOp::Flush));
        let io = r + wr + t;
        assert!((r / io - 0.19).abs() < 0.02, "reads {}", r / io);
        assert!((t / io - 0.05).abs() < 0.01, "trims {}", t / io);
        assert!((f - (wr / 10.0).floor()).abs() <= 1.0);
    }

    #[test]
    fn same_seed_same_requests() {
        let s = spec(|s| s.random_distribution = Distribution::Zipf(1.1));
        let a = collect(&mut SyntheticWorkload::new(&s, 1 << 22, 512, 9).unwrap());
        let b = collect(&mut SyntheticWorkload::new(&s, 1 << 22, 512, 9).unwrap());
        let c = collect(&mut SyntheticWorkload::new(&s, 1 << 22, 512, 10).unwrap());
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn bad_options_name_the_option() {
        let bad = |f: fn(&mut SyntheticSpec), option: &str| {
            let e = SyntheticWorkload::new(&spec(f), 1 << 20, 512, 1).err().expect("rejected");
            assert!(e.contains(option), "{e}");
        };
        bad(|s| s.bs = SizeSpec::Bytes(1000), "`bs`");
        bad(|s| s.size = Some(SizeSpec::Bytes(1 << 21)), "`size`");
        bad(|s| s.rwmixread = 101, "`rwmixread`");
        bad(
            |s| {
                s.rw = RwMode::RandRead;
                s.write_size = Some(SizeSpec::Bytes(4096));
            },
            "`write_size`",
        );
        bad(|s| s.bsrange = Some("64k-8k".into()), "`bsrange`");
    }

    /// Each combination that could never reach its stop condition is an
    /// error naming every option involved (before, these ran forever).
    #[test]
    fn a_stop_condition_that_can_never_be_reached_is_an_error() {
        let rejected = |f: fn(&mut SyntheticSpec), options: &[&str]| {
            let e = SyntheticWorkload::new(&spec(f), 1 << 20, 512, 1).err().expect("rejected");
            for o in options {
                assert!(e.contains(&format!("`{o}`")), "{e} should name {o}");
            }
        };
        rejected(
            |s| {
                s.write_size = Some(SizeSpec::TimesCapacity(4.0));
                s.rw = RwMode::RandRw;
                s.rwmixread = 100;
            },
            &["write_size", "rwmixread"],
        );
        rejected(
            |s| {
                s.write_size = Some(SizeSpec::TimesCapacity(4.0));
                s.trim_percent = 100.0;
            },
            &["write_size", "trim_percent"],
        );
        rejected(|s| s.trim_percent = 100.0, &["io_size", "trim_percent"]);
        rejected(
            |s| {
                s.rw = RwMode::Read;
                s.write_size = Some(SizeSpec::Bytes(4096));
            },
            &["write_size"],
        );
        rejected(|s| s.io_size = Some(SizeSpec::Bytes(0)), &["io_size"]);
        rejected(|s| s.size = Some(SizeSpec::Bytes(2048)), &["size"]);
        rejected(|s| s.blockalign = Some(SizeSpec::Bytes(1 << 21)), &["blockalign"]);
    }

    /// The neighbours of the rejected combinations are well defined and end.
    #[test]
    fn combinations_next_to_the_rejected_ones_end() {
        let ends = |f: fn(&mut SyntheticSpec)| {
            let mut w = SyntheticWorkload::new(&spec(f), 1 << 20, 512, 1).expect("accepted");
            let reqs = collect(&mut w);
            assert!(!reqs.is_empty());
            reqs
        };
        // rwmixread is ignored outside rw/randrw, as in fio.
        let r = ends(|s| {
            s.rw = RwMode::Write;
            s.rwmixread = 100;
            s.write_size = Some(SizeSpec::Bytes(1 << 16));
        });
        assert!(r.iter().all(|r| r.op == HostOp::Write));
        // Trims count towards io_size in the trim modes.
        let r = ends(|s| {
            s.rw = RwMode::RandTrim;
            s.trim_percent = 100.0;
        });
        assert!(r.iter().all(|r| r.op == HostOp::Trim));
        // Reads alone end at io_size; a mixed job at rwmixread = 100 does too.
        ends(|s| s.rw = RwMode::RandRead);
        ends(|s| {
            s.rw = RwMode::RandRw;
            s.rwmixread = 100;
        });
        // A trim share below 100 % still writes, so write_size is reached.
        ends(|s| {
            s.trim_percent = 99.0;
            s.write_size = Some(SizeSpec::Bytes(1 << 14));
        });
    }

    #[test]
    fn iodepth_and_numjobs_are_echoed() {
        let s = spec(|s| {
            s.iodepth = 16;
            s.numjobs = 2;
        });
        let d = SyntheticWorkload::new(&s, 1 << 20, 512, 1).unwrap().describe();
        assert!(d.contains("iodepth=16") && d.contains("numjobs=2"), "{d}");
    }
}
