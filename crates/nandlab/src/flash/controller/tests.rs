//! The controller: multi-plane operations (every page is checked, an
//! operation that fails part-way is recorded for what it did) and live
//! power cuts (a cut tears only its own operation).

use super::*;
use crate::nand::PageContent;
use crate::nand::{CellType, GeometryConfig, PagePairing};
use crate::violation::RuleConfig;
use std::cell::RefCell;
use std::rc::Rc;

/// 1 die of `planes` planes, 4 blocks x 4 pages of 2 KiB; block 1 of plane 1 bad.
fn controller(planes: u32) -> FlashController {
    let g = GeometryConfig {
        channels: 1,
        chips_per_channel: 1,
        dies_per_chip: 1,
        planes_per_die: planes,
        blocks_per_plane: 4,
        pages_per_block: 4,
        page_size_bytes: 2048,
        oob_size_bytes: 64,
        sector_size_bytes: 512,
        cell_type: CellType::Slc,
        page_pairing: PagePairing::Consecutive,
        partial_programs_per_page: 1,
    }
    .validate()
    .unwrap();
    let bad = g.block_addr(1, 1);
    FlashController::new(Nand::new(g, 16, &[bad]).unwrap(), &RuleConfig::default(), 1 << 20, 100)
}

/// Records what observers see.
struct Recorder(Rc<RefCell<Vec<FlashOp>>>);

impl FlashObserver for Recorder {
    fn after_op(&mut self, op: &FlashOp) {
        self.0.borrow_mut().push(*op);
    }
}

fn page_on(c: &FlashController, plane: u32, block: u32, page: u32) -> PageAddr {
    let g = c.geometry();
    g.page_addr(g.block_addr(plane, block), page)
}

#[test]
fn a_plane_repeated_after_the_sixteenth_page_is_a_mismatch() {
    let mut c = controller(20);
    let buf = c.buf_alloc(4).unwrap();
    let op = |c: &FlashController, plane, page| ProgramOp {
        page: page_on(c, plane, 0, page),
        src: buf,
        src_sector: 0,
        oob: &[],
    };
    // 18 distinct planes agree.
    let ops: Vec<_> = (0..18).map(|p| op(&c, p, 0)).collect();
    c.program_multi(Cause::Host, &ops).unwrap();
    assert_eq!(c.log().count(Rule::MultiPlaneMismatch), 0);
    // The 18th page is on plane 3 again.
    let ops: Vec<_> = (0..17).map(|p| op(&c, p, 1)).chain([op(&c, 3, 1)]).collect();
    let _ = c.program_multi(Cause::Host, &ops);
    assert_eq!(c.log().count(Rule::MultiPlaneMismatch), 1, "{:?}", c.log().kept());
}

#[test]
fn a_multi_plane_program_failing_part_way_is_counted_and_observed_for_what_it_did() {
    let mut c = controller(2);
    let seen = Rc::new(RefCell::new(Vec::new()));
    c.add_observer(Box::new(Recorder(seen.clone())));
    let buf = c.buf_alloc(4).unwrap();
    let (a, b) = (page_on(&c, 0, 0, 0), page_on(&c, 1, 0, 0));
    let ops = [
        ProgramOp { page: a, src: buf, src_sector: 0, oob: &[1] },
        ProgramOp { page: b, src: BufId::new(999, 0), src_sector: 0, oob: &[1] },
    ];
    assert_eq!(c.program_multi(Cause::Host, &ops), Err(FlashError::InvalidBuffer));
    assert!(c.nand().is_programmed(a) && !c.nand().is_programmed(b));
    assert_eq!(c.stats().cause(Cause::Host).page_programs, 1, "the programmed page counts");
    let ops_seen = seen.borrow();
    assert_eq!(ops_seen.len(), 1);
    assert_eq!((ops_seen[0].kind, ops_seen[0].planes, ops_seen[0].transfer_bytes), (OpKind::Program, 1, 2048));
    drop(ops_seen);
    // Nothing done: nothing counted (as for a single-plane failure).
    let ops = [ProgramOp { page: page_on(&c, 0, 0, 1), src: BufId::new(999, 0), src_sector: 0, oob: &[] }];
    assert_eq!(c.program_multi(Cause::Host, &ops), Err(FlashError::InvalidBuffer));
    assert_eq!(c.stats().cause(Cause::Host).page_programs, 1);
    assert_eq!(seen.borrow().len(), 1);
}

#[test]
fn a_multi_plane_erase_failing_part_way_is_counted() {
    let mut c = controller(2);
    let blocks = [c.geometry().block_addr(0, 1), c.geometry().block_addr(1, 1)]; // the second is bad
    assert_eq!(c.erase_multi(Cause::Gc, &blocks), Err(FlashError::BadBlock));
    assert_eq!(c.stats().cause(Cause::Gc).block_erases, 1);
    assert_eq!(c.nand().erase_count(blocks[0]), 1);
}

// ----- live power cuts -----

fn mlc_controller() -> FlashController {
    FlashController::new(crate::nand::power::tests::mlc(), &RuleConfig::default(), 1 << 20, 10)
}

#[test]
fn a_live_cut_during_a_read_tears_nothing_even_where_the_base_run_programmed_at_that_index() {
    // A crash test's recovery reuses the operation indices of the base
    // run, whose rolled-back entries stay in the journal for the redo.
    let mut f = mlc_controller();
    f.nand_mut().journal_start();
    let data = [7u8; 2048];
    f.program_meta(Cause::Host, PageAddr(0), &data, &[1; 4]).unwrap(); // op 0
    f.program_meta(Cause::Host, PageAddr(1), &data, &[2; 4]).unwrap(); // op 1
    let image = f.enter_crash_image(PowerCut { op_index: 1, during: false });
    assert_eq!(f.nand().page_content(PageAddr(1)), PageContent::Erased, "op 1 is rolled back");
    // The "recovery" reads page 0 as op 1 and is cut during that read.
    f.schedule_power_cut(PowerCut { op_index: 1, during: true });
    let mut out = [0u8; 2048];
    assert_eq!(f.read_meta(Cause::Recovery, PageAddr(0), &mut out, &mut []), Err(FlashError::PowerLoss));
    assert_eq!(f.nand().page_content(PageAddr(1)), PageContent::Erased, "a read tears nothing");
    assert!(matches!(f.nand().page_content(PageAddr(0)), PageContent::Metadata(_)));
    f.leave_crash_image(image);
    assert!(matches!(f.nand().page_content(PageAddr(1)), PageContent::Metadata(_)), "the base run is back");
}

#[test]
fn a_live_cut_during_a_program_tears_that_program() {
    let mut f = mlc_controller();
    f.nand_mut().journal_start();
    let data = [7u8; 2048];
    f.program_meta(Cause::Host, PageAddr(0), &data, &[1; 4]).unwrap();
    f.schedule_power_cut(PowerCut { op_index: 1, during: true });
    assert_eq!(f.program_meta(Cause::Host, PageAddr(1), &data, &[2; 4]), Err(FlashError::PowerLoss));
    assert_eq!(f.nand().page_content(PageAddr(1)), PageContent::Garbage);
    assert!(matches!(f.nand().page_content(PageAddr(0)), PageContent::Metadata(_)));
}
