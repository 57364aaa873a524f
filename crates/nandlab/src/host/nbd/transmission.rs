//! The transmission phase (proto.md, "Transmission", "Request types"):
//! requests, their checks against the export, and simple replies.
//!
//! A request is a 28-byte header (magic, command flags, type, cookie,
//! offset, length) followed, for `NBD_CMD_WRITE`, by `length` bytes of
//! payload. A header with a bad magic, or a write whose payload exceeds
//! [`MAX_PAYLOAD_BYTES`], cannot be skipped safely: the connection ends.
//! Everything else is checked by [`check`] and answered with the error
//! the protocol names (`NBD_EINVAL` for a read or trim past the end,
//! `NBD_ENOSPC` for a write past the end, `NBD_EINVAL` for an unknown
//! command or flag or an oversized read).

use super::{be_u16, be_u32, be_u64, errno, read_exact_or_eof, ProtocolError, MAX_PAYLOAD_BYTES};
use std::io::Read;

pub const REQUEST_MAGIC: u32 = 0x2560_9513;
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;

pub const CMD_READ: u16 = 0;
pub const CMD_WRITE: u16 = 1;
pub const CMD_DISC: u16 = 2;
pub const CMD_FLUSH: u16 = 3;
pub const CMD_TRIM: u16 = 4;
pub const CMD_WRITE_ZEROES: u16 = 6;

pub const CMD_FLAG_FUA: u16 = 1 << 0;
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;
pub const CMD_FLAG_DF: u16 = 1 << 2;

/// The command flags this server accepts on any command.
const KNOWN_FLAGS: u16 = CMD_FLAG_FUA | CMD_FLAG_NO_HOLE | CMD_FLAG_DF;

/// A request header.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub flags: u16,
    pub kind: u16,
    pub cookie: u64,
    pub offset_bytes: u64,
    pub length_bytes: u32,
}

/// What a request asks of the drive, once checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    Read {
        offset_bytes: u64,
        length_bytes: u32,
    },
    Write {
        offset_bytes: u64,
        data: Vec<u8>,
        fua: bool,
    },
    Flush,
    Trim {
        offset_bytes: u64,
        length_bytes: u32,
        fua: bool,
    },
    /// `may_trim`: without `NBD_CMD_FLAG_NO_HOLE` the zeros may be a hole.
    WriteZeroes {
        offset_bytes: u64,
        length_bytes: u32,
        fua: bool,
        may_trim: bool,
    },
}

/// Parse a request header: 28 bytes.
pub fn parse_request(b: &[u8; 28]) -> Result<Request, ProtocolError> {
    let magic = be_u32(b);
    if magic != REQUEST_MAGIC {
        return Err(ProtocolError::Violation(format!("request with bad magic {magic:#010x}")));
    }
    Ok(Request {
        flags: be_u16(&b[4..]),
        kind: be_u16(&b[6..]),
        cookie: be_u64(&b[8..]),
        offset_bytes: be_u64(&b[16..]),
        length_bytes: be_u32(&b[24..]),
    })
}

/// What the next message on a connection is.
#[derive(Debug, PartialEq, Eq)]
pub enum Incoming {
    /// A command to execute.
    Command(u64, Command),
    /// A request to refuse with this error (the connection goes on).
    Refuse(Request, u32, String),
    /// `NBD_CMD_DISC`, or the client closed the connection between requests.
    Disconnect,
}

/// Read the next request (and its payload) from `r`, checked against an
/// export of `size_bytes`. A hard error ends the connection.
pub fn read_request(r: &mut impl Read, size_bytes: u64) -> Result<Incoming, ProtocolError> {
    let mut header = [0; 28];
    if !read_exact_or_eof(r, &mut header)? {
        return Ok(Incoming::Disconnect);
    }
    let req = parse_request(&header)?;
    let mut data = Vec::new();
    if req.kind == CMD_WRITE {
        if req.length_bytes > MAX_PAYLOAD_BYTES {
            return Err(ProtocolError::Violation(format!(
                "write of {} bytes (the maximum payload is {MAX_PAYLOAD_BYTES})",
                req.length_bytes
            )));
        }
        // Read into spare capacity: no zeroing of memory about to be overwritten.
        data.reserve_exact(req.length_bytes as usize);
        r.by_ref().take(u64::from(req.length_bytes)).read_to_end(&mut data)?;
        if data.len() < req.length_bytes as usize {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
        }
    }
    Ok(match check(&req, size_bytes) {
        Err((error, why)) => Incoming::Refuse(req, error, why),
        Ok(None) => Incoming::Disconnect,
        Ok(Some(cmd)) => Incoming::Command(req.cookie, command(&req, cmd, data)),
    })
}

/// The command of a checked request (`Write` takes its payload).
fn command(req: &Request, kind: u16, data: Vec<u8>) -> Command {
    let (offset_bytes, length_bytes) = (req.offset_bytes, req.length_bytes);
    let fua = req.flags & CMD_FLAG_FUA != 0;
    match kind {
        CMD_READ => Command::Read { offset_bytes, length_bytes },
        CMD_WRITE => Command::Write { offset_bytes, data, fua },
        CMD_FLUSH => Command::Flush,
        CMD_TRIM => Command::Trim { offset_bytes, length_bytes, fua },
        _ => Command::WriteZeroes { offset_bytes, length_bytes, fua, may_trim: req.flags & CMD_FLAG_NO_HOLE == 0 },
    }
}

/// Check a request against an export of `size_bytes`: the command to run
/// (`None`: disconnect), or the error to answer with and why.
pub fn check(req: &Request, size_bytes: u64) -> Result<Option<u16>, (u32, String)> {
    if req.flags & !KNOWN_FLAGS != 0 {
        return Err((errno::EINVAL, format!("unknown command flags {:#x}", req.flags & !KNOWN_FLAGS)));
    }
    let end = req.offset_bytes.checked_add(u64::from(req.length_bytes));
    let past_end = end.is_none_or(|e| e > size_bytes);
    let range = || {
        format!(
            "{} bytes at offset {} past the end of the export ({size_bytes} bytes)",
            req.length_bytes, req.offset_bytes
        )
    };
    match req.kind {
        CMD_DISC => Ok(None),
        CMD_FLUSH => Ok(Some(CMD_FLUSH)),
        CMD_READ if req.length_bytes > MAX_PAYLOAD_BYTES => Err((
            errno::EINVAL,
            format!("read of {} bytes (the maximum payload is {MAX_PAYLOAD_BYTES})", req.length_bytes),
        )),
        CMD_WRITE | CMD_WRITE_ZEROES if past_end => Err((errno::ENOSPC, range())),
        CMD_READ | CMD_TRIM if past_end => Err((errno::EINVAL, range())),
        CMD_READ | CMD_WRITE | CMD_TRIM | CMD_WRITE_ZEROES => Ok(Some(req.kind)),
        other => Err((errno::EINVAL, format!("unknown command {other}"))),
    }
}

/// A simple reply's header (the payload of a read follows it).
pub fn simple_reply(cookie: u64, error: u32) -> [u8; 16] {
    let mut out = [0; 16];
    out[..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    out[4..8].copy_from_slice(&error.to_be_bytes());
    out[8..].copy_from_slice(&cookie.to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(kind: u16, flags: u16, offset: u64, length: u32) -> Vec<u8> {
        let mut b = REQUEST_MAGIC.to_be_bytes().to_vec();
        b.extend_from_slice(&flags.to_be_bytes());
        b.extend_from_slice(&kind.to_be_bytes());
        b.extend_from_slice(&7u64.to_be_bytes());
        b.extend_from_slice(&offset.to_be_bytes());
        b.extend_from_slice(&length.to_be_bytes());
        b
    }

    #[test]
    fn requests_past_the_end_get_the_errors_the_protocol_names() {
        let size = 4096;
        let refused = |kind, offset, length| match read_request(&mut &header(kind, 0, offset, length)[..], size) {
            Ok(Incoming::Refuse(_, e, _)) => e,
            other => panic!("expected a refusal, got {other:?}"),
        };
        assert_eq!(refused(CMD_READ, 4096, 512), errno::EINVAL);
        assert_eq!(refused(CMD_TRIM, u64::MAX, 512), errno::EINVAL);
        assert_eq!(refused(CMD_WRITE_ZEROES, 3584, 1024), errno::ENOSPC);
        assert_eq!(refused(CMD_READ, 0, MAX_PAYLOAD_BYTES + 1), errno::EINVAL);
        assert_eq!(refused(9, 0, 0), errno::EINVAL);
        let mut write = header(CMD_WRITE, 0, 4096, 4);
        write.extend_from_slice(b"abcd");
        assert!(matches!(read_request(&mut &write[..], size), Ok(Incoming::Refuse(_, errno::ENOSPC, _))));
    }

    #[test]
    fn a_write_carries_its_payload_and_flags() {
        let mut write = header(CMD_WRITE, CMD_FLAG_FUA, 512, 4);
        write.extend_from_slice(b"abcd");
        let got = read_request(&mut &write[..], 4096).unwrap();
        assert_eq!(got, Incoming::Command(7, Command::Write { offset_bytes: 512, data: b"abcd".to_vec(), fua: true }));
    }

    #[test]
    fn bad_magic_a_huge_write_or_a_truncated_payload_end_the_connection() {
        let mut bad = header(CMD_READ, 0, 0, 512);
        bad[0] ^= 1;
        assert!(matches!(read_request(&mut &bad[..], 4096), Err(ProtocolError::Violation(_))));
        let huge = header(CMD_WRITE, 0, 0, MAX_PAYLOAD_BYTES + 1);
        assert!(matches!(read_request(&mut &huge[..], u64::MAX), Err(ProtocolError::Violation(_))));
        let mut short = header(CMD_WRITE, 0, 0, 8);
        short.extend_from_slice(b"abc");
        assert!(matches!(read_request(&mut &short[..], 4096), Err(ProtocolError::Io(_))));
        assert!(matches!(read_request(&mut &header(CMD_READ, 0, 0, 8)[..10], 4096), Err(ProtocolError::Io(_))));
        assert_eq!(read_request(&mut &b""[..], 4096).unwrap(), Incoming::Disconnect);
    }
}
