//! optr's on-flash layout: the OOB every page carries (kind, write id or
//! metadata sequence, request size or index, logical page), the page
//! kinds, and the byte layout of seal, checkpoint, record and summary
//! pages (a header of [`HEADER`] bytes, then little-endian fields).

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

pub(super) fn oob(kind: u8, a: u64, b: u32, c: u32) -> [u8; OOB_BYTES] {
    let mut o = [0u8; OOB_BYTES];
    o[0] = kind;
    o[1..9].copy_from_slice(&a.to_le_bytes());
    o[9..13].copy_from_slice(&b.to_le_bytes());
    o[13..17].copy_from_slice(&c.to_le_bytes());
    o
}
pub(super) fn unoob(o: &[u8; OOB_BYTES]) -> (u8, u64, u32, u32) {
    (
        o[0],
        u64::from_le_bytes(o[1..9].try_into().unwrap()),
        u32::from_le_bytes(o[9..13].try_into().unwrap()),
        u32::from_le_bytes(o[13..17].try_into().unwrap()),
    )
}
pub(super) fn put32(d: &mut [u8], at: usize, v: u32) {
    d[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
pub(super) fn put64(d: &mut [u8], at: usize, v: u64) {
    d[at..at + 8].copy_from_slice(&v.to_le_bytes());
}
pub(super) fn get32(d: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(d[at..at + 4].try_into().unwrap())
}
pub(super) fn get64(d: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(d[at..at + 8].try_into().unwrap())
}
/// Where a seal of `units` chains pairs records its entry count (the
/// entries follow).
pub(super) fn seal_entries_at(units: u32) -> usize {
    32 + 16 * units as usize
}
/// The `n` (lpn, ppn) map entries of an incremental page or a seal, from
/// byte `at`, bounded by the page.
pub(super) fn map_entries(d: &[u8], n: u32, at: usize, out: &mut Vec<(u32, u32)>) {
    let n = (n as usize).min(d.len().saturating_sub(at) / 8);
    out.extend((0..n).map(|k| (get32(d, at + 8 * k), get32(d, at + 8 * k + 4))));
}

/// A coalescing record (src's page lives on in dst) or a trim record.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Record {
    Coalesce { src: u64, dst: u64, src_size: u32 },
    Trim { wid: u64, first_lpn: u32, count: u32, size: u32 },
}
