//! Data buffers in device DRAM, addressed by handle.
//!
//! Host data reaches the FTL in a buffer and leaves it in a buffer; the FTL
//! copies sector ranges between buffers and flash pages but never looks
//! inside. In stamp mode a buffer is a normalized run list (see
//! [`crate::nand::payload`]); its storage is recycled, so a warm pool
//! allocates nothing.
//!
//! A buffer's record is one 64-byte cache line holding its state and up to
//! [`INLINE_RUNS`] runs: a whole page written by one request is one run, a
//! partly written page two or three. In timed runs the write cache keeps
//! one buffer per cached page (32,768 on `mqsim-default`), touched once when
//! a host write fills it and once, long after, when it is evicted: both
//! times cold. With the runs in a `Vec` of their own each touch was two
//! cache misses (the record, then its heap block: `slice_runs`' first load
//! was 82 % of its samples on gc-heavy); now it is one. Longer lists (a
//! multi-page buffer of unrelated pages, a page gathered from many writes)
//! spill to a per-slot `Vec` beside the records, which keeps its capacity
//! when the slot is reused, so a warm pool still allocates nothing.
//!
//! A handle is a slot index tagged with the slot's generation, which moves
//! on every time the slot is freed. A handle kept after its buffer was
//! freed — or after a power cycle dropped the device DRAM — no longer
//! matches its slot and fails with [`FlashError::InvalidBuffer`], even when
//! the slot has since been handed out again: a freshly mounted FTL cannot
//! reach data its predecessor left in DRAM by guessing small integers.

use super::FlashError;
use crate::nand::payload::{push_run, slice_runs, splice_runs, Run, RunKind};

/// Handle to a data buffer: a plain 64-bit integer so an FTL written in C
/// can hold it (slot index in the low 32 bits, generation in the high 32).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct BufId(u64);

impl BufId {
    /// The handle of slot `index` in generation `generation`.
    pub fn new(index: u32, generation: u32) -> BufId {
        BufId(u64::from(generation) << 32 | u64::from(index))
    }
    /// The slot: a small integer, dense from 0 (usable as a table index).
    pub fn index(self) -> u32 {
        self.0 as u32
    }
    pub fn generation(self) -> u32 {
        (self.0 >> 32) as u32
    }
    /// The handle as the integer a C FTL holds.
    pub fn raw(self) -> u64 {
        self.0
    }
    pub fn from_raw(raw: u64) -> BufId {
        BufId(raw)
    }
}

/// Runs a buffer record holds without spilling (see the module docs).
pub const INLINE_RUNS: usize = 3;
/// `Buffer::runs` when the runs are in the slot's spill list.
const SPILLED: u8 = u8::MAX;

/// One buffer: its state and, when they fit, its runs, in one cache line.
#[derive(Clone, Debug, Default)]
#[repr(align(64))]
struct Buffer {
    sectors: u32,
    /// Bumped when the buffer is freed, so old handles stop matching.
    generation: u32,
    live: bool,
    /// Runs in `inline` (at most [`INLINE_RUNS`]), or [`SPILLED`].
    runs: u8,
    inline: [Run; INLINE_RUNS],
}

const _: () = assert!(std::mem::size_of::<Buffer>() == 64);

/// The pool of buffers.
#[derive(Clone, Debug, Default)]
pub struct BufferPool {
    bufs: Vec<Buffer>,
    /// Per slot: the runs of a buffer with more than [`INLINE_RUNS`] (kept
    /// allocated for the slot's next buffer).
    spill: Vec<Vec<Run>>,
    free: Vec<u32>,
    scratch: Vec<Run>,
    scratch2: Vec<Run>,
}

impl BufferPool {
    /// A buffer of `sectors` sectors, every sector of kind `fill`.
    pub fn alloc(&mut self, sectors: u32, fill: RunKind) -> BufId {
        self.alloc_run(sectors, Run::filler(fill, sectors))
    }

    /// A buffer holding host data `lba .. lba+sectors` of write `write`.
    pub fn alloc_data(&mut self, lba: u32, write: u32, sectors: u32) -> BufId {
        self.alloc_run(sectors, Run::data(lba, write, sectors))
    }

    /// A buffer of `sectors` sectors holding `run` (of that length).
    fn alloc_run(&mut self, sectors: u32, run: Run) -> BufId {
        let id = match self.free.pop() {
            Some(i) => i,
            None => {
                self.bufs.push(Buffer::default());
                self.spill.push(Vec::new());
                (self.bufs.len() - 1) as u32
            }
        };
        let b = &mut self.bufs[id as usize];
        b.sectors = sectors;
        b.live = true;
        b.runs = u8::from(sectors > 0);
        b.inline[0] = run;
        BufId::new(id, b.generation)
    }

    /// Free a buffer; a stale handle (freed, or of an earlier generation) is ignored.
    pub fn free(&mut self, id: BufId) {
        if self.get(id).is_ok() {
            let b = &mut self.bufs[id.index() as usize];
            b.live = false;
            b.generation = b.generation.wrapping_add(1);
            self.free.push(id.index());
        }
    }

    /// Free whatever live buffer occupies slot `index` (the owner's DRAM is
    /// gone; its handle, whatever generation, goes stale).
    pub fn free_slot(&mut self, index: u32) {
        if let Some(b) = self.bufs.get(index as usize).filter(|b| b.live) {
            self.free(BufId::new(index, b.generation));
        }
    }

    /// Whether `id` names a live buffer of the current generation.
    pub fn is_live(&self, id: BufId) -> bool {
        self.get(id).is_ok()
    }

    fn get(&self, id: BufId) -> Result<&Buffer, FlashError> {
        match self.bufs.get(id.index() as usize) {
            Some(b) if b.live && b.generation == id.generation() => Ok(b),
            _ => Err(FlashError::InvalidBuffer),
        }
    }

    pub fn sectors(&self, id: BufId) -> Result<u32, FlashError> {
        Ok(self.get(id)?.sectors)
    }

    /// The runs of a whole buffer.
    pub fn runs(&self, id: BufId) -> Result<&[Run], FlashError> {
        let b = self.get(id)?;
        Ok(self.runs_of(id.index() as usize, b))
    }

    /// The runs of buffer `b`, in slot `slot`.
    #[inline]
    fn runs_of<'a>(&'a self, slot: usize, b: &'a Buffer) -> &'a [Run] {
        match b.runs {
            SPILLED => &self.spill[slot],
            n => &b.inline[..usize::from(n)],
        }
    }

    /// Make normalized `runs` the content of slot `slot`. A spilled list
    /// is swapped in, not copied: `runs` gets the old list's storage.
    #[inline]
    fn store(&mut self, slot: usize, runs: &mut Vec<Run>) {
        let b = &mut self.bufs[slot];
        if runs.len() <= INLINE_RUNS {
            // Element by element: a slice copy of a length known only at
            // run time is a `memcpy` call, dearer than three moves.
            b.inline = std::array::from_fn(|k| runs.get(k).copied().unwrap_or_default());
            b.runs = runs.len() as u8;
        } else {
            b.runs = SPILLED;
            std::mem::swap(&mut self.spill[slot], runs);
        }
    }

    fn check_range(&self, id: BufId, start: u32, len: u32) -> Result<(), FlashError> {
        let b = self.get(id)?;
        if start.checked_add(len).is_none_or(|end| end > b.sectors) {
            return Err(FlashError::InvalidBuffer);
        }
        Ok(())
    }

    /// Append the runs of sectors `start .. start+len` of a buffer to `out`.
    pub fn slice(&self, id: BufId, start: u32, len: u32, out: &mut Vec<Run>) -> Result<(), FlashError> {
        self.check_range(id, start, len)?;
        let slot = id.index() as usize;
        slice_runs(self.runs_of(slot, &self.bufs[slot]), start, len, out);
        Ok(())
    }

    /// The runs of sectors `start .. start+len` of a buffer: its own list
    /// when that is the whole buffer (a page programmed from a one-page
    /// buffer), else a slice of it built in `scratch`.
    #[inline]
    pub fn range<'a>(
        &'a self,
        id: BufId,
        start: u32,
        len: u32,
        scratch: &'a mut Vec<Run>,
    ) -> Result<&'a [Run], FlashError> {
        self.check_range(id, start, len)?;
        let slot = id.index() as usize;
        let b = &self.bufs[slot];
        if start == 0 && len == b.sectors {
            return Ok(self.runs_of(slot, b));
        }
        scratch.clear();
        slice_runs(self.runs_of(slot, b), start, len, scratch);
        Ok(scratch)
    }

    /// Overwrite sectors `at ..` of a buffer with `runs` (normalized).
    pub fn write_runs(&mut self, id: BufId, at: u32, runs: &[Run]) -> Result<(), FlashError> {
        let len = crate::nand::payload::total_len(runs);
        self.check_range(id, at, len)?;
        let slot = id.index() as usize;
        let mut new = std::mem::take(&mut self.scratch);
        new.clear();
        let b = &self.bufs[slot];
        if len == b.sectors {
            // The whole buffer (a page read into a page buffer): nothing of
            // the old content is kept.
            for &r in runs {
                push_run(&mut new, r);
            }
        } else {
            splice_runs(self.runs_of(slot, b), at, runs, &mut new);
        }
        self.store(slot, &mut new);
        self.scratch = new;
        Ok(())
    }

    /// Copy `len` sectors from one buffer range to another.
    pub fn copy(&mut self, dst: BufId, dst_at: u32, src: BufId, src_at: u32, len: u32) -> Result<(), FlashError> {
        self.check_range(dst, dst_at, len)?;
        let mut moved = std::mem::take(&mut self.scratch2);
        moved.clear();
        let r = self.slice(src, src_at, len, &mut moved).and_then(|_| self.write_runs(dst, dst_at, &moved));
        self.scratch2 = moved;
        r
    }

    /// Fill sectors of a buffer with one kind (zeros, erased).
    pub fn fill(&mut self, dst: BufId, at: u32, len: u32, kind: RunKind) -> Result<(), FlashError> {
        self.write_runs(dst, at, &[Run::filler(kind, len)])
    }

    /// Buffers currently allocated.
    pub fn live(&self) -> usize {
        self.bufs.len() - self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_moves_a_sector_range_between_buffers() {
        let mut p = BufferPool::default();
        let host = p.alloc_data(100, 7, 8);
        let page = p.alloc(4, RunKind::Zero);
        p.copy(page, 1, host, 2, 2).unwrap();
        assert_eq!(
            p.runs(page).unwrap(),
            &[Run::filler(RunKind::Zero, 1), Run::data(102, 7, 2), Run::filler(RunKind::Zero, 1)]
        );
    }

    /// Run lists longer than a record holds spill and come back inline;
    /// either way the buffer reads what was written.
    #[test]
    fn long_run_lists_spill_and_return_inline() {
        let mut p = BufferPool::default();
        let page = p.alloc(8, RunKind::Erased);
        for k in 0..4 {
            p.write_runs(page, 2 * k, &[Run::data(100 * k, k + 1, 1)]).unwrap();
        }
        let mut want = Vec::new();
        for k in 0..4 {
            want.extend([Run::data(100 * k, k + 1, 1), Run::filler(RunKind::Erased, 1)]);
        }
        assert!(want.len() > INLINE_RUNS);
        assert_eq!(p.runs(page).unwrap(), &want[..]);
        let mut out = Vec::new();
        p.slice(page, 1, 3, &mut out).unwrap();
        assert_eq!(out, want[1..4]);
        p.write_runs(page, 0, &[Run::data(7, 9, 8)]).unwrap();
        assert_eq!(p.runs(page).unwrap(), &[Run::data(7, 9, 8)]);
        p.fill(page, 6, 2, RunKind::Zero).unwrap();
        assert_eq!(p.runs(page).unwrap(), &[Run::data(7, 9, 6), Run::filler(RunKind::Zero, 2)]);
    }

    /// A range is the buffer's own list when it is the whole buffer, a
    /// slice otherwise; out of range is an error either way.
    #[test]
    fn ranges_are_whole_lists_or_slices() {
        let mut p = BufferPool::default();
        let page = p.alloc_data(40, 3, 8);
        p.fill(page, 6, 2, RunKind::Zero).unwrap();
        let mut scratch = vec![Run::data(1, 1, 1)];
        let whole = [Run::data(40, 3, 6), Run::filler(RunKind::Zero, 2)];
        assert_eq!(p.range(page, 0, 8, &mut scratch).unwrap(), &whole);
        assert_eq!(p.range(page, 4, 3, &mut scratch).unwrap(), &[Run::data(44, 3, 2), Run::filler(RunKind::Zero, 1)]);
        assert_eq!(p.range(page, 4, 5, &mut scratch), Err(FlashError::InvalidBuffer));
    }

    #[test]
    fn out_of_range_and_freed_buffers_are_errors() {
        let mut p = BufferPool::default();
        let b = p.alloc(4, RunKind::Zero);
        assert_eq!(p.fill(b, 3, 2, RunKind::Erased), Err(FlashError::InvalidBuffer));
        p.free(b);
        assert_eq!(p.fill(b, 0, 1, RunKind::Erased), Err(FlashError::InvalidBuffer));
        let again = p.alloc(2, RunKind::Erased);
        assert_eq!(again.index(), b.index(), "freed slots are reused");
        assert_ne!(again, b, "under a new generation");
    }

    /// A handle kept past its buffer's life cannot reach the slot's next
    /// buffer (before, handles were bare slot numbers and it could).
    #[test]
    fn a_stale_handle_cannot_read_or_free_the_slots_next_buffer() {
        let mut p = BufferPool::default();
        let old = p.alloc_data(7, 1, 4);
        p.free(old);
        let new = p.alloc_data(100, 2, 4);
        assert_eq!(new.index(), old.index());
        assert_eq!(p.runs(old), Err(FlashError::InvalidBuffer));
        let mut out = Vec::new();
        assert_eq!(p.slice(old, 0, 4, &mut out), Err(FlashError::InvalidBuffer));
        p.free(old);
        assert_eq!(p.runs(new).unwrap(), &[Run::data(100, 2, 4)], "a stale free does not free the new buffer");
        assert_eq!(BufId::from_raw(new.raw()), new);
    }
}
