//! Data buffers in device DRAM, addressed by handle.
//!
//! Host data reaches the FTL in a buffer and leaves it in a buffer; the FTL
//! copies sector ranges between buffers and flash pages but never looks
//! inside. In stamp mode a buffer is a normalized run list (see
//! [`crate::nand::payload`]); its storage is recycled, so a warm pool
//! allocates nothing.

use super::FlashError;
use crate::nand::payload::{push_run, slice_runs, splice_runs, Run, RunKind};

/// Handle to a data buffer. Handles are plain integers so an FTL written in
/// C can hold them.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct BufId(pub u32);

#[derive(Clone, Debug, Default)]
struct Buffer {
    sectors: u32,
    runs: Vec<Run>,
    live: bool,
}

/// The pool of buffers.
#[derive(Clone, Debug, Default)]
pub struct BufferPool {
    bufs: Vec<Buffer>,
    free: Vec<u32>,
    scratch: Vec<Run>,
    scratch2: Vec<Run>,
}

impl BufferPool {
    /// A buffer of `sectors` sectors, every sector of kind `fill`.
    pub fn alloc(&mut self, sectors: u32, fill: RunKind) -> BufId {
        let id = match self.free.pop() {
            Some(i) => i,
            None => {
                self.bufs.push(Buffer::default());
                (self.bufs.len() - 1) as u32
            }
        };
        let b = &mut self.bufs[id as usize];
        b.sectors = sectors;
        b.live = true;
        b.runs.clear();
        push_run(&mut b.runs, Run::filler(fill, sectors));
        BufId(id)
    }

    /// A buffer holding host data `lba .. lba+sectors` of write `write`.
    pub fn alloc_data(&mut self, lba: u32, write: u32, sectors: u32) -> BufId {
        let id = self.alloc(sectors, RunKind::Unfilled);
        let b = &mut self.bufs[id.0 as usize];
        b.runs.clear();
        push_run(&mut b.runs, Run::data(lba, write, sectors));
        id
    }

    pub fn free(&mut self, id: BufId) {
        if let Some(b) = self.bufs.get_mut(id.0 as usize) {
            if b.live {
                b.live = false;
                self.free.push(id.0);
            }
        }
    }

    fn get(&self, id: BufId) -> Result<&Buffer, FlashError> {
        match self.bufs.get(id.0 as usize) {
            Some(b) if b.live => Ok(b),
            _ => Err(FlashError::InvalidBuffer),
        }
    }

    pub fn sectors(&self, id: BufId) -> Result<u32, FlashError> {
        Ok(self.get(id)?.sectors)
    }

    /// The runs of a whole buffer.
    pub fn runs(&self, id: BufId) -> Result<&[Run], FlashError> {
        Ok(&self.get(id)?.runs)
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
        slice_runs(&self.bufs[id.0 as usize].runs, start, len, out);
        Ok(())
    }

    /// Overwrite sectors `at ..` of a buffer with `runs`.
    pub fn write_runs(&mut self, id: BufId, at: u32, runs: &[Run]) -> Result<(), FlashError> {
        let len = crate::nand::payload::total_len(runs);
        self.check_range(id, at, len)?;
        let mut scratch = std::mem::take(&mut self.scratch);
        splice_runs(&mut self.bufs[id.0 as usize].runs, at, runs, &mut scratch);
        self.scratch = scratch;
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

    #[test]
    fn out_of_range_and_freed_buffers_are_errors() {
        let mut p = BufferPool::default();
        let b = p.alloc(4, RunKind::Zero);
        assert_eq!(p.fill(b, 3, 2, RunKind::Erased), Err(FlashError::InvalidBuffer));
        p.free(b);
        assert_eq!(p.fill(b, 0, 1, RunKind::Erased), Err(FlashError::InvalidBuffer));
        let again = p.alloc(2, RunKind::Erased);
        assert_eq!(again, b, "freed handles are reused");
    }
}
