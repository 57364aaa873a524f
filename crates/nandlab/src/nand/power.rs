//! What a power cut does to the NAND.
//!
//! A cut falls *between* two flash operations or *during* one. Between
//! operations it changes nothing on flash. During an operation, with every
//! effect on (the default, see [`PowerCutEffects`]):
//!
//! | operation in flight | what is left on flash |
//! |---------------------|-----------------------|
//! | read (data, OOB, metadata) | nothing changes |
//! | program (host data, metadata, copyback destination, each plane of a multi-plane program) | the page is **torn**: reads of its data or metadata fail as uncorrectable; its spare area reads back what the interrupted program was writing — the worst case for an FTL, whose OOB then vouches for a page whose data is gone, so an FTL must not trust a page on its OOB alone |
//! | program of an upper page (MLC/TLC), with `paired_pages` | the lower page(s) of the same word line, programmed earlier, are torn too (the *paired-page problem*); which pages pair is the geometry's `page_pairing` |
//! | erase (each block of a multi-plane erase) | the block is **undefined**: every page's data, metadata and OOB reads fail as uncorrectable, and a program into it before it is erased again breaks `program_not_erased` (and reads back as garbage) |
//!
//! With `write_cache_lost` (the default) the device DRAM — the FTL's
//! buffers, so its write cache — is lost at the cut. Without it the drive
//! has *power-loss protection*: capacitors keep it up long enough that the
//! FTL finishes the host request in flight and its old instance runs
//! [`crate::ftl::Ftl::emergency_flush`], whose operations are not cut; only
//! then is the power gone (so a protected cut tears nothing itself; the
//! nested cut of `crash` still falls in the recovery after it). What `crash`
//! then checks, and how, is in [`crate::run::crash`]'s docs. Either way
//! nothing else of the FTL survives: recovery is a fresh instance mounting
//! the flash.
//!
//! The effects are applied by the [`crate::flash::FlashController`], the one
//! place every operation passes through; the physics is here, not in the
//! operations. A torn operation is found from the NAND's undo journal (the
//! entries the operation made), so a cut can be placed on an operation that
//! already ran: `crash` rolls the drive back to it and tears it.

use super::{Nand, PageSlot, KIND_MASK, K_GARBAGE, K_UNDEFINED};
use serde::{Deserialize, Serialize};

/// Which effects a power cut has (each can be switched off).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PowerCutEffects {
    /// A program in flight leaves its page torn.
    pub torn_programs: bool,
    /// A torn upper-page program also tears the lower pages of its word line.
    pub paired_pages: bool,
    /// An erase in flight leaves its block undefined.
    pub torn_erases: bool,
    /// The device DRAM, and with it the FTL's write cache, is lost. Off:
    /// power-loss protection (the FTL flushes its cache as the power fails).
    pub write_cache_lost: bool,
}

impl Default for PowerCutEffects {
    /// Torn programs and erases and a lost write cache; paired-page
    /// corruption off, because neither shipped FTL defends against it (turn
    /// it on to test one that does, or to see the problem).
    fn default() -> Self {
        PowerCutEffects { torn_programs: true, paired_pages: false, torn_erases: true, write_cache_lost: true }
    }
}

impl PowerCutEffects {
    /// Parse `name=on|off` (as given to `--power-cut`), naming what is wrong.
    pub fn set(&mut self, assignment: &str) -> Result<(), String> {
        let (name, value) = crate::util::assignment::split(assignment, "EFFECT=on|off, e.g. paired_pages=on")?;
        let on = match value.trim() {
            "on" | "true" | "1" => true,
            "off" | "false" | "0" => false,
            v => return Err(format!("`{name}`: `{v}` is not on or off")),
        };
        let field = match name.trim().replace('-', "_").as_str() {
            "torn_programs" => &mut self.torn_programs,
            "paired_pages" => &mut self.paired_pages,
            "torn_erases" => &mut self.torn_erases,
            "write_cache_lost" => &mut self.write_cache_lost,
            other => {
                return Err(format!(
                    "unknown power-cut effect `{other}` (torn_programs, paired_pages, torn_erases, write_cache_lost)"
                ))
            }
        };
        *field = on;
        Ok(())
    }

    /// `torn_programs=on,...` for reports and reproducing commands.
    pub fn describe(&self) -> String {
        let f = |b: bool| if b { "on" } else { "off" };
        format!(
            "torn_programs={},paired_pages={},torn_erases={},write_cache_lost={}",
            f(self.torn_programs),
            f(self.paired_pages),
            f(self.torn_erases),
            f(self.write_cache_lost)
        )
    }
}

impl Nand {
    /// Tear the flash operation whose journal entries are `entries` (those
    /// it added to the journal): each page it programmed is torn, each block
    /// it erased made undefined (as `effects` allow). Returns how many pages
    /// and blocks were damaged.
    pub fn tear_operation(&mut self, entries: std::ops::Range<usize>, effects: &PowerCutEffects) -> (u32, u32) {
        let (mut pages, mut blocks) = (0, 0);
        let range = entries;
        let mut erased = Vec::new();
        let mut programmed = Vec::new();
        for at in range {
            match self.journal_target(at) {
                Ok(page) => programmed.push(page),
                Err(block) => erased.push(block),
            }
        }
        // An erase journals its pages too: they are the erased block's, not programs.
        let ppb = self.pages_per_block as usize;
        programmed.retain(|p| !erased.contains(&(p / ppb)));
        if effects.torn_erases {
            for &b in &erased {
                self.make_block_undefined(b);
                blocks += 1;
            }
        }
        if effects.torn_programs {
            let mut lower = Vec::new();
            for &p in &programmed {
                self.tear_page(p);
                pages += 1;
                if effects.paired_pages {
                    let pib = (p % ppb) as u32;
                    self.geometry.lower_paired_pages(pib, &mut lower);
                    for &l in &lower {
                        let q = p - pib as usize + l as usize;
                        if self.slots[q].state >> 4 != 0 {
                            self.tear_page(q);
                            pages += 1;
                        }
                    }
                }
            }
        }
        (pages, blocks)
    }

    /// A torn page: as a corrupted one.
    fn tear_page(&mut self, i: usize) {
        self.corrupt_page(super::PageAddr(i as u64));
    }

    /// An interrupted erase: every page undefined (unreadable, not erased).
    fn make_block_undefined(&mut self, b: usize) {
        let ppb = self.pages_per_block as usize;
        for i in b * ppb..(b + 1) * ppb {
            // Program count at its maximum: any program is an in-place write.
            self.replace_slot(i, PageSlot::content(K_UNDEFINED | (15 << 4), 0, 0));
        }
    }

    /// Whether a page is torn or undefined (for inspection and tests).
    pub fn is_damaged(&self, page: super::PageAddr) -> bool {
        self.slots.get(page.0 as usize).is_some_and(|s| s.state & KIND_MASK >= K_GARBAGE)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::nand::payload::Run;
    use crate::nand::FlashError;
    use crate::nand::{BlockAddr, CellType, GeometryConfig, PageAddr, PageContent, PagePairing};
    use crate::violation::{Checker, Rule, RuleConfig, Severity, ViolationLog};

    /// A small MLC NAND (4 blocks of 8 pages) for tests.
    pub(crate) fn mlc() -> Nand {
        let g = GeometryConfig {
            channels: 1,
            chips_per_channel: 1,
            dies_per_chip: 1,
            planes_per_die: 1,
            blocks_per_plane: 4,
            pages_per_block: 8,
            page_size_bytes: 2048,
            oob_size_bytes: 16,
            sector_size_bytes: 512,
            cell_type: CellType::Mlc,
            page_pairing: PagePairing::Consecutive,
            partial_programs_per_page: 1,
        }
        .validate()
        .unwrap();
        Nand::new(g, 4, &[]).unwrap()
    }

    fn with_ck<T>(log: &mut ViolationLog, f: impl FnOnce(&mut Checker) -> T) -> T {
        let sev: [Severity; Rule::ALL.len()] = RuleConfig::default().table();
        let mut ck = Checker::new(&sev, log, 0, None);
        f(&mut ck)
    }

    fn program(n: &mut Nand, log: &mut ViolationLog, op: u64, page: u64, w: u32) {
        n.journal_set_op(op);
        with_ck(log, |ck| n.program(ck, PageAddr(page), &[Run::data(w * 4, w, 4)], &[w as u8; 4])).unwrap();
    }

    #[test]
    fn the_journal_rolls_back_and_replays_exactly() {
        let (mut n, mut log) = (mlc(), ViolationLog::new(10));
        n.journal_start();
        for p in 0..5 {
            program(&mut n, &mut log, p, p, p as u32 + 1);
        }
        n.journal_set_op(5);
        with_ck(&mut log, |ck| n.erase(ck, BlockAddr(0))).unwrap();
        let after: Vec<_> = (0..8).map(|p| n.page_content(PageAddr(p))).collect();
        let end = n.journal_len();
        let cut = n.journal_first_at_or_after(3, end);
        n.journal_undo(cut, end);
        assert!(matches!(n.page_content(PageAddr(2)), PageContent::Data(_)));
        assert_eq!(n.page_content(PageAddr(3)), PageContent::Erased, "ops from 3 on are rolled back");
        assert_eq!(n.write_pointer(BlockAddr(0)), 3);
        assert_eq!(n.erase_count(BlockAddr(0)), 0);
        n.journal_redo(cut, end);
        assert_eq!((0..8).map(|p| n.page_content(PageAddr(p))).collect::<Vec<_>>(), after);
        assert_eq!(n.erase_count(BlockAddr(0)), 1);
    }

    #[test]
    fn a_torn_program_leaves_unreadable_data_and_a_readable_oob() {
        let (mut n, mut log) = (mlc(), ViolationLog::new(10));
        n.journal_start();
        program(&mut n, &mut log, 0, 0, 1);
        let mark = n.journal_len();
        program(&mut n, &mut log, 1, 1, 2);
        assert_eq!(n.tear_operation(mark..n.journal_len(), &PowerCutEffects::default()), (1, 0));
        let mut out = Vec::new();
        assert_eq!(with_ck(&mut log, |ck| n.read(ck, PageAddr(1), 0, 4, &mut out)), Err(FlashError::Uncorrectable));
        let mut oob = [0u8; 4];
        with_ck(&mut log, |ck| n.read_oob(ck, PageAddr(1), &mut oob)).unwrap();
        assert_eq!(oob, [2; 4], "the spare area vouches for the torn page");
        assert!(!n.is_damaged(PageAddr(0)), "paired pages are off by default");
    }

    #[test]
    fn a_torn_upper_page_tears_its_lower_page_when_paired_pages_are_on() {
        let (mut n, mut log) = (mlc(), ViolationLog::new(10));
        n.journal_start();
        program(&mut n, &mut log, 0, 0, 1);
        let mark = n.journal_len();
        program(&mut n, &mut log, 1, 1, 2);
        let effects = PowerCutEffects { paired_pages: true, ..PowerCutEffects::default() };
        assert_eq!(n.tear_operation(mark..n.journal_len(), &effects), (2, 0));
        assert!(n.is_damaged(PageAddr(0)), "word line 0's lower page is gone too");
    }

    #[test]
    fn an_interrupted_erase_leaves_an_undefined_block_until_erased_again() {
        let (mut n, mut log) = (mlc(), ViolationLog::new(10));
        n.journal_start();
        program(&mut n, &mut log, 0, 0, 1);
        n.journal_set_op(1);
        let mark = n.journal_len();
        with_ck(&mut log, |ck| n.erase(ck, BlockAddr(0))).unwrap();
        assert_eq!(n.tear_operation(mark..n.journal_len(), &PowerCutEffects::default()), (0, 1));
        let mut oob = [0u8; 4];
        assert_eq!(with_ck(&mut log, |ck| n.read_oob(ck, PageAddr(3), &mut oob)), Err(FlashError::Uncorrectable));
        program(&mut n, &mut log, 2, 0, 5);
        assert_eq!(log.count(Rule::ProgramNotErased), 1, "an undefined block is not erased");
        with_ck(&mut log, |ck| n.erase(ck, BlockAddr(0))).unwrap();
        with_ck(&mut log, |ck| n.read_oob(ck, PageAddr(3), &mut oob)).unwrap();
        assert_eq!(oob, [0xff; 4]);
    }

    #[test]
    fn effects_parse_by_name_and_reject_unknown_ones() {
        let mut e = PowerCutEffects::default();
        e.set("paired_pages=on").unwrap();
        e.set("torn-erases=off").unwrap();
        assert!(e.paired_pages && !e.torn_erases);
        assert!(e.set("sparks=on").unwrap_err().contains("unknown power-cut effect"));
        assert!(e.set("torn_programs=maybe").is_err());
    }
}
