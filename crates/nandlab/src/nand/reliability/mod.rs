//! Media reliability: raw bit errors, ECC and read retry, failing programs
//! and erases, grown bad blocks, endurance. Off unless a device file's
//! `[reliability]` table or `--reliability preset:NAME` turns it on; off,
//! the flash controller holds `None` and every operation is as before.
//!
//! The parts, one file each:
//! - [`rber`]: the raw bit error rate of a page read, from its block's P/E
//!   cycles, its retention time, the reads of its block since the erase
//!   (read disturb) and its page type;
//! - [`ecc`]: bit errors per 1 KiB codeword drawn from that RBER, BCH or
//!   LDPC correction, read retry;
//! - [`failures`]: program and erase failures (wear-dependent, at exact
//!   addresses, worn-out blocks);
//! - [`presets`]: SLC, MLC, TLC and QLC parameters with their sources.
//!
//! # What the controller does with it ([`Reliability`])
//!
//! - **Host-data reads** (`read`, multi-plane reads) are decoded: the RBER
//!   of the page, then ECC with retries. An uncorrectable read transfers
//!   the raw, undecodable data (the buffer's sectors become corrupt) and
//!   fails with [`FlashError::Uncorrectable`]; the data the page held is
//!   recorded as *lost to the media*, which is how the oracle tells a
//!   genuine media loss from an FTL's bug (see `run/host_side.rs`).
//!   Metadata reads (`read_meta`, OOB) are not decoded: firmware keeps its
//!   metadata in pSLC or under a stronger code; copybacks move the raw
//!   page without a decode (their errors are left for the second
//!   session, with refresh).
//! - **Host-data programs** (cause `Host`) may fail: the page is left
//!   unreadable (its OOB as written, like a torn program) and the block
//!   becomes a grown bad block. GC copies and metadata programs do not
//!   fail in this first slice (their handling in every FTL is the issue's
//!   second session); they are refused on a grown bad block all the same. The NAND refuses programs and erases of a
//!   grown bad block (`used_bad_block`) but still reads it, so the
//!   firmware can copy its other pages out.
//! - **Erases** may fail (always, past the worn-out P/E count): the block
//!   keeps its content and becomes a grown bad block.
//! - A grown bad block carries the bad-block marker a retiring firmware
//!   writes, so a mount's bad-block scan finds it as it finds a factory bad
//!   one (`Flash::is_factory_bad`).
//! - **Time**: a simulated clock advances by `seconds_per_request` per host
//!   request; a block's retention time runs from its first program after
//!   its erase (per block, not per page: the pages of a block are written
//!   within a short time of each other next to retention scales of days).
//!
//! Every draw comes from one generator seeded from the run seed
//! (`nand.reliability`), in operation order: a run is reproducible.

pub mod ecc;
pub mod failures;
pub(crate) mod journal;
pub mod presets;
pub mod rber;

use crate::nand::payload::{Run, RunKind};
use crate::nand::{BlockAddr, Geometry, PageAddr};
use crate::seed::{rng_for, Rng};
use ecc::{EccKind, EccModel};
use failures::{FailAt, FailureModel};
use rand::RngExt;
use rber::{PageHistory, RberModel};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// The resolved settings of the reliability model.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReliabilitySettings {
    /// The preset the settings start from (slc, mlc, tlc, qlc).
    pub preset: String,
    pub rber: RberModel,
    pub ecc: EccModel,
    pub failures: FailureModel,
    /// Simulated seconds per host request (retention time).
    pub seconds_per_request: f64,
    /// Exact failures to inject.
    pub fail_at: Vec<FailAt>,
}

/// The `[reliability]` table as written (and the `--reliability` option's
/// `key=value` items): a preset and overrides of any of its parameters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReliabilityTable {
    /// slc, mlc, tlc or qlc; default: the geometry's cell type.
    pub preset: Option<String>,
    pub floor: Option<f64>,
    pub wear_coefficient: Option<f64>,
    pub wear_exponent: Option<f64>,
    pub retention_coefficient: Option<f64>,
    pub retention_exponent: Option<f64>,
    pub disturb_per_read: Option<f64>,
    pub endurance_pe: Option<u32>,
    pub page_type_multiplier: Option<[f64; 4]>,
    pub ecc: Option<EccKind>,
    pub correctable_bits: Option<u32>,
    pub soft_correctable_bits: Option<u32>,
    pub read_retries: Option<u32>,
    pub retry_rber_factor: Option<f64>,
    /// Decode times (`perf`): BCH per attempt, LDPC per iteration, µs.
    pub bch_decode_us: Option<f64>,
    pub ldpc_iteration_us: Option<f64>,
    pub ldpc_max_iterations: Option<u32>,
    pub program_fail_probability: Option<f64>,
    pub erase_fail_probability: Option<f64>,
    pub worn_out_factor: Option<f64>,
    pub seconds_per_request: Option<f64>,
    /// Exact failures: `["program@block=17,page=3", "erase@block=9"]`.
    pub fail: Option<Vec<String>>,
}

impl ReliabilityTable {
    /// Parse the `--reliability` option: comma-separated `preset:NAME`
    /// and `KEY=VALUE` items (the keys of the `[reliability]` table).
    pub fn parse_option(spec: &str) -> Result<ReliabilityTable, String> {
        let mut table = toml::Table::new();
        for item in spec.split(',').map(str::trim) {
            if item.is_empty() {
                continue;
            }
            let (key, value) = if let Some(name) = item.strip_prefix("preset:") {
                ("preset", toml::Value::String(name.trim().to_string()))
            } else {
                let (k, v) =
                    item.split_once('=').ok_or_else(|| format!("`{item}`: expected preset:NAME or KEY=VALUE"))?;
                let v = v.trim();
                let value = v
                    .parse::<i64>()
                    .map(toml::Value::Integer)
                    .or_else(|_| v.parse::<f64>().map(toml::Value::Float))
                    .unwrap_or_else(|_| toml::Value::String(v.to_string()));
                (k.trim(), value)
            };
            if key == "fail" || key == "page_type_multiplier" {
                return Err(format!("`{key}` is set in a [reliability] table (use --fail for exact failures)"));
            }
            if table.insert(key.to_string(), value).is_some() {
                return Err(format!("`{key}` given twice"));
            }
        }
        table.try_into().map_err(|e: toml::de::Error| e.message().trim().to_string())
    }

    /// This table with `over`'s keys replacing its own.
    pub fn merged(&self, over: &ReliabilityTable) -> ReliabilityTable {
        macro_rules! pick {
            ($($f:ident),*) => { ReliabilityTable { $($f: over.$f.clone().or_else(|| self.$f.clone())),* } };
        }
        pick!(
            preset,
            floor,
            wear_coefficient,
            wear_exponent,
            retention_coefficient,
            retention_exponent,
            disturb_per_read,
            endurance_pe,
            page_type_multiplier,
            ecc,
            correctable_bits,
            soft_correctable_bits,
            read_retries,
            retry_rber_factor,
            bch_decode_us,
            ldpc_iteration_us,
            ldpc_max_iterations,
            program_fail_probability,
            erase_fail_probability,
            worn_out_factor,
            seconds_per_request,
            fail
        )
    }

    /// Resolve against the preset (default: `default_preset`) and check
    /// every value. Errors are (key, reason).
    pub fn resolve(&self, default_preset: &str, geometry: &Geometry) -> Result<ReliabilitySettings, (String, String)> {
        let e = |k: &str, r: String| (k.to_string(), r);
        let name = self.preset.as_deref().unwrap_or(default_preset);
        let mut s = presets::preset(name)
            .ok_or_else(|| e("preset", format!("unknown preset `{name}` (one of {})", presets::PRESETS.join(", "))))?;
        let unit = |k: &str, v: Option<f64>, lo: f64, hi: f64, into: &mut f64| -> Result<(), (String, String)> {
            if let Some(v) = v {
                if !(lo..=hi).contains(&v) {
                    return Err(e(k, format!("must be within {lo}..={hi}, got {v}")));
                }
                *into = v;
            }
            Ok(())
        };
        unit("floor", self.floor, 0.0, 0.5, &mut s.rber.floor)?;
        unit("wear_coefficient", self.wear_coefficient, 0.0, 1.0, &mut s.rber.wear_coefficient)?;
        unit("wear_exponent", self.wear_exponent, 0.0, 4.0, &mut s.rber.wear_exponent)?;
        unit("retention_coefficient", self.retention_coefficient, 0.0, 1.0, &mut s.rber.retention_coefficient)?;
        unit("retention_exponent", self.retention_exponent, 0.0, 2.0, &mut s.rber.retention_exponent)?;
        unit("disturb_per_read", self.disturb_per_read, 0.0, 1.0, &mut s.rber.disturb_per_read)?;
        unit("retry_rber_factor", self.retry_rber_factor, 1e-6, 1.0, &mut s.ecc.retry_rber_factor)?;
        // At most 1 ms: an attempt of at most 1000 iterations then stays within a second.
        unit("bch_decode_us", self.bch_decode_us, 0.0, 1e3, &mut s.ecc.bch_decode_us)?;
        unit("ldpc_iteration_us", self.ldpc_iteration_us, 0.0, 1e3, &mut s.ecc.ldpc_iteration_us)?;
        if let Some(n) = self.ldpc_max_iterations {
            if !(1..=1000).contains(&n) {
                return Err(e("ldpc_max_iterations", format!("must be within 1..=1000, got {n}")));
            }
            s.ecc.ldpc_max_iterations = n;
        }
        unit(
            "program_fail_probability",
            self.program_fail_probability,
            0.0,
            1.0,
            &mut s.failures.program_fail_probability,
        )?;
        unit("erase_fail_probability", self.erase_fail_probability, 0.0, 1.0, &mut s.failures.erase_fail_probability)?;
        unit("worn_out_factor", self.worn_out_factor, 1.0, 100.0, &mut s.failures.worn_out_factor)?;
        unit("seconds_per_request", self.seconds_per_request, 0.0, 1e9, &mut s.seconds_per_request)?;
        if let Some(m) = self.page_type_multiplier {
            if let Some(v) = m.iter().find(|v| !(0.0..=100.0).contains(*v)) {
                return Err(e("page_type_multiplier", format!("each must be within 0..=100, got {v}")));
            }
            s.rber.page_type_multiplier = m;
        }
        if let Some(n) = self.endurance_pe {
            if n == 0 {
                return Err(e("endurance_pe", "must be at least 1".into()));
            }
            s.rber.endurance_pe = n;
        }
        if let Some(k) = self.ecc {
            s.ecc.kind = k;
        }
        let bits = |k: &str, v: Option<u32>, into: &mut u32| -> Result<(), (String, String)> {
            if let Some(v) = v {
                if u64::from(v) > ecc::CODEWORD_BITS {
                    return Err(e(k, format!("at most {} bits per 1 KiB codeword, got {v}", ecc::CODEWORD_BITS)));
                }
                *into = v;
            }
            Ok(())
        };
        bits("correctable_bits", self.correctable_bits, &mut s.ecc.correctable_bits)?;
        bits("soft_correctable_bits", self.soft_correctable_bits, &mut s.ecc.soft_correctable_bits)?;
        if let Some(r) = self.read_retries {
            if r > 64 {
                return Err(e("read_retries", format!("at most 64, got {r}")));
            }
            s.ecc.read_retries = r;
        }
        for f in self.fail.iter().flatten() {
            let at = FailAt::parse(f).map_err(|r| e("fail", r))?;
            at.check(geometry.blocks(), geometry.pages_per_block()).map_err(|r| e("fail", r))?;
            s.fail_at.push(at);
        }
        Ok(s)
    }
}

/// The preset of a geometry's cell type.
pub fn default_preset(geometry: &Geometry) -> &'static str {
    presets::PRESETS[(geometry.cell_type().bits_per_cell() as usize).clamp(1, 4) - 1]
}

/// What the model did over a run (the report's reliability section).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ReliabilityStats {
    pub preset: String,
    /// Host-data page reads decoded.
    pub reads_decoded: u64,
    /// Reads that needed at least one retry, and the retries in all.
    pub reads_retried: u64,
    pub read_retries: u64,
    /// Bit errors the ECC corrected.
    pub corrected_bits: u64,
    /// Reads no retry decoded.
    pub uncorrectable_reads: u64,
    pub program_failures: u64,
    pub erase_failures: u64,
    /// Erases of blocks past the worn-out P/E count (counted in `erase_failures` too).
    pub worn_out_erases: u64,
    pub grown_bad_blocks: u64,
    /// Host reads that failed with a media error (data truly lost).
    pub host_read_errors: u64,
    /// The highest RBER a read saw.
    pub max_rber: f64,
    /// The simulated clock at the end, in days.
    pub clock_days: f64,
}

/// Why a read of host data failed, as the oracle needs to know.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum LossCause {
    /// Lost to the media: an uncorrectable read of it.
    Media,
    /// Its program failed (the FTL was told).
    ProgramFailure,
}

/// The reliability model's state (see the module docs).
pub struct Reliability {
    settings: ReliabilitySettings,
    rng: Rng,
    pages_per_block: u32,
    codeword_sectors: u32,
    sector_bytes: u32,
    page_types: Vec<crate::nand::PageType>,
    /// The page types a block has (at most four): what a prediction ranges over.
    distinct_page_types: Vec<crate::nand::PageType>,
    now_s: f64,
    /// Per block: clock at its first program since its erase (NaN: erased).
    programmed_at_s: Vec<f64>,
    reads_since_erase: Vec<u32>,
    grown_bad: Vec<bool>,
    /// Exact failures not injected yet.
    pending: Vec<FailAt>,
    stats: ReliabilityStats,
    /// Versions (LBA, write id) lost to the media or to a failed program.
    lost: HashSet<(u32, u32)>,
    failed_program: HashSet<(u32, u32)>,
    /// An uncorrectable host-data read happened in the current request.
    uncorrectable_in_request: bool,
    /// The decodes of the flash operation in progress (the worst page of
    /// a multi-plane read): what its timing charges.
    op_decode: OpDecode,
    /// The undo journal of all of it (crash tests; see [`journal`]).
    journal: journal::ModelJournal,
}

/// What the decodes of one flash read cost: the retries after the first
/// attempt and the ECC decode time of every attempt (see [`ecc`]).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct OpDecode {
    pub retries: u32,
    pub decode_ns: u64,
}

impl Reliability {
    pub fn new(settings: ReliabilitySettings, geometry: &Geometry, seed: u64) -> Reliability {
        let blocks = geometry.blocks() as usize;
        let sector_bytes = geometry.sector_size_bytes();
        Reliability {
            rng: rng_for(seed, "nand.reliability"),
            pages_per_block: geometry.pages_per_block(),
            codeword_sectors: (1024 / sector_bytes).max(1),
            sector_bytes,
            page_types: (0..geometry.pages_per_block()).map(|p| geometry.page_type(p)).collect(),
            distinct_page_types: {
                let mut t: Vec<_> = (0..geometry.pages_per_block()).map(|p| geometry.page_type(p)).collect();
                t.sort_by_key(|t| *t as u8);
                t.dedup();
                t
            },
            now_s: 0.0,
            programmed_at_s: vec![f64::NAN; blocks],
            reads_since_erase: vec![0; blocks],
            grown_bad: vec![false; blocks],
            pending: settings.fail_at.clone(),
            stats: ReliabilityStats { preset: settings.preset.clone(), ..Default::default() },
            lost: HashSet::new(),
            failed_program: HashSet::new(),
            uncorrectable_in_request: false,
            op_decode: OpDecode::default(),
            journal: journal::ModelJournal::default(),
            settings,
        }
    }

    pub fn settings(&self) -> &ReliabilitySettings {
        &self.settings
    }

    /// A host request (`host`) or background work starts: the clock
    /// advances for a host request.
    pub fn start_request(&mut self, host: bool) {
        self.journal_run_state();
        if host {
            self.now_s += self.settings.seconds_per_request;
        }
        self.uncorrectable_in_request = false;
    }

    pub fn stats(&self) -> ReliabilityStats {
        ReliabilityStats { clock_days: self.now_s / 86_400.0, ..self.stats.clone() }
    }

    pub fn count_host_read_error(&mut self) {
        self.journal_run_state();
        self.stats.host_read_errors += 1;
    }

    pub fn is_grown_bad(&self, block: BlockAddr) -> bool {
        self.grown_bad.get(block.0 as usize).copied().unwrap_or(false)
    }

    /// Whether an uncorrectable host-data read happened in this request.
    pub fn uncorrectable_in_request(&self) -> bool {
        self.uncorrectable_in_request
    }

    /// The RBER the next read of `block` (with `pe_cycles` erases) would
    /// see on its most error-prone page type, and the first decode's limit
    /// (see [`crate::flash::Flash::predicted_rber`]).
    pub fn predicted_rber(&self, block: BlockAddr, pe_cycles: u32) -> crate::flash::PredictedRber {
        let b = block.0 as usize;
        let programmed = self.programmed_at_s[b];
        let retention_s = if programmed.is_nan() { 0.0 } else { self.now_s - programmed };
        let m = &self.settings.rber;
        let rber = self
            .distinct_page_types
            .iter()
            .map(|&page_type| {
                m.rber(&PageHistory {
                    pe_cycles,
                    retention_days: retention_s / 86_400.0,
                    reads_since_erase: self.reads_since_erase[b].saturating_add(1),
                    page_type,
                })
            })
            .fold(0.0, f64::max);
        let correctable_rber = f64::from(self.settings.ecc.correctable_bits) / ecc::CODEWORD_BITS as f64;
        crate::flash::PredictedRber { rber, correctable_rber }
    }

    /// The decodes of the operation just done (and forget them).
    pub fn take_op_decode(&mut self) -> OpDecode {
        self.journal_run_state();
        std::mem::take(&mut self.op_decode)
    }

    /// Whether version `write` of `lba` was lost, and how.
    pub fn loss_of(&self, lba: u32, write: u32) -> Option<LossCause> {
        if self.lost.contains(&(lba, write)) {
            Some(LossCause::Media)
        } else if self.failed_program.contains(&(lba, write)) {
            Some(LossCause::ProgramFailure)
        } else {
            None
        }
    }

    /// (The caller journaled the block and the run state.)
    fn mark_grown_bad(&mut self, block: usize) {
        if !self.grown_bad[block] {
            self.journal_grew_bad();
            self.grown_bad[block] = true;
            self.stats.grown_bad_blocks += 1;
        }
    }

    fn take_exact(&mut self, at: FailAt) -> bool {
        match self.pending.iter().position(|p| *p == at) {
            Some(i) => {
                self.pending.swap_remove(i);
                true
            }
            None => false,
        }
    }

    /// Decode a read of sectors `first .. first+count` of `page`, whose
    /// block has had `pe_cycles` erases; `runs` is what the page holds
    /// there. Returns false if the read is uncorrectable (its data is
    /// recorded as lost).
    pub fn decode_read(&mut self, page: PageAddr, pe_cycles: u32, first: u32, count: u32, runs: &[Run]) -> bool {
        let block = (page.0 / u64::from(self.pages_per_block)) as usize;
        let in_block = (page.0 % u64::from(self.pages_per_block)) as usize;
        self.journal_run_state();
        self.journal_block(block);
        self.reads_since_erase[block] = self.reads_since_erase[block].saturating_add(1);
        let programmed = self.programmed_at_s[block];
        let retention_s = if programmed.is_nan() { 0.0 } else { self.now_s - programmed };
        let history = PageHistory {
            pe_cycles,
            retention_days: retention_s / 86_400.0,
            reads_since_erase: self.reads_since_erase[block],
            page_type: self.page_types[in_block],
        };
        let rber = self.settings.rber.rber(&history);
        let cw = self.codeword_sectors;
        let codewords = (first + count).div_ceil(cw) - first / cw;
        let d = self.settings.ecc.decode(&mut self.rng, rber, codewords);
        let o = &mut self.op_decode;
        o.retries = o.retries.max(d.retries);
        o.decode_ns = o.decode_ns.max(d.decode_ns);
        let s = &mut self.stats;
        s.reads_decoded += 1;
        s.max_rber = s.max_rber.max(rber);
        if d.retries > 0 {
            s.reads_retried += 1;
            s.read_retries += u64::from(d.retries);
        }
        s.corrected_bits += d.corrected_bits;
        if d.uncorrectable {
            s.uncorrectable_reads += 1;
            self.uncorrectable_in_request = true;
            self.record_versions(false, runs);
        }
        !d.uncorrectable
    }

    /// After a program of `page` (block with `pe_cycles` erases): whether
    /// it failed.
    pub fn program_fails(&mut self, page: PageAddr, pe_cycles: u32) -> bool {
        let block = page.0 / u64::from(self.pages_per_block);
        self.journal_run_state();
        self.journal_block(block as usize);
        if self.programmed_at_s[block as usize].is_nan() {
            self.programmed_at_s[block as usize] = self.now_s;
        }
        let at = FailAt::Program { block, page: (page.0 % u64::from(self.pages_per_block)) as u32 };
        let p = FailureModel::probability(
            self.settings.failures.program_fail_probability,
            pe_cycles,
            self.settings.rber.endurance_pe,
        );
        let fails = self.take_exact(at) || (p > 0.0 && self.rng.random::<f64>() < p);
        if fails {
            self.stats.program_failures += 1;
            self.mark_grown_bad(block as usize);
        }
        fails
    }

    /// A failed program of host data: `runs` are lost with it.
    pub fn record_failed_program(&mut self, runs: &[Run]) {
        self.record_versions(true, runs);
    }

    /// Before an erase of `block` with `pe_cycles` erases (not at format):
    /// whether it fails. A successful erase resets the block's history.
    pub fn erase_fails(&mut self, block: BlockAddr, pe_cycles: u32, format: bool) -> bool {
        let b = block.0 as usize;
        self.journal_run_state();
        self.journal_block(b);
        let f = &self.settings.failures;
        let endurance = self.settings.rber.endurance_pe;
        let worn = !format && f.worn_out(pe_cycles, endurance);
        let p = FailureModel::probability(f.erase_fail_probability, pe_cycles, endurance);
        let fails =
            !format && (worn || self.take_exact(FailAt::Erase { block: block.0 }) || self.rng.random::<f64>() < p);
        if fails {
            self.stats.erase_failures += 1;
            self.stats.worn_out_erases += u64::from(worn);
            self.mark_grown_bad(b);
        } else {
            self.programmed_at_s[b] = f64::NAN;
            self.reads_since_erase[b] = 0;
        }
        fails
    }

    /// Bytes of a sector (the buffer of an uncorrectable read).
    pub fn sector_bytes(&self) -> u32 {
        self.sector_bytes
    }
}

impl Reliability {
    /// Record the (LBA, write id) of every data sector of `runs` in the
    /// media losses or (`failed_program`) the failed programs' losses.
    fn record_versions(&mut self, failed_program: bool, runs: &[Run]) {
        for r in runs.iter().filter(|r| r.kind == RunKind::Data) {
            for k in 0..r.len {
                let version = (r.lba.wrapping_add(k), r.write);
                self.journal_loss(failed_program, version);
                self.loss_set_mut(failed_program).insert(version);
            }
        }
    }

    fn loss_set(&self, failed_program: bool) -> &HashSet<(u32, u32)> {
        if failed_program {
            &self.failed_program
        } else {
            &self.lost
        }
    }

    fn loss_set_mut(&mut self, failed_program: bool) -> &mut HashSet<(u32, u32)> {
        if failed_program {
            &mut self.failed_program
        } else {
            &mut self.lost
        }
    }

    /// Whether some version of `lba` was lost to the media (an
    /// uncorrectable read of it): what a read error after a power cut may
    /// legitimately show, whichever version recovery chose.
    pub fn lba_lost_to_media(&self, lba: u32) -> bool {
        self.lost.iter().any(|&(l, _)| l == lba)
    }
}

#[cfg(test)]
mod tests;
