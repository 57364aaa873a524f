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

/// Run the preset workload writing `write_size` (of the capacity) on
/// `config`; count the heap allocations and flash operations of its second
/// half (the first warms the drive up). Also whether the run was clean.
fn allocations_in_the_second_half(config: &nandlab::config::Config, write_size: &str) -> (u64, u64, bool) {
    let mut spec = preset_workload(config);
    spec.write_size = Some(write_size.parse().unwrap());
    let mut w = workload(config, &spec, 1);
    let requests = drain(&mut w);
    let mut session = Session::new(config, 1, w.alignment_sectors(), 0).unwrap();
    let (warm, measured) = requests.split_at(requests.len() / 2);
    for r in warm {
        session.submit(r).unwrap();
    }
    let ops_before = session.drive().flash().stats().operations();
    let allocs_before = ALLOCATIONS.load(Ordering::Relaxed);
    for r in measured {
        session.submit(r).unwrap();
    }
    let allocs = ALLOCATIONS.load(Ordering::Relaxed) - allocs_before;
    let ops = session.drive().flash().stats().operations() - ops_before;
    (allocs, ops, session.drive().flash().log().is_clean())
}

#[test]
fn steady_state_requests_allocate_nothing_per_flash_operation() {
    let _turn = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    let config = tiny();
    let (allocs, ops, clean) = allocations_in_the_second_half(&config, "8x");
    assert!(clean);
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
        let (allocs, ops, clean) = allocations_in_the_second_half(&config, "4x");
        assert!(clean, "{ftl}");
        eprintln!("{ftl}: {allocs} allocations for {ops} flash operations");
        assert!(allocs * 1000 < ops, "{ftl}: {allocs} allocations for {ops} flash operations");
    }
}

/// `lines` request lines of `format`, every line a request, sizes and
/// offsets varied; the fio log switches between two files.
fn trace_text(format: nandlab::workload::trace::TraceFormat, lines: u64) -> Vec<u8> {
    use nandlab::workload::trace::TraceFormat as F;
    use std::fmt::Write as _;
    let mut t = String::new();
    if format == F::Fio {
        t += "fio version 3 iolog\n0 /dev/a add\n0 /dev/b add\n";
    }
    for i in 0..lines {
        let (lba, sectors, read) = (i * 37 % 100_000, 8 << (i % 4), i % 3 == 0);
        let _ = match format {
            F::Msr => writeln!(
                t,
                "{},hm,1,{},{},{},0",
                128166372003061629 + i,
                if read { "Read" } else { "Write" },
                lba * 512,
                sectors * 512
            ),
            F::Mqsim => writeln!(t, "{} 0 {lba} {sectors} {}", i * 1000, u8::from(read)),
            F::Disksim => writeln!(t, "{}.5 0 {lba} {sectors} {}", i, u8::from(read)),
            F::Spc => writeln!(t, "0,{lba},{},{},{}.25", sectors * 512, if read { 'r' } else { 'w' }, i),
            // The column-mapping reader, through its one sniffed layout.
            F::Alibaba | F::Csv => {
                writeln!(t, "{},{},{},{},{}", i % 4, if read { 'R' } else { 'W' }, lba * 512, sectors * 512, i * 10)
            }
            F::Tencent => writeln!(t, "{i},{lba},{sectors},{},7", u8::from(!read)),
            F::Vscsi => writeln!(t, "1,{i},{},{},{lba}", if read { "28" } else { "2a" }, sectors * 512),
            F::Fio => writeln!(
                t,
                "{i} /dev/{} {} {} {}",
                if i % 2 == 0 { 'a' } else { 'b' },
                if read { "read" } else { "write" },
                lba * 512,
                sectors * 512
            ),
            F::Blkparse => writeln!(
                t,
                "  8,16   1 {:>8} {i:>5}.000000001  1000  C {} {lba} + {sectors} [0]",
                i + 1,
                if read { "R" } else { "FWFS" }
            ),
        };
    }
    t.into_bytes()
}

#[test]
fn trace_readers_and_transforms_allocate_nothing_per_line() {
    use nandlab::workload::trace::{ReaderOptions, TraceFormat, TraceReader};
    use nandlab::workload::transform::{DeviceMap, MapRule, TransformSpec, Transformed};
    let _turn = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    for format in TraceFormat::ALL.into_iter().chain([TraceFormat::Alibaba]) {
        let text = trace_text(format, 20_000);
        // Sniffed, so the sniffing sample is part of the stream too.
        let reader = TraceReader::from_bytes("a.trace", text, &ReaderOptions::default()).unwrap();
        assert_eq!(reader.format(), format);
        let spec = TransformSpec {
            align_bytes: Some(4096),
            map: Some(DeviceMap {
                rule: MapRule::Wrap,
                capacity_bytes: 1 << 24,
                grain_bytes: 4096,
                extent_bytes: None,
            }),
            ..Default::default()
        };
        let mut stream = Transformed::new(reader, spec).unwrap();
        for _ in 0..1_000 {
            stream.next_request().unwrap().unwrap();
        }
        let allocs_before = ALLOCATIONS.load(Ordering::Relaxed);
        let mut requests = 0u64;
        while stream.next_request().unwrap().is_some() {
            requests += 1;
        }
        let allocs = ALLOCATIONS.load(Ordering::Relaxed) - allocs_before;
        assert!(requests > 18_000, "{format}: {requests} requests");
        // The counter is global: the test harness's own threads may
        // allocate meanwhile. Per-line allocation would be one per request.
        assert!(allocs * 100 < requests, "{format}: {allocs} allocations for {requests} requests");
    }
}
