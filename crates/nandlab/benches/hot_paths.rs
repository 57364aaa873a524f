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

criterion_group! { name = benches; config = config(); targets = payload, nand_ops, oracle, page_ftl, workload }
criterion_main!(benches);
