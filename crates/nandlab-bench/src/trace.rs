//! `nandlab bench trace`: parsing throughput of every reader.
//!
//! For each format a file of at least `--size` bytes (1 GiB by default) of
//! deterministic pseudo-random requests is generated in `--dir`, then read
//! back `--runs` times through the reader alone (no transforms), on one
//! thread. Requests/s (requests the reader produced), lines/s and MB/s
//! (10^6 bytes of text per second) are printed as the median of the runs,
//! both per second of wall time and per second of CPU time of the process
//! (on a shared machine the CPU figure is the parser's speed on one core;
//! the wall figure includes waiting for it), with each run's requests/s.
//! Requests/s is the figure to compare across formats: lines/s flatters
//! formats with lines that are not requests (the blkparse file follows
//! each request through Q, G, I, D and C events, so four lines in five are
//! events skipped early and only C lines become requests).
//! The file is freshly written, so it is normally in the page cache: this
//! measures parsing, not the disk. Nothing is asserted.

use crate::html::{fixed, BenchTable};
use crate::{median, Verdict};
use nandlab::workload::trace::{ReaderOptions, TraceFormat, TraceReader};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What `bench trace` was asked to do.
pub struct TraceBenchOptions {
    /// Size of each generated file, at least.
    pub size_bytes: u64,
    /// Where the files are written.
    pub dir: PathBuf,
    pub formats: Vec<TraceFormat>,
    /// Parsing runs per format, at least 1.
    pub runs: usize,
    /// Keep the generated files.
    pub keep: bool,
}

/// A small deterministic generator (SplitMix64).
struct Gen(u64);
impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Write one line of `format` for request `i`.
fn line(w: &mut impl Write, format: TraceFormat, i: u64, g: &mut Gen) -> std::io::Result<()> {
    let r = g.next();
    let sectors = 8u64 << (r % 5);
    let lba = (r >> 8) % (1 << 31) / 8 * 8;
    let read = r & (1 << 60) != 0;
    let t_ns = i * 12_345;
    match format {
        TraceFormat::Msr => writeln!(
            w,
            "{},hm,{},{},{},{},{}",
            128166372003061629 + t_ns / 100,
            r % 4,
            if read { "Read" } else { "Write" },
            lba * 512,
            sectors * 512,
            r % 100_000
        ),
        TraceFormat::Mqsim => writeln!(w, "{t_ns} {} {lba} {sectors} {}", r % 4, u8::from(read)),
        TraceFormat::Disksim => {
            writeln!(w, "{}.{:06} {} {lba} {sectors} {}", t_ns / 1_000_000, t_ns % 1_000_000, r % 4, u8::from(read))
        }
        TraceFormat::Spc => writeln!(
            w,
            "{},{lba},{},{},{}.{:06}",
            r % 4,
            sectors * 512,
            if read { 'r' } else { 'w' },
            t_ns / 1_000_000_000,
            t_ns / 1_000 % 1_000_000
        ),
        TraceFormat::Fio => writeln!(
            w,
            "{} /dev/nvme0n1 {} {} {}",
            t_ns / 1000,
            if read { "read" } else { "write" },
            lba * 512,
            sectors * 512
        ),
        TraceFormat::Alibaba | TraceFormat::Csv => writeln!(
            w,
            "{},{},{},{},{}",
            r % 4,
            if read { 'R' } else { 'W' },
            lba * 512,
            sectors * 512,
            1_577_808_000_000_000 + t_ns / 1000
        ),
        TraceFormat::Tencent => {
            writeln!(w, "{},{lba},{sectors},{},{}", 1_538_352_000 + t_ns / 1_000_000_000, u8::from(!read), r % 4)
        }
        TraceFormat::Vscsi => {
            writeln!(w, "1,{},{},{},{lba}", t_ns / 1_000_000_000, if read { "28" } else { "2a" }, sectors * 512)
        }
        TraceFormat::Blkparse => {
            // A request's life in blkparse's default output: Q, G, I, D, C.
            let rwbs = if read { "R" } else { "WS" };
            let (s, ns) = (t_ns / 1_000_000_000, t_ns % 1_000_000_000);
            let action = ["Q", "G", "I", "D", "C"][(i % 5) as usize];
            let tail = if action == "C" { "[0]" } else { "[fio]" };
            writeln!(
                w,
                "  8,16   {:>1} {:>8} {s:>5}.{ns:09} {:>5}  {action} {rwbs:>3} {lba} + {sectors} {tail}",
                r % 8,
                i + 1,
                1000 + r % 30_000
            )
        }
    }
}

fn generate(path: &Path, format: TraceFormat, size: u64) -> std::io::Result<u64> {
    let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let mut g = Gen(0x5eed);
    let mut written = 0u64;
    let mut lines = 0u64;
    if format == TraceFormat::Fio {
        let header = "fio version 3 iolog\n0 /dev/nvme0n1 add\n0 /dev/nvme0n1 open\n";
        w.write_all(header.as_bytes())?;
        written += header.len() as u64;
        lines += 3;
    }
    let mut buf = Vec::with_capacity(256);
    while written < size {
        buf.clear();
        line(&mut buf, format, lines, &mut g)?;
        w.write_all(&buf)?;
        written += buf.len() as u64;
        lines += 1;
    }
    w.flush()?;
    Ok(lines)
}

/// Run `bench trace`, printing as it goes and filling `table` (the
/// `--html` page).
pub fn run(args: &TraceBenchOptions, table: &mut BenchTable) -> Result<Verdict, String> {
    let size = args.size_bytes;
    *table = BenchTable::new(
        "nandlab bench trace",
        &["format", "lines", "requests", "MB", "requests/s", "MB/s", "requests/CPU-s", "MB/CPU-s"],
        "requests parsed per CPU-second",
    );
    table.setup = format!(
        "{} per file, {} run(s) per format, one thread, reader only (file in the page cache)",
        nandlab::util::size::human_bytes(size),
        args.runs
    );
    if args.formats.contains(&TraceFormat::Csv) {
        return Err(
            "--formats csv: csv needs a column mapping; bench its layouts alibaba, tencent or vscsi instead".into()
        );
    }
    let dir = &args.dir;
    println!(
        "nandlab bench trace — {} per file, {} run(s) per format, one thread, reader only (file in the page cache)",
        nandlab::util::size::human_bytes(size),
        args.runs
    );
    println!(
        "{:10} {:>12} {:>12} {:>8} {:>12} {:>12} {:>8} {:>14} {:>14} {:>10}  runs (requests/s wall)",
        "format",
        "lines",
        "requests",
        "MB",
        "requests/s",
        "lines/s",
        "MB/s",
        "requests/CPU-s",
        "lines/CPU-s",
        "MB/CPU-s"
    );
    for &format in &args.formats {
        let path = dir.join(format!("nandlab-bench-{}-{}.trace", format.name(), std::process::id()));
        let lines = match generate(&path, format, size) {
            Ok(n) => n,
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                return Err(format!("{}: {e}", path.display()));
            }
        };
        let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(size);
        let mut rates = Vec::new();
        let mut cpu = Vec::new();
        let mut requests = 0u64;
        for _ in 0..args.runs {
            let started = Instant::now();
            let cpu_start = nandlab::report::resources::cpu_seconds();
            let mut reader = match TraceReader::open(&path, &ReaderOptions::for_format(format)) {
                Ok(r) => r,
                Err(e) => return Err(e.to_string()),
            };
            requests = 0;
            loop {
                match reader.next_request() {
                    Ok(Some(_)) => requests += 1,
                    Ok(None) => break,
                    Err(e) => return Err(e.to_string()),
                }
            }
            let secs = started.elapsed().as_secs_f64();
            cpu.push(nandlab::report::resources::cpu_seconds() - cpu_start);
            assert_eq!(reader.counts().lines, lines, "every generated line is read");
            rates.push(secs);
        }
        let request_rates: Vec<f64> = rates.iter().map(|s| requests as f64 / s).collect();
        let secs = median(rates);
        let cpu_secs = median(cpu).max(1e-9);
        println!(
            "{:10} {:>12} {:>12} {:>8.0} {:>12.0} {:>12.0} {:>8.1} {:>14.0} {:>14.0} {:>10.1}  {}",
            format.name(),
            lines,
            requests,
            bytes as f64 / 1e6,
            requests as f64 / secs,
            lines as f64 / secs,
            bytes as f64 / 1e6 / secs,
            requests as f64 / cpu_secs,
            lines as f64 / cpu_secs,
            bytes as f64 / 1e6 / cpu_secs,
            request_rates.iter().map(|r| format!("{:.2}M", r / 1e6)).collect::<Vec<_>>().join(" ")
        );
        table.row(
            vec![
                format.name().to_string(),
                lines.to_string(),
                requests.to_string(),
                fixed(bytes as f64 / 1e6, 0),
                fixed(requests as f64 / secs, 0),
                fixed(bytes as f64 / 1e6 / secs, 1),
                fixed(requests as f64 / cpu_secs, 0),
                fixed(bytes as f64 / 1e6 / cpu_secs, 1),
            ],
            Some((format.name().to_string(), "median".to_string(), requests as f64 / cpu_secs)),
        );
        if args.keep {
            println!("           kept {}", path.display());
        } else {
            let _ = std::fs::remove_file(&path);
        }
    }
    Ok(Verdict::Measured)
}
