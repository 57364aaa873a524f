//! Criterion benchmarks of the hot paths of a stress run: payload run
//! splicing, NAND program/read/copyback, the oracle, the page FTL's write
//! path (with GC in steady state), and workload generation.
//!
//! Run with `cargo bench -p nandlab --bench hot_paths`. Whole-run figures
//! come from `nandlab bench stress`.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use nandlab::config::Config;
use nandlab::nand::payload::{slice_runs, splice_runs, Run};
use nandlab::nand::{BlockAddr, Nand, PageAddr};
use nandlab::oracle::Oracle;
use nandlab::run::Session;
use nandlab::util::size::SizeSpec;
use nandlab::violation::{Checker, RuleConfig, ViolationLog};
use nandlab::workload::synthetic::{RwMode, SyntheticSpec, SyntheticWorkload};
use nandlab::workload::Workload;
use std::hint::black_box;
use std::time::Duration;

fn payload(c: &mut Criterion) {
    let page = vec![Run::data(0, 1, 16), Run::data(16, 2, 16)];
    let host = vec![Run::data(100, 9, 64)];
    let mut g = c.benchmark_group("payload");
    g.bench_function("splice 8 host sectors into a two-run page", |b| {
        let mut scratch = Vec::with_capacity(8);
        let mut ins = Vec::with_capacity(4);
        b.iter(|| {
            ins.clear();
            slice_runs(&host, 8, 8, &mut ins);
            scratch.clear();
            splice_runs(&page, 12, &ins, &mut scratch);
            black_box(&scratch);
        })
    });
    g.finish();
}

fn nand_ops(c: &mut Criterion) {
    let config = Config::preset("vst-jasmine").unwrap();
    let severities = RuleConfig::default().table();
    let mut log = ViolationLog::new(0);
    let mut nand = Nand::new(config.geometry.clone(), 12, &[]).expect("allocates");
    let ppb = u64::from(config.geometry.pages_per_block());
    let blocks = u64::from(config.geometry.blocks());
    let runs = [Run::data(0, 1, 32)];
    let oob = [1u8; 12];
    let mut g = c.benchmark_group("nand");
    g.throughput(Throughput::Elements(ppb));
    g.bench_function("program a block, read it, copy it back, erase both", |b| {
        let mut block = 0u64;
        b.iter(|| {
            let (src, dst) = (block % blocks, (block + blocks / 2) % blocks);
            let mut ck = Checker::new(&severities, &mut log, 0, None);
            let mut out = Vec::with_capacity(4);
            for p in 0..ppb {
                nand.program(&mut ck, PageAddr(src * ppb + p), &runs, &oob).unwrap();
            }
            for p in 0..ppb {
                out.clear();
                nand.read(&mut ck, PageAddr(src * ppb + p), 0, 32, &mut out).unwrap();
                nand.copyback(&mut ck, PageAddr(src * ppb + p), PageAddr(dst * ppb + p), Some(&oob)).unwrap();
            }
            nand.erase(&mut ck, BlockAddr(src)).unwrap();
            nand.erase(&mut ck, BlockAddr(dst)).unwrap();
            block += 1;
            black_box(&out);
        })
    });
    g.finish();
}

fn oracle(c: &mut Criterion) {
    let sectors = 124_822_461u64;
    let mut o = Oracle::new(sectors, 16);
    let severities = RuleConfig::default().table();
    let mut log = ViolationLog::new(0);
    let mut g = c.benchmark_group("oracle");
    g.throughput(Throughput::Elements(1));
    g.bench_function("record a 32 KiB write and check its read-back, random LBA", |b| {
        let mut x = 1u64;
        let mut w = 1u32;
        b.iter(|| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let lba = (x >> 20) % (sectors - 64) / 16 * 16;
            o.record_write(lba, 64, w);
            let mut ck = Checker::new(&severities, &mut log, 0, None);
            o.check_read(&mut ck, lba, &[Run::data(lba as u32, w, 64)]);
            w += 1;
        })
    });
    g.finish();
}

fn page_ftl(c: &mut Criterion) {
    let config = Config::preset("tiny").unwrap();
    let spec = SyntheticSpec {
        rw: RwMode::RandWrite,
        bs: SizeSpec::Bytes(4096),
        write_size: Some(SizeSpec::TimesCapacity(1000.0)),
        ..Default::default()
    };
    let mut g = c.benchmark_group("page ftl");
    g.throughput(Throughput::Elements(1));
    g.bench_function("4 KiB random write in steady state (GC included)", |b| {
        b.iter_batched_ref(
            || {
                let mut w = SyntheticWorkload::new(&spec, config.logical_bytes(), 512, 1).unwrap();
                let mut s = Session::new(&config, 1, 8, 0).unwrap();
                // Two drive-writes first, so GC is running.
                for _ in 0..(2 * config.logical_bytes() / 4096) {
                    s.submit(&w.next_request().unwrap().unwrap()).unwrap();
                }
                (s, w)
            },
            |(s, w)| {
                for _ in 0..1000 {
                    s.submit(&w.next_request().unwrap().unwrap()).unwrap();
                }
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

fn workload(c: &mut Criterion) {
    let spec = SyntheticSpec {
        rw: RwMode::RandRw,
        bsrange: Some("8k-64k".into()),
        write_size: Some(SizeSpec::TimesCapacity(1e6)),
        ..Default::default()
    };
    let mut w = SyntheticWorkload::new(&spec, 64 << 30, 512, 1).unwrap();
    let mut g = c.benchmark_group("workload");
    g.throughput(Throughput::Elements(1));
    g.bench_function("next randrw request", |b| b.iter(|| black_box(w.next_request().unwrap())));
    g.finish();
}

fn config() -> Criterion {
    Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1)).sample_size(20)
}

/// The flash timing of a stream of host programs (one 8 KiB page each, on
/// random dies of `mqsim-default`, arriving every 15 µs: below the 64
/// dies' program rate, so neither model builds an unbounded backlog) and
/// one read in eight: the reservation model ([`FlashTiming`]) beside the
/// discrete-event core under each scheduler. Per transaction timed.
fn timing(c: &mut Criterion) {
    use nandlab::flash::{Cause, FlashOp, OpKind};
    use nandlab::timing::event_core::FlashCore;
    use nandlab::timing::scheduler::SchedulerKind;
    use nandlab::timing::transaction::{Transaction, TxClass, TxDone, TxKind};
    use nandlab::timing::{Breakdown, FlashTiming};
    const N: u64 = 4096;
    const GAP_NS: u64 = 15_000;
    let config = Config::preset("mqsim-default").unwrap();
    let g = &config.geometry;
    let t = config.timing.clone().unwrap();
    let ppb = u64::from(g.pages_per_block());
    let page_bytes = g.page_size_bytes();
    // (address, is read) of each request, from a fixed xorshift stream.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let ops: Vec<(u64, bool)> = (0..N)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % (u64::from(g.blocks()) * ppb), i % 8 == 7)
        })
        .collect();
    let mut group = c.benchmark_group("timing");
    group.throughput(Throughput::Elements(N));
    group.bench_function("reservation model (FlashTiming)", |b| {
        b.iter_batched(
            || {
                let mut m = FlashTiming::new(g, &t, 1_000_000_000);
                m.set_enabled(true);
                m
            },
            |mut m| {
                for (i, &(address, read)) in ops.iter().enumerate() {
                    let now = i as u64 * GAP_NS;
                    m.advance(now);
                    m.begin_epoch(now, i as u64, Breakdown::default());
                    let kind = if read { OpKind::Read } else { OpKind::Program };
                    m.observe(&FlashOp {
                        kind,
                        cause: Cause::Host,
                        request_id: Some(i as u64),
                        op_index: i as u64,
                        address,
                        source: None,
                        planes: 1,
                        transfer_bytes: page_bytes,
                        buffer: None,
                    });
                    black_box(m.end_epoch());
                }
                m
            },
            BatchSize::LargeInput,
        )
    });
    for sched in [SchedulerKind::Fifo, SchedulerKind::Mqsim, SchedulerKind::ReadPriority] {
        group.bench_function(format!("event core, {}", sched.name()), |b| {
            let xfer = t.channel_ns(u64::from(page_bytes));
            b.iter_batched(
                || (FlashCore::for_device(g, &t, sched), Vec::<TxDone>::with_capacity(64)),
                |(mut core, mut done)| {
                    for (i, &(address, read)) in ops.iter().enumerate() {
                        let now = i as u64 * GAP_NS;
                        done.clear();
                        core.run_until(now, &mut done);
                        let block = address / ppb;
                        let die = g.die_of_block(nandlab::nand::BlockAddr(block));
                        let plane = g.plane_of_block(nandlab::nand::BlockAddr(block)) % g.planes_per_die();
                        let (kind, channel_in_ns, cell_ns, channel_out_ns) = if read {
                            (TxKind::Read, t.command_ns, t.read_ns_by_level[0], xfer)
                        } else {
                            (TxKind::Program, t.command_ns + xfer, t.program_ns_by_level[0], 0)
                        };
                        core.submit(Transaction {
                            kind,
                            class: TxClass::User,
                            die,
                            channel: g.channel_of_die(die),
                            planes_mask: 1 << plane,
                            page: address,
                            block,
                            channel_in_ns,
                            cell_ns,
                            channel_out_ns,
                            ready_ns: now,
                            after: None,
                            tag: i as u64,
                        });
                    }
                    core.run_to_idle(&mut done);
                    (core, done)
                },
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group! { name = benches; config = config(); targets = payload, nand_ops, oracle, page_ftl, workload, timing }
criterion_main!(benches);
