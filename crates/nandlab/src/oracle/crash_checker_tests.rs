//! Each crash rule is caught, legal recovered disks pass.

use super::*;
use crate::violation::{RuleConfig, Severity, ViolationLog};

fn w(request: u64, lba: u64, sectors: u32, write: WriteId) -> PendingOp {
    PendingOp { request, trim: false, lba, sectors, write }
}
fn t(request: u64, lba: u64, sectors: u32, writes_before: WriteId) -> PendingOp {
    PendingOp { request, trim: true, lba, sectors, write: writes_before }
}

/// Check a recovered disk given as runs from LBA 0; returns the log.
fn check(h: &CrashHistory, in_flight: Option<PendingOp>, g: Guarantee, runs: &[Run]) -> ViolationLog {
    let sev: [Severity; Rule::ALL.len()] = RuleConfig::default().table();
    let mut log = ViolationLog::new(10);
    let mut ck = Checker::new(&sev, &mut log, 0, None);
    let mut c = h.checker(in_flight, g);
    c.check_read(&mut ck, 0, runs);
    c.finish(&mut ck);
    log
}

fn only(log: &ViolationLog, rule: Rule) {
    assert_eq!(log.errors(), 1, "{:?}", log.kept());
    assert_eq!(log.count(rule), 1, "{:?}", log.kept());
}

/// Write 1 flushed on 0..8; then volatile writes 2 (0..4) and 3 (4..8).
fn history() -> CrashHistory {
    let mut h = CrashHistory::new(16, 4);
    h.record(Some(w(0, 0, 8, 1)), false, Some(Durability::Volatile));
    h.record(None, true, None);
    h.record(Some(w(2, 0, 4, 2)), false, Some(Durability::Volatile));
    h.record(Some(w(3, 4, 4, 3)), false, Some(Durability::Volatile));
    h
}

#[test]
fn baseline_accepts_the_floor_or_any_later_version() {
    let h = history();
    for runs in [
        vec![Run::data(0, 1, 8), Run::filler(RunKind::Zero, 8)],
        vec![Run::data(0, 2, 4), Run::data(4, 1, 4), Run::filler(RunKind::Zero, 8)],
        vec![Run::data(0, 1, 4), Run::data(4, 3, 4), Run::filler(RunKind::Zero, 8)],
    ] {
        assert!(check(&h, None, Guarantee::Baseline, &runs).is_clean(), "{runs:?}");
    }
}

/// As in `stress`, a never-written sector reads as zeros after a power
/// cut; erased flash there is a never-programmed page returned as data.
#[test]
fn erased_flash_where_nothing_durable_was_written_is_unwritten_not_zero() {
    let h = history();
    only(
        &check(&h, None, Guarantee::Baseline, &[Run::data(0, 1, 8), Run::filler(RunKind::Erased, 8)]),
        Rule::UnwrittenNotZero,
    );
    only(&check(&h, None, Guarantee::Baseline, &[Run::filler(RunKind::Erased, 16)]), Rule::ErasedRead);
}

#[test]
fn baseline_catches_lost_durable_data_phantoms_and_misdirection() {
    let h = history();
    only(&check(&h, None, Guarantee::Baseline, &[Run::filler(RunKind::Zero, 16)]), Rule::LostDurableWrite);
    only(
        &check(&h, None, Guarantee::Baseline, &[Run::data(0, 9, 8), Run::filler(RunKind::Zero, 8)]),
        Rule::PhantomData,
    );
    only(&check(&h, None, Guarantee::Baseline, &[Run::data(0, 1, 8), Run::data(0, 1, 8)]), Rule::MisdirectedRead);
    only(
        &check(&h, None, Guarantee::Baseline, &[Run::data(0, 1, 8), Run::filler(RunKind::Garbage, 8)]),
        Rule::CorruptRead,
    );
}

#[test]
fn a_durable_write_is_a_floor_older_versions_cannot_undercut() {
    let mut h = CrashHistory::new(8, 4);
    h.record(Some(w(0, 0, 8, 1)), false, Some(Durability::Volatile));
    h.record(Some(w(1, 0, 8, 2)), false, Some(Durability::Durable));
    only(&check(&h, None, Guarantee::Baseline, &[Run::data(0, 1, 8)]), Rule::LostDurableWrite);
    assert!(check(&h, None, Guarantee::Baseline, &[Run::data(0, 2, 8)]).is_clean());
}

#[test]
fn a_trim_reads_trimmed_or_previous_until_a_flush() {
    let mut h = CrashHistory::new(8, 4);
    h.record(Some(w(0, 0, 8, 1)), false, Some(Durability::Durable));
    h.record(Some(t(1, 0, 8, 1)), false, None);
    assert!(check(&h, None, Guarantee::Baseline, &[Run::filler(RunKind::Zero, 8)]).is_clean());
    assert!(check(&h, None, Guarantee::Baseline, &[Run::data(0, 1, 8)]).is_clean());
    h.record(None, true, None);
    only(&check(&h, None, Guarantee::Baseline, &[Run::data(0, 1, 8)]), Rule::LostDurableWrite);
}

#[test]
fn optr_accepts_every_prefix() {
    let h = history();
    let prefixes = [
        vec![Run::data(0, 1, 8)],
        vec![Run::data(0, 2, 4), Run::data(4, 1, 4)],
        vec![Run::data(0, 2, 4), Run::data(4, 3, 4)],
    ];
    for runs in prefixes {
        let mut runs = runs.clone();
        runs.push(Run::filler(RunKind::Zero, 8));
        assert!(check(&h, None, Guarantee::Optr, &runs).is_clean(), "{runs:?}");
    }
}

#[test]
fn optr_catches_a_later_request_surviving_an_earlier_one() {
    let h = history();
    let runs = [Run::data(0, 1, 4), Run::data(4, 3, 4), Run::filler(RunKind::Zero, 8)];
    assert!(check(&h, None, Guarantee::Baseline, &runs).is_clean(), "baseline allows it");
    only(&check(&h, None, Guarantee::Optr, &runs), Rule::NotAPrefix);
}

#[test]
fn optr_catches_a_request_in_flight_that_landed_in_part() {
    let h = history();
    let flight = w(4, 8, 8, 4);
    let runs = [Run::data(0, 2, 4), Run::data(4, 3, 4), Run::data(8, 4, 4), Run::filler(RunKind::Zero, 4)];
    assert!(check(&h, Some(flight), Guarantee::Baseline, &runs).is_clean(), "baseline allows it");
    only(&check(&h, Some(flight), Guarantee::Optr, &runs), Rule::TornWriteRequest);
    let whole = [Run::data(0, 2, 4), Run::data(4, 3, 4), Run::data(8, 4, 8)];
    assert!(check(&h, Some(flight), Guarantee::Optr, &whole).is_clean());
}

#[test]
fn optr_zeros_may_match_the_floor_or_a_trim() {
    let mut h = CrashHistory::new(16, 4);
    h.record(Some(w(0, 0, 8, 1)), false, Some(Durability::Volatile));
    h.record(Some(t(1, 0, 8, 1)), false, None);
    h.record(Some(w(2, 8, 8, 2)), false, Some(Durability::Volatile));
    // Trim applied, write 2 landed: prefix 3.
    assert!(check(&h, None, Guarantee::Optr, &[Run::filler(RunKind::Zero, 8), Run::data(8, 2, 8)]).is_clean());
    // Write 1 kept, trim lost, write 2 landed: not a prefix.
    only(&check(&h, None, Guarantee::Optr, &[Run::data(0, 1, 8), Run::data(8, 2, 8)]), Rule::NotAPrefix);
}

#[test]
fn a_flush_does_not_put_an_older_trim_over_a_durable_write() {
    let mut h = CrashHistory::new(8, 4);
    h.record(Some(t(0, 0, 8, 0)), false, None);
    h.record(Some(w(1, 0, 8, 1)), false, Some(Durability::Durable));
    h.record(None, true, None);
    assert!(check(&h, None, Guarantee::Baseline, &[Run::data(0, 1, 8)]).is_clean());
    only(&check(&h, None, Guarantee::Baseline, &[Run::filler(RunKind::Zero, 8)]), Rule::LostDurableWrite);
}
