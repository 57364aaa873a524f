//! Rules that nandlab checks, their severities, and the log of violations.
//!
//! Two checkers feed one log: the virtual NAND checks the rules of flash on
//! every operation (a [`Rule`] of the `nand` group), and the oracle checks
//! every sector a host read returns (the `oracle` group). Each violation
//! records the rule, the flash operation index, the host request being served
//! and the address, so a finding can be replayed exactly.
//!
//! NAND rules have a configurable [`Severity`] because some FTLs break a
//! rule on purpose (e.g. a device that allows out-of-order programming);
//! oracle rules are always errors: a wrong read is never acceptable. One
//! oracle rule is a convention rather than correctness and is configurable
//! too: `unwritten_not_zero`. nandlab requires a never-written sector to
//! read as zeros, like a deallocated block of an NVMe drive that reports
//! DLFEAT "reads return zeros"; NVMe also lets a drive report all-0xFF
//! reads, so a drive built that way can set the rule to `allow`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// Every rule nandlab checks.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    // --- NAND rules (checked by the virtual NAND on every operation) ---
    /// A program of a page (or sectors of it) that are not erased, or more
    /// partial programs than the page's NOP allows: an in-place write.
    ProgramNotErased,
    /// A program of page N of a block while page N-1 is still erased, or of a
    /// page below one already programmed (pages of a block must be
    /// programmed in order; each skip is reported where it happens).
    ProgramOutOfOrder,
    /// A program, erase or read of a block marked bad.
    BadBlock,
    /// An address outside the device.
    AddressOutOfRange,
    /// A multi-plane operation whose planes are not on one die, repeat a
    /// plane, or disagree on the block or page offset.
    MultiPlaneMismatch,
    /// A read of a page never programmed since its last erase (legitimate in
    /// a mount scan, so allowed by default; the oracle catches the harmful case).
    ReadErasedPage,
    /// A copyback whose source and destination are not on the same plane.
    CopybackCrossPlane,

    // --- Oracle rules (checked on every sector of every host read) ---
    /// A sector carries data written to a different LBA.
    MisdirectedRead,
    /// A sector carries an older version of its LBA than the latest write.
    StaleRead,
    /// A written sector reads as zeros, as if never written (a lost write).
    LostWrite,
    /// A sector reads as erased flash (0xFF) although it was written or trimmed.
    ErasedRead,
    /// A sector returns data although nothing was ever written to it, or a
    /// version of its LBA that was never written.
    PhantomData,
    /// A trimmed sector does not read as zeros (NVMe DSM deterministic
    /// read-zero after trim).
    TrimNotZero,
    /// A never-written sector reads as erased flash (0xFF) instead of zeros:
    /// the FTL returned a never-programmed page as host data. Configurable
    /// (see the module docs); an error by default.
    UnwrittenNotZero,
    /// A sector returns torn or corrupted (uncorrectable) content.
    CorruptRead,
    /// The FTL completed a read without filling every sector of the buffer.
    MissingData,
    /// A write request failed with an FTL error.
    FtlError,

    // --- Crash rules (checked on the recovered disk after a power cut) ---
    /// After a power cut a sector lost a version made durable before it (by
    /// a completed flush, or by a write acknowledged as durable).
    LostDurableWrite,
    /// OPTR prefix semantics: the recovered disk is not the disk after any
    /// prefix of the write requests in submission order (a later request
    /// survived an earlier one).
    NotAPrefix,
    /// OPTR request atomicity: a write request survived on some of its
    /// sectors and not on others.
    TornWriteRequest,
    /// The FTL failed to mount after a power cut.
    RecoveryFailed,

    // --- Media rules (with the reliability model on; see `nand::reliability`) ---
    /// A host read failed, or returned wrong data, for a sector whose
    /// latest version the FTL had been told failed to program: the FTL
    /// kept it mapped to the failed page instead of programming it again.
    LostAfterProgramFailure,
    /// A program or erase of a grown bad block (one that failed before).
    UsedBadBlock,
    /// A host read returned the undecodable data of an uncorrectable flash
    /// read as if it were good, instead of a read error.
    UncorrectableReturnedAsData,
    /// A host read failed with a media error although none of its
    /// sectors' data was lost to the media.
    ReadErrorOnGoodData,
}

impl Rule {
    pub const ALL: [Rule; 25] = [
        Rule::ProgramNotErased,
        Rule::ProgramOutOfOrder,
        Rule::BadBlock,
        Rule::AddressOutOfRange,
        Rule::MultiPlaneMismatch,
        Rule::ReadErasedPage,
        Rule::CopybackCrossPlane,
        Rule::MisdirectedRead,
        Rule::StaleRead,
        Rule::LostWrite,
        Rule::ErasedRead,
        Rule::PhantomData,
        Rule::TrimNotZero,
        Rule::UnwrittenNotZero,
        Rule::CorruptRead,
        Rule::MissingData,
        Rule::FtlError,
        Rule::LostDurableWrite,
        Rule::NotAPrefix,
        Rule::TornWriteRequest,
        Rule::RecoveryFailed,
        Rule::LostAfterProgramFailure,
        Rule::UsedBadBlock,
        Rule::UncorrectableReturnedAsData,
        Rule::ReadErrorOnGoodData,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Rule::ProgramNotErased => "program_not_erased",
            Rule::ProgramOutOfOrder => "program_out_of_order",
            Rule::BadBlock => "bad_block",
            Rule::AddressOutOfRange => "address_out_of_range",
            Rule::MultiPlaneMismatch => "multi_plane_mismatch",
            Rule::ReadErasedPage => "read_erased_page",
            Rule::CopybackCrossPlane => "copyback_cross_plane",
            Rule::MisdirectedRead => "misdirected_read",
            Rule::StaleRead => "stale_read",
            Rule::LostWrite => "lost_write",
            Rule::ErasedRead => "erased_read",
            Rule::PhantomData => "phantom_data",
            Rule::TrimNotZero => "trim_not_zero",
            Rule::UnwrittenNotZero => "unwritten_not_zero",
            Rule::CorruptRead => "corrupt_read",
            Rule::MissingData => "missing_data",
            Rule::FtlError => "ftl_error",
            Rule::LostDurableWrite => "lost_durable_write",
            Rule::NotAPrefix => "not_a_prefix",
            Rule::TornWriteRequest => "torn_write_request",
            Rule::RecoveryFailed => "recovery_failed",
            Rule::LostAfterProgramFailure => "lost_after_program_failure",
            Rule::UsedBadBlock => "used_bad_block",
            Rule::UncorrectableReturnedAsData => "uncorrectable_returned_as_data",
            Rule::ReadErrorOnGoodData => "read_error_on_good_data",
        }
    }

    pub fn from_name(name: &str) -> Option<Rule> {
        Rule::ALL.into_iter().find(|r| r.name() == name)
    }

    /// True for rules the NAND checks (their severity is configurable).
    pub fn is_nand_rule(self) -> bool {
        matches!(
            self,
            Rule::ProgramNotErased
                | Rule::ProgramOutOfOrder
                | Rule::BadBlock
                | Rule::AddressOutOfRange
                | Rule::MultiPlaneMismatch
                | Rule::ReadErasedPage
                | Rule::CopybackCrossPlane
        )
    }

    /// True for the media rules (checked with the reliability model on;
    /// always errors).
    pub fn is_media_rule(self) -> bool {
        matches!(
            self,
            Rule::LostAfterProgramFailure
                | Rule::UsedBadBlock
                | Rule::UncorrectableReturnedAsData
                | Rule::ReadErrorOnGoodData
        )
    }

    /// True for rules whose severity a configuration may change: the NAND
    /// rules and `unwritten_not_zero` (see the module docs).
    pub fn is_configurable(self) -> bool {
        self.is_nand_rule() || self == Rule::UnwrittenNotZero
    }

    pub fn default_severity(self) -> Severity {
        match self {
            Rule::ReadErasedPage => Severity::Allow,
            _ => Severity::Error,
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            Rule::ProgramNotErased => "program of a non-erased page beyond its partial-program (NOP) allowance",
            Rule::ProgramOutOfOrder => "program of page N of a block while page N-1 is erased",
            Rule::BadBlock => "program, erase or read of a bad block",
            Rule::AddressOutOfRange => "address outside the device",
            Rule::MultiPlaneMismatch => "multi-plane operation whose planes disagree on die, block or page offset",
            Rule::ReadErasedPage => "read of a page never programmed since its erase",
            Rule::CopybackCrossPlane => "copyback between different planes",
            Rule::MisdirectedRead => "sector returned data of another LBA",
            Rule::StaleRead => "sector returned an older version than the last write",
            Rule::LostWrite => "written sector returned zeros, as if never written",
            Rule::ErasedRead => "written or trimmed sector returned erased flash (0xFF)",
            Rule::PhantomData => "sector returned data never written to it",
            Rule::TrimNotZero => "trimmed sector did not read as zeros",
            Rule::UnwrittenNotZero => "never-written sector returned erased flash (0xFF) instead of zeros",
            Rule::CorruptRead => "sector returned torn or corrupted data",
            Rule::MissingData => "FTL completed a read without filling every sector",
            Rule::FtlError => "the FTL returned an error for a host request",
            Rule::LostDurableWrite => "after a power cut, a sector lost a version that was durable (flushed)",
            Rule::NotAPrefix => "after a power cut, a later write request survived an earlier one (OPTR prefix)",
            Rule::TornWriteRequest => "after a power cut, a write request survived in part (OPTR atomicity)",
            Rule::RecoveryFailed => "the FTL failed to mount after a power cut",
            Rule::LostAfterProgramFailure => {
                "a host read lost data whose program had failed (the FTL did not rewrite it)"
            }
            Rule::UsedBadBlock => "program or erase of a grown bad block",
            Rule::UncorrectableReturnedAsData => "an uncorrectable flash read was returned to the host as data",
            Rule::ReadErrorOnGoodData => "a host read failed although its data was not lost to the media",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What happens when a rule is broken.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Not recorded.
    Allow,
    /// Recorded and reported; the run still passes.
    Warn,
    /// Recorded; the run fails (exit code 1).
    Error,
}

impl std::str::FromStr for Severity {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "allow" => Ok(Severity::Allow),
            "warn" => Ok(Severity::Warn),
            "error" => Ok(Severity::Error),
            other => Err(format!("unknown severity `{other}` (expected allow, warn or error)")),
        }
    }
}

/// Severity per configurable rule (the `[rules]` table of a configuration).
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RuleConfig {
    overrides: BTreeMap<Rule, Severity>,
}

impl RuleConfig {
    pub fn severity(&self, rule: Rule) -> Severity {
        if !rule.is_configurable() {
            return Severity::Error;
        }
        self.overrides.get(&rule).copied().unwrap_or_else(|| rule.default_severity())
    }

    /// Set the severity of a configurable rule; the other oracle rules cannot be relaxed.
    pub fn set(&mut self, rule: Rule, severity: Severity) -> Result<(), String> {
        if !rule.is_configurable() {
            return Err(format!("`{rule}` is an oracle check and is always an error"));
        }
        self.overrides.insert(rule, severity);
        Ok(())
    }

    /// A severity table as an array indexed by rule (for the hot path).
    pub fn table(&self) -> [Severity; Rule::ALL.len()] {
        let mut t = [Severity::Error; Rule::ALL.len()];
        for (i, r) in Rule::ALL.iter().enumerate() {
            t[i] = self.severity(*r);
        }
        t
    }

    /// Parse `rule=severity`, as given on the command line.
    pub fn parse_assignment(&mut self, text: &str) -> Result<(), String> {
        let (name, sev) = crate::util::assignment::split(text, "RULE=SEVERITY, e.g. program_out_of_order=warn")?;
        let rule = Rule::from_name(name.trim()).ok_or_else(|| format!("unknown rule `{}`", name.trim()))?;
        self.set(rule, sev.trim().parse()?)
    }
}

/// The physical page that supplied wrong host data, and the flash read
/// that brought it into the buffer (see [`crate::flash::sources`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlashSource {
    /// Linear physical page number.
    pub page: u64,
    /// The page's block, and its index in the block.
    pub block: u64,
    pub page_in_block: u32,
    /// The sector of the page that landed on the reported LBA.
    pub sector_in_page: u32,
    /// Index of the flash read operation.
    pub op_index: u64,
}

impl fmt::Display for FlashSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "physical page {} (block {} page {}, sector {}) read at flash op {}",
            self.page, self.block, self.page_in_block, self.sector_in_page, self.op_index
        )
    }
}

/// One broken rule, with everything needed to find it again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    pub rule: Rule,
    pub severity: Severity,
    /// Index of the flash operation (counted from 0 over the whole run)
    /// during or after which the violation was seen.
    pub op_index: u64,
    /// The host request being served, if any (background work has none).
    pub request_id: Option<u64>,
    /// A physical page/block number for NAND rules, an LBA (in sectors) for
    /// oracle rules; `message` says which.
    pub address: u64,
    pub message: String,
    /// For a wrong read, the physical page the data at `address` came from,
    /// when a flash read of the same request brought it (absent for data
    /// never read from flash: zeros, an FTL's DRAM cache, unfilled sectors).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<FlashSource>,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let req = match self.request_id {
            Some(r) => format!("request {r}"),
            None => "background".to_string(),
        };
        write!(f, "[{:?}] {} at flash op {} ({}): {}", self.severity, self.rule, self.op_index, req, self.message)?;
        match &self.source {
            Some(source) => write!(f, "; data from {source}"),
            None => Ok(()),
        }
    }
}

/// The violations of a run: counts per rule, and the first ones in full.
#[derive(Clone, Debug, Default)]
pub struct ViolationLog {
    kept: Vec<Violation>,
    keep_limit: usize,
    counts: BTreeMap<Rule, u64>,
    errors: u64,
    warnings: u64,
}

impl ViolationLog {
    /// A log keeping the first `keep_limit` violations in full (all are counted).
    pub fn new(keep_limit: usize) -> Self {
        ViolationLog { keep_limit, ..Default::default() }
    }

    pub fn record(&mut self, v: Violation) {
        match v.severity {
            Severity::Allow => return,
            Severity::Warn => self.warnings += 1,
            Severity::Error => self.errors += 1,
        }
        *self.counts.entry(v.rule).or_insert(0) += 1;
        if self.kept.len() < self.keep_limit {
            self.kept.push(v);
        }
    }

    /// Whether the next violation would be kept in full (so its message is worth building).
    pub fn would_keep(&self) -> bool {
        self.kept.len() < self.keep_limit
    }

    pub fn errors(&self) -> u64 {
        self.errors
    }
    pub fn warnings(&self) -> u64 {
        self.warnings
    }
    pub fn kept(&self) -> &[Violation] {
        &self.kept
    }
    pub fn counts(&self) -> &BTreeMap<Rule, u64> {
        &self.counts
    }
    pub fn count(&self, rule: Rule) -> u64 {
        self.counts.get(&rule).copied().unwrap_or(0)
    }
    pub fn is_clean(&self) -> bool {
        self.errors == 0
    }
    pub fn first_error(&self) -> Option<&Violation> {
        self.kept.iter().find(|v| v.severity == Severity::Error)
    }
}

/// Where the sectors of the buffer being checked came from: the flash
/// controller answers for a host read (see [`crate::flash::sources`]).
pub trait SourceLookup {
    /// The flash page that supplied sector `buffer_sector` of the buffer.
    fn source(&self, buffer_sector: u32) -> Option<FlashSource>;
}

/// Everything a checker needs to record a violation at the current operation.
pub struct Checker<'a> {
    pub severities: &'a [Severity; Rule::ALL.len()],
    pub log: &'a mut ViolationLog,
    pub op_index: u64,
    pub request_id: Option<u64>,
    /// When checking a host buffer: where its sectors came from.
    pub sources: Option<&'a dyn SourceLookup>,
}

impl<'a> Checker<'a> {
    /// A checker recording into `log` at operation `op_index` of `request_id`.
    pub fn new(
        severities: &'a [Severity; Rule::ALL.len()],
        log: &'a mut ViolationLog,
        op_index: u64,
        request_id: Option<u64>,
    ) -> Checker<'a> {
        Checker { severities, log, op_index, request_id, sources: None }
    }

    /// Record a broken rule; the message is built only if it will be kept.
    #[inline]
    pub fn flag(&mut self, rule: Rule, address: u64, message: impl FnOnce() -> String) {
        self.record(rule, address, None, message);
    }

    /// Record a wrong read at LBA `address`, sector `buffer_sector` of the
    /// buffer being checked; a kept violation names the flash page that
    /// supplied the data, if one did.
    #[inline]
    pub fn flag_read(&mut self, rule: Rule, address: u64, buffer_sector: u64, message: impl FnOnce() -> String) {
        let sector = u32::try_from(buffer_sector).ok();
        self.record(rule, address, sector, message);
    }

    #[inline]
    fn record(&mut self, rule: Rule, address: u64, buffer_sector: Option<u32>, message: impl FnOnce() -> String) {
        let severity = self.severities[rule as usize];
        if severity == Severity::Allow {
            return;
        }
        let keep = self.log.would_keep();
        let source = match (keep, self.sources, buffer_sector) {
            (true, Some(sources), Some(sector)) => sources.source(sector),
            _ => None,
        };
        self.log.record(Violation {
            rule,
            severity,
            op_index: self.op_index,
            request_id: self.request_id,
            address,
            message: if keep { message() } else { String::new() },
            source,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_rules_in_discriminant_order() {
        for (i, r) in Rule::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
        }
    }

    #[test]
    fn names_round_trip() {
        for r in Rule::ALL {
            assert_eq!(Rule::from_name(r.name()), Some(r));
        }
    }

    #[test]
    fn oracle_rules_cannot_be_relaxed() {
        let mut c = RuleConfig::default();
        assert!(c.set(Rule::StaleRead, Severity::Allow).is_err());
        assert_eq!(c.severity(Rule::StaleRead), Severity::Error);
        c.parse_assignment("program_out_of_order=warn").unwrap();
        assert_eq!(c.severity(Rule::ProgramOutOfOrder), Severity::Warn);
        assert!(c.parse_assignment("no_such_rule=warn").is_err());
        assert!(c.parse_assignment("bad_block=sometimes").is_err());
        assert_eq!(c.severity(Rule::UnwrittenNotZero), Severity::Error, "zeros are required by default");
        c.parse_assignment("unwritten_not_zero=allow").unwrap();
        assert_eq!(c.severity(Rule::UnwrittenNotZero), Severity::Allow, "a 0xFF-deallocating drive may allow it");
    }

    #[test]
    fn allowed_violations_are_not_recorded_and_warnings_do_not_fail() {
        let mut log = ViolationLog::new(1);
        let v = |severity| Violation {
            rule: Rule::ProgramOutOfOrder,
            severity,
            op_index: 0,
            request_id: None,
            address: 0,
            message: String::new(),
            source: None,
        };
        log.record(v(Severity::Allow));
        log.record(v(Severity::Warn));
        assert!(log.is_clean());
        log.record(v(Severity::Error));
        log.record(v(Severity::Error));
        assert!(!log.is_clean());
        assert_eq!(log.kept().len(), 1);
        assert_eq!(log.count(Rule::ProgramOutOfOrder), 3);
    }
}
