//! Payload stamps: host data as an opaque value the FTL moves but never reads.
//!
//! In `stress`, `perf` and `crash` the bytes of host data do not matter, only
//! *which* data ends up where. A sector of host data is therefore represented
//! by a stamp: the LBA it was written to and the id of the host write that
//! produced it. Consecutive sectors written by one request form a [`Run`]
//! (`lba .. lba+len` by write `w`), so a page written whole by one request is
//! one run, stored in 8 bytes by the NAND. Pages assembled from several
//! writes (read-modify-write of a partial page) are lists of runs.
//!
//! The oracle reads stamps back out of host read buffers and compares each
//! sector with its shadow of the logical disk. Because the FTL only ever
//! handles buffer *handles* and sector ranges (never stamps), the same FTL
//! code works unchanged when a byte-backed payload store holds real data.
//!
//! Run lists are kept *normalized*: no empty runs, and no two adjacent runs
//! that could be one. Equal content therefore has one representation.

/// Id of a host write. Ids count host writes from 1 in submission order;
/// 0 is never a write.
pub type WriteId = u32;

/// What a run of consecutive sectors holds.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum RunKind {
    /// Host data: sector `i` of the run is LBA `lba + i` as written by `write`.
    Data = 0,
    /// All-zero sectors (what a trimmed or never-written sector reads as).
    Zero = 1,
    /// Erased cells (all 0xFF), read from a page or sectors never programmed.
    #[default]
    Erased = 2,
    /// The bytes of an FTL metadata page, read as if they were host data.
    Metadata = 3,
    /// Nothing has been put here yet: a fresh host read buffer.
    Unfilled = 4,
    /// Unreadable content: a torn program or a corrupted page.
    Garbage = 5,
}

/// `len` consecutive sectors of one kind. For [`RunKind::Data`], sector `i`
/// holds LBA `lba + i` from write `write`; for other kinds both are 0.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Run {
    pub lba: u32,
    pub write: WriteId,
    pub len: u32,
    pub kind: RunKind,
}

impl Run {
    pub fn data(lba: u32, write: WriteId, len: u32) -> Run {
        Run { lba, write, len, kind: RunKind::Data }
    }
    pub fn filler(kind: RunKind, len: u32) -> Run {
        debug_assert!(kind != RunKind::Data);
        Run { lba: 0, write: 0, len, kind }
    }

    /// The sub-run of `len` sectors starting `offset` sectors in.
    #[inline]
    pub fn slice(self, offset: u32, len: u32) -> Run {
        debug_assert!(offset + len <= self.len);
        let lba = if self.kind == RunKind::Data { self.lba + offset } else { 0 };
        Run { lba, len, ..self }
    }

    /// Whether `next` continues this run (so the two can be one run).
    #[inline]
    fn continues_with(&self, next: &Run) -> bool {
        self.kind == next.kind
            && (self.kind != RunKind::Data || (self.write == next.write && self.lba.wrapping_add(self.len) == next.lba))
    }
}

/// Append `run` to a normalized list, merging it with the last run if possible.
#[inline]
pub fn push_run(out: &mut Vec<Run>, run: Run) {
    if run.len == 0 {
        return;
    }
    if let Some(last) = out.last_mut() {
        if last.continues_with(&run) {
            last.len += run.len;
            return;
        }
    }
    out.push(run);
}

/// Total sectors covered by a run list.
pub fn total_len(runs: &[Run]) -> u32 {
    runs.iter().map(|r| r.len).sum()
}

/// Append to `out` the runs covering sectors `start .. start+len` of `src`
/// (whose runs cover sectors from 0).
pub fn slice_runs(src: &[Run], start: u32, len: u32, out: &mut Vec<Run>) {
    let end = start + len;
    let mut pos = 0u32;
    for r in src {
        let r_end = pos + r.len;
        if r_end > start && pos < end {
            let from = start.max(pos);
            let to = end.min(r_end);
            push_run(out, r.slice(from - pos, to - from));
        }
        if r_end >= end {
            break;
        }
        pos = r_end;
    }
}

/// Append to `out` the runs of `src` with sectors `at .. at + total_len(insert)`
/// replaced by `insert`.
pub fn splice_runs(src: &[Run], at: u32, insert: &[Run], out: &mut Vec<Run>) {
    let ins_len = total_len(insert);
    let src_len = total_len(src);
    debug_assert!(at + ins_len <= src_len, "splice past the end of the buffer");
    slice_runs(src, 0, at, out);
    for r in insert {
        push_run(out, *r);
    }
    slice_runs(src, at + ins_len, src_len - at - ins_len, out);
}

/// Fixed-size slots of `T` in size classes, with free lists, so
/// variable-length page contents (run lists, metadata bytes) are stored
/// without a heap allocation per operation once the pool is warm.
///
/// Classes are powers of two, each octave optionally split into `2^s`
/// equal steps: with `s = 4` a slot wastes at most 1/16 of its size, where
/// plain powers of two waste up to half (a 5 KiB summary page in an 8 KiB
/// slot). A handle packs the class in its top bits (as few as the class
/// count needs) and the slot in the rest.
#[derive(Clone, Debug)]
pub struct ClassSlab<T: Copy + Default> {
    min_shift: u32,
    step_shift: u32,
    slot_bits: u32,
    classes: Vec<SlabClass<T>>,
}

#[derive(Clone, Debug, Default)]
struct SlabClass<T> {
    data: Vec<T>,
    free: Vec<u32>,
    slot_len: usize,
}

impl<T: Copy + Default> ClassSlab<T> {
    /// Classes hold `2^min_shift` elements, then every length up to
    /// `max_len` rounded up to a step of `1/2^step_shift` of its octave
    /// (`step_shift` 0: powers of two). `min_shift >= step_shift`.
    pub fn new(min_shift: u32, step_shift: u32, max_len: usize) -> Self {
        assert!(min_shift >= step_shift, "a step must be at least one element");
        let mut slab = ClassSlab { min_shift, step_shift, slot_bits: 0, classes: Vec::new() };
        let count = slab.class_for(max_len.max(1 << min_shift)) + 1;
        slab.classes =
            (0..count).map(|c| SlabClass { data: Vec::new(), free: Vec::new(), slot_len: slab.class_len(c) }).collect();
        slab.slot_bits = 32 - (usize::BITS - (count - 1).leading_zeros()).max(1);
        slab
    }

    /// The class of a slot for `len` elements: class 0 holds `2^min_shift`;
    /// a length in octave `(2^k, 2^(k+1)]` falls in step `j` (1..=2^s) of
    /// size `2^(k-s)`.
    #[inline]
    fn class_for(&self, len: usize) -> usize {
        if len <= 1 << self.min_shift {
            return 0;
        }
        let k = (usize::BITS - 1 - (len - 1).leading_zeros()) as usize;
        let step_shift = k - self.step_shift as usize;
        let j = (len - (1 << k)).div_ceil(1 << step_shift);
        ((k - self.min_shift as usize) << self.step_shift) + j
    }

    /// Elements of a slot of class `class` (the inverse of `class_for`).
    fn class_len(&self, class: usize) -> usize {
        if class == 0 {
            return 1 << self.min_shift;
        }
        let steps = 1usize << self.step_shift;
        let (octave, j) = ((class - 1) / steps, (class - 1) % steps + 1);
        let k = self.min_shift as usize + octave;
        (1 << k) + (j << (k - self.step_shift as usize))
    }

    #[inline]
    fn handle(&self, class: usize, slot: u32) -> u32 {
        ((class as u32) << self.slot_bits) | slot
    }

    #[inline]
    fn split(&self, handle: u32) -> (usize, usize) {
        ((handle >> self.slot_bits) as usize, (handle & ((1 << self.slot_bits) - 1)) as usize)
    }

    /// Store `items`, returning a handle.
    pub fn insert(&mut self, items: &[T]) -> u32 {
        let class = self.class_for(items.len());
        let slot = self.take_slot(class);
        let c = &mut self.classes[class];
        let start = slot as usize * c.slot_len;
        c.data[start..start + items.len()].copy_from_slice(items);
        self.handle(class, slot)
    }

    fn take_slot(&mut self, class: usize) -> u32 {
        let slot_bits = self.slot_bits;
        let c = &mut self.classes[class];
        match c.free.pop() {
            Some(s) => s,
            None => {
                let s = (c.data.len() / c.slot_len) as u32;
                assert!(s < 1 << slot_bits, "payload slab class {class} is full");
                c.data.resize(c.data.len() + c.slot_len, T::default());
                s
            }
        }
    }

    /// The first `len` items stored under `handle`.
    #[inline]
    pub fn get(&self, handle: u32, len: usize) -> &[T] {
        let (class, slot) = self.split(handle);
        let c = &self.classes[class];
        let start = slot * c.slot_len;
        &c.data[start..start + len]
    }

    /// Copy the first `len` items under `handle` into a new slot (no temporary).
    pub fn duplicate(&mut self, handle: u32, len: usize) -> u32 {
        let (class, src_slot) = self.split(handle);
        let slot = self.take_slot(class);
        let c = &mut self.classes[class];
        let (from, to) = (src_slot * c.slot_len, slot as usize * c.slot_len);
        c.data.copy_within(from..from + len, to);
        self.handle(class, slot)
    }

    pub fn remove(&mut self, handle: u32) {
        let (class, slot) = self.split(handle);
        self.classes[class].free.push(slot as u32);
    }

    /// Bytes of memory held (for reports).
    pub fn heap_bytes(&self) -> usize {
        self.classes.iter().map(|c| c.data.capacity() * std::mem::size_of::<T>() + c.free.capacity() * 4).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Expand runs to one (kind, lba, write) per sector: the reference model.
    fn expand(runs: &[Run]) -> Vec<(RunKind, u32, u32)> {
        let mut v = Vec::new();
        for r in runs {
            for i in 0..r.len {
                let lba = if r.kind == RunKind::Data { r.lba + i } else { 0 };
                v.push((r.kind, lba, r.write));
            }
        }
        v
    }

    fn is_normalized(runs: &[Run]) -> bool {
        runs.iter().all(|r| r.len > 0) && runs.windows(2).all(|w| !w[0].continues_with(&w[1]))
    }

    fn arb_run() -> impl Strategy<Value = Run> {
        prop_oneof![
            (0u32..64, 1u32..4, 1u32..6).prop_map(|(lba, w, len)| Run::data(lba, w, len)),
            (1u32..6).prop_map(|len| Run::filler(RunKind::Zero, len)),
            (1u32..6).prop_map(|len| Run::filler(RunKind::Erased, len)),
        ]
    }

    fn normalize(runs: Vec<Run>) -> Vec<Run> {
        let mut out = Vec::new();
        for r in runs {
            push_run(&mut out, r);
        }
        out
    }

    proptest! {
        #[test]
        fn slice_matches_per_sector_model(runs in prop::collection::vec(arb_run(), 1..8), a in 0u32..40, b in 0u32..40) {
            let runs = normalize(runs);
            let n = total_len(&runs);
            let (start, end) = (a.min(b) % (n + 1), a.max(b) % (n + 1));
            let (start, end) = (start.min(end), start.max(end));
            let mut out = Vec::new();
            slice_runs(&runs, start, end - start, &mut out);
            prop_assert_eq!(expand(&out), expand(&runs)[start as usize..end as usize].to_vec());
            prop_assert!(is_normalized(&out));
        }

        #[test]
        fn splice_matches_per_sector_model(dst in prop::collection::vec(arb_run(), 1..8), ins in prop::collection::vec(arb_run(), 1..4), at in 0u32..40) {
            let dst = normalize(dst);
            let ins = normalize(ins);
            let n = total_len(&dst);
            let k = total_len(&ins);
            prop_assume!(k <= n);
            let at = at % (n - k + 1);
            let mut model = expand(&dst);
            model.splice(at as usize..(at + k) as usize, expand(&ins));
            let mut out = Vec::new();
            splice_runs(&dst, at, &ins, &mut out);
            prop_assert_eq!(expand(&out), model);
            prop_assert!(is_normalized(&out));
        }
    }

    #[test]
    fn consecutive_data_of_one_write_merges_into_one_run() {
        let mut v = Vec::new();
        push_run(&mut v, Run::data(10, 7, 4));
        push_run(&mut v, Run::data(14, 7, 4));
        push_run(&mut v, Run::data(18, 8, 4));
        assert_eq!(v, vec![Run::data(10, 7, 8), Run::data(18, 8, 4)]);
    }

    #[test]
    fn slab_classes_are_the_tightest_step_that_fits() {
        for (min_shift, step_shift, max) in [(1, 0, 64), (6, 4, 16384), (6, 4, 5000)] {
            let s: ClassSlab<u8> = ClassSlab::new(min_shift, step_shift, max);
            assert!(s.class_len(s.classes.len() - 1) >= max);
            for len in 1..=max {
                let c = s.class_for(len);
                assert_eq!(s.classes[c].slot_len, s.class_len(c));
                assert!(s.class_len(c) >= len, "len {len} in class {c} of {}", s.class_len(c));
                assert!(c == 0 || s.class_len(c - 1) < len, "len {len}: class {} fits too", c - 1);
                if len > 1 << min_shift {
                    // waste below one step of the octave
                    assert!((s.class_len(c) - len) << step_shift < len, "len {len}: slot {}", s.class_len(c));
                }
            }
        }
    }

    #[test]
    fn fine_classes_store_and_reuse_exactly() {
        let mut s: ClassSlab<u8> = ClassSlab::new(6, 4, 16384);
        let a = s.insert(&[7; 5112]);
        let b = s.insert(&[8; 5100]);
        assert_eq!(s.get(a, 5112), &[7; 5112][..]);
        assert_eq!(s.get(b, 5100), &[8; 5100][..]);
        assert_eq!(s.classes[s.class_for(5112)].slot_len, 5120);
        s.remove(a);
        assert_eq!(s.insert(&[9; 5113]), a, "a freed slot of the class is reused");
    }

    #[test]
    fn slab_reuses_freed_slots() {
        let mut s: ClassSlab<u8> = ClassSlab::new(2, 0, 64);
        let h = s.insert(&[1, 2, 3]);
        assert_eq!(s.get(h, 3), &[1, 2, 3]);
        let big = s.insert(&[9; 40]);
        assert_eq!(s.get(big, 40), &[9; 40][..]);
        s.remove(h);
        let h2 = s.insert(&[4]);
        assert_eq!(h2, h);
        assert_eq!(s.get(h2, 1), &[4]);
    }
}
