//! The fixed newstyle handshake and option haggling (proto.md, "Handshake
//! phase", "Option types").
//!
//! The server greets (`NBDMAGIC`, `IHAVEOPT`, its handshake flags); the
//! client answers with its flags, then sends options until one moves the
//! connection to transmission: `NBD_OPT_EXPORT_NAME` (old style: export
//! size and flags, no way to refuse) or `NBD_OPT_GO` (information replies
//! then `NBD_REP_ACK`). There is one export; its name, or the empty name
//! (the default export), selects it.
//!
//! Replies to `NBD_OPT_INFO`/`NBD_OPT_GO` always carry `NBD_INFO_EXPORT`
//! (size and transmission flags), and `NBD_INFO_BLOCK_SIZE` (minimum,
//! preferred, maximum) and the name and description when asked. A client
//! that asks for structured replies (`NBD_OPT_STRUCTURED_REPLY`) gets them
//! in transmission. Unknown options get `NBD_REP_ERR_UNSUP`, malformed ones
//! `NBD_REP_ERR_INVALID`; the haggling goes on after either.

use super::{be_u16, be_u32, be_u64, read_exact_or_eof, ProtocolError, MAX_OPTIONS, MAX_OPTION_BYTES};
use std::io::{Read, Write};

pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
/// Magic of an option reply.
pub const REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;

pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;

pub const OPT_EXPORT_NAME: u32 = 1;
pub const OPT_ABORT: u32 = 2;
pub const OPT_LIST: u32 = 3;
pub const OPT_INFO: u32 = 6;
pub const OPT_GO: u32 = 7;
pub const OPT_STRUCTURED_REPLY: u32 = 8;

pub const REP_ACK: u32 = 1;
pub const REP_SERVER: u32 = 2;
pub const REP_INFO: u32 = 3;
pub const REP_ERR_UNSUP: u32 = (1 << 31) + 1;
pub const REP_ERR_INVALID: u32 = (1 << 31) + 3;
pub const REP_ERR_UNKNOWN: u32 = (1 << 31) + 6;

pub const INFO_EXPORT: u16 = 0;
pub const INFO_NAME: u16 = 1;
pub const INFO_DESCRIPTION: u16 = 2;
pub const INFO_BLOCK_SIZE: u16 = 3;

/// Transmission flags (`NBD_FLAG_*`, sent with the export).
pub mod tflags {
    pub const HAS_FLAGS: u16 = 1 << 0;
    pub const SEND_FLUSH: u16 = 1 << 2;
    pub const SEND_FUA: u16 = 1 << 3;
    pub const SEND_TRIM: u16 = 1 << 5;
    pub const SEND_WRITE_ZEROES: u16 = 1 << 6;
    pub const SEND_DF: u16 = 1 << 7;
    pub const CAN_MULTI_CONN: u16 = 1 << 8;
}

/// The one export a server offers.
#[derive(Clone, Debug)]
pub struct Export {
    pub name: String,
    pub description: String,
    pub size_bytes: u64,
    /// `NBD_FLAG_*` transmission flags.
    pub transmission_flags: u16,
    /// Block-size constraints (`NBD_INFO_BLOCK_SIZE`), in bytes.
    pub block_min_bytes: u32,
    pub block_preferred_bytes: u32,
    pub block_max_bytes: u32,
}

/// What the handshake agreed.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Negotiated {
    /// The client asked for structured replies.
    pub structured_replies: bool,
}

/// One option, parsed from its number and data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OptionRequest {
    ExportName(Vec<u8>),
    Abort,
    List,
    /// `NBD_OPT_INFO` (`go` false) or `NBD_OPT_GO`.
    Info {
        go: bool,
        name: Vec<u8>,
        requests: Vec<u16>,
    },
    StructuredReply,
    /// An option this server does not implement.
    Unsupported(u32),
    /// A known option whose data is malformed.
    Invalid(u32, &'static str),
}

/// Parse an option header (magic, option, data length): 16 bytes.
pub fn parse_option_header(b: &[u8; 16]) -> Result<(u32, u32), ProtocolError> {
    if be_u64(b) != IHAVEOPT {
        return Err(ProtocolError::Violation(format!("option with bad magic {:#018x}", be_u64(b))));
    }
    let (option, len) = (be_u32(&b[8..]), be_u32(&b[12..]));
    if len > MAX_OPTION_BYTES {
        return Err(ProtocolError::Violation(format!(
            "option {option} with {len} bytes of data (at most {MAX_OPTION_BYTES})"
        )));
    }
    Ok((option, len))
}

/// Parse option `option` with its data.
pub fn parse_option(option: u32, data: &[u8]) -> OptionRequest {
    match option {
        OPT_EXPORT_NAME => OptionRequest::ExportName(data.to_vec()),
        OPT_ABORT => OptionRequest::Abort,
        OPT_LIST if data.is_empty() => OptionRequest::List,
        OPT_LIST => OptionRequest::Invalid(option, "NBD_OPT_LIST carries no data"),
        OPT_INFO | OPT_GO => parse_info(option == OPT_GO, data).unwrap_or(OptionRequest::Invalid(
            option,
            "the name length and information requests do not match the data length",
        )),
        OPT_STRUCTURED_REPLY if data.is_empty() => OptionRequest::StructuredReply,
        OPT_STRUCTURED_REPLY => OptionRequest::Invalid(option, "NBD_OPT_STRUCTURED_REPLY carries no data"),
        _ => OptionRequest::Unsupported(option),
    }
}

/// `NBD_OPT_INFO`/`GO` data: name length, name, request count, requests.
fn parse_info(go: bool, data: &[u8]) -> Option<OptionRequest> {
    let name_len = usize::try_from(be_u32(data.get(..4)?)).ok()?;
    let name = data.get(4..4usize.checked_add(name_len)?)?.to_vec();
    let rest = &data[4 + name_len..];
    let count = usize::from(be_u16(rest.get(..2)?));
    let list = &rest[2..];
    if list.len() != 2 * count {
        return None;
    }
    let requests = list.chunks_exact(2).map(be_u16).collect();
    Some(OptionRequest::Info { go, name, requests })
}

/// An option reply's header and data.
pub fn option_reply(option: u32, reply: u32, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(20 + data.len());
    out.extend_from_slice(&REPLY_MAGIC.to_be_bytes());
    out.extend_from_slice(&option.to_be_bytes());
    out.extend_from_slice(&reply.to_be_bytes());
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(data);
    out
}

/// An error reply with a message for the user.
fn error_reply(option: u32, reply: u32, message: &str) -> Vec<u8> {
    option_reply(option, reply, message.as_bytes())
}

impl Export {
    /// Whether `name` selects this export (its name, or the default "").
    pub fn is_named(&self, name: &[u8]) -> bool {
        name.is_empty() || name == self.name.as_bytes()
    }

    /// The `NBD_REP_INFO` replies for `requests` (always `NBD_INFO_EXPORT`).
    fn info_replies(&self, option: u32, requests: &[u16]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut export = INFO_EXPORT.to_be_bytes().to_vec();
        export.extend_from_slice(&self.size_bytes.to_be_bytes());
        export.extend_from_slice(&self.transmission_flags.to_be_bytes());
        out.extend(option_reply(option, REP_INFO, &export));
        if requests.contains(&INFO_BLOCK_SIZE) {
            let mut sizes = INFO_BLOCK_SIZE.to_be_bytes().to_vec();
            for v in [self.block_min_bytes, self.block_preferred_bytes, self.block_max_bytes] {
                sizes.extend_from_slice(&v.to_be_bytes());
            }
            out.extend(option_reply(option, REP_INFO, &sizes));
        }
        if requests.contains(&INFO_NAME) {
            let mut name = INFO_NAME.to_be_bytes().to_vec();
            name.extend_from_slice(self.name.as_bytes());
            out.extend(option_reply(option, REP_INFO, &name));
        }
        if requests.contains(&INFO_DESCRIPTION) {
            let mut text = INFO_DESCRIPTION.to_be_bytes().to_vec();
            text.extend_from_slice(self.description.as_bytes());
            out.extend(option_reply(option, REP_INFO, &text));
        }
        out
    }

    /// The reply to `NBD_OPT_EXPORT_NAME`: size, flags, and 124 zero
    /// bytes unless the client said `NBD_FLAG_C_NO_ZEROES`.
    fn export_name_reply(&self, no_zeroes: bool) -> Vec<u8> {
        let mut out = self.size_bytes.to_be_bytes().to_vec();
        out.extend_from_slice(&self.transmission_flags.to_be_bytes());
        if !no_zeroes {
            out.extend_from_slice(&[0; 124]);
        }
        out
    }
}

/// What the server does with one option: bytes to send, and whether the
/// handshake ends (into transmission, or closed).
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    Reply(Vec<u8>),
    /// Send the bytes, then go to transmission.
    Transmit(Vec<u8>),
    /// Send the bytes, then close (the reason is logged).
    Close(Vec<u8>, String),
}

/// The server's answer to one parsed option (`negotiated` records a
/// request for structured replies).
pub fn answer(export: &Export, request: OptionRequest, no_zeroes: bool, negotiated: &mut Negotiated) -> Step {
    match request {
        OptionRequest::ExportName(name) if export.is_named(&name) => {
            Step::Transmit(export.export_name_reply(no_zeroes))
        }
        OptionRequest::ExportName(name) => Step::Close(
            Vec::new(),
            format!("NBD_OPT_EXPORT_NAME for unknown export {:?}", String::from_utf8_lossy(&name)),
        ),
        OptionRequest::Abort => {
            Step::Close(option_reply(OPT_ABORT, REP_ACK, &[]), "the client aborted the handshake".into())
        }
        OptionRequest::List => {
            let mut data = (export.name.len() as u32).to_be_bytes().to_vec();
            data.extend_from_slice(export.name.as_bytes());
            let mut out = option_reply(OPT_LIST, REP_SERVER, &data);
            out.extend(option_reply(OPT_LIST, REP_ACK, &[]));
            Step::Reply(out)
        }
        OptionRequest::Info { go, name, requests } => {
            let option = if go { OPT_GO } else { OPT_INFO };
            if !export.is_named(&name) {
                let message =
                    format!("no export named {:?}; this server has {:?}", String::from_utf8_lossy(&name), export.name);
                return Step::Reply(error_reply(option, REP_ERR_UNKNOWN, &message));
            }
            let mut out = export.info_replies(option, &requests);
            out.extend(option_reply(option, REP_ACK, &[]));
            if go {
                Step::Transmit(out)
            } else {
                Step::Reply(out)
            }
        }
        OptionRequest::StructuredReply => {
            negotiated.structured_replies = true;
            Step::Reply(option_reply(OPT_STRUCTURED_REPLY, REP_ACK, &[]))
        }
        OptionRequest::Unsupported(option) => {
            Step::Reply(error_reply(option, REP_ERR_UNSUP, "option not supported by nandlab serve"))
        }
        OptionRequest::Invalid(option, why) => Step::Reply(error_reply(option, REP_ERR_INVALID, why)),
    }
}

/// The server's greeting.
pub fn greeting() -> [u8; 18] {
    let mut out = [0; 18];
    out[..8].copy_from_slice(&NBDMAGIC.to_be_bytes());
    out[8..16].copy_from_slice(&IHAVEOPT.to_be_bytes());
    out[16..].copy_from_slice(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes());
    out
}

/// Check the client's flags; whether it asked for no zeroes.
pub fn parse_client_flags(flags: u32) -> Result<bool, ProtocolError> {
    if flags & !(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES) != 0 {
        return Err(ProtocolError::Violation(format!("unknown client flags {flags:#x}")));
    }
    if flags & FLAG_C_FIXED_NEWSTYLE == 0 {
        return Err(ProtocolError::Violation("the client does not speak the fixed newstyle handshake".into()));
    }
    Ok(flags & FLAG_C_NO_ZEROES != 0)
}

/// Run the handshake on `stream` until the client enters transmission.
pub fn negotiate(stream: &mut (impl Read + Write), export: &Export) -> Result<Negotiated, ProtocolError> {
    stream.write_all(&greeting())?;
    stream.flush()?;
    let mut flags = [0; 4];
    if !read_exact_or_eof(stream, &mut flags)? {
        return Err(ProtocolError::Ended("the client closed the connection before the handshake".into()));
    }
    let no_zeroes = parse_client_flags(be_u32(&flags))?;
    let mut negotiated = Negotiated::default();
    for _ in 0..MAX_OPTIONS {
        let mut header = [0; 16];
        if !read_exact_or_eof(stream, &mut header)? {
            return Err(ProtocolError::Ended("the client closed the connection during the handshake".into()));
        }
        let (option, len) = parse_option_header(&header)?;
        let mut data = vec![0; len as usize];
        stream.read_exact(&mut data)?;
        match answer(export, parse_option(option, &data), no_zeroes, &mut negotiated) {
            Step::Reply(bytes) => stream.write_all(&bytes)?,
            Step::Transmit(bytes) => {
                stream.write_all(&bytes)?;
                stream.flush()?;
                return Ok(negotiated);
            }
            Step::Close(bytes, why) => {
                // The client may already be gone; the reason is what counts.
                let _ = stream.write_all(&bytes).and_then(|()| stream.flush());
                return Err(ProtocolError::Ended(why));
            }
        }
        stream.flush()?;
    }
    Err(ProtocolError::Violation(format!("more than {MAX_OPTIONS} options in the handshake")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn export() -> Export {
        Export {
            name: "nandlab".into(),
            description: "test".into(),
            size_bytes: 1 << 20,
            transmission_flags: tflags::HAS_FLAGS | tflags::SEND_FLUSH,
            block_min_bytes: 512,
            block_preferred_bytes: 4096,
            block_max_bytes: 1 << 25,
        }
    }

    fn info_data(name: &[u8], requests: &[u16]) -> Vec<u8> {
        let mut d = (name.len() as u32).to_be_bytes().to_vec();
        d.extend_from_slice(name);
        d.extend_from_slice(&(requests.len() as u16).to_be_bytes());
        for r in requests {
            d.extend_from_slice(&r.to_be_bytes());
        }
        d
    }

    #[test]
    fn go_parses_name_and_requests_and_rejects_bad_lengths() {
        let d = info_data(b"nandlab", &[INFO_BLOCK_SIZE, INFO_NAME]);
        assert_eq!(
            parse_option(OPT_GO, &d),
            OptionRequest::Info { go: true, name: b"nandlab".to_vec(), requests: vec![3, 1] }
        );
        assert!(matches!(parse_option(OPT_GO, &d[..d.len() - 1]), OptionRequest::Invalid(OPT_GO, _)));
        let mut huge = d.clone();
        huge[..4].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(matches!(parse_option(OPT_INFO, &huge), OptionRequest::Invalid(OPT_INFO, _)));
        assert!(matches!(parse_option(OPT_LIST, b"x"), OptionRequest::Invalid(OPT_LIST, _)));
        assert_eq!(parse_option(99, b""), OptionRequest::Unsupported(99));
    }

    #[test]
    fn go_to_an_unknown_export_is_refused_and_the_handshake_goes_on() {
        let mut n = Negotiated::default();
        let step = answer(&export(), parse_option(OPT_GO, &info_data(b"other", &[])), false, &mut n);
        let Step::Reply(bytes) = step else { panic!("expected an error reply, got {step:?}") };
        assert_eq!(be_u32(&bytes[12..]), REP_ERR_UNKNOWN);
        let step = answer(&export(), parse_option(OPT_GO, &info_data(b"", &[INFO_BLOCK_SIZE])), false, &mut n);
        let Step::Transmit(bytes) = step else { panic!("expected transmission, got {step:?}") };
        // INFO_EXPORT (20 + 12), INFO_BLOCK_SIZE (20 + 14), ACK (20).
        assert_eq!(bytes.len(), 32 + 34 + 20);
        assert_eq!(be_u32(&bytes[32 + 34 + 12..]), REP_ACK);
        assert_eq!(be_u32(&bytes[32 + 22..]), 512, "minimum block size");
    }

    #[test]
    fn a_bad_option_magic_or_a_huge_option_ends_the_connection() {
        let mut h = [0u8; 16];
        assert!(parse_option_header(&h).is_err());
        h[..8].copy_from_slice(&IHAVEOPT.to_be_bytes());
        h[12..].copy_from_slice(&(MAX_OPTION_BYTES + 1).to_be_bytes());
        assert!(parse_option_header(&h).is_err());
        h[12..].copy_from_slice(&16u32.to_be_bytes());
        assert_eq!(parse_option_header(&h).unwrap(), (0, 16));
    }

    #[test]
    fn client_flags_must_be_fixed_newstyle() {
        assert!(parse_client_flags(0).is_err());
        assert!(parse_client_flags(4 | 1).is_err());
        assert!(!parse_client_flags(1).unwrap());
        assert!(parse_client_flags(3).unwrap());
    }
}
