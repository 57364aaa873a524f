//! The report of a `crash` campaign: what each crash point found, the
//! shrunk reproducer of the first finding, what the campaign measured, and
//! the readable summary. The campaign itself is [`crate::run::crash`].

use crate::flash::PowerCut;
use crate::ftl::Guarantee;
use crate::nand::power::PowerCutEffects;
use crate::violation::{Rule, Violation};
use serde::Serialize;
use std::collections::BTreeMap;

/// Where the second power cut falls in the first recovery (see
/// [`crate::run::crash`], *Nested cuts*).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NestedCut {
    /// Which of the recovery's state-changing operations (programs,
    /// copybacks, erases), from 0; their count (or more) means after the
    /// last one.
    pub nth: u32,
    /// During that operation (tearing it) rather than just before it.
    pub during: bool,
}

/// The step of a crash test where a point's first finding appeared.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Power-loss protection's emergency flush by the old FTL instance.
    EmergencyFlush,
    /// The first recovery (uncut; with `nested`, the one then cut).
    Recovery,
    /// The recovery after the nested cut.
    RecoveryAfterNestedCut,
    /// Reading back the recovered disk (the crash guarantee).
    Verify,
    /// The workload run on the recovered drive.
    PostWorkload,
}

/// What one crash point found.
#[derive(Clone, Debug, Serialize)]
pub struct PointResult {
    pub cut: PowerCut,
    /// The host request in flight at the cut.
    pub request: u64,
    /// Whether the cut operation changed flash (a read cut "during" does not).
    pub tore: bool,
    pub torn_pages: u32,
    pub torn_blocks: u32,
    /// The nested cut, relative to the first recovery (when nested).
    pub nested_cut: Option<NestedCut>,
    /// The same cut as an operation index.
    pub recovery_cut: Option<PowerCut>,
    /// State-changing operations of the first recovery (when nested).
    pub recovery_state_changes: u32,
    /// Pages and blocks the nested cut tore.
    pub recovery_torn_pages: u32,
    pub recovery_torn_blocks: u32,
    /// Flash operations the final recovery took.
    pub recovery_ops: u64,
    pub passed: bool,
    /// Where the first finding appeared.
    pub stage: Option<Stage>,
    /// Violations by rule.
    pub rules: BTreeMap<Rule, u64>,
    /// The first violation, in full.
    pub first: Option<Violation>,
}

impl PointResult {
    /// What the point failed by: the first finding's rule and stage.
    pub fn signature(&self) -> Option<(Rule, Stage)> {
        Some((self.first.as_ref()?.rule, self.stage?))
    }
}

/// The shrunk reproducer of a finding.
#[derive(Clone, Debug, Serialize)]
pub struct Shrunk {
    pub cut: PowerCut,
    /// The nested cut it was found with (reproduce with the same).
    pub nested_cut: Option<NestedCut>,
    /// Host requests before the one in flight at the cut.
    pub requests_before: u64,
    pub rule: Rule,
    pub stage: Stage,
    pub message: String,
    /// Crash points tried while shrinking, and in how many rounds.
    pub tried: u64,
    pub rounds: u32,
    /// Every point from this operation up to the shrunk one was tried and
    /// did not fail the same way (the first request's operation: the
    /// shrunk point is the earliest failing one).
    pub clean_from_op: Option<u64>,
    /// The command that reproduces it (set by the CLI).
    pub command: Option<String>,
}

/// The report of a crash campaign.
#[derive(Clone, Debug, Serialize)]
pub struct CrashReport {
    pub schema_version: u32,
    pub mode: &'static str,
    pub seed: u64,
    pub preset: String,
    pub ftl: String,
    pub guarantee: Guarantee,
    pub workload: String,
    pub effects: PowerCutEffects,
    pub nested: bool,
    pub nested_at: Option<NestedCut>,
    pub post_requests: u64,
    /// Operation index of the first host request (operations before it format the drive).
    pub first_request_op: u64,
    /// Operation index where the window of crash points starts.
    pub window_start_op: u64,
    pub points_planned: u64,
    pub points_tested: u64,
    pub passed: u64,
    pub failed: u64,
    /// Failed points counted by each rule they broke.
    pub failed_by_kind: BTreeMap<Rule, u64>,
    /// Random or every-k-th points beyond the end of the workload.
    pub not_reached: u64,
    pub points: Vec<PointResult>,
    pub shrunk: Option<Shrunk>,
    /// A failure of the base run itself (the FTL failed without a power cut).
    pub base_failure: Option<String>,
    /// Stopped by a signal (SIGINT, SIGTERM): the points not reached were
    /// not tested and nothing was shrunk. Absent from the JSON when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    pub threads: usize,
    /// Times, rates and memory (in the JSON beside the other fields).
    #[serde(flatten)]
    pub measured: CrashMeasurements,
}

/// What a campaign measured (see [`CrashReport::summary`] for what each
/// covers): the fields a determinism check leaves out.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CrashMeasurements {
    /// The whole command: campaign and shrinking.
    pub wall_seconds: f64,
    pub cpu_seconds: f64,
    /// The campaign: counting pass, every thread's base run (warm-up
    /// included) and testing the points; shrinking excluded.
    pub run_wall_seconds: f64,
    pub run_cpu_seconds: f64,
    /// Testing points only: CPU summed over threads, wall of the slowest thread.
    pub test_cpu_seconds: f64,
    pub test_wall_seconds: f64,
    pub shrink_wall_seconds: f64,
    pub shrink_cpu_seconds: f64,
    /// Points tested per second of the campaign (whole run).
    pub points_per_run_wall_second: Option<f64>,
    pub points_per_run_cpu_second: Option<f64>,
    /// Points tested per second spent testing them (testing only).
    pub points_per_test_wall_second: Option<f64>,
    pub points_per_test_cpu_second: Option<f64>,
    pub peak_rss_bytes: u64,
}

impl CrashReport {
    /// Whether the campaign found something (exit code 1).
    pub fn has_findings(&self) -> bool {
        self.failed > 0 || self.base_failure.is_some()
    }

    /// A copy without wall-clock and memory fields (determinism checks).
    pub fn without_measurements(&self) -> CrashReport {
        CrashReport { measured: CrashMeasurements::default(), threads: 0, ..self.clone() }
    }

    /// The readable summary.
    pub fn summary(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "nandlab crash — preset {} — FTL {} — guarantee {:?} — seed {}",
            self.preset, self.ftl, self.guarantee, self.seed
        );
        let _ = writeln!(s, "  workload   {}", self.workload);
        let nested = match (self.nested, self.nested_at) {
            (false, _) => "no".to_string(),
            (true, None) => "yes (drawn per point)".to_string(),
            (true, Some(n)) => format!("yes, at {}", nested_name(n)),
        };
        let _ = writeln!(
            s,
            "  power cut  {}; nested cut during recovery: {nested}; {} requests after each recovery",
            self.effects.describe(),
            self.post_requests
        );
        if !self.effects.write_cache_lost {
            let _ = writeln!(
                s,
                "             power-loss protection: each cut falls at the end of its request, the old FTL \
                 flushes its cache, every acknowledged write must survive"
            );
        }
        let _ = writeln!(
            s,
            "  points     {} planned from op {} (first request at op {}), {} tested, {} passed, {} failed{}",
            self.points_planned,
            self.window_start_op,
            self.first_request_op,
            self.points_tested,
            self.passed,
            self.failed,
            match (self.not_reached, self.interrupted) {
                (0, _) => String::new(),
                (n, false) => format!(", {n} beyond the workload"),
                (n, true) => format!(", {n} not reached (interrupted)"),
            }
        );
        let torn = self.points.iter().filter(|p| p.tore).count();
        let _ = writeln!(s, "  cuts       {torn} tore a program or erase");
        if !self.failed_by_kind.is_empty() {
            let kinds: Vec<String> = self.failed_by_kind.iter().map(|(r, n)| format!("{r}: {n}")).collect();
            let _ = writeln!(s, "  failed by  {}", kinds.join(", "));
        }
        self.write_speed(&mut s);
        if let Some(b) = &self.base_failure {
            let _ = writeln!(s, "  base run   FAILED: {b}");
        }
        if self.interrupted {
            let _ = writeln!(s, "{}", super::INTERRUPTED_LINE);
        }
        if let Some(first) = self.points.iter().find(|p| !p.passed) {
            if let Some(v) = &first.first {
                let _ = writeln!(
                    s,
                    "  first      cut {} op {} (request {}{}): {v}",
                    phase_name(first.cut.during),
                    first.cut.op_index,
                    first.request,
                    first.nested_cut.map_or(String::new(), |n| format!(
                        ", recovery cut {}",
                        describe_nested(n, first.recovery_state_changes)
                    ))
                );
            }
        }
        if let Some(sh) = &self.shrunk {
            let clean = match sh.clean_from_op {
                Some(op) if op <= self.first_request_op => "the earliest failing point".to_string(),
                Some(op) => format!("no point from op {op} up to it fails the same way"),
                None => "a local minimum of the points tried".to_string(),
            };
            let _ = writeln!(
                s,
                "  shrunk     {} ({:?}) at op {} {}{} ({} requests before it; {}; {} points tried in {} rounds): {}",
                sh.rule,
                sh.stage,
                sh.cut.op_index,
                phase_name(sh.cut.during),
                sh.nested_cut.map_or(String::new(), |n| format!(", --nested-at {}", nested_name(n))),
                sh.requests_before,
                clean,
                sh.tried,
                sh.rounds,
                sh.message
            );
        }
        let verdict = if self.has_findings() { "FAIL" } else { "PASS — every crash point recovered legally" };
        let _ = writeln!(s, "  result     {verdict}");
        s
    }

    fn write_speed(&self, s: &mut String) {
        let rate_text = |v: Option<f64>| v.map_or_else(|| "n/a".to_string(), |v| format!("{v:.2}"));
        use std::fmt::Write as _;
        let _ = writeln!(
            s,
            "  speed      whole run (counting pass, base runs with warm-up, testing; {} threads): {:.2} s wall, \
             {:.2} s CPU: {} points/s, {} points per CPU-second",
            self.threads,
            self.measured.run_wall_seconds,
            self.measured.run_cpu_seconds,
            rate_text(self.measured.points_per_run_wall_second),
            rate_text(self.measured.points_per_run_cpu_second)
        );
        let _ = writeln!(
            s,
            "             testing points only: {:.2} s wall (slowest thread), {:.2} s CPU: {} points/s, \
             {} points per CPU-second",
            self.measured.test_wall_seconds,
            self.measured.test_cpu_seconds,
            rate_text(self.measured.points_per_test_wall_second),
            rate_text(self.measured.points_per_test_cpu_second)
        );
        if self.shrunk.is_some() {
            let _ = writeln!(
                s,
                "             shrinking: {:.2} s wall, {:.2} s CPU (not in the rates above)",
                self.measured.shrink_wall_seconds, self.measured.shrink_cpu_seconds
            );
        }
    }
}

pub fn phase_name(during: bool) -> &'static str {
    if during {
        "during"
    } else {
        "between"
    }
}

/// `k:during` or `k` (as `--nested-at` takes it), for messages.
pub fn nested_name(n: NestedCut) -> String {
    if n.during {
        format!("{}:during", n.nth)
    } else {
        n.nth.to_string()
    }
}

/// A nested cut in words, given the recovery's state-changing operations.
pub fn describe_nested(n: NestedCut, state_changes: u32) -> String {
    if n.nth >= state_changes {
        format!("after the last of the recovery's {state_changes} state changes")
    } else {
        let when = if n.during { "during" } else { "before" };
        format!("{when} state change {} of the recovery's {state_changes}", n.nth)
    }
}
