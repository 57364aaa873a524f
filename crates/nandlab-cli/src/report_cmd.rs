//! `nandlab report A.json [B.json ...] -o out.html`: the HTML report of
//! saved JSON reports, several runs of one mode on the same axes; and the
//! `--html FILE` output of `stress`, `perf` and `crash`, which draws the
//! same page from the report the run would write with `--json`.
//!
//! Every input is read, parsed and checked before anything is written: a
//! file that cannot be read, is not JSON (the message gives the line and
//! column), is not a nandlab report, or is of another mode than the first
//! is refused with exit 2, naming it.

use crate::exit::input_error;
use crate::outputs::{self, Output};
use clap::Args;
use nandlab::report::html::{self, Kind, Run};
use std::path::PathBuf;
use std::process::ExitCode;

/// A report file larger than this is refused (nandlab's own are far
/// smaller: their series are capped), so a wrong file cannot exhaust memory.
const MAX_REPORT_BYTES: u64 = 256 << 20;

/// Options of `nandlab report`.
#[derive(Args, Debug, Clone)]
pub struct ReportArgs {
    /// JSON reports (`--json` of stress, perf or crash), all of one mode;
    /// several are drawn on the same axes.
    #[arg(required = true, value_name = "REPORT.json")]
    pub reports: Vec<PathBuf>,
    /// The HTML file to write (`-` for standard output).
    #[arg(short = 'o', long = "output", value_name = "FILE.html")]
    pub output: PathBuf,
}

/// `nandlab report`.
pub fn run(args: &ReportArgs) -> ExitCode {
    let inputs: Vec<(&str, &std::path::Path)> = args.reports.iter().map(|p| ("a report", p.as_path())).collect();
    let [out] = match outputs::prepare(&inputs, [("-o", Some(args.output.as_path()))]) {
        Ok(o) => o,
        Err(e) => return input_error(e),
    };
    let (kind, runs) = match read_all(&args.reports) {
        Ok(r) => r,
        Err(e) => return input_error(e),
    };
    match write(out.expect("given"), kind, &runs) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => input_error(e),
    }
}

/// Read and check every report; all must be of the first one's mode.
fn read_all(paths: &[PathBuf]) -> Result<(Kind, Vec<Run>), String> {
    let mut parsed = Vec::new();
    for path in paths {
        let name = path.display().to_string();
        let size = std::fs::metadata(path).map_err(|e| format!("{name}: cannot read: {e}"))?.len();
        if size > MAX_REPORT_BYTES {
            return Err(format!(
                "{name}: {size} bytes, more than a nandlab report can be ({MAX_REPORT_BYTES} bytes at most)"
            ));
        }
        let text = std::fs::read_to_string(path).map_err(|e| format!("{name}: cannot read: {e}"))?;
        let (kind, value) = html::read_report(&name, &text)?;
        parsed.push((name, kind, value));
    }
    let kind = parsed[0].1;
    if let Some((name, other, _)) = parsed.iter().find(|p| p.1 != kind) {
        return Err(format!(
            "{name} is a {} report and {} a {} report: give reports of one mode (stress, perf or crash) to draw them together",
            other.name(),
            parsed[0].0,
            kind.name()
        ));
    }
    let names: Vec<String> = paths
        .iter()
        .map(|p| p.file_name().map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into_owned()))
        .collect();
    let keyed: Vec<(&str, &serde_json::Value)> =
        names.iter().map(String::as_str).zip(parsed.iter().map(|p| &p.2)).collect();
    let labels = html::labels(&keyed);
    Ok((kind, parsed.into_iter().zip(labels).map(|((_, _, report), label)| Run { label, report }).collect()))
}

fn write(out: Output, kind: Kind, runs: &[Run]) -> Result<(), String> {
    out.write(html::render(kind, runs).as_bytes())
}

/// The `--html` output of a run: the page of its report (`json`, the text
/// `--json` writes), drawn exactly as `nandlab report` draws a saved one.
pub fn write_html(out: Output, json: &str) -> Result<(), String> {
    let (kind, value) = html::read_report("the report", json)?;
    let label = html::labels(&[("", &value)]).remove(0);
    write(out, kind, &[Run { label, report: value }])
}
