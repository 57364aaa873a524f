//! The reliability model's undo journal: how `crash` rolls the model back
//! with the NAND (see [`crate::nand`]'s journal, whose rules this follows).
//!
//! A crash test rolls the NAND back to the cut operation, tears it, mounts
//! a fresh FTL, and later rolls all of it back to carry on with the base
//! run. The model's state is part of the physical device too — which
//! blocks failed (grown bad), when each block was programmed (retention),
//! how often it was read since its erase (read disturb) — and part of the
//! run's reproducibility: its random stream, the exact failures not yet
//! injected, the clock, the counters, and the versions it recorded lost.
//! Restoring that state as of the end of the request instead would leave
//! blocks bad whose failure had not happened yet at the cut, and the mount
//! would lose their data: a false finding (see
//! `docs/design-notes/reliability.md`).
//!
//! So while the journal is active every change records the old value first,
//! tagged with the flash operation that made it, and entries are *swapped*
//! back (undoing a range, then redoing it in order, returns the model to
//! where it was), exactly as the NAND's entries are. Three kinds of entry:
//! the small per-run state (clock, random stream, pending exact failures,
//! counters: copied whole at each call that changes it — a few dozen
//! bytes), one block's state, and one recorded loss (its presence).
//!
//! The changes of the operation a cut falls at — before or during it — are
//! undone with everything after: an operation the power interrupted never
//! reported a status, so a failure it would have drawn never happened.

use super::{OpDecode, Reliability, ReliabilityStats};
use crate::nand::reliability::failures::FailAt;
use crate::seed::Rng;

#[cfg(test)]
thread_local! {
    /// The broken variant a test proves the journal needed with: no model
    /// journal on this thread (the model then stays as the base run left it
    /// at the end of the request, whatever the cut).
    pub(crate) static JOURNAL_OFF_FOR_TEST: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The model's per-run state (everything but the per-block tables and
/// the loss sets).
#[derive(Clone, Debug)]
pub(super) struct RunState {
    pub(super) rng: Rng,
    pub(super) now_s: f64,
    pub(super) pending: Vec<FailAt>,
    /// The counters, without the preset's name (it never changes).
    pub(super) stats: ReliabilityStats,
    pub(super) uncorrectable_in_request: bool,
    pub(super) op_decode: OpDecode,
}

#[derive(Clone, Debug)]
enum Saved {
    Run(Box<RunState>),
    Block {
        block: usize,
        programmed_at_s: f64,
        reads_since_erase: u32,
        grown_bad: bool,
    },
    /// A version (LBA, write id) of the media losses (`failed_program`:
    /// of the failed programs' losses), and whether the set held it.
    Loss {
        failed_program: bool,
        version: (u32, u32),
        present: bool,
    },
    /// A marker: the operation grew a bad block (its block entry before
    /// it holds the old state; nothing to swap).
    GrewBad,
}

#[derive(Clone, Debug)]
struct Entry {
    op: u64,
    saved: Saved,
}

/// The journal (inactive by default: a run without crash tests pays nothing).
#[derive(Clone, Debug, Default)]
pub(super) struct ModelJournal {
    active: bool,
    op: u64,
    entries: Vec<Entry>,
}

impl Reliability {
    /// Start journaling changes (see the module docs).
    pub fn journal_start(&mut self) {
        #[cfg(test)]
        if JOURNAL_OFF_FOR_TEST.with(|off| off.get()) {
            return;
        }
        self.journal.active = true;
    }

    /// Stop journaling and forget the entries.
    pub fn journal_stop(&mut self) {
        self.journal.entries.clear();
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
        self.journal.entries.len()
    }

    /// The first entry among `0 .. end` made by operation `op` or a later one.
    pub fn journal_first_at_or_after(&self, op: u64, end: usize) -> usize {
        self.journal.entries[..end].partition_point(|e| e.op < op)
    }

    /// The operations among entries `from ..` that grew a bad block.
    pub fn journal_bad_block_ops_since(&self, from: usize) -> impl Iterator<Item = u64> + '_ {
        self.journal.entries[from..].iter().filter_map(|e| matches!(e.saved, Saved::GrewBad).then_some(e.op))
    }

    /// Undo entries `from .. to`, newest first, keeping them for [`Reliability::journal_redo`].
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
        let len = self.journal.entries.len();
        self.journal_undo(mark, len);
        self.journal.entries.truncate(mark);
    }

    /// Forget entries from `mark` on (their changes stay).
    pub fn journal_discard_from(&mut self, mark: usize) {
        self.journal.entries.truncate(mark);
    }

    /// Record the per-run state before a change.
    pub(super) fn journal_run_state(&mut self) {
        if self.journal.active {
            let saved = Saved::Run(Box::new(self.run_state()));
            self.journal.entries.push(Entry { op: self.journal.op, saved });
        }
    }

    /// Record block `b`'s state before a change.
    pub(super) fn journal_block(&mut self, b: usize) {
        if self.journal.active {
            let saved = Saved::Block {
                block: b,
                programmed_at_s: self.programmed_at_s[b],
                reads_since_erase: self.reads_since_erase[b],
                grown_bad: self.grown_bad[b],
            };
            self.journal.entries.push(Entry { op: self.journal.op, saved });
        }
    }

    /// Note that the operation grew a bad block.
    pub(super) fn journal_grew_bad(&mut self) {
        if self.journal.active {
            self.journal.entries.push(Entry { op: self.journal.op, saved: Saved::GrewBad });
        }
    }

    /// Record whether a loss set holds `version` before inserting it.
    pub(super) fn journal_loss(&mut self, failed_program: bool, version: (u32, u32)) {
        if self.journal.active {
            let present = self.loss_set(failed_program).contains(&version);
            let saved = Saved::Loss { failed_program, version, present };
            self.journal.entries.push(Entry { op: self.journal.op, saved });
        }
    }

    fn run_state(&mut self) -> RunState {
        // The preset's name is not copied (it never changes).
        let preset = std::mem::take(&mut self.stats.preset);
        let stats = self.stats.clone();
        self.stats.preset = preset;
        RunState {
            rng: self.rng.clone(),
            now_s: self.now_s,
            pending: self.pending.clone(),
            stats,
            uncorrectable_in_request: self.uncorrectable_in_request,
            op_decode: self.op_decode,
        }
    }

    fn swap_entry(&mut self, at: usize) {
        let mut saved = std::mem::replace(&mut self.journal.entries[at].saved, Saved::GrewBad);
        match &mut saved {
            Saved::Run(state) => {
                std::mem::swap(&mut self.rng, &mut state.rng);
                std::mem::swap(&mut self.now_s, &mut state.now_s);
                std::mem::swap(&mut self.pending, &mut state.pending);
                std::mem::swap(&mut self.uncorrectable_in_request, &mut state.uncorrectable_in_request);
                std::mem::swap(&mut self.op_decode, &mut state.op_decode);
                std::mem::swap(&mut self.stats.preset, &mut state.stats.preset);
                std::mem::swap(&mut self.stats, &mut state.stats);
            }
            Saved::Block { block, programmed_at_s, reads_since_erase, grown_bad } => {
                let b = *block;
                std::mem::swap(&mut self.programmed_at_s[b], programmed_at_s);
                std::mem::swap(&mut self.reads_since_erase[b], reads_since_erase);
                std::mem::swap(&mut self.grown_bad[b], grown_bad);
            }
            Saved::Loss { failed_program, version, present } => {
                let set = self.loss_set_mut(*failed_program);
                let now = set.contains(version);
                if *present {
                    set.insert(*version);
                } else {
                    set.remove(version);
                }
                *present = now;
            }
            Saved::GrewBad => {}
        }
        self.journal.entries[at].saved = saved;
    }
}
