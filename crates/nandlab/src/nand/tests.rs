//! Rule checks of the virtual NAND, one broken operation per rule, and
//! property tests of page content against a per-sector model.

use super::*;
use crate::violation::{RuleConfig, Severity, ViolationLog};
use proptest::prelude::*;

fn geometry(nop: u32) -> Geometry {
    GeometryConfig {
        channels: 1,
        chips_per_channel: 1,
        dies_per_chip: 1,
        planes_per_die: 2,
        blocks_per_plane: 4,
        pages_per_block: 8,
        page_size_bytes: 2048,
        oob_size_bytes: 64,
        sector_size_bytes: 512,
        cell_type: CellType::Slc,
        page_pairing: PagePairing::Consecutive,
        partial_programs_per_page: nop,
    }
    .validate()
    .unwrap()
}

struct Rig {
    nand: Nand,
    sev: [Severity; Rule::ALL.len()],
    log: ViolationLog,
}

impl Rig {
    fn new(nop: u32) -> Rig {
        Rig::with_rules(nop, RuleConfig::default())
    }
    fn with_rules(nop: u32, rules: RuleConfig) -> Rig {
        Rig {
            nand: Nand::new(geometry(nop), 16, &[BlockAddr(7)]).unwrap(),
            sev: rules.table(),
            log: ViolationLog::new(100),
        }
    }
    /// Run one NAND operation with a checker.
    fn op<T>(&mut self, f: impl FnOnce(&mut Nand, &mut Checker) -> T) -> T {
        let mut ck = Checker::new(&self.sev, &mut self.log, 0, Some(1));
        f(&mut self.nand, &mut ck)
    }
    fn program(&mut self, page: u64, runs: &[Run]) -> Result<(), FlashError> {
        let mut ck = Checker::new(&self.sev, &mut self.log, 0, Some(1));
        self.nand.program(&mut ck, PageAddr(page), runs, &[1, 2, 3])
    }
    fn read(&mut self, page: u64) -> Result<Vec<Run>, FlashError> {
        let mut out = Vec::new();
        let mut ck = Checker::new(&self.sev, &mut self.log, 0, None);
        self.nand.read(&mut ck, PageAddr(page), 0, 4, &mut out).map(|_| out)
    }
    fn count(&self, rule: Rule) -> u64 {
        self.log.count(rule)
    }
}

fn data(lba: u32, w: u32) -> Vec<Run> {
    vec![Run::data(lba, w, 4)]
}

#[test]
fn in_order_programs_break_no_rule_and_read_back() {
    let mut r = Rig::new(1);
    for p in 0..8 {
        r.program(p, &data(p as u32 * 4, 1)).unwrap();
    }
    assert_eq!(r.log.errors(), 0);
    assert_eq!(r.read(3).unwrap(), data(12, 1));
    let mut oob = [0u8; 8];
    r.op(|n, ck| n.read_oob(ck, PageAddr(3), &mut oob)).unwrap();
    assert_eq!(oob, [1, 2, 3, 0xff, 0xff, 0xff, 0xff, 0xff]);
}

#[test]
fn skipping_page_zero_is_out_of_order() {
    let mut r = Rig::new(1);
    r.program(1, &data(0, 1)).unwrap();
    assert_eq!(r.count(Rule::ProgramOutOfOrder), 1);
    // Going back to the skipped page is out of order too.
    r.program(0, &data(4, 1)).unwrap();
    assert_eq!(r.count(Rule::ProgramOutOfOrder), 2);
}

#[test]
fn reprogramming_a_page_is_an_in_place_write() {
    let mut r = Rig::new(1);
    r.program(0, &data(0, 1)).unwrap();
    r.program(0, &data(0, 2)).unwrap();
    assert_eq!(r.count(Rule::ProgramNotErased), 1);
}

#[test]
fn partial_programs_within_nop_are_legal_but_overlaps_are_not() {
    let mut r = Rig::new(2);
    let erased = |n| Run::filler(RunKind::Erased, n);
    r.program(0, &[Run::data(0, 1, 2), erased(2)]).unwrap();
    r.program(0, &[erased(2), Run::data(2, 2, 2)]).unwrap();
    assert_eq!(r.log.errors(), 0);
    assert_eq!(r.read(0).unwrap(), vec![Run::data(0, 1, 2), Run::data(2, 2, 2)]);
    // A third program exceeds NOP = 2.
    r.program(0, &[erased(3), Run::data(3, 3, 1)]).unwrap();
    assert_eq!(r.count(Rule::ProgramNotErased), 1, "one violation per operation");
}

#[test]
fn bad_blocks_and_addresses_outside_the_device_fail() {
    let mut r = Rig::new(1);
    let bad_page = 7 * 8;
    assert_eq!(r.program(bad_page, &data(0, 1)), Err(FlashError::BadBlock));
    assert_eq!(r.op(|n, ck| n.erase(ck, BlockAddr(7))), Err(FlashError::BadBlock));
    assert_eq!(r.program(64, &data(0, 1)), Err(FlashError::AddressOutOfRange));
    assert_eq!(r.op(|n, ck| n.erase(ck, BlockAddr(8))), Err(FlashError::AddressOutOfRange));
    assert_eq!(r.count(Rule::BadBlock), 2);
    assert_eq!(r.count(Rule::AddressOutOfRange), 2);
}

#[test]
fn multi_plane_pages_must_share_block_and_page_offsets() {
    let mut r = Rig::new(1);
    let g = r.nand.geometry().clone();
    let a = g.page_addr(g.block_addr(0, 1), 2);
    let b = g.page_addr(g.block_addr(1, 1), 2);
    let c = g.page_addr(g.block_addr(1, 2), 2);
    let d = g.page_addr(g.block_addr(1, 1), 3);
    assert!(r.op(|n, ck| n.check_multi_plane(ck, [a, b].into_iter())));
    assert!(!r.op(|n, ck| n.check_multi_plane(ck, [a, c].into_iter())));
    assert!(!r.op(|n, ck| n.check_multi_plane(ck, [a, d].into_iter())));
    assert!(!r.op(|n, ck| n.check_multi_plane(ck, [a, a].into_iter())));
    assert_eq!(r.count(Rule::MultiPlaneMismatch), 3);
}

#[test]
fn reading_an_erased_page_is_allowed_by_default_but_can_be_flagged() {
    let mut r = Rig::new(1);
    assert_eq!(r.read(0).unwrap(), vec![Run::filler(RunKind::Erased, 4)]);
    assert_eq!(r.count(Rule::ReadErasedPage), 0);
    let mut rules = RuleConfig::default();
    rules.set(Rule::ReadErasedPage, Severity::Warn).unwrap();
    let mut r = Rig::with_rules(1, rules);
    r.read(0).unwrap();
    assert_eq!(r.count(Rule::ReadErasedPage), 1);
    assert!(r.log.is_clean(), "a warning does not fail the run");
}

#[test]
fn allowed_rules_are_not_recorded() {
    let mut rules = RuleConfig::default();
    rules.set(Rule::ProgramOutOfOrder, Severity::Allow).unwrap();
    let mut r = Rig::with_rules(1, rules);
    r.program(3, &data(0, 1)).unwrap();
    assert_eq!(r.count(Rule::ProgramOutOfOrder), 0);
}

#[test]
fn erase_resets_pages_and_counts_wear() {
    let mut r = Rig::new(1);
    r.program(0, &data(0, 1)).unwrap();
    r.op(|n, ck| n.erase(ck, BlockAddr(0))).unwrap();
    assert_eq!(r.nand.erase_count(BlockAddr(0)), 1);
    assert_eq!(r.read(0).unwrap(), vec![Run::filler(RunKind::Erased, 4)]);
    r.program(0, &data(0, 2)).unwrap();
    assert_eq!(r.log.errors(), 0);
}

#[test]
fn erase_clears_damage_the_write_pointer_does_not_show() {
    // Block 1 was never programmed (write pointer 0), yet page 5 was
    // corrupted: the erase must still reset it, though it skips the pages
    // of blocks that are already erased.
    let mut r = Rig::new(1);
    let page = 8 + 5;
    r.nand.corrupt_page(PageAddr(page));
    assert_eq!(r.read(page), Err(FlashError::Uncorrectable));
    r.op(|n, ck| n.erase(ck, BlockAddr(1))).unwrap();
    assert_eq!(r.read(page).unwrap(), vec![Run::filler(RunKind::Erased, 4)]);
    assert!(!r.nand.is_programmed(PageAddr(page)));
}

#[test]
fn copyback_copies_content_within_a_plane_only() {
    let mut r = Rig::new(1);
    let mixed = vec![Run::data(0, 1, 1), Run::data(9, 2, 3)];
    r.program(0, &mixed).unwrap();
    r.op(|n, ck| n.copyback(ck, PageAddr(0), PageAddr(8), Some(&[9]))).unwrap();
    assert_eq!(r.read(8).unwrap(), mixed);
    // Plane 1 starts at block 4.
    r.op(|n, ck| n.copyback(ck, PageAddr(0), PageAddr(32), None)).unwrap();
    assert_eq!(r.count(Rule::CopybackCrossPlane), 1);
}

#[test]
fn a_copyback_onto_a_programmed_page_is_reported_once() {
    // NOP = 1: the program-order check reports the second program of the page.
    let mut r = Rig::new(1);
    r.program(0, &data(0, 1)).unwrap();
    r.program(8, &data(1, 1)).unwrap();
    r.op(|n, ck| n.copyback(ck, PageAddr(0), PageAddr(8), None)).unwrap();
    assert_eq!(r.count(Rule::ProgramNotErased), 1);
    // NOP = 2: a partial program would be allowed, a whole-page copyback is not.
    let mut r = Rig::new(2);
    r.program(0, &data(0, 1)).unwrap();
    r.program(8, &data(1, 1)).unwrap();
    r.op(|n, ck| n.copyback(ck, PageAddr(0), PageAddr(8), None)).unwrap();
    assert_eq!(r.count(Rule::ProgramNotErased), 1);
    // Onto an erased page: nothing to report.
    r.op(|n, ck| n.copyback(ck, PageAddr(0), PageAddr(1), None)).unwrap();
    assert_eq!(r.count(Rule::ProgramNotErased), 1);
}

#[test]
fn metadata_pages_keep_their_bytes() {
    let mut r = Rig::new(1);
    r.op(|n, ck| n.program_meta(ck, PageAddr(0), &[7, 0, 0xff, 5, 0xff, 0xff], &[])).unwrap();
    let mut out = [0u8; 8];
    r.op(|n, ck| n.read_meta(ck, PageAddr(0), &mut out)).unwrap();
    assert_eq!(out, [7, 0, 0xff, 5, 0xff, 0xff, 0xff, 0xff]);
    assert_eq!(r.read(0).unwrap(), vec![Run::filler(RunKind::Metadata, 4)]);
}

#[test]
fn fast_division_is_exact() {
    for d in [1u32, 2, 3, 7, 256, 4152, 65_521, u32::MAX] {
        let f = FastDiv::new(d);
        for n in [0u32, 1, d - 1, d, d.wrapping_add(1), 123_456_789, u32::MAX - 1, u32::MAX] {
            assert_eq!(f.quotient(n), n / d, "{n} / {d}");
            assert_eq!(f.remainder(n), n % d, "{n} % {d}");
        }
    }
}

#[test]
fn a_metadata_range_read_transfers_only_that_range() {
    let mut r = Rig::new(1);
    r.op(|n, ck| n.program_meta(ck, PageAddr(0), &[1, 2, 3, 4, 5, 6], &[])).unwrap();
    let mut out = [0u8; 4];
    r.op(|n, ck| n.read_meta_at(ck, PageAddr(0), 4, &mut out)).unwrap();
    assert_eq!(out, [5, 6, 0xff, 0xff], "bytes past the programmed ones read as erased");
    r.op(|n, ck| n.read_meta_at(ck, PageAddr(0), 1, &mut out)).unwrap();
    assert_eq!(out, [2, 3, 4, 5]);
    let past_the_page = r.op(|n, ck| n.read_meta_at(ck, PageAddr(0), 2047, &mut out));
    assert_eq!(past_the_page, Err(FlashError::InvalidArgument));
}

proptest! {
    /// Any sequence of in-order programs, erases and reads reads back what
    /// was last programmed since the last erase, and breaks no rule.
    #[test]
    fn content_matches_a_model_under_legal_operations(ops in prop::collection::vec((0u64..2, 0u8..3, 1u32..200), 1..120)) {
        let mut r = Rig::new(1);
        let mut model: Vec<Vec<Option<Vec<Run>>>> = vec![vec![None; 8]; 2];
        for (block, op, w) in ops {
            let wp = r.nand.write_pointer(BlockAddr(block));
            match op {
                0 | 1 if wp < 8 => {
                    let runs = if op == 0 { data(w, w) } else { vec![Run::data(w, w, 1), Run::filler(RunKind::Zero, 3)] };
                    r.program(block * 8 + u64::from(wp), &runs).unwrap();
                    model[block as usize][wp as usize] = Some(runs);
                }
                _ => {
                    r.op(|n, ck| n.erase(ck, BlockAddr(block))).unwrap();
                    model[block as usize] = vec![None; 8];
                }
            }
        }
        prop_assert_eq!(r.log.errors(), 0);
        for b in 0..2u64 {
            for p in 0..8u64 {
                let got = r.read(b * 8 + p).unwrap();
                let want = model[b as usize][p as usize].clone().unwrap_or_else(|| vec![Run::filler(RunKind::Erased, 4)]);
                prop_assert_eq!(got, want);
            }
        }
    }

    /// Programming pages in any order is flagged exactly when the page is
    /// not the block's write pointer: page N while page N-1 is erased (a
    /// skip), or a page below one already programmed (going back). Each
    /// skip is reported once, where it happens.
    #[test]
    fn out_of_order_is_flagged_exactly_off_the_write_pointer(order in Just((0u64..8).collect::<Vec<_>>()).prop_shuffle()) {
        let mut r = Rig::new(1);
        let mut expected = 0;
        let mut write_pointer = 0;
        for &p in &order {
            if p != write_pointer {
                expected += 1;
            }
            write_pointer = write_pointer.max(p + 1);
            r.program(p, &data(0, 1)).unwrap();
        }
        prop_assert_eq!(r.count(Rule::ProgramOutOfOrder), expected);
    }
}

/// A page of `spp` sectors as consecutive-LBA data runs split at `cuts`
/// (each run its own write), optionally with a zero run in the middle.
fn page_runs(spp: u32, cuts: &[u32], zero_in_middle: bool) -> Vec<Run> {
    let mut points: Vec<u32> = cuts.iter().map(|c| c % spp).filter(|&c| c > 0).collect();
    points.sort_unstable();
    points.dedup();
    points.push(spp);
    let mut runs = Vec::new();
    let mut start = 0;
    for (k, &end) in points.iter().enumerate() {
        let kind_zero = zero_in_middle && k == 1 && points.len() > 2;
        let r = if kind_zero {
            Run::filler(RunKind::Zero, end - start)
        } else {
            Run::data(100 + start, k as u32 + 1, end - start)
        };
        payload::push_run(&mut runs, r);
        start = end;
    }
    runs
}

proptest! {
    /// Whatever run list a page holds (inline or in the slab), reading any
    /// sector range gives exactly that slice of it, and copyback keeps it.
    #[test]
    fn any_page_content_reads_back_by_sector_range(cuts in prop::collection::vec(0u32..4, 0..5), zero in any::<bool>(), first in 0u32..4, len in 1u32..5) {
        let mut r = Rig::new(1);
        let runs = page_runs(4, &cuts, zero);
        r.program(0, &runs).unwrap();
        let len = len.min(4 - first);
        let mut want = Vec::new();
        payload::slice_runs(&runs, first, len, &mut want);
        let mut got = Vec::new();
        r.op(|n, ck| n.read(ck, PageAddr(0), first, len, &mut got)).unwrap();
        prop_assert_eq!(got, want);
        r.op(|n, ck| n.copyback(ck, PageAddr(0), PageAddr(8), None)).unwrap();
        prop_assert_eq!(r.read(8).unwrap(), runs);
        prop_assert_eq!(r.log.errors(), 0);
    }
}

#[test]
fn pages_of_up_to_two_consecutive_lba_runs_are_inline_and_others_in_the_slab() {
    let g = GeometryConfig { page_size_bytes: 16384, ..geometry(1).config().clone() }.validate().unwrap();
    let mut nand = Nand::new(g, 0, &[]).unwrap();
    let sev = RuleConfig::default().table();
    let mut log = ViolationLog::new(4);
    let mut ck = Checker::new(&sev, &mut log, 0, None);
    let two = page_runs(32, &[16], false);
    let three = page_runs(32, &[8, 16], false);
    nand.program(&mut ck, PageAddr(0), &two, &[]).unwrap();
    let before = nand.runs.heap_bytes();
    nand.program(&mut ck, PageAddr(1), &two, &[]).unwrap();
    assert_eq!(nand.runs.heap_bytes(), before, "two runs stay inline");
    nand.program(&mut ck, PageAddr(2), &three, &[]).unwrap();
    assert!(nand.runs.heap_bytes() > before, "three runs go to the slab");
    let mut out = Vec::new();
    nand.read(&mut ck, PageAddr(1), 0, 32, &mut out).unwrap();
    assert_eq!(out, two);
    out.clear();
    nand.read(&mut ck, PageAddr(2), 0, 32, &mut out).unwrap();
    assert_eq!(out, three);
}

/// A device of 2^31 pages or more needs tables larger than many machines
/// can allocate: that is an error naming the size, not a panic.
#[test]
fn a_device_too_large_to_allocate_is_an_error_not_a_panic() {
    let g = GeometryConfig {
        channels: 8,
        chips_per_channel: 8,
        dies_per_chip: 2,
        planes_per_die: 4,
        blocks_per_plane: 16383,
        pages_per_block: 512,
        page_size_bytes: 1 << 20,
        oob_size_bytes: 1 << 16,
        sector_size_bytes: 1 << 20,
        ..geometry(1).config().clone()
    }
    .validate()
    .unwrap();
    assert!(g.pages() >= 1 << 31);
    // 64 KiB of OOB kept per page: 2^47 bytes, beyond any address space.
    let e = std::panic::catch_unwind(|| Nand::new(g.clone(), 1 << 16, &[]).map(|_| ())).expect("no panic").unwrap_err();
    assert!(e.contains("cannot allocate the NAND's") && e.contains(&g.pages().to_string()), "{e}");
}
