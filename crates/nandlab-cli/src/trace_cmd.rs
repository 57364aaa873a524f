//! Traces on the command line: the reader and transform options shared by
//! `stress --trace`, `trace stats` and `trace convert`, and those commands.

use crate::exit::input_error;
use crate::options::WorkloadArgs;
use clap::{Args, Subcommand};
use nandlab::oracle::MAX_UNIT_SECTORS;
use nandlab::util::size::{parse_bytes, SizeSpec};
use nandlab::workload::trace::convert::{self, TargetFormat, TraceWriter};
use nandlab::workload::trace::csv::{self, CsvOptions};
use nandlab::workload::trace::replay::TraceWorkload;
use nandlab::workload::trace::stats;
use nandlab::workload::trace::{ReaderOptions, TraceFormat, TraceReader};
use nandlab::workload::transform::{self, DeviceMap, MapRule, TransformSpec, Transformed};
use nandlab::workload::{HostOp, WorkloadReport};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// How to read the trace.
#[derive(Args, Debug, Clone, Default)]
pub struct ReaderArgs {
    /// auto, msr, mqsim, disksim, blkparse, spc, fio, csv, alibaba, tencent, vscsi (auto sniffs the
    /// first lines and says what it chose; csv and its layouts are never sniffed).
    #[arg(long = "trace-format", default_value = "auto", help_heading = "Trace reading")]
    pub format: String,
    /// Unit of the time field for mqsim (default ns), disksim (ms), spc (s), fio v3 (us).
    #[arg(long = "trace-time-unit", value_name = "ns|us|ms|s", help_heading = "Trace reading")]
    pub time_unit: Option<String>,
    /// ASCII direction field: mqsim (0 = write, 1 = read) or disksim (flags, bit 0 = read).
    #[arg(long = "ascii-rw", value_name = "mqsim|disksim", help_heading = "Trace reading")]
    pub ascii_rw: Option<String>,
    /// blkparse events that are requests: completed (C, default), issued (D), queued (Q).
    #[arg(long = "blkparse-events", help_heading = "Trace reading")]
    pub blkparse_events: Option<String>,
    /// Bytes per LBA unit in mqsim, disksim, blkparse and spc traces (default 512; refused for msr and fio).
    #[arg(long = "trace-sector-bytes", value_name = "BYTES", help_heading = "Trace reading")]
    pub sector_bytes: Option<u32>,
    /// Count malformed lines and go on (reported in the summary and JSON) instead of stopping.
    #[arg(long = "skip-bad-lines", help_heading = "Trace reading")]
    pub skip_bad_lines: bool,
    /// csv: where the fields are, 1-based: time=N,op=N,offset=N,size=N[,device=N] (time and device optional).
    #[arg(long = "trace-columns", value_name = "SPEC", help_heading = "Trace reading")]
    pub columns: Option<String>,
    /// csv: operation values, repeatable: read=R,28 write=W,2a trim=D flush=F ignore=X (case-insensitive).
    #[arg(long = "trace-ops", value_name = "OP=VALUES", help_heading = "Trace reading")]
    pub op_values: Vec<String>,
    /// csv: unit of the offset field: bytes (default), sectors (512 B) or a size such as 4k.
    #[arg(long = "trace-offset-unit", value_name = "UNIT", help_heading = "Trace reading")]
    pub offset_unit: Option<String>,
    /// csv: unit of the size field: bytes (default), sectors (512 B) or a size such as 4k.
    #[arg(long = "trace-size-unit", value_name = "UNIT", help_heading = "Trace reading")]
    pub size_unit: Option<String>,
    /// csv: field delimiter (default `,`; tab, space or one punctuation character).
    #[arg(long = "trace-delimiter", value_name = "CHAR", help_heading = "Trace reading")]
    pub delimiter: Option<String>,
    /// csv: the first line is a header, whatever it holds (without this, a first line whose
    /// mapped numeric fields are not numbers is taken for one).
    #[arg(long = "trace-skip-header", help_heading = "Trace reading")]
    pub skip_header: bool,
}

impl ReaderArgs {
    pub fn options(&self) -> Result<ReaderOptions, String> {
        Ok(ReaderOptions {
            format: match self.format.as_str() {
                "auto" => None,
                f => Some(f.parse::<TraceFormat>().map_err(|e| format!("--trace-format: {e}"))?),
            },
            time_unit: parse_option("--trace-time-unit", &self.time_unit, str::parse)?,
            ascii_rw: parse_option("--ascii-rw", &self.ascii_rw, str::parse)?,
            blkparse_events: parse_option("--blkparse-events", &self.blkparse_events, str::parse)?,
            sector_bytes: self.sector_bytes,
            skip_bad_lines: self.skip_bad_lines,
            csv: CsvOptions {
                columns: parse_option("--trace-columns", &self.columns, str::parse)?,
                offset_unit: parse_option("--trace-offset-unit", &self.offset_unit, csv::parse_unit)?,
                size_unit: parse_option("--trace-size-unit", &self.size_unit, csv::parse_unit)?,
                ops: self
                    .op_values
                    .iter()
                    .map(|o| o.parse::<csv::OpRule>().map_err(|e| format!("--trace-ops: {e}")))
                    .collect::<Result<_, _>>()?,
                delimiter: parse_option("--trace-delimiter", &self.delimiter, csv::parse_delimiter)?,
                skip_header: self.skip_header,
            },
        })
    }

    fn given(&self) -> bool {
        self.format != "auto"
            || self.time_unit.is_some()
            || self.ascii_rw.is_some()
            || self.blkparse_events.is_some()
            || self.sector_bytes.is_some()
            || self.skip_bad_lines
            || self.columns.is_some()
            || !self.op_values.is_empty()
            || self.offset_unit.is_some()
            || self.size_unit.is_some()
            || self.delimiter.is_some()
            || self.skip_header
    }
}

/// An option's value, if given, read by `parse`; an error names the option.
fn parse_option<T, E: std::fmt::Display>(
    option: &str,
    value: &Option<String>,
    parse: impl Fn(&str) -> Result<T, E>,
) -> Result<Option<T>, String> {
    value.as_deref().map(parse).transpose().map_err(|e| format!("{option}: {e}"))
}

/// Transforms, applied in the order documented in `workload::transform`.
#[derive(Args, Debug, Clone, Default)]
pub struct TransformArgs {
    /// Keep only this device / disk / ASU number (repeatable; blkparse: MAJOR,MINOR).
    #[arg(long = "trace-device", value_name = "N", help_heading = "Trace transforms")]
    pub devices: Vec<String>,
    /// Keep only these operations (comma-separated: read, write, trim, flush).
    #[arg(long = "trace-op", value_name = "OPS", help_heading = "Trace transforms")]
    pub ops: Option<String>,
    /// Replay speed: 2 = twice as fast, 0.5 = half as fast (divides arrival times).
    #[arg(long = "trace-speed", default_value_t = 1.0, help_heading = "Trace transforms")]
    pub speed: f64,
    /// Widen every request to N-byte alignment (4k, 8k, …).
    #[arg(long = "trace-align", value_name = "BYTES", help_heading = "Trace transforms")]
    pub align: Option<String>,
    /// Out-of-range addresses: wrap (modulo capacity, default), scale (footprint onto the device), skip, reject.
    #[arg(long = "trace-map", help_heading = "Trace transforms")]
    pub map: Option<String>,
    /// The trace's extent for --trace-map scale (default: measured by a first pass).
    #[arg(long = "trace-extent", value_name = "BYTES", help_heading = "Trace transforms")]
    pub extent: Option<String>,
    /// Repeat the trace, pass k shifted by k × the repeat offset, until this many bytes are written (1t, 4x, …).
    #[arg(long = "trace-repeat-until", value_name = "BYTES", help_heading = "Trace transforms")]
    pub repeat_until: Option<String>,
    /// The LBA shift between passes in bytes (default: pass 0's highest end, rounded up to 1 MiB).
    #[arg(long = "trace-repeat-offset", value_name = "BYTES", help_heading = "Trace transforms")]
    pub repeat_offset: Option<String>,
    /// Stop after this many requests.
    #[arg(long = "trace-requests", value_name = "N", help_heading = "Trace transforms")]
    pub max_requests: Option<u64>,
}

impl TransformArgs {
    fn given(&self) -> bool {
        !self.devices.is_empty()
            || self.ops.is_some()
            || self.speed != 1.0
            || self.align.is_some()
            || self.map.is_some()
            || self.extent.is_some()
            || self.repeat_until.is_some()
            || self.repeat_offset.is_some()
            || self.max_requests.is_some()
    }

    /// The transform spec for a device of `capacity_bytes` with `sector_bytes`
    /// sectors (`None`: no device, addresses stay as they are).
    pub fn spec(
        &self,
        device: Option<(u64, u64)>,
        trace: &Path,
        reader: &ReaderOptions,
    ) -> Result<TransformSpec, String> {
        let devices = self.devices.iter().map(|d| parse_device(d)).collect::<Result<Vec<_>, _>>()?;
        let ops = match &self.ops {
            None => Vec::new(),
            Some(list) => list
                .split(',')
                .map(|o| o.trim().parse::<HostOp>().map_err(|e| format!("--trace-op: {e}")))
                .collect::<Result<Vec<_>, _>>()?,
        };
        let align_bytes = parse_option("--trace-align", &self.align, parse_bytes)?;
        let capacity = device.map(|d| d.0);
        let repeat_until_written_bytes = self
            .repeat_until
            .as_deref()
            .map(|t| {
                let s: SizeSpec = t.parse().map_err(|e| format!("--trace-repeat-until: {e}"))?;
                match (s, capacity) {
                    (SizeSpec::Bytes(b), _) => Ok(b),
                    (s, Some(c)) => Ok(s.resolve(c)),
                    (_, None) => Err(format!(
                        "--trace-repeat-until {t}: a size relative to the device needs a device (--capacity)"
                    )),
                }
            })
            .transpose()?;
        let rule =
            self.map.as_deref().map(str::parse::<MapRule>).transpose().map_err(|e| format!("--trace-map: {e}"))?;
        let map = match device {
            None => {
                if rule.is_some() || self.extent.is_some() {
                    return Err("--trace-map and --trace-extent need a device size (--capacity BYTES)".into());
                }
                None
            }
            Some((capacity_bytes, sector)) => Some(DeviceMap::onto_device(
                rule.unwrap_or_default(),
                capacity_bytes,
                sector,
                align_bytes,
                parse_option("--trace-extent", &self.extent, parse_bytes)?,
            )),
        };
        let mut spec = TransformSpec {
            devices,
            ops,
            rebase_time: true,
            speed: self.speed,
            align_bytes,
            repeat_until_written_bytes,
            repeat_offset_bytes: parse_option("--trace-repeat-offset", &self.repeat_offset, parse_bytes)?,
            map,
            max_requests: self.max_requests,
        };
        spec.refuse_second_pass(trace)?;
        if let Some(m) = &mut spec.map {
            if m.rule == MapRule::Scale && m.extent_bytes.is_none() {
                let r = TraceReader::open(trace, reader).map_err(|e| e.to_string())?;
                eprintln!("  measuring the trace's extent for --trace-map scale (one pass over the file)…");
                let e = transform::measure_extent(r, &spec).map_err(|e| e.to_string())?;
                if e == 0 {
                    return Err("--trace-map scale: the trace touches no address".into());
                }
                if let Some(m) = &mut spec.map {
                    m.extent_bytes = Some(e);
                }
            }
        }
        spec.validate()?;
        Ok(spec)
    }
}

/// `N` or blkparse's `MAJOR,MINOR`.
fn parse_device(s: &str) -> Result<u32, String> {
    if let Some(d) = nandlab::workload::trace::blkparse::parse_device(s.trim().as_bytes()) {
        return Ok(d);
    }
    s.trim().parse::<u32>().map_err(|_| format!("--trace-device `{s}`: expected a number or MAJOR,MINOR"))
}

/// `--trace FILE` and its options, for `stress`.
#[derive(Args, Debug, Clone, Default)]
pub struct StressTraceArgs {
    /// Replay this trace (plain, .gz or .zst) instead of a synthetic workload.
    #[arg(long, value_name = "FILE", help_heading = "Trace reading")]
    pub trace: Option<PathBuf>,
    #[command(flatten)]
    pub reader: ReaderArgs,
    #[command(flatten)]
    pub transform: TransformArgs,
}

/// The synthetic-workload flags given on the command line.
fn synthetic_flags(w: &WorkloadArgs) -> Vec<&'static str> {
    let mut v = Vec::new();
    let mut check = |given: bool, name: &'static str| {
        if given {
            v.push(name);
        }
    };
    check(w.rw.is_some(), "--rw");
    check(w.bs.is_some(), "--bs");
    check(w.bsrange.is_some(), "--bsrange");
    check(w.blockalign.is_some(), "--blockalign");
    check(w.rwmixread.is_some(), "--rwmixread");
    check(w.offset.is_some(), "--offset");
    check(w.size.is_some(), "--size");
    check(w.io_size.is_some(), "--io_size");
    check(w.write_size.is_some(), "--write_size");
    check(w.random_distribution.is_some(), "--random_distribution");
    check(w.iodepth.is_some(), "--iodepth");
    check(w.numjobs.is_some(), "--numjobs");
    check(w.fsync.is_some(), "--fsync");
    check(w.trim_percent.is_some(), "--trim_percent");
    v
}

/// What decides a replay's oracle unit, for [`StressTraceArgs::workload`].
pub struct OracleUnit {
    /// `--oracle-unit`, if given: it wins, and the trace is not measured.
    pub given: Option<u32>,
    /// The device page's sectors: a measured unit is at most this.
    pub page_sectors: u32,
    /// The run's only workload (`oracle unit: …` is printed); a perf trace
    /// flow beside others says its alignment instead (the run takes the
    /// smallest of the flows').
    pub sole: bool,
}

impl StressTraceArgs {
    /// `Ok(None)` when no trace was given (and no trace option either).
    /// Without `--oracle-unit`, the oracle unit is measured by a first pass
    /// over the trace (see [`TraceWorkload::measure_alignment`]) if it can be
    /// read twice, and said on stderr.
    pub fn workload(
        &self,
        synthetic: &WorkloadArgs,
        capacity_bytes: u64,
        sector_bytes: u32,
        unit: &OracleUnit,
    ) -> Result<Option<TraceWorkload>, String> {
        let Some(path) = &self.trace else {
            if self.reader.given() || self.transform.given() {
                return Err("the --trace-* options need --trace FILE".into());
            }
            return Ok(None);
        };
        let flags = synthetic_flags(synthetic);
        if !flags.is_empty() {
            return Err(format!(
                "{} describe(s) a synthetic workload and cannot be combined with --trace (use the --trace-* transforms instead)",
                flags.join(", ")
            ));
        }
        let options = self.reader.options()?;
        let spec = self.transform.spec(Some((capacity_bytes, u64::from(sector_bytes))), path, &options)?;
        let reader = TraceReader::open(path, &options).map_err(|e| e.to_string())?;
        if let Some(why) = reader.chosen_because() {
            eprintln!("  trace format: {} (auto: {why})", reader.format());
        }
        let mut workload = TraceWorkload::new(reader, spec, sector_bytes)?;
        let (sectors, source) =
            workload.choose_oracle_unit(path, &options, unit.given, unit.page_sectors.clamp(1, MAX_UNIT_SECTORS))?;
        let why = source.describe();
        let size = nandlab::util::size::human_bytes(u64::from(sectors) * u64::from(sector_bytes));
        let plural = if sectors == 1 { "" } else { "s" };
        if unit.sole || unit.given.is_some() {
            eprintln!("  oracle unit: {sectors} sector{plural} ({size}, {why})");
        } else {
            eprintln!(
                "  trace {}: aligned to {sectors} sector{plural} ({size}, {why}); the oracle unit is the smallest of the flows'",
                path.display()
            );
        }
        Ok(Some(workload))
    }
}

/// A line for the stress summary: what the trace reader and transforms did.
pub fn summary_line(report: &WorkloadReport) -> String {
    let WorkloadReport::Trace(report) = report;
    let read = &report.read;
    let t = &report.transforms;
    let mut s = format!(
        "  trace      {} lines, {} requests, {} ignored lines, {} bad lines skipped; {} out of range ({} skipped, {} split), {} zero-length skipped, {} pass(es)",
        read.lines, read.requests, read.ignored_lines, read.skipped_bad_lines,
        t.out_of_range, t.skipped_out_of_range, t.split_at_end, report.zero_length_skipped, t.passes
    );
    for e in report.bad_line_examples.iter().take(3) {
        s += &format!("\n  bad line   {e}");
    }
    for w in &report.warnings {
        s += &format!("\n  warning    {w}");
    }
    s
}

#[derive(Subcommand)]
pub enum TraceCommand {
    /// Statistics of a trace: counts and bytes per operation, sizes, footprint,
    /// sequentiality, inter-arrival times, time span.
    Stats {
        /// The trace (plain, .gz or .zst).
        file: PathBuf,
        #[command(flatten)]
        reader: ReaderArgs,
        #[command(flatten)]
        transform: TransformArgs,
        /// Device size for --trace-map (bytes: 3g, 512g, …).
        #[arg(long, value_name = "BYTES")]
        capacity: Option<String>,
        /// Memory for the exact footprint bitmap (8 bytes cover 32 KiB of addresses; units
        /// beyond its range are estimated with HyperLogLog, and only that part is approximate).
        #[arg(long = "footprint-bitmap-max", default_value = "256m")]
        bitmap_max: String,
        /// Print JSON instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Write a trace in another format (fio, fio-v2, mqsim, disksim, msr, spc).
    Convert {
        /// The trace to read (plain, .gz or .zst).
        input: PathBuf,
        /// Target format: fio (iolog v3), fio-v2, mqsim, disksim, msr, spc.
        #[arg(long)]
        to: String,
        /// Output file (`-` for standard output; .gz / .zst compress).
        #[arg(short, long)]
        output: PathBuf,
        /// File name of the first device in fio iologs (the next ones: NAME.1, NAME.2, …).
        #[arg(long = "fio-file", default_value = "/dev/nandlab0")]
        fio_file: String,
        #[command(flatten)]
        reader: ReaderArgs,
        #[command(flatten)]
        transform: TransformArgs,
        /// Device size for --trace-map (bytes: 3g, 512g, …).
        #[arg(long, value_name = "BYTES")]
        capacity: Option<String>,
    },
    /// List the trace formats nandlab reads.
    Formats,
}

fn device_of(capacity: &Option<String>) -> Result<Option<(u64, u64)>, String> {
    capacity
        .as_deref()
        .map(|c| {
            let b = parse_bytes(c).map_err(|e| format!("--capacity: {e}"))?;
            if b == 0 || b % 512 != 0 {
                return Err(format!("--capacity {c}: must be a positive multiple of 512 bytes"));
            }
            Ok((b, 512))
        })
        .transpose()
}

fn open_stream(
    file: &Path,
    reader: &ReaderArgs,
    transform: &TransformArgs,
    capacity: &Option<String>,
) -> Result<Transformed, String> {
    let options = reader.options()?;
    let spec = transform.spec(device_of(capacity)?, file, &options)?;
    let r = TraceReader::open(file, &options).map_err(|e| e.to_string())?;
    Transformed::new(r, spec)
}

pub fn run(cmd: TraceCommand) -> ExitCode {
    match cmd {
        TraceCommand::Formats => {
            for f in TraceFormat::ALL.into_iter().chain(TraceFormat::CSV_LAYOUTS) {
                println!("{:10} {}", f.name(), f.description());
            }
            ExitCode::SUCCESS
        }
        TraceCommand::Stats { file, reader, transform, capacity, bitmap_max, json } => {
            let bitmap_max = match parse_bytes(&bitmap_max) {
                Ok(b) => b,
                Err(e) => return input_error(format!("--footprint-bitmap-max: {e}")),
            };
            let mut stream = match open_stream(&file, &reader, &transform, &capacity) {
                Ok(s) => s,
                Err(e) => return input_error(e),
            };
            let stats = match stats::collect(&mut stream, bitmap_max, transform.given()) {
                Ok(s) => s,
                Err(e) => return input_error(e),
            };
            for w in &stats.warnings {
                eprintln!("warning: {w}");
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&stats).expect("stats serialize"));
            } else {
                print!("{}", stats.table());
            }
            ExitCode::SUCCESS
        }
        TraceCommand::Convert { input, to, output, fio_file, reader, transform, capacity } => {
            convert(&input, &to, &output, &fio_file, &reader, &transform, &capacity)
        }
    }
}

fn convert(
    input: &Path,
    to: &str,
    output: &Path,
    fio_file: &str,
    reader: &ReaderArgs,
    transform: &TransformArgs,
    capacity: &Option<String>,
) -> ExitCode {
    let target: TargetFormat = match to.parse() {
        Ok(t) => t,
        Err(e) => return input_error(format!("--to: {e}")),
    };
    if let Err(e) = convert::check_fio_file(fio_file) {
        return input_error(format!("--fio-file {e}"));
    }
    let [prepared] = match crate::outputs::prepare(&[("the trace to convert", input)], [("-o", Some(output))]) {
        Ok(o) => o,
        Err(e) => return input_error(e),
    };
    let prepared = prepared.expect("given");
    let mut stream = match open_stream(input, reader, transform, capacity) {
        Ok(s) => s,
        Err(e) => return input_error(e),
    };
    if let Some(why) = stream.reader().chosen_because() {
        eprintln!("  trace format: {} (auto: {why})", stream.reader().format());
    }
    let out: Box<dyn Write> = match prepared.file().and_then(|f| {
        convert::compressed_writer(f, output, prepared.is_stdout()).map_err(|e| format!("{}: {e}", output.display()))
    }) {
        Ok(o) => o,
        Err(e) => return input_error(e),
    };
    let mut writer = TraceWriter::new(out, target, fio_file);
    let io_error = |e: std::io::Error| input_error(format!("{}: {e}", output.display()));
    loop {
        match stream.next_request() {
            Ok(Some(r)) => {
                if let Err(e) = writer.write(&r) {
                    let r = stream.reader();
                    // The partial output would read back, but it is not the trace asked
                    // for: it is dropped uncommitted, and the temporary file removed.
                    drop(writer);
                    return input_error(e.located(r.name(), r.format(), &output.display().to_string()));
                }
            }
            Ok(None) => break,
            Err(e) => return input_error(e),
        }
    }
    let (out, counts) = match writer.finish() {
        Ok(x) => x,
        Err(e) => return io_error(e),
    };
    drop(out); // finishes the compressed stream
    if let Err(e) = prepared.commit() {
        return input_error(e);
    }
    let r = stream.reader();
    eprintln!(
        "converted {} ({}) to {} {}: {} requests written",
        input.display(),
        r.format(),
        target.name(),
        output.display(),
        counts.written
    );
    if counts.dropped_flushes + counts.dropped_trims > 0 {
        eprintln!(
            "  dropped {} flush(es) and {} trim(s): the {} format has no flush or trim",
            counts.dropped_flushes,
            counts.dropped_trims,
            target.name()
        );
    }
    if counts.widened_to_sectors > 0 {
        eprintln!("  {} request(s) widened to whole 512-byte sectors", counts.widened_to_sectors);
    }
    if r.counts().skipped_bad_lines > 0 {
        eprintln!("  {} bad line(s) skipped", r.counts().skipped_bad_lines);
    }
    for w in stream.warnings() {
        eprintln!("warning: {w}");
    }
    ExitCode::SUCCESS
}
