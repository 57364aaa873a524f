//! The hot path allocates nothing: once a run is warm, host requests (with
//! GC, read-modify-write and oracle checks) do no heap allocation per flash
//! operation. A counting global allocator proves it.

mod support;

use nandlab::run::Session;
use nandlab::workload::Workload;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use support::*;

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The allocation counter is global: tests measuring it take turns.
static MEASURING: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn steady_state_requests_allocate_nothing_per_flash_operation() {
    let _turn = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    let config = tiny();
    let mut spec = preset_workload(&config);
    spec.write_size = Some("8x".parse().unwrap());
    let mut w = workload(&config, &spec, 1);
    let requests = drain(&mut w);
    let mut session = Session::new(&config, 1, w.alignment_sectors(), 0).unwrap();
    let (warm, measured) = requests.split_at(requests.len() / 2);
    for r in warm {
        session.submit(r).unwrap();
    }
    let ops_before = session.flash.stats().operations();
    let allocs_before = ALLOCATIONS.load(Ordering::Relaxed);
    for r in measured {
        session.submit(r).unwrap();
    }
    let allocs = ALLOCATIONS.load(Ordering::Relaxed) - allocs_before;
    let ops = session.flash.stats().operations() - ops_before;
    assert!(session.flash.log().is_clean());
    assert!(ops > 100_000, "the measured half does real work ({ops} flash ops)");
    // Amortised growth of a pool may still happen rarely; per-operation
    // allocation would be at least one per op.
    eprintln!("{allocs} allocations for {ops} flash operations");
    assert!(allocs * 1000 < ops, "{allocs} allocations for {ops} flash operations");
}

#[test]
fn zoo_ftls_allocate_nothing_per_flash_operation_either() {
    let _turn = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    for (ftl, options) in [
        ("dftl", "cmt_bytes = \"5%\""),
        ("hybrid", ""),
        ("block", ""),
        ("page", "hot_cold = \"dac:4\"\nwear_leveling = \"static:threshold=4\""),
    ] {
        let mut config = tiny();
        config.ftl_name = ftl.to_string();
        config.ftl_options = toml::from_str(options).unwrap();
        let mut spec = preset_workload(&config);
        spec.write_size = Some("4x".parse().unwrap());
        let mut w = workload(&config, &spec, 1);
        let requests = drain(&mut w);
        let mut session = Session::new(&config, 1, w.alignment_sectors(), 0).unwrap();
        let (warm, measured) = requests.split_at(requests.len() / 2);
        for r in warm {
            session.submit(r).unwrap();
        }
        let ops_before = session.flash.stats().operations();
        let allocs_before = ALLOCATIONS.load(Ordering::Relaxed);
        for r in measured {
            session.submit(r).unwrap();
        }
        let allocs = ALLOCATIONS.load(Ordering::Relaxed) - allocs_before;
        let ops = session.flash.stats().operations() - ops_before;
        assert!(session.flash.log().is_clean(), "{ftl}");
        eprintln!("{ftl}: {allocs} allocations for {ops} flash operations");
        assert!(allocs * 1000 < ops, "{ftl}: {allocs} allocations for {ops} flash operations");
    }
}
