//! The OOB (spare area) of every page `page`, `dftl`, `block` and
//! `hybrid` program: one codec, each FTL with its own kinds.
//!
//! ```text
//! byte 0      kind (each FTL's own; page and dftl keep the write stream
//!             in the high nibble, see `data_plane::OOB_KIND_MASK`)
//! bytes 1-4   index: logical page, logical block, or which metadata page
//! bytes 5-9   program sequence number, 40 bits (2^40 programs before it
//!             would wrap)
//! ```
//!
//! An erased page reads as all `0xff`, so its kind is [`OOB_ERASED`].
//! The codec runs on every program and every page of a mount scan:
//! allocation-free, and inlined into its callers.

use super::{U32Le, U40Le};
use bytemuck::{Pod, Zeroable};

/// Bytes of the OOB.
pub const OOB_BYTES: usize = 10;
/// The kind byte of an erased page's OOB.
pub const OOB_ERASED: u8 = 0xff;

/// The byte view of the OOB.
#[derive(Copy, Clone, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct OobBytes {
    pub kind: u8,
    pub index: U32Le,
    pub seq: U40Le,
}

const _: () = assert!(std::mem::size_of::<OobBytes>() == OOB_BYTES);

/// The parsed OOB.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Oob {
    pub kind: u8,
    pub index: u32,
    pub seq: u64,
}

impl Oob {
    #[inline]
    pub fn parse(bytes: &[u8; OOB_BYTES]) -> Oob {
        let v: &OobBytes = bytemuck::cast_ref(bytes);
        Oob { kind: v.kind, index: v.index.get(), seq: v.seq.get() }
    }

    #[inline]
    pub fn emit(&self) -> [u8; OOB_BYTES] {
        bytemuck::cast(OobBytes { kind: self.kind, index: U32Le::new(self.index), seq: U40Le::new(self.seq) })
    }
}

/// The OOB of a page of `kind` holding `index`, programmed at `seq`.
#[inline]
pub fn encode_oob(kind: u8, index: u32, seq: u64) -> [u8; OOB_BYTES] {
    Oob { kind, index, seq }.emit()
}

/// (kind byte, index, sequence number) of an OOB.
#[inline]
pub fn decode_oob(bytes: &[u8; OOB_BYTES]) -> (u8, u32, u64) {
    let Oob { kind, index, seq } = Oob::parse(bytes);
    (kind, index, seq)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exact bytes on flash (reports include recovery from them).
    #[test]
    fn the_layout_is_kind_index_then_a_40_bit_sequence_number() {
        let o = encode_oob(0x31, 0x0403_0201, 0x1_0a09_0807_0605);
        assert_eq!(o, [0x31, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        assert_eq!(decode_oob(&o), (0x31, 0x0403_0201, 0x09_0807_0605));
        assert_eq!(decode_oob(&[0xff; OOB_BYTES]).0, OOB_ERASED);
    }
}
