//! The physics the timing model must obey: exact sums on an idle drive,
//! saturation at the tightest resource, sequential write bandwidth, the
//! write cache, the write cliff — and that timing changes nothing the
//! oracle checks, and nothing a seed does not fix.

use nandlab::config::Config;
use nandlab::flash::{Cause, FlashOp, OpKind};
use nandlab::host::Arrival;
use nandlab::report::perf::PerfReport;
use nandlab::run::device::TimedDevice;
use nandlab::run::perf::precondition::{precondition, PreconditionSpec};
use nandlab::run::perf::{self, Flow, PerfOptions};
use nandlab::run::StopFlag;
use nandlab::timing::{Breakdown, Component, FlashTiming};
use nandlab::util::size::SizeSpec;
use nandlab::workload::synthetic::{RwMode, SyntheticSpec};
use nandlab::workload::{HostOp, HostRequest};

/// A device: `ch` channels x `chips` chips x 1 die x `planes` planes,
/// 64 blocks x 32 pages of `page` bytes, SLC, 20 % spare, with the given
/// [timing] and [host] lines.
fn device(ch: u32, chips: u32, planes: u32, page: u32, timing: &str, host: &str) -> Config {
    device_with(ch, chips, planes, page, timing, host, "")
}

/// [`device`] with extra `[ftl]` options. `page`'s summary pages are off
/// unless `ftl` sets them: these tests check the timing model's physics,
/// whose exact figures a summary program per block filled (1/32 of the
/// programs here) would blur; `summary_pages_take_one_program_per_block`
/// measures what they cost.
fn device_with(ch: u32, chips: u32, planes: u32, page: u32, timing: &str, host: &str, ftl: &str) -> Config {
    device_with_tables(ch, chips, planes, page, timing, host, ftl, "")
}

/// [`device_with`] with more tables after `[host]`.
#[allow(clippy::too_many_arguments)]
fn device_with_tables(
    ch: u32,
    chips: u32,
    planes: u32,
    page: u32,
    timing: &str,
    host: &str,
    ftl: &str,
    tables: &str,
) -> Config {
    let summaries = if ftl.contains("summary_pages") { "" } else { "summary_pages = false" };
    let text = format!(
        r#"
name = "physics"
source = "test"
[geometry]
channels = {ch}
chips_per_channel = {chips}
dies_per_chip = 1
planes_per_die = {planes}
blocks_per_plane = 64
pages_per_block = 32
page_size_bytes = {page}
oob_size_bytes = 64
sector_size_bytes = 512
cell_type = "slc"
[device]
spare_percent = 20
dram_bytes = "64m"
[ftl]
name = "page"
{summaries}
{ftl}
[timing]
{timing}
[host]
{host}
{tables}
"#
    );
    Config::parse(&text, "physics.toml").unwrap_or_else(|e| panic!("{e}"))
}

const FAST_HOST: &str = "pcie_generation = 3\npcie_lanes = 4\nqueues = 1\nqueue_depth = 4096";

fn spec(rw: RwMode, bs: u64, iodepth: u32, io_size: SizeSpec) -> SyntheticSpec {
    SyntheticSpec { rw, bs: SizeSpec::Bytes(bs), iodepth, io_size: Some(io_size), ..Default::default() }
}

fn fill_only() -> PreconditionSpec {
    PreconditionSpec { fill_percent: 100.0, max_overwrite: 0.0, ..Default::default() }
}

fn run(config: &Config, spec: &SyntheticSpec, opts: PerfOptions) -> PerfReport {
    let flows = Flow::synthetic(spec, None, 0, config, opts.seed).unwrap();
    perf::run(config, flows, &opts, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"))
}

fn within(actual: f64, expected: f64, tolerance: f64) -> bool {
    // Printed with --nocapture: the figures behind each physics claim.
    eprintln!("measured {actual:.1}, expected {expected:.1} ({:+.2} %)", (actual / expected - 1.0) * 100.0);
    (actual - expected).abs() <= tolerance * expected
}

fn read(lba: u64, sectors: u32) -> HostRequest {
    HostRequest { op: HostOp::Read, lba, sectors, arrival_ns: 0, job: 0 }
}

#[test]
fn qd1_read_latency_is_exactly_the_sum_of_its_path() {
    let config = device(
        2,
        2,
        1,
        4096,
        "read_latency_us = 45\nprogram_latency_us = 300\nerase_latency_us = 2000\nchannel_rate_mtps = 400\ncommand_latency_ns = 100",
        "pcie_generation = 3\npcie_lanes = 4\ncommand_overhead_ns = 2500\nfirmware_ns_per_request = 1500",
    );
    let mut dev = TimedDevice::new(&config, 1, 8, 10, 1_000_000_000).unwrap();
    precondition(dev.session_mut(), &fill_only(), 1, &StopFlag::default(), &mut |_, _| {}).unwrap();
    dev.start_timing();
    let link = config.host.link_ns(4096);
    assert_eq!(link, 1041, "4096 B at 3938.46 MB/s, rounded up");
    let expected = 2500 + 1500 + 100 + 45_000 + 10_240 + link;
    for i in 0..50u64 {
        let arrival = 1_000_000 * (i + 1); // idle: the previous read is long done
        let lba = (i * 7919 % 2000) * 8;
        let c = dev.submit(&read(lba, 8), 0, arrival, i).unwrap().expect("the reservation model times at once");
        assert_eq!(c.completion_ns - arrival, expected, "read {i}");
        let b = c.breakdown;
        assert_eq!(b.get(Component::HostCommand), 2500);
        assert_eq!(b.get(Component::Cpu), 1500);
        assert_eq!(b.get(Component::Cell), 45_000);
        assert_eq!(b.get(Component::FlashTransfer), 100 + 10_240);
        assert_eq!(b.get(Component::HostTransfer), link);
    }
    assert!(dev.session().drive().flash().log().is_clean());
}

/// Closed-loop random reads at queue depth 1024 over 8 dies. (A closed
/// loop of N requests routed at random over K equal dies leaves a die idle
/// with probability (K-1)/(N+K-1): 5 % at N = 128, 0.7 % at N = 1024; the
/// bounds below are reached as N grows.)
fn random_read_iops(timing: &str, host: &str) -> f64 {
    let config = device(2, 4, 1, 4096, timing, host);
    let opts = PerfOptions { seed: 3, precondition: Some(fill_only()), ..Default::default() };
    let r = run(&config, &spec(RwMode::RandRead, 4096, 1024, SizeSpec::Bytes(60_000 * 4096)), opts);
    assert_eq!(r.run.errors, 0);
    r.perf.iops
}

const READ_TIMING: &str = "program_latency_us = 300\nerase_latency_us = 2000\nchannel_rate_mtps = 400";

/// The timing cores the physics tests run under: the reservation model
/// (the default) and the event core in order (`fifo`), which must obey
/// the same bounds.
const CORES: [&str; 2] = ["reservation", "fifo"];

#[test]
fn random_reads_saturate_at_the_dies() {
    // 8 dies / 50 us = 160 k IOPS; channels could do 2 x 97.7 k.
    for core in CORES {
        let iops = random_read_iops(&format!("read_latency_us = 50\n{READ_TIMING}\nscheduler = \"{core}\""), FAST_HOST);
        assert!(within(iops, 160_000.0, 0.02), "{core}: {iops}");
    }
}

#[test]
fn random_reads_saturate_at_the_channels_when_dies_are_faster() {
    // Dies could do 8 / 20 us = 400 k; each channel moves 4 KiB in 10.24 us.
    for core in CORES {
        let iops = random_read_iops(&format!("read_latency_us = 20\n{READ_TIMING}\nscheduler = \"{core}\""), FAST_HOST);
        let expected = 2.0 * 1e9 / 10_240.0;
        assert!(within(iops, expected, 0.02), "{core}: {iops} vs {expected}");
    }
}

/// A read-heavy flow beside a write flow on the event core: under `mqsim`
/// and `read-priority` reads overtake queued programs, so the read p99 is
/// below `fifo`'s; and no read beats its own physics (command + tR +
/// data-out). Each scheduler is shown to differ: with every policy acting
/// as fifo the ordering assertion fails.
#[test]
fn reads_beside_writes_have_a_lower_p99_under_mqsim_and_read_priority_than_under_fifo() {
    let read_p99 = |sched: &str| {
        let config = device(
            2,
            2,
            1,
            4096,
            &format!("read_latency_us = 50\nprogram_latency_us = 1000\nerase_latency_us = 3000\nchannel_rate_mtps = 400\nscheduler = \"{sched}\""),
            FAST_HOST,
        );
        let opts =
            PerfOptions { seed: 3, precondition: Some(fill_only()), max_requests: Some(20_000), ..Default::default() };
        let mut flows = Vec::new();
        for (i, (rw, depth)) in [(RwMode::RandRead, 16), (RwMode::RandWrite, 16)].into_iter().enumerate() {
            let s = spec(rw, 4096, depth, SizeSpec::Bytes(1 << 30));
            flows.extend(Flow::synthetic(&s, None, i, &config, 3).unwrap());
        }
        let r = perf::run(&config, flows, &opts, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.run.errors, 0);
        assert_eq!(r.perf.scheduler, Some(sched));
        let l = &r.perf.latency["read"];
        // Command + tR + 4 KiB data-out at 400 MB/s is the least a read takes (every read goes to flash).
        assert!(l.p50_us >= 50.0 + 10.24, "{sched}: {l:?}");
        l.p99_us
    };
    let fifo = read_p99("fifo");
    for sched in ["mqsim", "read-priority"] {
        let p99 = read_p99(sched);
        eprintln!("read p99: fifo {fifo:.1} us, {sched} {p99:.1} us");
        assert!(p99 < fifo, "{sched}: read p99 {p99} us not below fifo's {fifo} us");
    }
}

#[test]
fn random_reads_saturate_at_the_host_link() {
    let iops = random_read_iops(
        &format!("read_latency_us = 50\n{READ_TIMING}"),
        "link_bandwidth_mbps = 100\nqueue_depth = 4096",
    );
    let expected = 100e6 / 4096.0;
    assert!(within(iops, expected, 0.02), "{iops} vs {expected}");
}

#[test]
fn random_reads_saturate_at_the_controller_cpu() {
    let iops = random_read_iops(
        &format!("read_latency_us = 50\n{READ_TIMING}"),
        &format!("{FAST_HOST}\nfirmware_ns_per_request = 25000"),
    );
    assert!(within(iops, 40_000.0, 0.02), "{iops}");
}

fn sequential_write_mbps(timing: &str) -> f64 {
    sequential_write_mbps_on(&device(2, 2, 1, 16384, timing, FAST_HOST))
}

fn sequential_write_mbps_on(config: &Config) -> f64 {
    let r = run(
        config,
        &spec(RwMode::Write, 128 * 1024, 8, SizeSpec::Bytes(80 << 20)),
        PerfOptions { seed: 5, ..Default::default() },
    );
    assert_eq!(r.run.errors, 0);
    assert_eq!(r.run.gc.pages_moved, 0, "no GC in this measurement");
    r.perf.write_mbps
}

#[test]
fn sequential_writes_run_at_dies_times_page_over_tprog() {
    let t = "read_latency_us = 50\nprogram_latency_us = 500\nerase_latency_us = 2000\nchannel_rate_mtps = 400";
    let mbps = sequential_write_mbps(t);
    let expected = 4.0 * 16384.0 / 500e-6 / 1e6;
    assert!(within(mbps, expected, 0.02), "{mbps} vs {expected}");
    // Without cache program the die also waits for its data-in.
    let mbps = sequential_write_mbps(&format!("{t}\ncache_program = false"));
    let expected = 4.0 * 16384.0 / (500e-6 + 40.96e-6) / 1e6;
    assert!(within(mbps, expected, 0.02), "{mbps} vs {expected}");
}

const SEQ_TIMING: &str =
    "read_latency_us = 50\nprogram_latency_us = 500\nerase_latency_us = 2000\nchannel_rate_mtps = 400";

#[test]
fn sequential_writes_run_at_dies_times_planes_times_page_over_tprog() {
    // Two planes per die: the page FTL programs both with one multi-plane
    // program, so the four dies move 2 x 16 KiB per tPROG each.
    let config = device(2, 2, 2, 16384, SEQ_TIMING, FAST_HOST);
    let mbps = sequential_write_mbps_on(&config);
    let expected = 4.0 * 2.0 * 16384.0 / 500e-6 / 1e6;
    assert!(within(mbps, expected, 0.02), "{mbps} vs {expected}");
    // Without multi-plane operations the planes of a die take turns.
    let single = device_with(2, 2, 2, 16384, SEQ_TIMING, FAST_HOST, "multi_plane = false");
    let mbps = sequential_write_mbps_on(&single);
    let expected = 4.0 * 16384.0 / 500e-6 / 1e6;
    assert!(within(mbps, expected, 0.02), "{mbps} vs {expected}");
}

#[test]
fn summary_pages_take_one_program_per_block() {
    // Each group of 2 planes x 32 pages holds 31 whole rows of data and
    // its summary row (one single-plane program): a die moves 31 rows of
    // 2 x 16 KiB in 32 tPROG.
    let config = device_with(2, 2, 2, 16384, SEQ_TIMING, FAST_HOST, "summary_pages = true");
    let mbps = sequential_write_mbps_on(&config);
    let expected = 4.0 * 2.0 * 16384.0 / 500e-6 / 1e6 * 31.0 / 32.0;
    assert!(within(mbps, expected, 0.02), "{mbps} vs {expected}");
}

#[test]
fn multi_plane_sequential_writes_are_limited_by_the_host_link_when_it_is_slower() {
    // The flash could take 262 MB/s; the link carries 100 MB/s.
    let config = device(2, 2, 2, 16384, SEQ_TIMING, "link_bandwidth_mbps = 100\nqueue_depth = 4096");
    let mbps = sequential_write_mbps_on(&config);
    assert!(within(mbps, 100.0, 0.02), "{mbps} vs 100");
}

#[test]
fn sequential_writes_are_limited_by_the_channels_when_they_are_slow() {
    let mbps = sequential_write_mbps(
        "read_latency_us = 50\nprogram_latency_us = 500\nerase_latency_us = 2000\nchannel_rate_mtps = 20",
    );
    let expected = 2.0 * 20.0; // two channels at 20 MB/s
    assert!(within(mbps, expected, 0.02), "{mbps} vs {expected}");
}

#[test]
fn multi_plane_programs_overlap_planes_for_bandwidth() {
    // 2 channels x 2 dies x 4 planes of 16 KiB, tPROG 1 ms: back-to-back
    // 4-plane programs move dies x planes x page / tPROG.
    let config = device(
        2,
        2,
        4,
        16384,
        "read_latency_us = 50\nprogram_latency_us = 1000\nerase_latency_us = 2000\nchannel_rate_mtps = 400",
        FAST_HOST,
    );
    let t = config.timing.clone().unwrap();
    let g = &config.geometry;
    let mut m = FlashTiming::new(g, &t, 1_000_000_000);
    m.begin_epoch(0, 0, Breakdown::default());
    let pages_per_plane = u64::from(g.pages_per_block()) * u64::from(g.blocks_per_plane());
    let n = 200u64;
    for i in 0..n {
        let die = i % 4;
        let page = die * 4 * pages_per_plane + i / 4;
        m.observe(&FlashOp {
            kind: OpKind::Program,
            cause: Cause::Host,
            request_id: Some(0),
            op_index: i,
            address: page,
            source: None,
            planes: 4,
            transfer_bytes: 4 * 16384,
            buffer: None,
            read_retries: 0,
            decode_ns: 0,
        });
    }
    let (end, _) = m.end_epoch();
    let mbps = (n * 4 * 16384) as f64 / (end as f64 / 1e9) / 1e6;
    let expected = 4.0 * 4.0 * 16384.0 / 1e-3 / 1e6;
    assert!(within(mbps, expected, 0.02), "{mbps} vs {expected}");
}

#[test]
fn write_back_cache_completes_at_dram_speed_until_full_then_at_flash_speed() {
    let config = device(
        2,
        2,
        1,
        4096,
        "read_latency_us = 50\nprogram_latency_us = 400\nerase_latency_us = 2000\nchannel_rate_mtps = 400\nwrite_cache = \"write_back\"\nwrite_cache_bytes = \"256k\"\nwrite_cache_flush_watermark = 0.5\ndram_bandwidth_mbps = 1000",
        FAST_HOST,
    );
    let mut dev = TimedDevice::new(&config, 1, 8, 10, 1_000_000_000).unwrap();
    dev.start_timing();
    let link = config.host.link_ns(4096);
    let dram = 4096; // 4096 B at 1000 MB/s
    let mut t = 0;
    let mut completions = Vec::new();
    for i in 0..4000u64 {
        let w = HostRequest { op: HostOp::Write, lba: (i % 12_000) * 8, sectors: 8, arrival_ns: 0, job: 0 };
        let c = dev.submit(&w, 0, t, i).unwrap().expect("the reservation model times at once");
        if i < 32 {
            assert_eq!(c.completion_ns - t, link + dram, "write {i} at DRAM speed");
        }
        t = c.completion_ns;
        completions.push(t);
    }
    // Steady state: one page per line, 4 dies x 4 KiB / 400 us = 10 k writes/s.
    let (a, b) = (completions[2000], completions[3999]);
    let rate = 1999.0 / ((b - a) as f64 / 1e9);
    assert!(within(rate, 10_000.0, 0.02), "{rate} writes/s");
    assert_eq!(dev.session().host().counters().volatile_writes, 4000);
    // A flush waits for every dirty line to reach flash.
    let flush = HostRequest { op: HostOp::Flush, lba: 0, sectors: 0, arrival_ns: 0, job: 0 };
    let c = dev.submit(&flush, 0, t, 5000).unwrap().expect("the reservation model times at once");
    assert_eq!(dev.cache().unwrap().dirty_lines(), 0);
    assert!(c.completion_ns >= dev.timing_model().busy_until());
    assert!(c.completion_ns > t + 300_000, "at least one program's worth");
    assert!(dev.session().drive().flash().log().is_clean());
}

#[test]
fn random_writes_on_a_full_drive_show_the_write_cliff() {
    for core in CORES {
        write_cliff_on(core);
    }
}

/// The write cliff on one timing core. On the event core (`fifo`) this
/// failed before the FTL saw the open epoch's time and each die's backlog
/// there: placement could not steer host writes away from a die collecting
/// garbage, writes queued behind one die's GC while the others idled, and
/// the plateau's die utilisation fell to about 0.91 (issue 20).
fn write_cliff_on(core: &str) {
    // The model below counts one cell phase per page programmed or block
    // erased: the FTL runs plane by plane (a multi-plane operation would
    // take one phase for both planes of a die).
    let config = device_with(
        2,
        2,
        2,
        4096,
        &format!("read_latency_us = 40\nprogram_latency_us = 200\nerase_latency_us = 2000\nchannel_rate_mtps = 400\nscheduler = \"{core}\""),
        FAST_HOST,
        "multi_plane = false",
    );
    let r = run(
        &config,
        &spec(RwMode::RandWrite, 4096, 16, SizeSpec::TimesCapacity(3.0)),
        PerfOptions { seed: 9, precondition: Some(fill_only()), interval_ns: 100_000_000, ..Default::default() },
    );
    assert_eq!(r.run.errors, 0);
    let rows = &r.perf.timeseries;
    assert!(rows.len() >= 30, "{} intervals", rows.len());
    // 4 dies, single-plane programs of one 4 KiB page: tPROG 200 us, tR 40
    // us (GC moves through the controller: a read and a program), tBERS 2 ms.
    let (dies, t_prog, t_r, t_bers) = (4.0, 200e-6, 40e-6, 2e-3);
    // Before GC starts: the no-GC bound, every die programming back to back.
    let first = &rows[0];
    assert_eq!(first.foreground_gc_pages_moved + first.blocks_erased, 0, "no GC before the cliff");
    assert!(within(first.iops, dies / t_prog, 0.02), "{core}: before the cliff: {}", first.iops);
    // GC pages moved and blocks erased rise from zero, and stay.
    let gc_from = rows.iter().position(|r| r.foreground_gc_pages_moved > 0).expect("GC starts");
    assert!(gc_from > 0 && rows[..gc_from].iter().all(|r| r.blocks_erased == 0));
    let plateau = &rows[rows.len() / 3..rows.len() - 1];
    assert!(plateau.iter().all(|r| r.foreground_gc_pages_moved > 0 && r.blocks_erased > 0));
    // Over the plateau the host write rate is what the dies sustain: their
    // busy time is the cell time of the flash work per host write — WAF
    // pages programmed (tPROG each), the reads GC needs (tR each: pages
    // moved through the controller, OOB and summary reads) and the erases
    // (tBERS each) — so host rate = dies x utilisation / that time.
    let sum = |f: fn(&nandlab::report::timeseries::IntervalRow) -> f64| plateau.iter().map(f).sum::<f64>();
    let span_s = sum(|r| r.length_s);
    let host = sum(|r| r.writes as f64);
    let programmed = sum(|r| r.pages_programmed as f64);
    let reads = sum(|r| r.pages_read as f64);
    let erased = sum(|r| r.blocks_erased as f64);
    let utilisation = sum(|r| r.die_utilisation * r.length_s) / span_s;
    // (Measured with the CLI on the same drive: reservation 0.9996, fifo
    // 0.9951; fifo before the fix 0.9145.)
    assert!(utilisation > 0.97, "{core}: the dies are the bottleneck: {utilisation}");
    let waf = programmed / host;
    let cell_s_per_write = waf * t_prog + reads / host * t_r + erased / host * t_bers;
    let sustained = dies * utilisation / cell_s_per_write;
    assert!(
        within(host / span_s, sustained, 0.02),
        "{core}: plateau {} vs sustained {sustained} (WAF {waf:.3})",
        host / span_s
    );
    assert!(first.iops > 2.0 * host / span_s, "{core}: the cliff");
    assert!(r.perf.gc.foreground_pages_moved > 0);
    if core != "reservation" {
        // The event core's breakdown does not split GC's share of the wait out.
        return;
    }
    // The wait is GC's, and the report says so.
    let share = &r.perf.breakdown.share;
    assert!(share["gc_wait"] > share["die_wait"], "{share:?}");
    assert_eq!(r.perf.breakdown.bottleneck_component, "gc_wait", "{share:?}");
}

/// The write cliff of FEMU's blackbox SSD (Li et al., FAST 2018), on the
/// `femu-bbssd` preset itself: random 4 KiB writes into a fresh drive run
/// at the dies' program bound until the free blocks fall to the
/// foreground-GC threshold, then drop to the rate the dies sustain with
/// GC's reads, programs and erases on them. `cliff` finds the drop in a
/// time series; the run that stops before GC proves it finds none there.
#[test]
fn femu_bbssd_random_writes_fall_off_the_write_cliff_when_gc_starts() {
    let config = Config::preset("femu-bbssd").unwrap();
    let rows_of = |times_capacity: f64| {
        let r = run(
            &config,
            &spec(RwMode::RandWrite, 4096, 64, SizeSpec::TimesCapacity(times_capacity)),
            PerfOptions { seed: 4, interval_ns: 100_000_000, ..Default::default() },
        );
        assert_eq!(r.run.errors, 0);
        r.perf.timeseries
    };
    // FEMU's bbssd: 16 LUNs, tPROG 200 us, tR 40 us, tBERS 2 ms, no
    // channel time; GC in the foreground at 5 % free blocks.
    let (dies, t_prog, t_r, t_bers) = (16.0, 200e-6, 40e-6, 2e-3);
    let threshold_blocks = 16 * (256 * 5_u64).div_ceil(100);

    /// (first GC interval, mean host writes/s before it, over the plateau
    /// after it): the cliff, if the series has one.
    fn cliff(rows: &[nandlab::report::timeseries::IntervalRow]) -> Option<(usize, f64, f64)> {
        let from = rows.iter().position(|r| r.foreground_gc_pages_moved > 0)?;
        let full = &rows[..rows.len() - 1]; // the last interval is cut short
        let rate = |rs: &[nandlab::report::timeseries::IntervalRow]| {
            rs.iter().map(|r| r.writes as f64).sum::<f64>() / rs.iter().map(|r| r.length_s).sum::<f64>()
        };
        (from > 0 && full.len() > from + 2).then(|| (from, rate(&full[..from]), rate(&full[from + 1..])))
    }

    // Written only once over (less than the raw space): no GC, no cliff.
    let calm = rows_of(0.9);
    assert!(calm.iter().all(|r| r.foreground_gc_pages_moved == 0));
    assert_eq!(cliff(&calm), None);

    let rows = rows_of(1.6);
    let (from, before, after) = cliff(&rows).expect("a write cliff");
    // Before: every die programs back to back.
    assert!(within(before, dies / t_prog, 0.02), "before the cliff: {before}");
    // It comes when the free blocks reach the foreground threshold: they
    // fall one interval's worth of blocks at a time, then stay there.
    let free = |r: &nandlab::report::timeseries::IntervalRow| r.free_blocks.unwrap();
    let per_interval = free(&rows[0]).abs_diff(free(&rows[1])) + 1;
    eprintln!("free blocks {:?}", rows[from.saturating_sub(2)..from + 2].iter().map(free).collect::<Vec<_>>());
    assert!(free(&rows[from - 1]) <= threshold_blocks + per_interval, "{}", free(&rows[from - 1]));
    assert!(rows[..from].iter().all(|r| free(r) >= threshold_blocks));
    assert!(rows[from..].iter().all(|r| free(r) <= threshold_blocks));
    // After: the rate the dies sustain with GC's cell work on them.
    let plateau = &rows[from + 1..rows.len() - 1];
    let sum = |f: fn(&nandlab::report::timeseries::IntervalRow) -> f64| plateau.iter().map(f).sum::<f64>();
    let host = sum(|r| r.writes as f64);
    let cell_s_per_write = (sum(|r| r.pages_programmed as f64) * t_prog
        + sum(|r| r.pages_read as f64) * t_r
        + sum(|r| r.blocks_erased as f64) * t_bers)
        / host;
    let utilisation = sum(|r| r.die_utilisation * r.length_s) / sum(|r| r.length_s);
    assert!(utilisation > 0.98, "the dies stay the bottleneck: {utilisation}");
    assert!(within(after, dies * utilisation / cell_s_per_write, 0.02), "plateau {after}");
    // And it is a cliff: the drop is more than a third.
    assert!(after < 0.67 * before, "before {before}, after {after}");
}

/// Cell time of every flash operation observed (one phase per operation,
/// whatever its planes), ns: what the dies must spend on the work.
struct CellWork {
    t_r: u64,
    t_prog: u64,
    t_bers: u64,
    ns: std::rc::Rc<std::cell::Cell<u64>>,
}

impl nandlab::flash::FlashObserver for CellWork {
    fn after_op(&mut self, op: &FlashOp) {
        let ns = match op.kind {
            OpKind::Read | OpKind::ReadOob | OpKind::ReadMeta => self.t_r,
            OpKind::Program | OpKind::ProgramMeta => self.t_prog,
            OpKind::Copyback => self.t_r + self.t_prog,
            OpKind::Erase => self.t_bers,
        };
        self.ns.set(self.ns.get() + ns);
    }
}

/// Random 4 KiB writes through a small write-back cache on a full drive of
/// 8 dies x 2 planes, issued as fast as the cache takes them, until GC is
/// steady. Returns (host writes/s, die utilisation, dies x utilisation /
/// cell time per host write) over the second half.
fn gc_bound_write_back(ftl: &str) -> (f64, f64, f64) {
    let (t_r, t_prog, t_bers) = (40_000, 200_000, 2_000_000);
    let config = device_with(
        4,
        2,
        2,
        4096,
        "read_latency_us = 40\nprogram_latency_us = 200\nerase_latency_us = 2000\nchannel_rate_mtps = 400\nwrite_cache = \"write_back\"\nwrite_cache_bytes = \"1m\"\ndram_bandwidth_mbps = 4000",
        FAST_HOST,
        ftl,
    );
    let mut dev = TimedDevice::new(&config, 1, 8, 10, 1_000_000_000).unwrap();
    precondition(dev.session_mut(), &fill_only(), 1, &StopFlag::default(), &mut |_, _| {}).unwrap();
    let cell_ns = std::rc::Rc::new(std::cell::Cell::new(0));
    dev.session_mut().drive_mut().add_observer(Box::new(CellWork { t_r, t_prog, t_bers, ns: cell_ns.clone() }));
    dev.start_timing();
    let pages = config.logical_bytes() / 4096;
    let dies = f64::from(config.geometry.dies());
    let (writes, plateau_from) = (4 * pages, 2 * pages);
    let (mut t, mut rng) = (0, 99u64);
    let (mut t0, mut busy0, mut cell0) = (0, 0, 0);
    for i in 0..writes {
        if i == plateau_from {
            (t0, busy0, cell0) = (t, dev.timing_model().die_busy_ns().iter().sum::<u64>(), cell_ns.get());
        }
        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let w = HostRequest { op: HostOp::Write, lba: (rng >> 24) % pages * 8, sectors: 8, arrival_ns: 0, job: 0 };
        t = dev.submit(&w, 0, t, i).unwrap().expect("the reservation model times at once").completion_ns;
    }
    assert!(dev.session().drive().flash().log().is_clean());
    assert!(dev.session().drive().ftl().stats().gc_runs > 0, "GC-bound");
    let span_ns = (t - t0) as f64;
    let busy = (dev.timing_model().die_busy_ns().iter().sum::<u64>() - busy0) as f64;
    let host_rate = (writes - plateau_from) as f64 / span_ns * 1e9;
    let utilisation = busy / (dies * span_ns);
    eprintln!("{ftl:?}: {host_rate:.0} host writes/s, dies {:.1} % busy", utilisation * 100.0);
    let cell_per_write = (cell_ns.get() - cell0) as f64 / (writes - plateau_from) as f64;
    (host_rate, utilisation, dies * utilisation / cell_per_write * 1e9)
}

#[test]
fn a_gc_bound_drive_keeps_its_dies_busy_behind_a_write_back_cache() {
    // The host offers more than the dies absorb (the cache stays full), and
    // a die collecting a victim is blocked for a whole collection: the
    // other dies must go on absorbing writes (dynamic striping past
    // collecting dies; a freed cache line is reused when its own flush ends).
    let (multi_rate, utilisation, sustained) = gc_bound_write_back("");
    assert!(utilisation >= 0.9, "dies {:.1} % busy", utilisation * 100.0);
    // The host rate is what the dies sustain: dies x utilisation over the
    // cell time per host write (WAF programs, GC's reads, erases).
    assert!(within(multi_rate, sustained, 0.02), "{multi_rate} vs {sustained}");
    let (single_rate, utilisation, sustained) = gc_bound_write_back("multi_plane = false");
    assert!(utilisation >= 0.9, "single-plane: dies {:.1} % busy", utilisation * 100.0);
    assert!(within(single_rate, sustained, 0.02), "{single_rate} vs {sustained}");
    // Multi-plane programs and GC rows take one cell phase for two pages.
    assert!(multi_rate >= single_rate, "multi-plane {multi_rate} vs single-plane {single_rate} writes/s");
}

#[test]
fn idle_steps_never_run_past_the_next_arrival() {
    let timing = "read_latency_us = 40\nprogram_latency_us = 200\nerase_latency_us = 2000\nchannel_rate_mtps = 400";
    let config = device_with(2, 2, 1, 4096, timing, FAST_HOST, "gc_background_free_percent = 60");
    let mut dev = TimedDevice::new(&config, 1, 8, 10, 1_000_000_000).unwrap();
    let spec = PreconditionSpec { max_overwrite: 0.5, ..Default::default() };
    precondition(dev.session_mut(), &spec, 1, &StopFlag::default(), &mut |_, _| {}).unwrap();
    dev.start_timing();
    // A gap shorter than one step (a block of 32 pages takes ~9 ms to
    // collect): nothing may start.
    let t = 1_000_000;
    assert_eq!(dev.idle(t, t + 2_000_000, u32::MAX), 0);
    assert_eq!(dev.timing_model().busy_until(), 0, "no flash work at all");
    // A long gap: steps run, and all of them end before it does.
    let until = t + 200_000_000;
    let steps = dev.idle(t, until, u32::MAX);
    assert!(steps > 0);
    let busy = dev.timing_model().busy_until();
    assert!(busy > t && busy <= until, "idle work ends at {busy}, the arrival is at {until}");
    assert_eq!(dev.idle_overruns(), 0);
    assert!(dev.session().drive().flash().log().is_clean());
}

#[test]
fn no_channel_or_die_is_ever_booked_twice() {
    // Write-back evictions (epochs ready in the future), reads, trims,
    // flushes, suspends and GC, with every reservation audited.
    let mut config = Config::preset("tiny-timed").unwrap();
    let mut t = config.timing.clone().unwrap().config;
    t.write_cache = "write_back".parse().unwrap();
    t.write_cache_bytes = Some(SizeSpec::Bytes(256 << 10));
    t.erase_suspend = true;
    t.program_suspend = true;
    config.timing = Some(t.validate(2, config.dram_budget_bytes).unwrap());
    let mut dev = TimedDevice::new(&config, 1, 8, 10, 1_000_000_000).unwrap();
    dev.start_timing();
    dev.enable_timing_audit();
    let pages = config.logical_bytes() / 4096;
    let mut rng = 12345u64;
    let mut t = 0;
    for i in 0..20_000u64 {
        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let op = match (rng >> 33) % 16 {
            0..=8 => HostOp::Write,
            9..=14 => HostOp::Read,
            _ => HostOp::Flush,
        };
        let lba = (rng >> 20) % pages * 8;
        let req = HostRequest { op, lba, sectors: 8, arrival_ns: 0, job: 0 };
        let c = dev.submit(&req, 0, t, i).unwrap().expect("the reservation model times at once");
        // Arrivals spread over the completions: requests overlap.
        t += (c.completion_ns - t) / 4;
    }
    assert_eq!(dev.timing_model().double_booking(), None);
    assert!(dev.timing_model().counters().suspends > 0 || dev.session().drive().ftl().stats().gc_runs > 0);
    assert!(dev.session().drive().flash().log().is_clean());
}

#[test]
fn every_ftl_runs_timed_with_the_oracle_on() {
    for ftl in ["page", "dftl", "hybrid", "block", "optr"] {
        let mut config = Config::preset("tiny-timed").unwrap();
        config.ftl_name = ftl.into();
        if !matches!(ftl, "page" | "dftl") {
            config.ftl_options = Default::default(); // no GC policy options
        }
        let s = SyntheticSpec {
            rw: RwMode::RandRw,
            bs: SizeSpec::Bytes(4096),
            rwmixread: 50,
            write_size: Some(SizeSpec::TimesCapacity(1.0)),
            fsync: 64,
            iodepth: 8,
            ..Default::default()
        };
        let r = run(&config, &s, PerfOptions { seed: 7, remount_verify: true, ..Default::default() });
        assert_eq!(r.run.errors, 0, "{ftl}: {:?}", r.run.violations.first());
        assert_eq!(r.run.ftl, ftl);
        assert!(r.run.host.read_requests > 100 && r.perf.iops > 0.0, "{ftl}");
        assert!(r.run.remount.as_ref().is_some_and(|m| m.error.is_none()), "{ftl}: {:?}", r.run.remount);
    }
}

#[test]
fn the_oracle_checks_every_read_while_timed() {
    let config = Config::preset("tiny-timed").unwrap();
    for cache in ["none", "write_back", "write_through"] {
        let mut config = config.clone();
        let mut t = config.timing.clone().unwrap().config;
        t.write_cache = cache.parse().unwrap();
        t.write_cache_bytes = Some(SizeSpec::Bytes(512 << 10));
        t.erase_suspend = true;
        t.program_suspend = true;
        config.timing = Some(t.validate(2, config.dram_budget_bytes).unwrap());
        let s = SyntheticSpec {
            rw: RwMode::RandRw,
            bsrange: Some("4k-32k".into()),
            rwmixread: 40,
            write_size: Some(SizeSpec::TimesCapacity(2.0)),
            fsync: 32,
            trim_percent: 2.0,
            iodepth: 8,
            numjobs: 2,
            ..Default::default()
        };
        let r = run(&config, &s, PerfOptions { seed: 11, ..Default::default() });
        assert_eq!(r.run.errors, 0, "{cache}: {:?}", r.run.violations.first());
        assert!(r.run.host.read_requests > 1000 && r.run.host.trim_requests > 0);
        assert!(r.run.gc.pages_moved > 0, "{cache}: GC ran");
    }
    // The check is live: a corrupted page is reported through the timed path.
    let mut dev = TimedDevice::new(&config, 1, 8, 10, 1_000_000_000).unwrap();
    precondition(dev.session_mut(), &fill_only(), 1, &StopFlag::default(), &mut |_, _| {}).unwrap();
    dev.start_timing();
    for p in 0..dev.session().drive().flash().nand().geometry().pages() {
        if dev.session().drive().flash().nand().is_programmed(nandlab::nand::PageAddr(p)) {
            dev.session_mut().drive_mut().corrupt_page(nandlab::nand::PageAddr(p));
        }
    }
    dev.submit(&read(0, 8), 0, 0, 0).unwrap().expect("the reservation model times at once");
    assert!(dev.session().drive().flash().log().errors() > 0);
}

#[test]
fn the_same_seed_gives_the_same_report() {
    let config = Config::preset("tiny-timed").unwrap();
    let s = SyntheticSpec {
        rw: RwMode::RandRw,
        bs: SizeSpec::Bytes(4096),
        write_size: Some(SizeSpec::TimesCapacity(1.5)),
        iodepth: 4,
        numjobs: 2,
        ..Default::default()
    };
    let go = |seed| {
        let r = run(
            &config,
            &s,
            PerfOptions {
                seed,
                precondition: Some(PreconditionSpec { max_overwrite: 0.5, ..Default::default() }),
                interval_ns: 5_000_000,
                ..Default::default()
            },
        );
        serde_json::to_string(&r.without_measurements()).unwrap()
    };
    let a = go(21);
    assert_eq!(a, go(21));
    assert_ne!(a, go(22));
}

#[test]
fn open_loop_arrivals_follow_the_trace_timestamps() {
    /// A trace of reads at fixed timestamps.
    struct Replay(Vec<HostRequest>, usize);
    impl nandlab::workload::Workload for Replay {
        fn next_request(&mut self) -> Result<Option<HostRequest>, nandlab::workload::WorkloadError> {
            self.1 += 1;
            Ok(self.0.get(self.1 - 1).copied())
        }
        fn progress(&self) -> nandlab::workload::WorkloadProgress {
            Default::default()
        }
        fn alignment_sectors(&self) -> u32 {
            8
        }
        fn describe(&self) -> String {
            "replay".into()
        }
    }
    let config = Config::preset("tiny-timed").unwrap();
    let trace: Vec<_> = (0..100u64).map(|i| HostRequest { arrival_ns: i * 1_000_000, ..read(i * 64, 8) }).collect();
    let flows = |scale| {
        vec![Flow {
            name: "trace".into(),
            workload: Box::new(Replay(trace.clone(), 0)),
            arrival: Arrival::Timestamps { time_scale: scale },
        }]
    };
    let opts = PerfOptions { seed: 1, ..Default::default() };
    let r = perf::run(&config, flows(1.0), &opts, &mut |_| {}).unwrap();
    // The last request arrives at 99 ms and takes microseconds.
    assert!(within(r.perf.simulated_seconds, 0.099, 0.001), "{}", r.perf.simulated_seconds);
    let r = perf::run(&config, flows(0.5), &opts, &mut |_| {}).unwrap();
    assert!(within(r.perf.simulated_seconds, 0.0495, 0.001), "{}", r.perf.simulated_seconds);
    assert_eq!(r.perf.completed, 100);
}

#[test]
fn perf_without_timing_is_a_clear_error() {
    let config = Config::preset("tiny").unwrap();
    let flows = Flow::synthetic(&SyntheticSpec::default(), None, 0, &config, 1).unwrap();
    let e = perf::run(&config, flows, &PerfOptions::default(), &mut |_| {}).expect_err("rejected");
    assert!(e.to_string().contains("no [timing] table"), "{e}");
}

#[test]
fn background_gc_runs_in_idle_time_and_shows_in_the_metrics() {
    let timing = "read_latency_us = 40\nprogram_latency_us = 200\nerase_latency_us = 2000\nchannel_rate_mtps = 400";
    let go = |ftl: &str, rate: &str| {
        let config = device_with(2, 2, 1, 4096, timing, FAST_HOST, ftl);
        let s = spec(RwMode::RandWrite, 4096, 1, SizeSpec::TimesCapacity(1.0));
        let arrival = nandlab::host::arrival::parse_arrival(rate, 1).unwrap();
        let opts = PerfOptions { seed: 4, precondition: Some(fill_only()), ..Default::default() };
        let flows = Flow::synthetic(&s, Some(arrival), 0, &config, opts.seed).unwrap();
        perf::run(&config, flows, &opts, &mut |_| {}).unwrap()
    };
    // Writes arrive every 20 ms, far slower than the drive: it is idle in
    // between, long enough for a whole step (one block of 32 pages: ~9 ms).
    let bg = go("gc_background_free_percent = 40", "rate:50");
    assert_eq!(bg.run.errors, 0);
    assert!(bg.perf.gc.background_pages_moved > 0, "{:?}", bg.perf.gc);
    assert!(bg.perf.gc.background_steps > 0);
    assert_eq!(bg.perf.gc.background_overruns, 0, "every step ended before the next arrival");
    let rows_bg: u64 = bg.perf.timeseries.iter().map(|r| r.background_gc_pages_moved).sum();
    assert_eq!(rows_bg, bg.perf.gc.background_pages_moved, "in the time series too");
    // Without background GC the same work happens in the foreground, in the writes' way.
    let fg = go("", "rate:50");
    assert_eq!(fg.perf.gc.background_pages_moved, 0);
    assert!(fg.perf.gc.foreground_pages_moved > 0);
    assert!(
        bg.perf.gc.foreground_pages_moved * 2 < fg.perf.gc.foreground_pages_moved,
        "idle time takes GC out of the writes: {:?} vs {:?}",
        bg.perf.gc,
        fg.perf.gc
    );
    assert!(
        fg.perf.latency["write"].mean_us > bg.perf.latency["write"].mean_us,
        "mean write latency {} (foreground GC) vs {} (background GC)",
        fg.perf.latency["write"].mean_us,
        bg.perf.latency["write"].mean_us
    );
}

/// A `[reliability]` table (BCH, 40 bits per codeword, 4 µs per decode,
/// no wear, retention, disturb or failures) with RBER `floor` on the first
/// attempt and `floor × 0.001` on a retry: at 0.05 the first attempt sees
/// about 410 errors per codeword and never decodes, the retry about 0.4
/// and always does; at 1e-9 every first attempt decodes.
fn media(floor: f64) -> String {
    format!(
        "[reliability]\npreset = \"slc\"\necc = \"bch\"\ncorrectable_bits = 40\nread_retries = 3\n\
         retry_rber_factor = 0.001\nbch_decode_us = 4\nfloor = {floor}\nwear_coefficient = 0.0\n\
         retention_coefficient = 0.0\ndisturb_per_read = 0.0\nprogram_fail_probability = 0.0\n\
         erase_fail_probability = 0.0\n"
    )
}

const MEDIA_TIMING: &str =
    "read_latency_us = 45\nprogram_latency_us = 300\nerase_latency_us = 2000\nchannel_rate_mtps = 400\ncommand_latency_ns = 100";
const MEDIA_HOST: &str =
    "pcie_generation = 3\npcie_lanes = 4\ncommand_overhead_ns = 2500\nfirmware_ns_per_request = 1500";

/// `device` with a `[reliability]` table appended.
fn device_with_media(floor: f64) -> Config {
    device_with_tables(2, 2, 1, 4096, MEDIA_TIMING, MEDIA_HOST, "", &media(floor))
}

#[test]
fn a_read_retry_costs_a_full_read_and_every_attempt_its_decode() {
    let link = 1041; // 4096 B at 3938.46 MB/s (see qd1_read_latency_is_exactly_the_sum_of_its_path)
    let base = 2500 + 1500 + 100 + 45_000 + 10_240 + link;
    // Clean media: one attempt, one decode. High RBER: the first attempt
    // fails, the retry (command + tR + data-out again) decodes: two decodes.
    for (floor, expected) in [(1e-9, base + 4_000), (0.05, base + 100 + 45_000 + 10_240 + 2 * 4_000)] {
        let config = device_with_media(floor);
        let mut dev = TimedDevice::new(&config, 1, 8, 10, 1_000_000_000).unwrap();
        precondition(dev.session_mut(), &fill_only(), 1, &StopFlag::default(), &mut |_, _| {}).unwrap();
        dev.start_timing();
        for i in 0..50u64 {
            let arrival = 1_000_000 * (i + 1);
            let lba = (i * 7919 % 2000) * 8;
            let c = dev.submit(&read(lba, 8), 0, arrival, i).unwrap().expect("the reservation model times at once");
            assert_eq!(c.completion_ns - arrival, expected, "read {i} at RBER {floor}");
        }
        let stats = dev.session().drive().flash().reliability_stats().unwrap();
        assert_eq!(stats.uncorrectable_reads, 0);
        assert!(dev.session().drive().flash().log().is_clean());
    }
}

#[test]
fn a_high_rber_device_has_a_read_p99_higher_by_one_retry_and_one_decode() {
    let p99 = |floor: f64| {
        let config = device_with_media(floor);
        let opts = PerfOptions { seed: 5, precondition: Some(fill_only()), ..Default::default() };
        let r = run(&config, &spec(RwMode::RandRead, 4096, 1, SizeSpec::Bytes(2_000 * 4096)), opts);
        assert_eq!(r.run.errors, 0);
        let media = r.run.reliability.clone().unwrap();
        (r.perf.latency["read"].p99_us, media.reads_retried, media.read_retries)
    };
    let (clean, clean_retried, _) = p99(1e-9);
    let (worn, worn_retried, worn_retries) = p99(0.05);
    assert_eq!(clean_retried, 0);
    assert!(worn_retried >= 2_000 && worn_retries == worn_retried, "{worn_retried} reads, {worn_retries} retries");
    // The physics: a retry is command + tR + data-out again, plus its decode.
    let retry_us = (100.0 + 45_000.0 + 10_240.0 + 4_000.0) / 1000.0;
    assert!(within(worn - clean, retry_us, 0.01), "p99 {clean} µs clean, {worn} µs at high RBER");
}
