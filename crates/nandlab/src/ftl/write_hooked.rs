//! Test support: an FTL wrapped so that a closure sees every host write
//! first and may fail it (or panic), the rest forwarded unchanged.
//!
//! Unit tests of the runners (`hunt`'s `ftl_panic` and out-of-space
//! findings, `serve`'s panic path) need an FTL that misbehaves on a
//! chosen write; this is the one wrapper they share.

use super::{Durability, Ftl, FtlError, FtlInfo, FtlStats, IdleOutcome, IoRequest};
use crate::flash::Flash;

/// `inner`, whose writes first go to `hook`: `Some(error)` fails the
/// write with it (the inner FTL never sees it), `None` passes it on.
pub(crate) struct WriteHooked<H: FnMut(&IoRequest) -> Option<FtlError>> {
    pub inner: Box<dyn Ftl>,
    pub hook: H,
}

impl<H: FnMut(&IoRequest) -> Option<FtlError>> Ftl for WriteHooked<H> {
    fn info(&self) -> FtlInfo {
        self.inner.info()
    }
    fn format(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.inner.format(flash)
    }
    fn mount(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.inner.mount(flash)
    }
    fn read(&mut self, flash: &mut dyn Flash, req: &IoRequest) -> Result<(), FtlError> {
        self.inner.read(flash, req)
    }
    fn write(&mut self, flash: &mut dyn Flash, req: &IoRequest) -> Result<Durability, FtlError> {
        match (self.hook)(req) {
            Some(error) => Err(error),
            None => self.inner.write(flash, req),
        }
    }
    fn trim(&mut self, flash: &mut dyn Flash, lba: u64, sectors: u64) -> Result<(), FtlError> {
        self.inner.trim(flash, lba, sectors)
    }
    fn flush(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.inner.flush(flash)
    }
    fn idle(&mut self, flash: &mut dyn Flash) -> Result<IdleOutcome, FtlError> {
        self.inner.idle(flash)
    }
    fn shutdown(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.inner.shutdown(flash)
    }
    fn stats(&self) -> FtlStats {
        self.inner.stats()
    }
}
