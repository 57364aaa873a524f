//! The NBD protocol: the host interface `nandlab serve` speaks, so real
//! clients (the Linux kernel's `nbd` driver, qemu, libnbd's `nbdcopy` and
//! `nbdfuse`, fio's `nbd` engine) use a simulated drive as a block device.
//!
//! The source is the protocol document of the NBD project,
//! `doc/proto.md` in <https://github.com/NetworkBlockDevice/nbd>
//! ("The NBD protocol"); the names of constants are its names. One file
//! per part of it:
//! - [`handshake`]: the fixed newstyle handshake and option haggling
//!   (`NBD_OPT_EXPORT_NAME`, `LIST`, `INFO`, `GO`, `STRUCTURED_REPLY`,
//!   `ABORT`; everything else is answered `NBD_REP_ERR_UNSUP`), the export
//!   information and block-size constraints sent in reply;
//! - [`transmission`]: requests (`READ`, `WRITE`, `FLUSH`, `TRIM`,
//!   `WRITE_ZEROES`, `DISC`, flags `FUA`, `NO_HOLE`, `DF`), their checks
//!   against the export (range, payload limit), and simple replies;
//! - [`structured`]: structured reply chunks, for a client that asked for
//!   them (`NBD_OPT_STRUCTURED_REPLY`).
//!
//! Every message a client sends is parsed from bytes by a function of its
//! own (no I/O), so a fuzz target drives the parsers with arbitrary input.
//! A message the protocol cannot recover from (a bad magic number, a write
//! payload over [`MAX_PAYLOAD_BYTES`], an option over
//! [`MAX_OPTION_BYTES`]) ends the connection (a *hard disconnect*, as the
//! document calls it); anything else gets the protocol's error reply and
//! the connection goes on.
//!
//! Not implemented: TLS (`NBD_OPT_STARTTLS` is refused with
//! `NBD_REP_ERR_UNSUP`), metadata contexts and `NBD_CMD_BLOCK_STATUS`,
//! extended headers, `NBD_CMD_CACHE` and `NBD_CMD_RESIZE` (none is
//! advertised, so a conforming client does not send them; one that does
//! gets `NBD_EINVAL`).

pub mod handshake;
pub mod structured;
pub mod transmission;

/// The largest payload a request may carry or ask for: 2^25 bytes
/// (32 MiB), the size the protocol says no server should treat as a
/// denial of service. Advertised as the maximum block size.
pub const MAX_PAYLOAD_BYTES: u32 = 1 << 25;

/// The largest option data accepted during the handshake (an export name
/// is at most 4 KiB; larger is treated as an attack: hard disconnect).
pub const MAX_OPTION_BYTES: u32 = 64 * 1024;

/// Options a client may send before choosing an export (more ends the
/// connection: a client looping in the handshake holds a thread).
pub const MAX_OPTIONS: u32 = 1024;

/// The default TCP port of NBD (IANA).
pub const DEFAULT_PORT: u16 = 10809;

/// Error values of replies (the protocol's fixed subset of errno).
pub mod errno {
    pub const EPERM: u32 = 1;
    pub const EIO: u32 = 5;
    pub const ENOMEM: u32 = 12;
    pub const EINVAL: u32 = 22;
    pub const ENOSPC: u32 = 28;
    pub const EOVERFLOW: u32 = 75;
    pub const ENOTSUP: u32 = 95;
    pub const ESHUTDOWN: u32 = 108;
}

/// Why a connection ends.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    /// The socket failed or closed (a client that vanished mid-message).
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
    /// The client broke the protocol in a way that ends the connection.
    #[error("{0}")]
    Violation(String),
    /// The client ended the handshake (`NBD_OPT_ABORT`) or asked for an
    /// export that does not exist with `NBD_OPT_EXPORT_NAME`.
    #[error("{0}")]
    Ended(String),
}

/// Read exactly `buf.len()` bytes; a clean end of stream before the first
/// byte is `Ok(false)`.
pub(crate) fn read_exact_or_eof(r: &mut impl std::io::Read, buf: &mut [u8]) -> Result<bool, std::io::Error> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

fn be_u16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn be_u64(b: &[u8]) -> u64 {
    u64::from_be_bytes(b[..8].try_into().expect("8 bytes"))
}
