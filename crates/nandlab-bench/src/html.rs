//! `--html FILE` on the benches: the medians a bench printed, as one
//! self-contained page (the library's HTML report page: inline SVG, no
//! script) with the table of configurations and a bar chart of each
//! configuration's median throughput.
//!
//! A bench fills a [`BenchTable`] as it prints its medians, one row per
//! configuration, so the page holds the same figures as the text; peers
//! appear (as rows and ratio columns) only where the bench measured them
//! side by side in the same run.

use nandlab::report::html::charts::{self, Axes, Series};
use nandlab::report::html::{Cell, Page};

/// The medians of a bench, for its page.
#[derive(Clone, Debug, Default)]
pub struct BenchTable {
    /// `nandlab bench perf`, …
    pub title: String,
    /// What was run (a line of text under the title).
    pub setup: String,
    pub columns: Vec<String>,
    /// One row per configuration, `columns.len()` cells each.
    pub rows: Vec<Vec<String>>,
    /// Each configuration's median throughput, charted: (configuration,
    /// series, value); a series per workload where a bench has several.
    pub bars: Vec<(String, String, f64)>,
    /// What the bars measure, with its unit.
    pub bar_axis: String,
    /// Notes under the table (what a column means, where a peer's figure comes from).
    pub notes: Vec<String>,
}

impl BenchTable {
    pub fn new(title: &str, columns: &[&str], bar_axis: &str) -> BenchTable {
        BenchTable {
            title: title.to_string(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
            bar_axis: bar_axis.to_string(),
            ..BenchTable::default()
        }
    }

    /// A row (cells in column order) and its configuration's bar, if any.
    pub fn row(&mut self, cells: Vec<String>, bar: Option<(String, String, f64)>) {
        self.rows.push(cells);
        self.bars.extend(bar.filter(|b| b.2.is_finite()));
    }

    /// The page: the table, the chart and the notes.
    pub fn render(&self) -> String {
        let mut page = Page::titled(&self.title, &self.setup);
        page.section("Medians");
        let rows: Vec<Vec<Cell>> = self
            .rows
            .iter()
            .map(|r| {
                r.iter()
                    .map(|c| if c.parse::<f64>().is_ok() || c == "n/a" { Cell::num(c) } else { Cell::text(c) })
                    .collect()
            })
            .collect();
        page.table(&self.columns, &rows);
        for n in &self.notes {
            page.note("", n);
        }
        page.section("Throughput per configuration");
        // Configurations along the axis, series side by side, both in first-seen order.
        let mut categories: Vec<String> = Vec::new();
        let mut names: Vec<String> = Vec::new();
        for (c, n, _) in &self.bars {
            if !categories.contains(c) {
                categories.push(c.clone());
            }
            if !names.contains(n) {
                names.push(n.clone());
            }
        }
        let position = |c: &String| categories.iter().position(|x| x == c).unwrap_or(0) as f64;
        let series: Vec<Series> = names
            .iter()
            .map(|n| Series {
                name: n.clone(),
                points: self.bars.iter().filter(|b| &b.1 == n).map(|b| (position(&b.0), b.2)).collect(),
            })
            .collect();
        page.charts_start();
        page.chart(
            "Median throughput",
            "One bar per configuration (and workload, where there are several), the median of its runs on this machine: compare heights within this page only.",
            charts::grouped_bars(&categories, &series, &Axes::linear("configuration", &self.bar_axis)),
        );
        page.charts_end();
        page.finish()
    }
}

/// A number with `decimals` decimals (`n/a` when not finite).
pub fn fixed(v: f64, decimals: usize) -> String {
    if v.is_finite() {
        format!("{v:.decimals$}")
    } else {
        "n/a".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_has_every_row_and_one_bar_per_configuration() {
        let mut t = BenchTable::new("nandlab bench x", &["configuration", "GB/s"], "host GB/s");
        t.setup = "2 runs".into();
        let bar = |c: &str, v: f64| Some((c.to_string(), "median".to_string(), v));
        t.row(vec!["page".into(), "1.50".into()], bar("page", 1.5));
        t.row(vec!["<dftl>".into(), "0.75".into()], bar("<dftl>", 0.75));
        t.row(vec!["broken".into(), "n/a".into()], bar("broken", f64::NAN));
        let page = t.render();
        assert!(page.starts_with("<!DOCTYPE html>") && !page.contains("<script"));
        assert!(page.contains("<td class=\"n\">1.50</td>") && page.contains("&lt;dftl&gt;"), "{page}");
        assert_eq!(page.matches("<figure class=\"chart\">").count(), 1);
        // Two finite bars: two filled rectangles in the series colour.
        let svg = &page[page.find("<svg").unwrap()..page.find("</svg>").unwrap()];
        assert_eq!(t.bars.len(), 2);
        assert!(svg.matches("<rect").count() >= 2, "{svg}");
        assert_eq!(t.render(), page, "deterministic");
    }

    #[test]
    fn a_table_without_bars_says_there_is_no_chart() {
        let t = BenchTable::new("nandlab bench x", &["configuration"], "GB/s");
        assert!(t.render().contains("Median throughput: no data"));
    }
}
