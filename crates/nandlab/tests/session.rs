//! The session around an FTL: what it checks before the drive is built, and
//! what a power cycle takes away.

mod support;

use nandlab::config::{Config, PRESETS};
use nandlab::flash::{BufId, Flash, FlashError};
use nandlab::ftl::{self, Durability, Ftl, FtlError, IoRequest};
use nandlab::run::{RunError, Session};
use nandlab::workload::HostOp;
use nandlab::workload::HostRequest;
use std::cell::RefCell;
use std::rc::Rc;
use support::*;

fn tiny_with(from: &str, to: &str) -> Config {
    let text = PRESETS.iter().find(|(n, _)| *n == "tiny").unwrap().1.replace(from, to);
    Config::parse(&text, "device.toml").expect("valid configuration")
}

/// An OOB smaller than the FTL writes is bad input naming the field, what
/// the FTL needs and what the geometry has — not an `ftl_error` at the
/// first program, as before.
#[test]
fn an_oob_too_small_for_the_ftl_is_an_input_error_naming_the_field() {
    let config = tiny_with("oob_size_bytes = 128", "oob_size_bytes = 4");
    let needed = ftl::build("page", &env(&config), &config.ftl_options).unwrap().info().oob_bytes;
    assert!(needed > 4);
    let Err(RunError::Input(e)) = Session::new(&config, 1, 8, 10) else { panic!("accepted an OOB of 4 bytes") };
    assert!(e.starts_with("device.toml:"), "names the file and line: {e}");
    assert!(e.contains("`geometry.oob_size_bytes`"), "{e}");
    assert!(e.contains(&format!("{needed} bytes")) && e.contains("has 4"), "{e}");
    let fits = tiny_with("oob_size_bytes = 128", &format!("oob_size_bytes = {needed}"));
    assert!(Session::new(&fits, 1, 8, 10).is_ok(), "exactly what the FTL needs is enough");
}

fn env(config: &Config) -> ftl::FtlEnv {
    ftl::FtlEnv {
        geometry: config.geometry.clone(),
        logical_sectors: config.logical_sectors,
        dram_budget_bytes: config.dram_budget_bytes,
        seed: 1,
    }
}

/// What the snooping FTL saw, shared across its instances.
#[derive(Default)]
struct Seen {
    /// The buffer the first instance filled with host data.
    kept: Option<BufId>,
    /// What the next instance got when it read that buffer after mounting.
    after_mount: Option<Result<(), FlashError>>,
}

/// The `page` FTL plus a DRAM buffer holding a copy of the first write; a
/// later instance tries to read that buffer through the old handle.
struct Snoop {
    inner: Box<dyn Ftl>,
    seen: Rc<RefCell<Seen>>,
    mine: Option<BufId>,
}

impl Ftl for Snoop {
    forward_ftl_methods!(info, read, trim, flush, idle, shutdown, stats);
    fn format(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.mine = Some(flash.buf_alloc(8)?);
        self.inner.format(flash)
    }
    fn mount(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        let mine = flash.buf_alloc(8)?;
        self.mine = Some(mine);
        let kept = self.seen.borrow().kept;
        if let Some(old) = kept {
            self.seen.borrow_mut().after_mount = Some(flash.buf_copy(mine, 0, old, 0, 8));
        }
        self.inner.mount(flash)
    }
    fn write(&mut self, flash: &mut dyn Flash, req: &IoRequest) -> Result<Durability, FtlError> {
        if self.seen.borrow().kept.is_none() && req.sectors >= 8 {
            let mine = self.mine.expect("allocated at format");
            flash.buf_copy(mine, 0, req.buf, 0, 8)?;
            self.seen.borrow_mut().kept = Some(mine);
        }
        self.inner.write(flash, req)
    }
}

/// A power cycle loses the device DRAM: a fresh FTL cannot read a buffer
/// its predecessor filled (before, the old instance's buffers stayed
/// allocated and their small integer handles still worked), and the old
/// buffers stop counting against the DRAM budget.
#[test]
fn a_power_cycle_loses_the_old_instances_dram() {
    let config = tiny();
    let seen = Rc::new(RefCell::new(Seen::default()));
    let options = config.ftl_options.clone();
    let shared = seen.clone();
    let factory: nandlab::run::FtlFactory = Box::new(move |env| {
        let inner = ftl::build("page", env, &options)?;
        Ok(Box::new(Snoop { inner, seen: shared.clone(), mine: None }))
    });
    let mut session = Session::with_factory(&config, factory, 1, 8, 10).unwrap();
    let write = HostRequest { op: HostOp::Write, lba: 64, sectors: 16, arrival_ns: 0, job: 0 };
    session.submit(&write).unwrap();
    assert!(seen.borrow().kept.is_some(), "the first instance kept host data in DRAM");
    session.remount().unwrap();
    let dram_after_one_cycle = session.drive().flash().ftl_buffer_bytes();
    assert_eq!(seen.borrow().after_mount, Some(Err(FlashError::InvalidBuffer)), "the old handle is stale");
    session.remount().unwrap();
    session.power_cycle(false).unwrap();
    assert_eq!(
        session.drive().flash().ftl_buffer_bytes(),
        dram_after_one_cycle,
        "buffers do not pile up across cycles"
    );
    session.verify_all(4096).unwrap();
    assert!(session.drive().flash().log().is_clean(), "{:?}", session.drive().flash().log().kept());
}
