//! A table of `u32` that starts all zero and becomes resident a chunk of 16
//! entries at a time.
//!
//! The tables indexed by logical address (the page FTL's map, the oracle)
//! span the whole drive. A flat table is free until written
//! ([`crate::util::prefetch::zeroed_vec`]), but a workload writing at random
//! touches every OS page of it long before it has written a small share of
//! its entries, and the kernel zeroing those pages can cost more CPU than
//! the simulation itself.
//!
//! Here entries live in chunks of 16 (64 bytes, a cache line's worth),
//! handed out in the order they are first written from one `calloc`ed
//! arena, so only the chunks written are ever resident. A directory (one
//! `u32` per chunk: 1/16 of the flat table) says where each chunk lives;
//! chunk 0 is never handed out and stands for "all zero", so a read is two
//! dependent loads and no branch. On a drive written all over the chunks are dense
//! and the directory is small enough to stay in cache: the price there is
//! the directory load.
//!
//! A table of at most 64 MiB (`FLAT_MAX_BYTES`) is stored flat instead (no
//! directory): on a small drive the directory load costs more than the
//! memory it could save. The measurements behind both choices are in
//! `docs/design-notes/util.md`.
//!
//! Writing zero to an entry of a chunk never written allocates nothing (it
//! reads as zero already). The arena is sized for the whole table up front
//! and never grows, so no write allocates heap memory.

use crate::util::prefetch::{prefetch, zeroed_vec};

/// log2 of the entries per chunk.
const CHUNK_SHIFT: u32 = 4;
const CHUNK_LEN: usize = 1 << CHUNK_SHIFT;
const IN_CHUNK: usize = CHUNK_LEN - 1;

/// Tables up to this size are flat (see the module docs).
const FLAT_MAX_BYTES: usize = 64 << 20;

/// `len` entries of `u32`, all zero until set. See the module docs.
#[derive(Default)]
pub struct SparseTable {
    len: usize,
    /// Per chunk of entries: where it lives in `arena` (in chunks; 0: never
    /// written). Empty: the table is flat, `arena` holds entry `i` at `i`.
    directory: Vec<u32>,
    /// Chunk storage in order of first write; chunk 0 stays all zero.
    arena: Vec<u32>,
    /// Chunks of `arena` in use, the zero chunk included.
    chunks_used: u32,
}

impl SparseTable {
    /// `len` zero entries; nothing is resident yet. Both vectors are
    /// accessed at random, so they are backed by huge pages: the arena is
    /// filled from its start, so its touched part is dense.
    pub fn zeroed(len: usize) -> SparseTable {
        SparseTable::with_layout(len, len * 4 > FLAT_MAX_BYTES)
    }

    fn with_layout(len: usize, chunked: bool) -> SparseTable {
        if !chunked {
            return SparseTable { len, directory: Vec::new(), arena: zeroed_vec(len, true), chunks_used: 0 };
        }
        let chunks = len.div_ceil(CHUNK_LEN);
        assert!(chunks < u32::MAX as usize, "{len} entries: too many for a sparse table");
        SparseTable {
            len,
            directory: zeroed_vec(chunks, true),
            arena: zeroed_vec((chunks + 1) * CHUNK_LEN, true),
            chunks_used: 1,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline(always)]
    pub fn get(&self, index: usize) -> u32 {
        debug_assert!(index < self.len, "index {index} of a table of {}", self.len);
        if self.directory.is_empty() {
            return self.arena[index];
        }
        let chunk = self.directory[index >> CHUNK_SHIFT] as usize;
        self.arena[(chunk << CHUNK_SHIFT) | (index & IN_CHUNK)]
    }

    #[inline(always)]
    pub fn set(&mut self, index: usize, value: u32) {
        debug_assert!(index < self.len, "index {index} of a table of {}", self.len);
        if self.directory.is_empty() {
            self.arena[index] = value;
            return;
        }
        let mut chunk = self.directory[index >> CHUNK_SHIFT];
        if chunk == 0 {
            if value == 0 {
                return;
            }
            chunk = self.new_chunk(index >> CHUNK_SHIFT);
        }
        self.arena[((chunk as usize) << CHUNK_SHIFT) | (index & IN_CHUNK)] = value;
    }

    /// Give directory entry `at` the next chunk of the arena.
    fn new_chunk(&mut self, at: usize) -> u32 {
        let chunk = self.chunks_used;
        self.chunks_used += 1;
        self.directory[at] = chunk;
        chunk
    }

    /// Hint that entry `index` will be accessed soon: reads its directory
    /// entry now and prefetches its chunk. On a large table the directory
    /// entry is itself a cache miss that this read waits for: call
    /// [`SparseTable::prefetch_directory`] a little earlier.
    #[inline(always)]
    pub fn prefetch(&self, index: usize) {
        if self.directory.is_empty() {
            prefetch(&self.arena, index);
        } else if let Some(&chunk) = self.directory.get(index >> CHUNK_SHIFT) {
            prefetch(&self.arena, ((chunk as usize) << CHUNK_SHIFT) | (index & IN_CHUNK));
        }
    }

    /// The first of two prefetch stages for entry `index`: warms its
    /// directory entry without waiting for it (a flat table: the entry
    /// itself), so a later [`SparseTable::prefetch`] does not stall.
    #[inline(always)]
    pub fn prefetch_directory(&self, index: usize) {
        if self.directory.is_empty() {
            prefetch(&self.arena, index);
        } else {
            prefetch(&self.directory, index >> CHUNK_SHIFT);
        }
    }

    /// Every entry, in order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.len).map(|i| self.get(i))
    }

    /// Call `f(index, value)` for every non-zero entry, in order; chunks
    /// never written are skipped without being read.
    pub fn for_each_nonzero(&self, mut f: impl FnMut(usize, u32)) {
        if self.directory.is_empty() {
            for (i, &v) in self.arena[..self.len].iter().enumerate() {
                if v != 0 {
                    f(i, v);
                }
            }
            return;
        }
        for (c, &chunk) in self.directory.iter().enumerate().filter(|(_, &chunk)| chunk != 0) {
            let base = (chunk as usize) << CHUNK_SHIFT;
            for k in 0..CHUNK_LEN.min(self.len - (c << CHUNK_SHIFT)) {
                let v = self.arena[base + k];
                if v != 0 {
                    f((c << CHUNK_SHIFT) + k, v);
                }
            }
        }
    }

    /// Heap bytes reserved (most of them never resident).
    pub fn memory_bytes(&self) -> usize {
        (self.directory.capacity() + self.arena.capacity()) * 4
    }
}

impl Clone for SparseTable {
    /// Copies only the chunks in use (a derived clone would make the whole
    /// arena resident).
    fn clone(&self) -> SparseTable {
        let mut copy = SparseTable::with_layout(self.len, !self.directory.is_empty());
        copy.directory.copy_from_slice(&self.directory);
        let used = if self.directory.is_empty() { self.len } else { self.chunks_used as usize * CHUNK_LEN };
        copy.arena[..used].copy_from_slice(&self.arena[..used]);
        copy.chunks_used = self.chunks_used;
        copy
    }
}

impl std::fmt::Debug for SparseTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SparseTable {{ len: {}, chunks_used: {} }}", self.len, self.chunks_used)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_start_zero_and_round_trip_flat_and_across_chunks() {
        for chunked in [false, true] {
            let mut t = SparseTable::with_layout(1000, chunked);
            assert!(t.iter().all(|e| e == 0));
            for (i, v) in [(0, 5), (15, 6), (16, 7), (999, 8), (500, 9)] {
                t.set(i, v);
            }
            assert_eq!([t.get(0), t.get(15), t.get(16), t.get(999), t.get(500), t.get(1)], [5, 6, 7, 8, 9, 0]);
            t.set(16, 0);
            assert_eq!(t.iter().filter(|&e| e != 0).count(), 4);
            let copy = t.clone();
            assert!(copy.iter().eq(t.iter()));
        }
    }

    #[test]
    fn only_written_chunks_are_used() {
        let mut t = SparseTable::with_layout(1 << 20, true);
        t.set(3, 0); // zero into an unwritten chunk: nothing to store
        assert_eq!(t.chunks_used, 1);
        for i in (0..1 << 20).step_by(1 << 12) {
            t.set(i, 1);
            t.set(i + 1, 2); // same chunk
        }
        assert_eq!(t.chunks_used, 1 + (1 << 8));
        assert_eq!(t.iter().map(u64::from).sum::<u64>(), 3 << 8);
    }
}
