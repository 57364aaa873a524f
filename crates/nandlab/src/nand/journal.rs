//! An undo journal for the NAND: how `crash` tests thousands of power cuts
//! without copying the drive.
//!
//! While the journal is active, every change to a page (its slot, its OOB
//! bytes, its block's write pointer) or to a block (write pointer, P/E
//! count, bad mark) first records the old value, tagged with the index of
//! the flash operation that made it. Entries are *swapped* back, not just
//! copied: undoing an entry puts the old value in the NAND and the newer
//! one in the entry, so undoing a range and redoing it in forward order
//! returns the NAND exactly to where it was. That is what lets a crash test
//! roll a running drive back to any flash operation of the last host
//! request, tear that operation, recover and run more workload on the
//! image, then roll all of it back and carry on with the base run.
//!
//! Slab-backed content (run lists, metadata bytes) has exactly one owner:
//! the slot that holds it or the journal entry that holds it. A slot's
//! content replaced while journaling is therefore not freed but handed to
//! the entry; entries free what they own when they are discarded.

use super::{Nand, PageSlot, K_META, K_RUNS};

/// What one entry saved.
#[derive(Copy, Clone, Debug)]
enum Saved {
    /// A page: its slot, its block's write pointer, and its OOB bytes at
    /// `oob_at` in the journal's byte arena.
    Page { page: usize, slot: PageSlot, write_ptr: u32, oob_at: usize },
    /// A block's metadata.
    Block { block: usize, write_ptr: u32, erase_count: u32, bad: bool },
}

#[derive(Copy, Clone, Debug)]
struct Entry {
    op: u64,
    saved: Saved,
}

/// The journal (see the module docs). Inactive by default: `stress` pays nothing.
#[derive(Clone, Debug, Default)]
pub(super) struct Journal {
    pub(super) active: bool,
    /// The flash operation being executed (tags new entries).
    pub(super) op: u64,
    entries: Vec<Entry>,
    oob: Vec<u8>,
}

impl Journal {
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }
}

impl Nand {
    /// Start journaling changes (see the `nand::journal` module docs).
    pub fn journal_start(&mut self) {
        self.journal.active = true;
    }

    /// Stop journaling, freeing what the entries own.
    pub fn journal_stop(&mut self) {
        self.journal_discard_from(0);
        self.journal.active = false;
    }

    pub fn journal_active(&self) -> bool {
        self.journal.active
    }

    /// Tag the entries that follow with flash operation `op`.
    #[inline]
    pub fn journal_set_op(&mut self, op: u64) {
        self.journal.op = op;
    }

    /// Entries recorded so far (a mark to undo or discard to).
    pub fn journal_len(&self) -> usize {
        self.journal.len()
    }

    /// The first entry among `0 .. end` made by operation `op` or a later
    /// one (entries up to `end` must be in operation order, as a base run
    /// journals them).
    pub fn journal_first_at_or_after(&self, op: u64, end: usize) -> usize {
        self.journal.entries[..end].partition_point(|e| e.op < op)
    }

    /// The operation that made entry `at`, if there is one.
    pub fn journal_op_of(&self, at: usize) -> Option<u64> {
        self.journal.entries.get(at).map(|e| e.op)
    }

    /// Undo entries `from .. to`, newest first, keeping them for [`Nand::journal_redo`].
    pub fn journal_undo(&mut self, from: usize, to: usize) {
        for at in (from..to).rev() {
            self.swap_entry(at);
        }
    }

    /// Redo entries `from .. to` (undone before), oldest first.
    pub fn journal_redo(&mut self, from: usize, to: usize) {
        for at in from..to {
            self.swap_entry(at);
        }
    }

    /// Undo entries from `mark` on and forget them.
    pub fn journal_rollback(&mut self, mark: usize) {
        let len = self.journal.len();
        self.journal_undo(mark, len);
        self.journal_discard_from(mark);
    }

    /// Forget entries from `mark` on (their changes stay), freeing what they own.
    pub fn journal_discard_from(&mut self, mark: usize) {
        for at in mark..self.journal.entries.len() {
            if let Saved::Page { slot, .. } = self.journal.entries[at].saved {
                self.release_slot_content(slot);
            }
        }
        self.journal.entries.truncate(mark);
        let oob_keep = self.journal.entries.iter().rev().find_map(|e| match e.saved {
            Saved::Page { oob_at, .. } => Some(oob_at + self.oob_stored_bytes),
            Saved::Block { .. } => None,
        });
        self.journal.oob.truncate(oob_keep.unwrap_or(0));
    }

    /// What entry `at` touched: `Ok(page)` or `Err(block)`.
    pub(super) fn journal_target(&self, at: usize) -> Result<usize, usize> {
        match self.journal.entries[at].saved {
            Saved::Page { page, .. } => Ok(page),
            Saved::Block { block, .. } => Err(block),
        }
    }

    /// Record page `i` (and its block's write pointer) before changing it.
    #[inline]
    pub(super) fn journal_page(&mut self, i: usize) {
        if !self.journal.active {
            return;
        }
        let n = self.oob_stored_bytes;
        let oob_at = self.journal.oob.len();
        self.journal.oob.extend_from_slice(&self.oob[i * n..i * n + n]);
        let block = self.block_index(i);
        let saved = Saved::Page { page: i, slot: self.slots[i], write_ptr: self.write_ptr[block], oob_at };
        self.journal.entries.push(Entry { op: self.journal.op, saved });
    }

    /// Record block `b`'s metadata before changing it.
    #[inline]
    pub(super) fn journal_block(&mut self, b: usize) {
        if !self.journal.active {
            return;
        }
        let saved = Saved::Block {
            block: b,
            write_ptr: self.write_ptr[b],
            erase_count: self.erase_count[b],
            bad: self.bad_bit(b),
        };
        self.journal.entries.push(Entry { op: self.journal.op, saved });
    }

    fn swap_entry(&mut self, at: usize) {
        let n = self.oob_stored_bytes;
        match &mut self.journal.entries[at].saved {
            Saved::Page { page, slot, write_ptr, oob_at } => {
                let (i, o) = (*page, *oob_at);
                std::mem::swap(&mut self.slots[i], slot);
                let block = match self.ppb_shift {
                    Some(s) => i >> s,
                    None => i / self.pages_per_block as usize,
                };
                std::mem::swap(&mut self.write_ptr[block], write_ptr);
                self.stray.set(block, true);
                self.oob[i * n..i * n + n].swap_with_slice(&mut self.journal.oob[o..o + n]);
            }
            Saved::Block { block, write_ptr, erase_count, bad } => {
                let b = *block;
                std::mem::swap(&mut self.write_ptr[b], write_ptr);
                std::mem::swap(&mut self.erase_count[b], erase_count);
                let was_bad = self.bad.get(b);
                self.bad.set(b, *bad);
                *bad = was_bad;
                // Rolled back to an older write pointer: its pages may be anything.
                self.stray.set(b, true);
            }
        }
    }

    /// Free the slab content a slot refers to.
    pub(super) fn release_slot_content(&mut self, slot: PageSlot) {
        match slot.state & super::KIND_MASK {
            K_RUNS => self.runs.remove(slot.a),
            K_META => self.bytes.remove(slot.a),
            _ => {}
        }
    }
}
