//! The HTML report: one self-contained page of tables and charts drawn
//! from one or more JSON reports of the same mode (`stress`, `perf` or
//! `crash`), several runs on the same axes.
//!
//! # Why SVG drawn by nandlab
//!
//! The charts are SVG drawn here with the `plotters` crate (SVG backend
//! only: no font library, no bitmap code; text stays SVG `<text>` in the
//! browser's sans-serif font) and inlined in the HTML with an inline style
//! sheet. The alternative, a JavaScript charting library vendored into
//! every page, costs hundreds of kilobytes per file before any data, needs
//! a script to run before anything shows, and is hard to check without a
//! browser. Inline SVG gives:
//!
//! - **no network**: the file opens anywhere, offline, in any browser, and
//!   can be attached to a mail or a paper's artefact as it is;
//! - **small files**: a chart is a few tens of kilobytes of SVG, and the
//!   data are already reduced (time series capped at
//!   [`crate::timing::MAX_SERIES_BINS`] rows, CDFs at
//!   [`crate::report::latency::MAX_CDF_POINTS`] points, stress samples at
//!   [`crate::report::StressSample::MAX_SAMPLES`]);
//! - **deterministic output**: the same JSON gives the same bytes (no time
//!   stamp, fixed colours in series order, maps in key order), so pages can
//!   be compared and committed;
//! - **testable without a browser**: the page is text; the unit tests count
//!   its `<svg>` charts and their drawn elements, and a browser test
//!   (`crates/nandlab-cli/tests/html_browser.rs`) loads it in headless
//!   Chromium to check that it renders.
//!
//! The page contains no script at all.
//!
//! # Data
//!
//! The page is a function of the JSON reports ([`serde_json::Value`]), not
//! of a run in memory: `--html` on a run and `nandlab report FILE.json`
//! draw the same page, and saved reports can be compared later. A field
//! missing from a report (an older schema, a hand-made file) leaves out
//! what needs it rather than failing; a file that is not a nandlab report
//! at all is refused by [`read_report`]. The parts: [`stress`] (host and
//! flash traffic, WAF and free blocks along the run, wear, violations,
//! shared with perf), [`perf`] (time series, latency CDFs and percentiles,
//! breakdown, utilisation heat maps), [`crash`] (crash points, failures,
//! the shrunk finding).

pub mod charts;
pub mod crash;
pub mod perf;
pub mod stress;

use serde_json::Value;
use std::fmt::Write as _;

/// Which kind of report a JSON file is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    Stress,
    Perf,
    Crash,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Stress => "stress",
            Kind::Perf => "perf",
            Kind::Crash => "crash",
        }
    }
}

/// One run on the page: its label (legend, table column) and its report.
#[derive(Clone, Debug)]
pub struct Run {
    pub label: String,
    pub report: Value,
}

/// Parse `text` as a nandlab JSON report; the error says where the JSON is
/// broken (line and column) or why it is not a nandlab report. `name`
/// (a file name) starts the message.
pub fn read_report(name: &str, text: &str) -> Result<(Kind, Value), String> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| format!("{name}: line {}, column {}: not valid JSON: {e}", e.line(), e.column()))?;
    let kind = kind_of(&value).map_err(|why| format!("{name}: not a nandlab report: {why}"))?;
    Ok((kind, value))
}

/// The kind of a nandlab report, or why `value` is not one.
pub fn kind_of(value: &Value) -> Result<Kind, String> {
    let obj = value.as_object().ok_or("the top level is not a JSON object")?;
    if !obj.get("schema_version").is_some_and(Value::is_u64) {
        return Err("no `schema_version` number".into());
    }
    match obj.get("mode").and_then(Value::as_str) {
        Some("stress") => Ok(Kind::Stress),
        Some("perf") => Ok(Kind::Perf),
        Some("crash") => Ok(Kind::Crash),
        Some(other) => Err(format!("`mode` is `{other}`, not stress, perf or crash")),
        None => Err("no `mode` string".into()),
    }
}

/// Labels for runs: `FTL on PRESET`, with the file name added where two
/// runs would otherwise share a label.
pub fn labels(reports: &[(&str, &Value)]) -> Vec<String> {
    let base: Vec<String> =
        reports.iter().map(|(_, v)| format!("{} on {}", text(v, "/ftl"), text(v, "/preset"))).collect();
    base.iter()
        .zip(reports)
        .map(
            |(b, (file, _))| {
                if base.iter().filter(|o| *o == b).count() > 1 {
                    format!("{b} ({file})")
                } else {
                    b.clone()
                }
            },
        )
        .collect()
}

/// The page for `runs`, all of `kind`.
pub fn render(kind: Kind, runs: &[Run]) -> String {
    let mut page = Page::new(kind, runs);
    match kind {
        Kind::Stress => stress::page(&mut page, runs),
        Kind::Perf => perf::page(&mut page, runs),
        Kind::Crash => crash::page(&mut page, runs),
    }
    page.finish()
}

/// The number at JSON pointer `ptr` (`/perf/iops`), if any.
pub fn num(v: &Value, ptr: &str) -> Option<f64> {
    v.pointer(ptr).and_then(Value::as_f64).filter(|x| x.is_finite())
}

/// The value at `ptr` as display text (`—` when absent or null).
pub fn text(v: &Value, ptr: &str) -> String {
    match v.pointer(ptr) {
        None | Some(Value::Null) => "—".into(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) if n.is_f64() => format!("{:.3}", n.as_f64().unwrap_or(0.0)),
        Some(other) => other.to_string(),
    }
}

/// The array at `ptr` (empty when absent).
pub fn array<'a>(v: &'a Value, ptr: &str) -> &'a [Value] {
    v.pointer(ptr).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// The object at `ptr` as (key, value) pairs in key order (empty when absent).
pub fn entries<'a>(v: &'a Value, ptr: &str) -> Vec<(&'a str, &'a Value)> {
    let mut out: Vec<_> = v
        .pointer(ptr)
        .and_then(Value::as_object)
        .map_or_else(Vec::new, |m| m.iter().map(|(k, v)| (k.as_str(), v)).collect());
    out.sort_by(|a, b| a.0.cmp(b.0));
    out
}

/// `s` with the characters HTML gives meaning to escaped (text and
/// attribute values).
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Bytes as GiB.
pub fn gib(bytes: f64) -> f64 {
    bytes / f64::from(1u32 << 30)
}

/// The page being assembled: sections, tables, charts.
pub struct Page {
    body: String,
    title: String,
    charts: usize,
}

/// The inline style sheet.
const STYLE: &str = "body{font-family:sans-serif;margin:24px auto;max-width:1400px;color:#222;padding:0 16px}\
h1{font-size:22px;margin-bottom:4px}h2{font-size:18px;border-bottom:1px solid #ccc;padding-bottom:4px;margin-top:32px}\
.meta{color:#555;margin-top:0}.charts{display:flex;flex-wrap:wrap;gap:16px}\
figure{margin:0;border:1px solid #ddd;padding:8px;background:#fff}figure h3{font-size:14px;margin:0 0 4px 0}\
figcaption{font-size:13px;color:#444;max-width:640px;margin-top:4px}\
table{border-collapse:collapse;font-size:13px;margin:8px 0}th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}\
th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:tabular-nums}\
pre{background:#f6f6f6;padding:8px;white-space:pre-wrap;word-break:break-all;font-size:13px}\
.pass{color:#1a7f37;font-weight:bold}.fail{color:#c62828;font-weight:bold}.absent{color:#777;font-size:13px}";

impl Page {
    fn new(kind: Kind, runs: &[Run]) -> Page {
        let title = format!("nandlab {} report", kind.name());
        let mut body = String::new();
        let _ = write!(body, "<h1>{}</h1>\n<p class=\"meta\">", escape(&title));
        let names: Vec<String> = runs
            .iter()
            .map(|r| format!("{} (seed {}; {})", r.label, text(&r.report, "/seed"), text(&r.report, "/workload")))
            .collect();
        let _ = write!(body, "{} run(s): {}</p>\n", runs.len(), escape(&names.join("; ")));
        Page { body, title, charts: 0 }
    }

    /// A page not drawn from run reports (a bench's table): `title` and a
    /// line under it, both escaped; fill it, then [`Page::finish`] it.
    pub fn titled(title: &str, meta: &str) -> Page {
        let body = format!("<h1>{}</h1>\n<p class=\"meta\">{}</p>\n", escape(title), escape(meta));
        Page { body, title: title.to_string(), charts: 0 }
    }

    /// Start a section.
    pub fn section(&mut self, heading: &str) {
        let _ = writeln!(self.body, "<h2>{}</h2>", escape(heading));
    }

    /// A paragraph of text (escaped), with `class`.
    pub fn note(&mut self, class: &str, text: &str) {
        let _ = writeln!(self.body, "<p class=\"{class}\">{}</p>", escape(text));
    }

    /// Preformatted text (a command, a message).
    pub fn pre(&mut self, text: &str) {
        let _ = writeln!(self.body, "<pre>{}</pre>", escape(text));
    }

    /// A row of charts follows (they wrap on narrow screens).
    pub fn charts_start(&mut self) {
        self.body.push_str("<div class=\"charts\">\n");
    }

    pub fn charts_end(&mut self) {
        self.body.push_str("</div>\n");
    }

    /// A chart with its title and its one-line caption (what to look for),
    /// or a note that the runs have no data for it.
    pub fn chart(&mut self, title: &str, caption: &str, svg: Option<String>) {
        match svg {
            Some(svg) => {
                self.charts += 1;
                let _ = write!(
                    self.body,
                    "<figure class=\"chart\"><h3>{}</h3>\n{}\n<figcaption>{}</figcaption></figure>\n",
                    escape(title),
                    svg,
                    escape(caption)
                );
            }
            None => {
                let _ = writeln!(self.body, "<p class=\"absent\">{}: no data in the report(s).</p>", escape(title));
            }
        }
    }

    /// A table; `numeric` cells are right-aligned. Cells are escaped.
    pub fn table(&mut self, headers: &[String], rows: &[Vec<Cell>]) {
        self.body.push_str("<table><thead><tr>");
        for h in headers {
            let _ = write!(self.body, "<th>{}</th>", escape(h));
        }
        self.body.push_str("</tr></thead><tbody>\n");
        for row in rows {
            self.body.push_str("<tr>");
            for c in row {
                let _ = write!(self.body, "<td class=\"{}\">{}</td>", c.class, escape(&c.text));
            }
            self.body.push_str("</tr>\n");
        }
        self.body.push_str("</tbody></table>\n");
    }

    /// The charts drawn so far.
    pub fn chart_count(&self) -> usize {
        self.charts
    }

    /// The whole page.
    pub fn finish(self) -> String {
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta name=\"generator\" content=\"nandlab {}\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n\
             <body>\n{}<p class=\"absent\">Charts: {}. Drawn by nandlab {} from its JSON report(s).</p>\n</body>\n</html>\n",
            env!("CARGO_PKG_VERSION"),
            escape(&self.title),
            self.body,
            self.charts,
            env!("CARGO_PKG_VERSION")
        )
    }
}

/// A table cell: its text and CSS class (`n` numeric, `pass`, `fail`, or none).
#[derive(Clone, Debug)]
pub struct Cell {
    pub text: String,
    pub class: &'static str,
}

impl Cell {
    pub fn text(s: impl Into<String>) -> Cell {
        Cell { text: s.into(), class: "" }
    }
    pub fn num(s: impl Into<String>) -> Cell {
        Cell { text: s.into(), class: "n" }
    }
    pub fn verdict(pass: bool, s: impl Into<String>) -> Cell {
        Cell { text: s.into(), class: if pass { "pass" } else { "fail" } }
    }
}

/// A summary table: one row per metric, one column per run. Each metric
/// is (name, function from a report to its cell).
pub fn summary_table(page: &mut Page, runs: &[Run], metrics: &[(&str, &dyn Fn(&Value) -> Cell)]) {
    let mut headers = vec!["".to_string()];
    headers.extend(runs.iter().map(|r| r.label.clone()));
    let rows: Vec<Vec<Cell>> = metrics
        .iter()
        .map(|(name, f)| std::iter::once(Cell::text(*name)).chain(runs.iter().map(|r| f(&r.report))).collect())
        .collect();
    page.table(&headers, &rows);
}

/// A number with `decimals` decimals, or `—`.
pub fn fixed(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| "—".into(), |v| format!("{v:.decimals$}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_report_is_recognised_by_its_schema_and_mode() {
        assert_eq!(read_report("a.json", r#"{"schema_version": 2, "mode": "perf"}"#).unwrap().0, Kind::Perf);
        let e = read_report("a.json", "{\n \"mode\": \"stress\",\n oops}").unwrap_err();
        assert!(e.starts_with("a.json: line 3, column 2: not valid JSON"), "{e}");
        let e = read_report("b.json", r#"{"mode": "stress"}"#).unwrap_err();
        assert!(e.contains("b.json: not a nandlab report: no `schema_version`"), "{e}");
        let e = read_report("c.json", r#"{"schema_version": 2, "mode": "serve"}"#).unwrap_err();
        assert!(e.contains("`serve`"), "{e}");
        assert!(read_report("d.json", "[1, 2]").unwrap_err().contains("not a JSON object"));
    }

    #[test]
    fn text_from_reports_is_escaped_and_labels_are_told_apart() {
        assert_eq!(escape("<script>&\"'"), "&lt;script&gt;&amp;&quot;&#39;");
        let a = json!({"ftl": "page", "preset": "tiny"});
        let b = json!({"ftl": "dftl", "preset": "tiny"});
        let l = labels(&[("a.json", &a), ("b.json", &a), ("c.json", &b)]);
        assert_eq!(l, ["page on tiny (a.json)", "page on tiny (b.json)", "dftl on tiny"]);
        let page = render(
            Kind::Stress,
            &[Run { label: "<b>x</b>".into(), report: json!({"schema_version": 2, "mode": "stress"}) }],
        );
        assert!(!page.contains("<b>x</b>") && page.contains("&lt;b&gt;x&lt;/b&gt;"));
        assert!(page.starts_with("<!DOCTYPE html>") && page.ends_with("</html>\n"));
        assert!(!page.contains("<script"), "no script in the page");
    }
}
