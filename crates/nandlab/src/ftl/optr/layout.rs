//! optr's on-flash layout: the OOB every page carries (kind, write id or
//! metadata sequence, request size or index, logical page), the page
//! kinds, and the byte layout of seal, checkpoint, record and summary
//! pages (a header of [`HEADER`] bytes, then little-endian fields), as
//! byte views on the field types of [`crate::ftl::kit::wire`].

use crate::ftl::kit::wire::{array, view, view_mut, U32Le, U64Le};
use bytemuck::{Pod, Zeroable};

/// OOB: kind (1), write id or metadata sequence (8), size or index (4), lpn (4).
pub const OOB_BYTES: usize = 17;
pub(super) const K_DATA: u8 = 1;
pub(super) const K_GC: u8 = 2;
pub(super) const K_SUMMARY: u8 = 3;
pub(super) const K_FULL: u8 = 4;
pub(super) const K_SEAL: u8 = 5;
pub(super) const K_INC: u8 = 6;
pub(super) const K_RECORDS: u8 = 7;
pub(super) const K_ERASED: u8 = 0xff;
pub(super) const MAGIC: u32 = 0x5254_504f; // "OPTR"
pub(super) const HEADER: usize = 16;
pub(super) const RECORD_BYTES: usize = 20;
pub(super) const TRIM_FLAG: u32 = 0x8000_0000;

/// The byte view of the OOB.
#[derive(Copy, Clone, Debug, Pod, Zeroable)]
#[repr(C)]
struct OobBytes {
    kind: u8,
    a: U64Le,
    b: U32Le,
    c: U32Le,
}

const _: () = assert!(std::mem::size_of::<OobBytes>() == OOB_BYTES);

/// The OOB of a page of `kind`: write id or metadata sequence `a`, size or
/// index `b`, logical page `c`.
#[inline]
pub(super) fn oob(kind: u8, a: u64, b: u32, c: u32) -> [u8; OOB_BYTES] {
    bytemuck::cast(OobBytes { kind, a: U64Le::new(a), b: U32Le::new(b), c: U32Le::new(c) })
}

/// (kind, a, b, c) of an OOB (see [`oob`]).
#[inline]
pub(super) fn unoob(o: &[u8; OOB_BYTES]) -> (u8, u64, u32, u32) {
    let v: &OobBytes = bytemuck::cast_ref(o);
    (v.kind, v.a.get(), v.b.get(), v.c.get())
}

/// The first field of every metadata page: [`MAGIC`].
pub(super) fn has_magic(d: &[u8]) -> bool {
    view::<U32Le>(d).get() == MAGIC
}

/// The header of an entry page (incremental checkpoint, full checkpoint,
/// records, chain summary): magic, then up to three words, then the
/// entries from byte [`HEADER`].
#[derive(Copy, Clone, Debug, Pod, Zeroable)]
#[repr(C)]
pub(super) struct PageHeader {
    pub(super) magic: U32Le,
    pub(super) words: [U32Le; 3],
}

const _: () = assert!(std::mem::size_of::<PageHeader>() == HEADER);

/// Write the magic and the first `words.len()` words of a page header
/// (the rest of the header keeps its bytes).
pub(super) fn put_header(d: &mut [u8], words: &[u32]) {
    let h: &mut PageHeader = view_mut(d);
    h.magic = U32Le::new(MAGIC);
    for (w, &v) in h.words.iter_mut().zip(words) {
        *w = U32Le::new(v);
    }
}

/// Header word `i` (0-based, after the magic).
pub(super) fn header_word(d: &[u8], i: usize) -> u32 {
    view::<PageHeader>(d).words[i].get()
}

/// A map entry of an incremental checkpoint or a seal.
#[derive(Copy, Clone, Debug, Pod, Zeroable)]
#[repr(C)]
pub(super) struct MapEntry {
    pub(super) lpn: U32Le,
    pub(super) ppn: U32Le,
}

/// An entry of a chain block's summary page: the (write id, size | GC
/// flag, logical page) of one of its pages.
#[derive(Copy, Clone, Debug, Pod, Zeroable)]
#[repr(C)]
pub(super) struct SummaryEntry {
    pub(super) wid: U64Le,
    pub(super) size: U32Le,
    pub(super) lpn: U32Le,
}

/// The header of a seal page; a [`ChainEnds`] per unit follows, then the
/// count of the map entries it carries and the [`MapEntry`]s.
#[derive(Copy, Clone, Debug, Pod, Zeroable)]
#[repr(C)]
pub(super) struct SealHeader {
    pub(super) magic: U32Le,
    /// The metadata sequence number of the checkpoint it seals.
    pub(super) seq: U64Le,
    /// Every write id up to this one is in the checkpoint.
    pub(super) commit: U64Le,
    pub(super) next_wid: U64Le,
    pub(super) units: U32Le,
}

/// Where a unit's host and GC chains continue after a seal.
#[derive(Copy, Clone, Debug, Pod, Zeroable)]
#[repr(C)]
pub(super) struct ChainEnds {
    pub(super) host_block: U32Le,
    pub(super) host_page: U32Le,
    pub(super) gc_block: U32Le,
    pub(super) gc_page: U32Le,
}

/// The seal header at the start of `d`.
pub(super) fn seal_header(d: &[u8]) -> &SealHeader {
    view(d)
}

/// Where a seal records `u`'s chain ends.
pub(super) fn chain_ends_at(u: usize) -> usize {
    std::mem::size_of::<SealHeader>() + std::mem::size_of::<ChainEnds>() * u
}

/// Where a seal of `units` chains pairs records its entry count (the
/// entries follow).
pub(super) fn seal_entries_at(units: u32) -> usize {
    chain_ends_at(units as usize)
}

/// The `n` (lpn, ppn) map entries of an incremental page or a seal, from
/// byte `at`, bounded by the page.
pub(super) fn map_entries(d: &[u8], n: u32, at: usize, out: &mut Vec<(u32, u32)>) {
    let n = (n as usize).min(d.len().saturating_sub(at) / std::mem::size_of::<MapEntry>());
    out.extend(array::<MapEntry>(d, at, n).iter().map(|e| (e.lpn.get(), e.ppn.get())));
}

/// A record as stored: two 8-byte fields and a 4-byte one (see [`Record`]).
#[derive(Copy, Clone, Debug, Pod, Zeroable)]
#[repr(C)]
pub(super) struct RecordBytes {
    a: U64Le,
    b: U64Le,
    c: U32Le,
}

const _: () = assert!(std::mem::size_of::<RecordBytes>() == RECORD_BYTES);

impl Record {
    pub(super) fn emit(&self) -> RecordBytes {
        let (a, b, c) = match *self {
            Record::Coalesce { src, dst, src_size } => (src, dst, src_size),
            Record::Trim { wid, first_lpn, count, size } => {
                (wid, (u64::from(first_lpn) << 32) | u64::from(count), size | TRIM_FLAG)
            }
        };
        RecordBytes { a: U64Le::new(a), b: U64Le::new(b), c: U32Le::new(c) }
    }

    pub(super) fn parse(r: &RecordBytes) -> Record {
        let (a, b, c) = (r.a.get(), r.b.get(), r.c.get());
        if c & TRIM_FLAG != 0 {
            Record::Trim { wid: a, first_lpn: (b >> 32) as u32, count: b as u32, size: c & !TRIM_FLAG }
        } else {
            Record::Coalesce { src: a, dst: b, src_size: c }
        }
    }
}

/// A coalescing record (src's page lives on in dst) or a trim record.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Record {
    Coalesce { src: u64, dst: u64, src_size: u32 },
    Trim { wid: u64, first_lpn: u32, count: u32, size: u32 },
}
