//! One client connection: the handshake, then either (untimed) one thread
//! that reads a request, executes it on the drive's [`Core`] and writes
//! its reply, or (timed) a reader that parses requests and hands them to
//! the drive thread, and a writer that sends replies in the order the
//! pacer releases them.
//!
//! Untimed, replies are written into a buffer sent whenever the client has
//! no request left in the socket buffer (or the buffer fills): a client
//! that does not read its replies blocks the thread in its send, and is no
//! longer read. Timed, the reader holds a budget of bytes in flight (payloads received and
//! read data not yet sent, [`IN_FLIGHT_BYTES_MAX`]); a client that sends
//! requests faster than it reads replies stops being read until replies
//! drain, so it cannot make the server hold unbounded memory. A protocol
//! error ends only this connection: it is logged once and the requests
//! already received are still answered if the client is there to read
//! them.

use super::allocator;
use super::bytes::ReadBytes;
use super::send::Outgoing;
use super::stream::Stream;
use super::{Core, Event, Job};
use crate::host::nbd::handshake::{self, Export, Negotiated};
use crate::host::nbd::transmission::{self, Command, Incoming};
use crate::host::nbd::{structured, ProtocolError};
use std::io::BufReader;
use std::panic::AssertUnwindSafe;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Bytes of payload and read data one connection may have in flight.
pub const IN_FLIGHT_BYTES_MAX: u64 = 64 << 20;

/// How long a client may take over the handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// A reply on its way to the writer.
pub struct Reply {
    pub cookie: u64,
    /// Where a read's data starts (its structured chunk names it).
    pub offset_bytes: u64,
    /// The read's data, or the error value and a message.
    pub result: Result<ReadBytes, (u32, String)>,
    /// Bytes of the budget this reply returns when sent.
    pub budget_bytes: u64,
}

/// Bytes in flight on one connection.
#[derive(Default)]
struct Budget {
    used: Mutex<u64>,
    freed: Condvar,
}

impl Budget {
    /// Wait until `bytes` more fit (always, when nothing is in flight).
    fn acquire(&self, bytes: u64) {
        let mut used = self.used.lock().expect("budget lock");
        while *used > 0 && *used + bytes > IN_FLIGHT_BYTES_MAX {
            used = self.freed.wait(used).expect("budget lock");
        }
        *used += bytes;
    }

    fn release(&self, bytes: u64) {
        *self.used.lock().expect("budget lock") -= bytes;
        self.freed.notify_all();
    }
}

/// Serve connection `id` on `stream` until it ends; the drive gets its
/// commands through `drive`. How it ended: `Ok(None)` as the protocol
/// says, `Ok(Some(note))` in the handshake as the client chose (an abort,
/// an unknown export), `Err` after a protocol or socket error.
pub fn serve(
    id: u64,
    stream: Stream,
    export: &Export,
    drive: &Sender<Event>,
    direct: Option<&Mutex<Core>>,
) -> Result<Option<String>, String> {
    let ended = serve_stream(id, &stream, export, drive, direct);
    // Closed for every clone (the server keeps one to close at shutdown):
    // a client that sent NBD_CMD_DISC waits for the close.
    stream.shutdown();
    ended
}

fn serve_stream(
    id: u64,
    stream: &Stream,
    export: &Export,
    drive: &Sender<Event>,
    direct: Option<&Mutex<Core>>,
) -> Result<Option<String>, String> {
    let _ = stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT));
    let mut handshake_stream = match stream.try_clone() {
        Ok(s) => s,
        Err(e) => return Err(format!("cannot use the socket: {e}")),
    };
    let negotiated = match handshake::negotiate(&mut handshake_stream, export) {
        Ok(n) => n,
        Err(ProtocolError::Ended(why)) => return Ok(Some(why)),
        Err(e) => return Err(format!("handshake: {e}")),
    };
    let _ = stream.set_read_timeout(None);
    if let Some(core) = direct {
        return match execute_requests(id, stream, export.size_bytes, negotiated, core, drive) {
            None => Ok(None),
            Some(e) => Err(e),
        };
    }
    let budget = Arc::new(Budget::default());
    let (reply_tx, reply_rx) = channel::<Reply>();
    let writer = {
        let (stream, budget) = (stream.try_clone(), Arc::clone(&budget));
        let Ok(stream) = stream else { return Err("cannot use the socket".into()) };
        std::thread::spawn(move || write_replies(stream, reply_rx, negotiated, &budget))
    };
    let ended = read_requests(id, stream, export.size_bytes, drive, &reply_tx, &budget);
    drop(reply_tx);
    let write_error = writer.join().unwrap_or_else(|_| Some("the reply writer panicked".into()));
    match ended.or(write_error) {
        None => Ok(None),
        Some(e) => Err(e),
    }
}

/// Untimed: read requests until the client disconnects or breaks the
/// protocol, executing each on `core` and writing its reply; log lines
/// and a stop go to the server's loop through `events`.
fn execute_requests(
    id: u64,
    stream: &Stream,
    size_bytes: u64,
    negotiated: Negotiated,
    core: &Mutex<Core>,
    events: &Sender<Event>,
) -> Option<String> {
    let (Ok(read_half), Ok(mut socket)) = (stream.try_clone(), stream.try_clone()) else {
        return Some("cannot use the socket".into());
    };
    let mut reader = BufReader::with_capacity(256 << 10, read_half);
    let mut out = Outgoing::default();
    let lock = || Core::lock(core);
    loop {
        let reply = match transmission::read_request(&mut reader, size_bytes) {
            Ok(Incoming::Disconnect) => return out.send(&mut socket).err().map(|e| format!("sending a reply: {e}")),
            Ok(Incoming::Refuse(req, error, why)) => {
                lock().count_refused();
                Reply { cookie: req.cookie, offset_bytes: 0, result: Err((error, why)), budget_bytes: 0 }
            }
            Ok(Incoming::Command(cookie, cmd)) => {
                if let Command::Write { data, .. } = &cmd {
                    allocator::prefault_heap_past(data.as_ptr() as usize + data.capacity());
                }
                let executed = match std::panic::catch_unwind(AssertUnwindSafe(|| lock().execute(id, cookie, cmd))) {
                    Ok(executed) => executed,
                    Err(payload) => {
                        let _ = events.send(Event::Panicked(payload));
                        return Some("the drive panicked".into());
                    }
                };
                let Some((reply, lines, stop)) = executed else {
                    let _ = out.send(&mut socket);
                    return Some("the server is shutting down".into());
                };
                for line in lines {
                    let _ = events.send(Event::Log(line));
                }
                if stop {
                    let _ = events.send(Event::Stop);
                }
                reply
            }
            Err(ProtocolError::Io(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                let _ = out.send(&mut socket);
                return Some("the client vanished in the middle of a request".into());
            }
            Err(e) => {
                let _ = out.send(&mut socket);
                return Some(e.to_string());
            }
        };
        queue_reply(&mut out, &reply, negotiated);
        // Send what is ready once the client has nothing more queued.
        if reader.buffer().is_empty() || out.pending_bytes() >= Outgoing::FLUSH_AT_BYTES {
            if let Err(e) = out.send(&mut socket) {
                return Some(format!("sending a reply: {e}"));
            }
        }
    }
}

/// Timed: read requests until the client disconnects or breaks the
/// protocol, handing each to the drive thread.
fn read_requests(
    id: u64,
    stream: &Stream,
    size_bytes: u64,
    drive: &Sender<Event>,
    replies: &Sender<Reply>,
    budget: &Budget,
) -> Option<String> {
    let Ok(read_half) = stream.try_clone() else { return Some("cannot use the socket".into()) };
    let mut reader = BufReader::with_capacity(256 << 10, read_half);
    loop {
        match transmission::read_request(&mut reader, size_bytes) {
            Ok(Incoming::Disconnect) => return None,
            Ok(Incoming::Refuse(req, error, why)) => {
                let _ = drive.send(Event::Refused);
                budget.acquire(0);
                let reply = Reply { cookie: req.cookie, offset_bytes: 0, result: Err((error, why)), budget_bytes: 0 };
                if replies.send(reply).is_err() {
                    return Some("the reply writer stopped".into());
                }
            }
            Ok(Incoming::Command(cookie, cmd)) => {
                let bytes = match &cmd {
                    Command::Write { data, .. } => data.len() as u64,
                    Command::Read { length_bytes, .. } => u64::from(*length_bytes),
                    _ => 0,
                };
                budget.acquire(bytes);
                let job = Job {
                    connection: id,
                    cookie,
                    command: cmd,
                    reply: replies.clone(),
                    budget_bytes: bytes,
                    arrived: std::time::Instant::now(),
                };
                if drive.send(Event::Job(job)).is_err() {
                    return Some("the server is shutting down".into());
                }
            }
            Err(ProtocolError::Io(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Some("the client vanished in the middle of a request".into())
            }
            Err(e) => return Some(e.to_string()),
        }
    }
}

/// Send replies as they come; structured ones if the client asked.
fn write_replies(
    mut stream: Stream,
    replies: Receiver<Reply>,
    negotiated: Negotiated,
    budget: &Budget,
) -> Option<String> {
    let mut out = Outgoing::default();
    let mut failed = None;
    while let Ok(first) = replies.recv() {
        let mut next = Some(first);
        // Batch what is ready into one send.
        while let Some(reply) = next {
            if failed.is_none() {
                queue_reply(&mut out, &reply, negotiated);
                if out.pending_bytes() >= Outgoing::FLUSH_AT_BYTES {
                    if let Err(e) = out.send(&mut stream) {
                        failed = Some(format!("sending a reply: {e}"));
                    }
                }
            }
            budget.release(reply.budget_bytes);
            next = replies.try_recv().ok();
        }
        if failed.is_none() {
            if let Err(e) = out.send(&mut stream) {
                failed = Some(format!("sending a reply: {e}"));
            }
        }
    }
    failed
}

/// Queue `reply` on `out`: its header, and a read's data as it is kept.
fn queue_reply(out: &mut Outgoing, reply: &Reply, negotiated: Negotiated) {
    match (&reply.result, negotiated.structured_replies) {
        (Ok(data), false) => {
            out.push_header(&transmission::simple_reply(reply.cookie, 0));
            out.push_data(data);
        }
        (Err((error, _)), false) => out.push_header(&transmission::simple_reply(reply.cookie, *error)),
        (Ok(data), true) if data.is_empty() => out.push_header(&structured::none_chunk(reply.cookie)),
        (Ok(data), true) => {
            out.push_header(&structured::offset_data_header(reply.cookie, reply.offset_bytes, data.len() as u32));
            out.push_data(data);
        }
        (Err((error, why)), true) => out.push_header(&structured::error_chunk(reply.cookie, *error, why)),
    }
}
