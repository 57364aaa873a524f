//! The oracle catches each kind of wrong read, and accepts right ones.

use super::*;
use crate::violation::{Rule, RuleConfig, Severity, ViolationLog};
use proptest::prelude::*;

fn check(o: &Oracle, lba: u64, runs: &[Run]) -> ViolationLog {
    let sev: [Severity; Rule::ALL.len()] = RuleConfig::default().table();
    let mut log = ViolationLog::new(10);
    let mut ck = Checker::new(&sev, &mut log, 0, Some(0));
    o.check_read(&mut ck, lba, runs);
    log
}

fn only(log: &ViolationLog, rule: Rule) {
    assert_eq!(log.errors(), 1, "{:?}", log.kept());
    assert_eq!(log.count(rule), 1, "{:?}", log.kept());
}

#[test]
fn correct_reads_pass() {
    let mut o = Oracle::new(64, 4);
    o.record_write(0, 8, 1);
    o.record_write(8, 2, 2);
    o.record_trim(12, 4);
    let runs = [Run::data(0, 1, 8), Run::data(8, 2, 2), Run::filler(RunKind::Zero, 10)];
    assert!(check(&o, 0, &runs).is_clean());
}

/// A never-written sector must read as zeros; erased flash there is the
/// FTL returning a never-programmed page (before, it was accepted).
#[test]
fn erased_flash_for_a_never_written_sector_is_caught_unless_allowed() {
    let mut o = Oracle::new(64, 4);
    o.record_write(0, 4, 1);
    only(&check(&o, 8, &[Run::filler(RunKind::Erased, 4)]), Rule::UnwrittenNotZero);
    only(&check(&o, 0, &[Run::data(0, 1, 4), Run::filler(RunKind::Erased, 4)]), Rule::UnwrittenNotZero);
    only(&check(&o, 0, &[Run::filler(RunKind::Erased, 8)]), Rule::ErasedRead);
    let mut rules = RuleConfig::default();
    rules.set(Rule::UnwrittenNotZero, Severity::Allow).unwrap();
    let sev = rules.table();
    let mut log = ViolationLog::new(10);
    let mut ck = Checker::new(&sev, &mut log, 0, Some(0));
    o.check_read(&mut ck, 8, &[Run::filler(RunKind::Erased, 4)]);
    assert!(log.is_clean() && log.warnings() == 0, "allowed for a drive that deallocates to 0xFF");
}

#[test]
fn each_wrong_read_has_its_rule() {
    let mut o = Oracle::new(64, 4);
    o.record_write(0, 4, 1);
    o.record_write(0, 4, 5);
    o.record_trim(4, 4);
    only(&check(&o, 0, &[Run::data(4, 5, 4)]), Rule::MisdirectedRead);
    only(&check(&o, 0, &[Run::data(0, 1, 4)]), Rule::StaleRead);
    only(&check(&o, 0, &[Run::data(0, 9, 4)]), Rule::PhantomData);
    only(&check(&o, 8, &[Run::data(8, 1, 4)]), Rule::PhantomData);
    only(&check(&o, 4, &[Run::data(4, 1, 4)]), Rule::TrimNotZero);
    only(&check(&o, 0, &[Run::filler(RunKind::Zero, 4)]), Rule::LostWrite);
    only(&check(&o, 0, &[Run::filler(RunKind::Erased, 4)]), Rule::ErasedRead);
    only(&check(&o, 4, &[Run::filler(RunKind::Erased, 4)]), Rule::ErasedRead);
    only(&check(&o, 0, &[Run::filler(RunKind::Unfilled, 4)]), Rule::MissingData);
    only(&check(&o, 0, &[Run::filler(RunKind::Metadata, 4)]), Rule::MisdirectedRead);
    only(&check(&o, 0, &[Run::filler(RunKind::Garbage, 4)]), Rule::CorruptRead);
}

#[test]
fn partial_unit_writes_are_checked_per_sector_and_collapse_back() {
    let mut o = Oracle::new(32, 8);
    o.record_write(0, 8, 1);
    o.record_write(3, 2, 2);
    assert_eq!(o.exception_units(), 1);
    assert!(check(&o, 0, &[Run::data(0, 1, 3), Run::data(3, 2, 2), Run::data(5, 1, 3)]).is_clean());
    only(&check(&o, 0, &[Run::data(0, 1, 8)]), Rule::StaleRead);
    o.record_write(0, 8, 3);
    assert_eq!(o.exception_units(), 0, "a whole-unit write collapses the exception");
    o.record_write(2, 4, 4);
    o.record_write(0, 2, 4);
    o.record_write(6, 2, 4);
    assert_eq!(o.exception_units(), 0, "sectors that agree again collapse");
    assert_eq!(o.version(5), SectorVersion::Written(4));
}

proptest! {
    /// The unit-compressed oracle answers exactly like a per-sector array.
    #[test]
    fn versions_match_a_per_sector_model(ops in prop::collection::vec((0u64..60, 1u64..12, any::<bool>()), 1..80), unit in 0u32..4) {
        let mut o = Oracle::new(64, 1 << unit);
        let mut model = vec![SectorVersion::Never; 64];
        for (w, (lba, len, trim)) in ops.into_iter().enumerate() {
            let len = len.min(64 - lba);
            if trim {
                o.record_trim(lba, len);
                model[lba as usize..(lba + len) as usize].fill(SectorVersion::Trimmed);
            } else {
                o.record_write(lba, len, w as u32 + 1);
                model[lba as usize..(lba + len) as usize].fill(SectorVersion::Written(w as u32 + 1));
            }
        }
        for s in 0..64u64 {
            prop_assert_eq!(o.version(s), model[s as usize]);
        }
        // A read returning exactly the model passes.
        let runs: Vec<Run> = model.iter().enumerate().map(|(i, v)| match v {
            SectorVersion::Written(w) => Run::data(i as u32, *w, 1),
            _ => Run::filler(RunKind::Zero, 1),
        }).collect();
        prop_assert!(check(&o, 0, &runs).is_clean());
    }
}
