//! Structured replies (proto.md, "Structured reply chunk message"), for a
//! client that negotiated `NBD_OPT_STRUCTURED_REPLY`.
//!
//! Each reply is one chunk with `NBD_REPLY_FLAG_DONE`: a read's data as
//! one `NBD_REPLY_TYPE_OFFSET_DATA` chunk (never fragmented, so
//! `NBD_CMD_FLAG_DF` holds trivially), an error as
//! `NBD_REPLY_TYPE_ERROR` with a message, and anything else as
//! `NBD_REPLY_TYPE_NONE`.

pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;
pub const REPLY_FLAG_DONE: u16 = 1 << 0;
pub const REPLY_TYPE_NONE: u16 = 0;
pub const REPLY_TYPE_OFFSET_DATA: u16 = 1;
pub const REPLY_TYPE_ERROR: u16 = (1 << 15) + 1;

/// A chunk header for a payload of `length` bytes.
pub fn chunk_header(cookie: u64, kind: u16, length: u32) -> [u8; 20] {
    let mut out = [0; 20];
    out[..4].copy_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
    out[4..6].copy_from_slice(&REPLY_FLAG_DONE.to_be_bytes());
    out[6..8].copy_from_slice(&kind.to_be_bytes());
    out[8..16].copy_from_slice(&cookie.to_be_bytes());
    out[16..].copy_from_slice(&length.to_be_bytes());
    out
}

/// The header of a read's data chunk (`data_len` bytes from `offset_bytes` follow).
pub fn offset_data_header(cookie: u64, offset_bytes: u64, data_len: u32) -> [u8; 28] {
    let mut out = [0; 28];
    out[..20].copy_from_slice(&chunk_header(cookie, REPLY_TYPE_OFFSET_DATA, data_len + 8));
    out[20..].copy_from_slice(&offset_bytes.to_be_bytes());
    out
}

/// An error chunk with `message` (truncated to 4 KiB).
pub fn error_chunk(cookie: u64, error: u32, message: &str) -> Vec<u8> {
    let message = &message.as_bytes()[..message.len().min(4096)];
    let mut out = chunk_header(cookie, REPLY_TYPE_ERROR, 6 + message.len() as u32).to_vec();
    out.extend_from_slice(&error.to_be_bytes());
    out.extend_from_slice(&(message.len() as u16).to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// The reply to a command without data that succeeded.
pub fn none_chunk(cookie: u64) -> [u8; 20] {
    chunk_header(cookie, REPLY_TYPE_NONE, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_carry_their_lengths() {
        let e = error_chunk(9, 5, "lost write");
        assert_eq!(u32::from_be_bytes(e[16..20].try_into().unwrap()), 6 + 10);
        assert_eq!(e.len(), 20 + 16);
        let d = offset_data_header(9, 4096, 512);
        assert_eq!(u32::from_be_bytes(d[16..20].try_into().unwrap()), 520);
        assert_eq!(u16::from_be_bytes(d[6..8].try_into().unwrap()), REPLY_TYPE_OFFSET_DATA);
        assert_eq!(u16::from_be_bytes(none_chunk(1)[4..6].try_into().unwrap()), REPLY_FLAG_DONE);
    }
}
