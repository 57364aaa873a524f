//! Each crash rule is caught, legal recovered disks pass.

use super::*;
use crate::violation::{RuleConfig, Severity, ViolationLog};

fn w(request: u64, lba: u64, sectors: u32, write: WriteId) -> PendingOp {
    PendingOp { request, trim: false, lba, sectors, write }
}
fn t(request: u64, lba: u64, sectors: u32, writes_before: WriteId) -> PendingOp {
    PendingOp { request, trim: true, lba, sectors, write: writes_before }
}

/// Check a recovered disk given as runs from LBA 0 for the history's
/// guarantee; returns the log.
fn check(h: &CrashHistory, in_flight: Option<PendingOp>, runs: &[Run]) -> ViolationLog {
    check_with(h.checker(in_flight), runs)
}

fn check_with(mut c: CrashChecker, runs: &[Run]) -> ViolationLog {
    let sev: [Severity; Rule::ALL.len()] = RuleConfig::default().table();
    let mut log = ViolationLog::new(10);
    let mut ck = Checker::new(&sev, &mut log, 0, None);
    c.check_read(&mut ck, 0, runs);
    c.finish(&mut ck);
    log
}

const BASE: Guarantee = Guarantee::Baseline;
const OPTR: Guarantee = Guarantee::Optr;

fn only(log: &ViolationLog, rule: Rule) {
    assert_eq!(log.errors(), 1, "{:?}", log.kept());
    assert_eq!(log.count(rule), 1, "{:?}", log.kept());
}

/// Write 1 flushed on 0..8; then volatile writes 2 (0..4) and 3 (4..8).
fn history(g: Guarantee) -> CrashHistory {
    let mut h = CrashHistory::new(16, 4, g);
    h.record(Some(w(0, 0, 8, 1)), false, Some(Durability::Volatile));
    h.record(None, true, None);
    h.record(Some(w(2, 0, 4, 2)), false, Some(Durability::Volatile));
    h.record(Some(w(3, 4, 4, 3)), false, Some(Durability::Volatile));
    h
}

#[test]
fn baseline_accepts_the_floor_or_any_later_version() {
    let hb = history(BASE);
    for runs in [
        vec![Run::data(0, 1, 8), Run::filler(RunKind::Zero, 8)],
        vec![Run::data(0, 2, 4), Run::data(4, 1, 4), Run::filler(RunKind::Zero, 8)],
        vec![Run::data(0, 1, 4), Run::data(4, 3, 4), Run::filler(RunKind::Zero, 8)],
    ] {
        assert!(check(&hb, None, &runs).is_clean(), "{runs:?}");
    }
}

/// As in `stress`, a never-written sector reads as zeros after a power
/// cut; erased flash there is a never-programmed page returned as data.
#[test]
fn erased_flash_where_nothing_durable_was_written_is_unwritten_not_zero() {
    let h = history(BASE);
    only(&check(&h, None, &[Run::data(0, 1, 8), Run::filler(RunKind::Erased, 8)]), Rule::UnwrittenNotZero);
    only(&check(&h, None, &[Run::filler(RunKind::Erased, 16)]), Rule::ErasedRead);
}

#[test]
fn baseline_catches_lost_durable_data_phantoms_and_misdirection() {
    let hb = history(BASE);
    only(&check(&hb, None, &[Run::filler(RunKind::Zero, 16)]), Rule::LostDurableWrite);
    only(&check(&hb, None, &[Run::data(0, 9, 8), Run::filler(RunKind::Zero, 8)]), Rule::PhantomData);
    only(&check(&hb, None, &[Run::data(0, 1, 8), Run::data(0, 1, 8)]), Rule::MisdirectedRead);
    only(&check(&hb, None, &[Run::data(0, 1, 8), Run::filler(RunKind::Garbage, 8)]), Rule::CorruptRead);
}

#[test]
fn a_durable_write_is_a_floor_older_versions_cannot_undercut() {
    let mut hb = CrashHistory::new(8, 4, BASE);
    hb.record(Some(w(0, 0, 8, 1)), false, Some(Durability::Volatile));
    hb.record(Some(w(1, 0, 8, 2)), false, Some(Durability::Durable));
    only(&check(&hb, None, &[Run::data(0, 1, 8)]), Rule::LostDurableWrite);
    assert!(check(&hb, None, &[Run::data(0, 2, 8)]).is_clean());
}

#[test]
fn a_trim_reads_trimmed_or_previous_until_a_flush() {
    let mut hb = CrashHistory::new(8, 4, BASE);
    hb.record(Some(w(0, 0, 8, 1)), false, Some(Durability::Durable));
    hb.record(Some(t(1, 0, 8, 1)), false, None);
    assert!(check(&hb, None, &[Run::filler(RunKind::Zero, 8)]).is_clean());
    assert!(check(&hb, None, &[Run::data(0, 1, 8)]).is_clean());
    hb.record(None, true, None);
    only(&check(&hb, None, &[Run::data(0, 1, 8)]), Rule::LostDurableWrite);
}

#[test]
fn optr_accepts_every_prefix() {
    let ho = history(OPTR);
    let prefixes = [
        vec![Run::data(0, 1, 8)],
        vec![Run::data(0, 2, 4), Run::data(4, 1, 4)],
        vec![Run::data(0, 2, 4), Run::data(4, 3, 4)],
    ];
    for runs in prefixes {
        let mut runs = runs.clone();
        runs.push(Run::filler(RunKind::Zero, 8));
        assert!(check(&ho, None, &runs).is_clean(), "{runs:?}");
    }
}

#[test]
fn optr_catches_a_later_request_surviving_an_earlier_one() {
    let (hb, ho) = (history(BASE), history(OPTR));
    let runs = [Run::data(0, 1, 4), Run::data(4, 3, 4), Run::filler(RunKind::Zero, 8)];
    assert!(check(&hb, None, &runs).is_clean(), "baseline allows it");
    only(&check(&ho, None, &runs), Rule::NotAPrefix);
}

#[test]
fn optr_catches_a_request_in_flight_that_landed_in_part() {
    let (hb, ho) = (history(BASE), history(OPTR));
    let flight = w(4, 8, 8, 4);
    let runs = [Run::data(0, 2, 4), Run::data(4, 3, 4), Run::data(8, 4, 4), Run::filler(RunKind::Zero, 4)];
    assert!(check(&hb, Some(flight), &runs).is_clean(), "baseline allows it");
    only(&check(&ho, Some(flight), &runs), Rule::TornWriteRequest);
    let whole = [Run::data(0, 2, 4), Run::data(4, 3, 4), Run::data(8, 4, 8)];
    assert!(check(&ho, Some(flight), &whole).is_clean());
}

#[test]
fn optr_zeros_may_match_the_floor_or_a_trim() {
    let mut ho = CrashHistory::new(16, 4, OPTR);
    ho.record(Some(w(0, 0, 8, 1)), false, Some(Durability::Volatile));
    ho.record(Some(t(1, 0, 8, 1)), false, None);
    ho.record(Some(w(2, 8, 8, 2)), false, Some(Durability::Volatile));
    // Trim applied, write 2 landed: prefix 3.
    assert!(check(&ho, None, &[Run::filler(RunKind::Zero, 8), Run::data(8, 2, 8)]).is_clean());
    // Write 1 kept, trim lost, write 2 landed: not a prefix.
    only(&check(&ho, None, &[Run::data(0, 1, 8), Run::data(8, 2, 8)]), Rule::NotAPrefix);
}

#[test]
fn a_flush_does_not_put_an_older_trim_over_a_durable_write() {
    let mut hb = CrashHistory::new(8, 4, BASE);
    hb.record(Some(t(0, 0, 8, 0)), false, None);
    hb.record(Some(w(1, 0, 8, 1)), false, Some(Durability::Durable));
    hb.record(None, true, None);
    assert!(check(&hb, None, &[Run::data(0, 1, 8)]).is_clean());
    only(&check(&hb, None, &[Run::filler(RunKind::Zero, 8)]), Rule::LostDurableWrite);
}

/// Volatile write 1 (LBA 0..8), then write 2 (LBA 8..16) acknowledged as durable.
fn mixed_acknowledgements(g: Guarantee) -> CrashHistory {
    let mut h = CrashHistory::new(16, 4, g);
    h.record(Some(w(0, 0, 8, 1)), false, Some(Durability::Volatile));
    h.record(Some(w(1, 8, 8, 2)), false, Some(Durability::Durable));
    h
}

#[test]
fn optr_a_durable_write_kept_while_an_earlier_volatile_one_is_lost_is_not_a_prefix() {
    // Under baseline only write 2 had to survive; under OPTR a prefix
    // holding write 2 holds write 1 too.
    let lost_first = [Run::filler(RunKind::Zero, 8), Run::data(8, 2, 8)];
    assert!(check(&mixed_acknowledgements(BASE), None, &lost_first).is_clean(), "baseline allows it");
    let log = check(&mixed_acknowledgements(OPTR), None, &lost_first);
    only(&log, Rule::NotAPrefix);
    assert!(log.kept()[0].message.contains("acknowledged as durable"), "{:?}", log.kept());
    assert!(check(&mixed_acknowledgements(OPTR), None, &[Run::data(0, 1, 8), Run::data(8, 2, 8)]).is_clean());
    // Write 2 itself is durable under both.
    only(
        &check(&mixed_acknowledgements(OPTR), None, &[Run::data(0, 1, 8), Run::filler(RunKind::Zero, 8)]),
        Rule::LostDurableWrite,
    );
}

#[test]
fn optr_a_durable_write_over_an_earlier_volatile_one_shows_no_false_prefix_break() {
    // Volatile write 1 on 0..8, durable write 2 over 0..4, volatile write 3 on 8..16.
    let mut h = CrashHistory::new(16, 4, OPTR);
    h.record(Some(w(0, 0, 8, 1)), false, Some(Durability::Volatile));
    h.record(Some(w(1, 0, 4, 2)), false, Some(Durability::Durable));
    h.record(Some(w(2, 8, 8, 3)), false, Some(Durability::Volatile));
    assert!(check(&h, None, &[Run::data(0, 2, 4), Run::data(4, 1, 4), Run::data(8, 3, 8)]).is_clean());
    assert!(check(&h, None, &[Run::data(0, 2, 4), Run::data(4, 1, 4), Run::filler(RunKind::Zero, 8)]).is_clean());
}

#[test]
fn with_power_loss_protection_every_acknowledged_write_must_survive() {
    for g in [BASE, OPTR] {
        let h = history(g);
        let flight = w(4, 8, 8, 4);
        let newest = [Run::data(0, 2, 4), Run::data(4, 3, 4)];
        let with = |tail: &[Run]| [&newest[..], tail].concat();
        // The request in flight may or may not have landed.
        for tail in [vec![Run::filler(RunKind::Zero, 8)], vec![Run::data(8, 4, 8)]] {
            assert!(check_with(h.checker(Some(flight)).all_acknowledged_durable(), &with(&tail)).is_clean(), "{g:?}");
        }
        // A prefix that leaves out acknowledged write 3 passes the guarantee
        // alone, not with power-loss protection.
        let older = [Run::data(0, 2, 4), Run::data(4, 1, 4), Run::filler(RunKind::Zero, 8)];
        assert!(check(&h, Some(flight), &older).is_clean(), "{g:?}");
        let log = check_with(h.checker(Some(flight)).all_acknowledged_durable(), &older);
        only(&log, Rule::LostDurableWrite);
        assert!(log.kept()[0].message.contains("power-loss protection"), "{:?}", log.kept());
    }
}

#[test]
fn with_power_loss_protection_an_acknowledged_trim_must_survive() {
    for g in [BASE, OPTR] {
        let mut h = CrashHistory::new(8, 4, g);
        h.record(Some(w(0, 0, 8, 1)), false, Some(Durability::Volatile));
        h.record(None, true, None);
        h.record(Some(t(1, 0, 8, 1)), false, None);
        assert!(check_with(h.checker(None).all_acknowledged_durable(), &[Run::filler(RunKind::Zero, 8)]).is_clean());
        only(&check_with(h.checker(None).all_acknowledged_durable(), &[Run::data(0, 1, 8)]), Rule::LostDurableWrite);
    }
}

// ----- a write acknowledged as durable over part of an earlier pending operation -----

/// Write 1 flushed on 0..32; then `earlier` (pending, on 8..24); then write
/// 3 acknowledged as durable over 0..12: it covers the head 8..12 of
/// `earlier`, whose tail 12..24 stays pending. (The case: trim
/// request 2103 of LBA 38056..38080, then durable write request 2116 of
/// LBA 38000..38064.)
fn durable_write_over_the_head_of(g: Guarantee, earlier: PendingOp) -> CrashHistory {
    let mut h = CrashHistory::new(32, 4, g);
    h.record(Some(w(0, 0, 32, 1)), false, Some(Durability::Volatile));
    h.record(None, true, None);
    let durability = (!earlier.trim).then_some(Durability::Volatile);
    h.record(Some(earlier), false, durability);
    h.record(Some(w(2, 0, 12, 3)), false, Some(Durability::Durable));
    h
}
fn pending_trim() -> PendingOp {
    t(1, 8, 16, 1)
}
fn pending_write() -> PendingOp {
    w(1, 8, 16, 2)
}
fn acked(h: &CrashHistory, runs: &[Run]) -> ViolationLog {
    check_with(h.checker(None).all_acknowledged_durable(), runs)
}

#[test]
fn with_power_loss_protection_a_durable_write_over_the_head_of_a_pending_trim_passes_with_zeros_on_the_tail() {
    // The durable write on 0..12, the trim's uncovered tail 12..24 trimmed,
    // write 1 beyond.
    let disk = [Run::data(0, 3, 12), Run::filler(RunKind::Zero, 12), Run::data(24, 1, 8)];
    for g in [BASE, OPTR] {
        let h = durable_write_over_the_head_of(g, pending_trim());
        assert!(check(&h, None, &disk).is_clean(), "{g:?}");
        let log = acked(&h, &disk);
        assert!(log.is_clean(), "{g:?}: {:?}", log.kept());
    }
}

#[test]
fn with_power_loss_protection_a_durable_write_over_the_head_of_a_pending_write_passes_with_it_on_the_tail() {
    let disk = [Run::data(0, 3, 12), Run::data(12, 2, 12), Run::data(24, 1, 8)];
    for g in [BASE, OPTR] {
        let h = durable_write_over_the_head_of(g, pending_write());
        assert!(check(&h, None, &disk).is_clean(), "{g:?}");
        let log = acked(&h, &disk);
        assert!(log.is_clean(), "{g:?}: {:?}", log.kept());
    }
}

#[test]
fn a_trim_lost_on_the_tail_a_later_durable_write_does_not_cover_is_caught() {
    // The tail shows write 1, the data the trim removed.
    let disk = [Run::data(0, 3, 12), Run::data(12, 1, 20)];
    let mut h = durable_write_over_the_head_of(BASE, pending_trim());
    assert!(check(&h, None, &disk).is_clean(), "baseline alone: the trim is still pending");
    let log = acked(&h, &disk);
    only(&log, Rule::LostDurableWrite);
    assert!(log.kept()[0].message.contains("LBA 12 does not show request 1 (trim"), "{:?}", log.kept());
    // A flush makes the tail's trim durable (and only the tail's).
    h.record(None, true, None);
    only(&check(&h, None, &disk), Rule::LostDurableWrite);
    let legal = [Run::data(0, 3, 12), Run::filler(RunKind::Zero, 12), Run::data(24, 1, 8)];
    assert!(check(&h, None, &legal).is_clean());
    // Under OPTR the durable write made the whole trim durable: a prefix holding it holds the trim.
    let ho = durable_write_over_the_head_of(OPTR, pending_trim());
    only(&acked(&ho, &disk), Rule::NotAPrefix);
}

#[test]
fn a_write_lost_on_the_tail_a_later_durable_write_does_not_cover_is_caught() {
    let h = durable_write_over_the_head_of(BASE, pending_write());
    for tail in [Run::data(12, 1, 12), Run::filler(RunKind::Zero, 12)] {
        let disk = [Run::data(0, 3, 12), tail, Run::data(24, 1, 8)];
        let log = acked(&h, &disk);
        only(&log, Rule::LostDurableWrite);
        assert!(log.kept()[0].message.contains("LBA 12"), "{:?}", log.kept());
    }
    // Nor may the head show the pending write the durable one superseded.
    only(&acked(&h, &[Run::data(0, 3, 8), Run::data(8, 2, 16), Run::data(24, 1, 8)]), Rule::LostDurableWrite);
}

#[test]
fn with_power_loss_protection_a_durable_write_does_not_excuse_a_later_operation_over_it() {
    // A trim (request 3) and a write (request 4, write 4) issued after the
    // durable write, over its sectors 0..4 and 4..8: showing the durable
    // write there loses them.
    for later in [t(3, 0, 4, 3), w(3, 4, 4, 4)] {
        let mut h = durable_write_over_the_head_of(BASE, pending_trim());
        h.record(Some(later), false, (!later.trim).then_some(Durability::Volatile));
        let disk = [Run::data(0, 3, 12), Run::filler(RunKind::Zero, 12), Run::data(24, 1, 8)];
        let log = acked(&h, &disk);
        only(&log, Rule::LostDurableWrite);
        assert!(log.kept()[0].message.contains("request 3"), "{later:?}: {:?}", log.kept());
    }
}
