//! A panic inside the FTL while serving: the server closes every
//! connection and ends with the panic (see the module docs of `serve`);
//! a correct FTL on the same requests serves them all.

use super::executor::{ServeDrive, ViolationPolicy};
use super::stream::Listener;
use super::{AtExit, ServeOptions};
use crate::config::Config;
use crate::ftl::write_hooked::WriteHooked;
use crate::ftl::{Ftl, IoRequest};
use crate::host::nbd::handshake::{FLAG_C_FIXED_NEWSTYLE, FLAG_C_NO_ZEROES, IHAVEOPT, OPT_EXPORT_NAME};
use crate::host::nbd::transmission::{CMD_DISC, CMD_WRITE, REQUEST_MAGIC, SIMPLE_REPLY_MAGIC};
use crate::run::{Session, StopFlag};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::mpsc::channel;
use std::time::Duration;

/// The FTL panics on a write that reaches this LBA.
const POISON_LBA: u64 = 4096;

/// Connect and negotiate the export (`NBD_OPT_EXPORT_NAME`).
fn connect(addr: std::net::SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect");
    // A bound on a hang only (the assertions below say what went wrong).
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut greeting = [0; 18];
    s.read_exact(&mut greeting).expect("greeting");
    s.write_all(&(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes()).unwrap();
    let mut option = IHAVEOPT.to_be_bytes().to_vec();
    option.extend_from_slice(&OPT_EXPORT_NAME.to_be_bytes());
    option.extend_from_slice(&0u32.to_be_bytes());
    s.write_all(&option).unwrap();
    let mut export = [0; 10];
    s.read_exact(&mut export).expect("export size and flags");
    s
}

fn request(s: &mut TcpStream, kind: u16, cookie: u64, offset: u64, data: &[u8]) {
    let mut m = REQUEST_MAGIC.to_be_bytes().to_vec();
    m.extend_from_slice(&0u16.to_be_bytes());
    m.extend_from_slice(&kind.to_be_bytes());
    m.extend_from_slice(&cookie.to_be_bytes());
    m.extend_from_slice(&offset.to_be_bytes());
    m.extend_from_slice(&(data.len() as u32).to_be_bytes());
    m.extend_from_slice(data);
    s.write_all(&m).unwrap();
}

/// A write's reply: its error value.
fn write_reply(s: &mut TcpStream, cookie: u64) -> u32 {
    let mut r = [0; 16];
    s.read_exact(&mut r).expect("a reply");
    assert_eq!(u32::from_be_bytes(r[..4].try_into().unwrap()), SIMPLE_REPLY_MAGIC);
    assert_eq!(u64::from_be_bytes(r[8..].try_into().unwrap()), cookie);
    u32::from_be_bytes(r[4..8].try_into().unwrap())
}

/// How a connection ended for a client waiting on it: `Ok(())` when the
/// server closed it (end of stream or reset), `Err` otherwise.
fn closed_by_server(s: &mut TcpStream) -> Result<(), String> {
    let mut b = [0; 64];
    match s.read(&mut b) {
        Ok(0) => Ok(()),
        Err(e) if e.kind() == ErrorKind::ConnectionReset => Ok(()),
        Ok(n) => Err(format!("{n} bytes more")),
        Err(e) => Err(format!("still open ({e})")),
    }
}

/// Serve two clients: `idle` writes once and then waits; then `poison`
/// writes at [`POISON_LBA`] (and disconnects, if it can). Returns what
/// `serve::run` did (the panic's message, or `Ok`) and how each client's
/// connection ended.
fn serve_two_clients(poisoned: bool, timed: bool) -> (Result<(), String>, Result<(), String>, Result<(), String>) {
    let preset = if timed { "tiny-timed" } else { "tiny" };
    let config = Config::preset(preset).unwrap();
    let options = config.ftl_options.clone();
    let factory: crate::run::FtlFactory = Box::new(move |env| {
        let inner = crate::ftl::build("page", env, &options)?;
        // The page FTL, which panics on a write that reaches
        // [`POISON_LBA`] (`poisoned`), or never.
        let hook = move |req: &IoRequest| {
            if poisoned && req.lba + u64::from(req.sectors) > POISON_LBA && req.lba <= POISON_LBA {
                panic!("deliberate FTL panic: write of LBA {}", req.lba);
            }
            None
        };
        Ok(Box::new(WriteHooked { inner, hook }) as Box<dyn Ftl>)
    });
    let session = Session::with_factory(&config, factory, 3, 1, 20).unwrap();
    let drive = ServeDrive::new(session, 1 << 20, ViolationPolicy::Continue);
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = tcp.local_addr().unwrap();
    let opts = ServeOptions {
        seed: 3,
        export_name: "nandlab".into(),
        block_min_bytes: 512,
        once: true,
        remount_verify: false,
        stop: StopFlag::default(),
        stats_now: None,
        stats_interval: None,
        timed,
        at_exit: AtExit::Flush,
    };
    let (ready_tx, ready_rx) = channel();
    let (done_tx, done_rx) = channel();
    let idle = std::thread::spawn(move || {
        let mut s = connect(addr);
        request(&mut s, CMD_WRITE, 1, 0, &[7; 4096]);
        assert_eq!(write_reply(&mut s, 1), 0, "an ordinary write");
        ready_tx.send(()).unwrap();
        if !poisoned {
            // Still served: disconnect once the other client is done.
            done_rx.recv().unwrap();
            request(&mut s, CMD_DISC, 2, 0, &[]);
        }
        closed_by_server(&mut s)
    });
    let poison = std::thread::spawn(move || {
        ready_rx.recv().unwrap();
        let mut s = connect(addr);
        request(&mut s, CMD_WRITE, 1, POISON_LBA * 512, &[9; 4096]);
        if poisoned {
            return closed_by_server(&mut s);
        }
        assert_eq!(write_reply(&mut s, 1), 0, "the write the correct FTL serves");
        request(&mut s, CMD_DISC, 2, 0, &[]);
        let ended = closed_by_server(&mut s);
        done_tx.send(()).unwrap();
        ended
    });
    let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        super::run(&config, drive, Listener::Tcp(tcp), &opts, &mut |_| {}).map(|_| ())
    }));
    let served = match served {
        Ok(r) => r.map_err(|e| format!("an error: {e}")),
        Err(payload) => Err(payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()),
    };
    (served, idle.join().unwrap(), poison.join().unwrap())
}

#[test]
fn a_panic_in_the_ftl_closes_every_connection_and_ends_the_server_with_it() {
    for timed in [false, true] {
        let (served, idle, poison) = serve_two_clients(true, timed);
        let message = served.expect_err("the server ends with the FTL's panic");
        assert!(message.contains("deliberate FTL panic: write of LBA 4096"), "timed {timed}: {message}");
        assert_eq!(poison, Ok(()), "timed {timed}: the panicking command's connection is closed");
        assert_eq!(idle, Ok(()), "timed {timed}: the other connection is closed, not left hanging");
    }
}

#[test]
fn the_same_requests_on_the_correct_ftl_are_served() {
    let (served, idle, poison) = serve_two_clients(false, false);
    assert_eq!(served, Ok(()));
    assert_eq!((idle, poison), (Ok(()), Ok(())), "both closed after their disconnects");
}
