//! What the FTLs write to flash besides host data, record by record: each
//! has a *byte view* (a `#[repr(C)]` struct of little-endian fields that
//! [`bytemuck`] lays over a page's bytes, alignment 1, so over any slice)
//! and, where a record has more than a field or two, a *parsed form* with
//! `parse` (bytes → values, `None` if the record is not what it claims)
//! and `emit` (values → bytes). The layout of a record is written down
//! once, here, instead of as offsets in the code that reads or writes it
//! (the shape of smoltcp's `wire` module).
//!
//! - [`oob`]: the 10-byte OOB of `page`, `dftl`, `block` and `hybrid`.
//! - [`summary`]: the header of the data plane's summary pages.
//! - [`checkpoint`]: `page`'s checkpoint pages and trim records.
//! - [`translation`]: `dftl`'s translation pages and erase-count record.
//!
//! `optr`'s records (seals, checkpoints, coalescing and trim records, its
//! 17-byte OOB) are its alone and described in `optr/layout.rs`, on the
//! same field types. Every multi-byte field is little-endian; the bytes on
//! flash are exactly what the FTLs wrote before these views existed.

pub mod checkpoint;
pub mod oob;
pub mod summary;
pub mod translation;

use bytemuck::{Pod, Zeroable};

/// A little-endian `u32` field, at any alignment.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(transparent)]
pub struct U32Le([u8; 4]);

impl U32Le {
    #[inline]
    pub fn new(value: u32) -> U32Le {
        U32Le(value.to_le_bytes())
    }
    #[inline]
    pub fn get(self) -> u32 {
        u32::from_le_bytes(self.0)
    }
}

/// A little-endian `u64` field, at any alignment.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(transparent)]
pub struct U64Le([u8; 8]);

impl U64Le {
    #[inline]
    pub fn new(value: u64) -> U64Le {
        U64Le(value.to_le_bytes())
    }
    #[inline]
    pub fn get(self) -> u64 {
        u64::from_le_bytes(self.0)
    }
}

/// A little-endian 40-bit field (the low 5 bytes of a `u64`; higher bits
/// are dropped on the way in).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(transparent)]
pub struct U40Le([u8; 5]);

impl U40Le {
    #[inline]
    pub fn new(value: u64) -> U40Le {
        let mut b = [0u8; 5];
        b.copy_from_slice(&value.to_le_bytes()[..5]);
        U40Le(b)
    }
    #[inline]
    pub fn get(self) -> u64 {
        let mut b = [0u8; 8];
        b[..5].copy_from_slice(&self.0);
        u64::from_le_bytes(b)
    }
}

/// The byte view `T` at the start of `bytes` (which must be long enough).
#[inline]
pub fn view<T: Pod>(bytes: &[u8]) -> &T {
    bytemuck::from_bytes(&bytes[..std::mem::size_of::<T>()])
}

/// The byte view `T` at the start of `bytes`, to write.
#[inline]
pub fn view_mut<T: Pod>(bytes: &mut [u8]) -> &mut T {
    bytemuck::from_bytes_mut(&mut bytes[..std::mem::size_of::<T>()])
}

/// The `n` fields of type `T` from byte `at` of `bytes` (an array after a header).
#[inline]
pub fn array<T: Pod>(bytes: &[u8], at: usize, n: usize) -> &[T] {
    bytemuck::cast_slice(&bytes[at..at + n * std::mem::size_of::<T>()])
}

/// The `n` fields of type `T` from byte `at` of `bytes`, to write.
#[inline]
pub fn array_mut<T: Pod>(bytes: &mut [u8], at: usize, n: usize) -> &mut [T] {
    bytemuck::cast_slice_mut(&mut bytes[at..at + n * std::mem::size_of::<T>()])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_little_endian_at_any_alignment() {
        let mut bytes = [0u8; 18];
        view_mut::<U32Le>(&mut bytes[1..]).clone_from(&U32Le::new(0x0403_0201));
        assert_eq!(bytes[1..5], [1, 2, 3, 4]);
        *view_mut::<U40Le>(&mut bytes[5..]) = U40Le::new(0xff_0504_0302_01);
        assert_eq!(bytes[5..10], [1, 2, 3, 4, 5], "the 40-bit field keeps the low 5 bytes");
        assert_eq!(view::<U40Le>(&bytes[5..]).get(), 0x05_0403_0201);
        *view_mut::<U64Le>(&mut bytes[10..]) = U64Le::new(u64::MAX - 1);
        assert_eq!(array::<U32Le>(&bytes, 10, 2)[1].get(), u32::MAX);
    }
}
