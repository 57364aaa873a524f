//! Fuzz what an NBD client sends `nandlab serve`: the input is the whole
//! byte stream of one connection (client flags, options, requests with
//! their payloads). The handshake and the request parser must answer,
//! refuse or end the connection — never panic, hang or allocate beyond
//! the protocol's limits — and every request they accept is executed on a
//! small drive (one per process), which must answer it without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nandlab::run::serve::executor::{ServeDrive, ViolationPolicy};
use std::io::{Read, Write};
use std::cell::RefCell;

/// The connection: reads from the fuzz input, writes go nowhere.
struct Duplex<'a> {
    input: &'a [u8],
}

impl Read for Duplex<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.input.read(buf)
    }
}

impl Write for Duplex<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

thread_local! {
    /// The drive (a session is not `Send`: one per fuzzing thread).
    static DRIVE: RefCell<ServeDrive> = RefCell::new({
        let config = nandlab::config::Config::preset("tiny").expect("the tiny preset");
        let session = nandlab::run::Session::new(&config, 1, 1, 4).expect("a drive");
        ServeDrive::new(session, 1 << 20, ViolationPolicy::Continue)
    });
}

fuzz_target!(|data: &[u8]| DRIVE.with_borrow_mut(|drive| serve(drive, data)));

fn serve(drive: &mut ServeDrive, data: &[u8]) {
    let export = nandlab::run::serve::export("nandlab", drive.size_bytes(), 512, 4096);
    nandlab::run::serve::serve_in_line(drive, &mut Duplex { input: data }, &export);
}
