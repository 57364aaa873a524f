//! Multi-plane operations through the controller: every page is checked,
//! and an operation that fails part-way is recorded for what it did.

use super::*;
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
    FlashController::new(Nand::new(g, 16, &[bad]), &RuleConfig::default(), 1 << 20, 100)
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
        ProgramOp { page: b, src: BufId(999), src_sector: 0, oob: &[1] },
    ];
    assert_eq!(c.program_multi(Cause::Host, &ops), Err(FlashError::InvalidBuffer));
    assert!(c.nand().is_programmed(a) && !c.nand().is_programmed(b));
    assert_eq!(c.stats().cause(Cause::Host).page_programs, 1, "the programmed page counts");
    let ops_seen = seen.borrow();
    assert_eq!(ops_seen.len(), 1);
    assert_eq!((ops_seen[0].kind, ops_seen[0].planes, ops_seen[0].transfer_bytes), (OpKind::Program, 1, 2048));
    drop(ops_seen);
    // Nothing done: nothing counted (as for a single-plane failure).
    let ops = [ProgramOp { page: page_on(&c, 0, 0, 1), src: BufId(999), src_sector: 0, oob: &[] }];
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
