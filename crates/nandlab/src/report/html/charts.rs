//! The chart kinds of the HTML report, drawn as SVG by `plotters`: lines
//! (time series, CDFs, overlays of several runs), scatter plots, grouped
//! bars (histograms), stacked bars (breakdowns) and heat maps.
//!
//! Each function takes plain numbers and returns the SVG text, or `None`
//! when there is nothing finite to draw (the page then leaves the chart
//! out rather than drawing empty axes). Ranges are padded when degenerate
//! (a constant series still gets a visible axis), non-finite values are
//! dropped, and a logarithmic axis is drawn as the decimal logarithm of
//! the values on a linear axis with its tick labels written back as
//! values, so one code path serves both. Colours come from a fixed palette
//! in series order: the same report gives the same bytes.

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Width and height of a chart, pixels.
pub const SIZE_PX: (u32, u32) = (640, 330);

/// Series colours, in order (distinct in hue and in lightness).
const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

/// The colour of series `i`.
pub fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// One named line or set of points.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// Axis titles (with units) and scales of a line or scatter chart.
#[derive(Clone, Debug)]
pub struct Axes {
    pub x: String,
    pub y: String,
    pub x_log: bool,
    pub y_log: bool,
    /// Start the y axis at 0 (counts, rates) rather than at the data.
    pub y_from_zero: bool,
}

impl Axes {
    pub fn linear(x: &str, y: &str) -> Axes {
        Axes { x: x.into(), y: y.into(), x_log: false, y_log: false, y_from_zero: true }
    }
}

type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// Values beyond this magnitude are not drawn (no figure of a report
/// comes near it; plotters' tick search would take forever over such a
/// range).
const LARGEST_DRAWN: f64 = 1e15;

/// `value` for a linear axis, its decimal logarithm for a log axis (None
/// when it cannot be drawn).
fn scaled(value: f64, log: bool) -> Option<f64> {
    if !value.is_finite() || value.abs() > LARGEST_DRAWN {
        return None;
    }
    match log {
        false => Some(value),
        true if value > 0.0 => Some(value.log10()),
        true => None,
    }
}

/// The range covering `values`, padded by 4 %, and widened when narrower
/// than a millionth of its magnitude (a constant series, or values
/// differing in their last digits: a visible axis either way).
fn range(values: impl Iterator<Item = f64>, from_zero: bool) -> Option<(f64, f64)> {
    let drawable = values.filter(|v| v.is_finite() && v.abs() <= LARGEST_DRAWN);
    let (lo, hi) = drawable.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if !lo.is_finite() || !hi.is_finite() {
        return None;
    }
    let lo = if from_zero { lo.min(0.0) } else { lo };
    let narrowest = (lo.abs().max(hi.abs()) * 1e-6).max(1e-9);
    let pad = if hi - lo >= narrowest { (hi - lo) * 0.04 } else { narrowest };
    Some((if from_zero && lo >= 0.0 { lo } else { lo - pad }, hi + pad))
}

/// A tick value as text: few significant digits, thousands as k/M.
pub fn tick(v: f64) -> String {
    let a = v.abs();
    let text = if a >= 1e9 {
        format!("{:.3}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.3}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.3}k", v / 1e3)
    } else if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a >= 1e-3 {
        format!("{v:.4}")
    } else {
        format!("{v:.3e}")
    };
    trim_zeros(&text)
}

/// `1.500k` → `1.5k`, `2.00` → `2`, `1.000e-2` → `1e-2`.
fn trim_zeros(text: &str) -> String {
    let split = text.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let number = if number.contains('.') { number.trim_end_matches('0').trim_end_matches('.') } else { number };
    format!("{number}{suffix}")
}

/// Draw into an SVG string of [`SIZE_PX`]; `None` when drawing failed.
fn svg(draw: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> Option<()>) -> Option<String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, SIZE_PX).into_drawing_area();
        root.fill(&WHITE).ok()?;
        draw(&root)?;
        root.present().ok()?;
    }
    Some(out)
}

/// The chart's frame: axes over the ranges, mesh, axis titles.
fn frame<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    x: (f64, f64),
    y: (f64, f64),
    axes: &Axes,
    x_labels: &dyn Fn(&f64) -> String,
) -> Option<Chart<'a, 'b>> {
    let mut chart = ChartBuilder::on(root)
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(64)
        .build_cartesian_2d(x.0..x.1, y.0..y.1)
        .ok()?;
    let (x_log, y_log) = (axes.x_log, axes.y_log);
    let y_labels = move |v: &f64| tick(if y_log { 10f64.powf(*v) } else { *v });
    let x_fmt = move |v: &f64| if x_log { tick(10f64.powf(*v)) } else { x_labels(v) };
    chart
        .configure_mesh()
        .x_desc(axes.x.as_str())
        .y_desc(axes.y.as_str())
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_labels)
        .x_labels(8)
        .y_labels(6)
        .light_line_style(RGBColor(236, 236, 236))
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .ok()?;
    Some(chart)
}

/// The legend, when there is more than one series, at the upper left.
fn legend<'a, 'b: 'a>(chart: &mut Chart<'a, 'b>, series: usize) -> Option<()> {
    legend_at(chart, series, SeriesLabelPosition::UpperLeft)
}

/// The legend, when there is more than one series, at `position`.
fn legend_at<'a, 'b: 'a>(chart: &mut Chart<'a, 'b>, series: usize, position: SeriesLabelPosition) -> Option<()> {
    if series > 1 {
        chart
            .configure_series_labels()
            .position(position)
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(180, 180, 180))
            .label_font(("sans-serif", 15))
            .draw()
            .ok()?;
    }
    Some(())
}

/// The points of `series` on the axes' scales.
fn scaled_series(series: &[Series], axes: &Axes) -> Vec<Vec<(f64, f64)>> {
    series
        .iter()
        .map(|s| s.points.iter().filter_map(|&(x, y)| Some((scaled(x, axes.x_log)?, scaled(y, axes.y_log)?))).collect())
        .collect()
}

/// The x and y ranges of scaled points.
fn ranges(points: &[Vec<(f64, f64)>], axes: &Axes) -> Option<((f64, f64), (f64, f64))> {
    let all = || points.iter().flatten();
    let x = range(all().map(|p| p.0), false)?;
    let y = range(all().map(|p| p.1), axes.y_from_zero && !axes.y_log)?;
    Some((x, y))
}

/// Lines, one per series; `None` when no series has a drawable point.
pub fn lines(series: &[Series], axes: &Axes) -> Option<String> {
    let points = scaled_series(series, axes);
    let (x, y) = ranges(&points, axes)?;
    svg(|root| {
        let mut chart = frame(root, x, y, axes, &|v| tick(*v))?;
        for (i, (s, pts)) in series.iter().zip(points).enumerate() {
            let c = colour(i);
            let style = c.stroke_width(2);
            if pts.len() == 1 {
                chart.draw_series(std::iter::once(Circle::new(pts[0], 3, c.filled()))).ok()?;
            }
            chart
                .draw_series(LineSeries::new(pts, style))
                .ok()?
                .label(s.name.as_str())
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], c.stroke_width(2)));
        }
        legend(&mut chart, series.len())
    })
}

/// Points, one colour per series; `None` when no point can be drawn.
pub fn scatter(series: &[Series], axes: &Axes) -> Option<String> {
    let points = scaled_series(series, axes);
    let (x, y) = ranges(&points, axes)?;
    svg(|root| {
        let mut chart = frame(root, x, y, axes, &|v| tick(*v))?;
        for (i, (s, pts)) in series.iter().zip(points).enumerate() {
            let c = colour(i);
            chart
                .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, c.filled())))
                .ok()?
                .label(s.name.as_str())
                .legend(move |(x, y)| Circle::new((x + 8, y), 4, c.filled()));
        }
        legend(&mut chart, series.len())
    })
}

/// Bars grouped by category: one bar per series in each category
/// (`values[series][category]`). `None` when there is no category.
pub fn grouped_bars(categories: &[String], series: &[Series], axes: &Axes) -> Option<String> {
    let n = categories.len();
    let values = series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).filter(|v| v.is_finite());
    let y = range(values.chain([0.0]), true)?;
    if n == 0 {
        return None;
    }
    let width = 0.8 / series.len().max(1) as f64;
    svg(|root| {
        let labels = |v: &f64| category_label(categories, *v);
        let mut chart = frame(root, (-0.5, n as f64 - 0.5), y, axes, &labels)?;
        for (i, s) in series.iter().enumerate() {
            let c = colour(i);
            let left = -0.4 + width * i as f64;
            let bars =
                s.points.iter().filter(|p| p.1.is_finite() && p.0 >= 0.0 && (p.0 as usize) < n).map(|&(k, v)| {
                    let x0 = k.floor() + left;
                    Rectangle::new([(x0, 0.0), (x0 + width * 0.92, v)], c.filled())
                });
            chart
                .draw_series(bars)
                .ok()?
                .label(s.name.as_str())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
        }
        legend(&mut chart, series.len())
    })
}

/// The label of the category at integer position `v` (none between them).
fn category_label(categories: &[String], v: f64) -> String {
    let k = v.round();
    if (v - k).abs() > 1e-6 || k < 0.0 {
        return String::new();
    }
    categories.get(k as usize).cloned().unwrap_or_default()
}

/// One bar per entry of `bars`, stacked from `parts` (`parts[p].points`
/// holds (bar index, value)); `None` when there is no bar.
pub fn stacked_bars(bars: &[String], parts: &[Series], axes: &Axes) -> Option<String> {
    let n = bars.len();
    if n == 0 {
        return None;
    }
    let mut totals = vec![0.0f64; n];
    for p in parts {
        for &(k, v) in &p.points {
            if v.is_finite() && v > 0.0 && k >= 0.0 && (k as usize) < n {
                totals[k as usize] += v;
            }
        }
    }
    let y = range(totals.iter().copied().chain([0.0]), true)?;
    svg(|root| {
        let labels = |v: &f64| category_label(bars, *v);
        let mut chart = frame(root, (-0.5, n as f64 - 0.5), y, axes, &labels)?;
        let mut base = vec![0.0f64; n];
        for (i, p) in parts.iter().enumerate() {
            let c = colour(i);
            let mut rects = Vec::new();
            for &(k, v) in &p.points {
                if v.is_finite() && v > 0.0 && k >= 0.0 && (k as usize) < n {
                    let k = k as usize;
                    let x0 = k as f64 - 0.35;
                    rects.push(Rectangle::new([(x0, base[k]), (x0 + 0.7, base[k] + v)], c.filled()));
                    base[k] += v;
                }
            }
            chart
                .draw_series(rects)
                .ok()?
                .label(p.name.as_str())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
        }
        // Upper right: the bars start at the left. (One part needs a legend too.)
        legend_at(&mut chart, parts.len() + 1, SeriesLabelPosition::UpperRight)
    })
}

/// A heat map of shares in 0..=1 (`values[row][column]`), each cell
/// labelled with its percentage; white is idle, dark red fully busy.
pub fn heat_map(rows: &[String], columns: &[String], values: &[Vec<f64>], caption: &str) -> Option<String> {
    if rows.is_empty() || columns.is_empty() || values.iter().all(|r| r.iter().all(|v| !v.is_finite())) {
        return None;
    }
    let (w, h) = SIZE_PX;
    let (left, top, bottom) = (90i32, 30i32, 30i32);
    let cell_w = ((w as i32 - left - 20) / columns.len() as i32).max(1);
    let cell_h = ((h as i32 - top - bottom) / rows.len() as i32).clamp(1, 60);
    svg(|root| {
        let text = |s: &str, x: i32, y: i32, pos: Pos, size: i32| {
            let style = TextStyle::from(("sans-serif", size).into_font()).pos(pos);
            root.draw(&Text::new(s.to_string(), (x, y), style)).ok()
        };
        text(caption, left, 8, Pos::new(HPos::Left, VPos::Top), 16)?;
        for (r, name) in rows.iter().enumerate() {
            let y = top + r as i32 * cell_h;
            text(name, left - 6, y + cell_h / 2, Pos::new(HPos::Right, VPos::Center), 15)?;
            for (c, _) in columns.iter().enumerate() {
                let v = values.get(r).and_then(|row| row.get(c)).copied().unwrap_or(f64::NAN);
                let x = left + c as i32 * cell_w;
                let fill = heat(v);
                root.draw(&Rectangle::new([(x, y), (x + cell_w - 2, y + cell_h - 2)], fill.filled())).ok()?;
                if v.is_finite() && cell_w >= 34 && cell_h >= 14 {
                    let label = format!("{:.0}%", v * 100.0);
                    let ink = if v > 0.55 { WHITE } else { BLACK };
                    let style = TextStyle::from(("sans-serif", 14).into_font())
                        .pos(Pos::new(HPos::Center, VPos::Center))
                        .color(&ink);
                    root.draw(&Text::new(label, (x + cell_w / 2, y + cell_h / 2), style)).ok()?;
                }
            }
        }
        let y = top + rows.len() as i32 * cell_h + 4;
        for (c, name) in columns.iter().enumerate() {
            if cell_w >= 24 || c % (24 / cell_w.max(1) as usize + 1) == 0 {
                text(name, left + c as i32 * cell_w + cell_w / 2, y, Pos::new(HPos::Center, VPos::Top), 14)?;
            }
        }
        Some(())
    })
}

/// White (0) to dark red (1); grey for a missing value.
fn heat(v: f64) -> RGBColor {
    if !v.is_finite() {
        return RGBColor(200, 200, 200);
    }
    let t = v.clamp(0.0, 1.0);
    let mix = |a: f64, b: f64| (a + (b - a) * t).round() as u8;
    RGBColor(mix(255.0, 165.0), mix(250.0, 15.0), mix(240.0, 21.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(name: &str, points: &[(f64, f64)]) -> Series {
        Series { name: name.into(), points: points.to_vec() }
    }

    #[test]
    fn a_line_chart_draws_one_path_per_series_with_its_axis_titles() {
        let s = [line("page", &[(0.0, 1.0), (1.0, 1.5), (2.0, 2.0)]), line("dftl", &[(0.0, 1.0), (2.0, 3.0)])];
        let svg = lines(&s, &Axes::linear("host GiB written", "WAF")).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80]);
        for c in [colour(0), colour(1)] {
            let stroke = format!("stroke=\"#{:02X}{:02X}{:02X}\"", c.0, c.1, c.2);
            assert_eq!(svg.matches(&stroke).count(), 2, "{stroke}: the line and its legend mark");
        }
        assert!(svg.contains("host GiB written") && svg.contains("WAF") && svg.contains("dftl"));
        assert_eq!(svg, lines(&s, &Axes::linear("host GiB written", "WAF")).unwrap(), "deterministic");
    }

    #[test]
    fn nothing_drawable_gives_no_chart_and_degenerate_ranges_are_padded() {
        let axes = Axes::linear("x", "y");
        assert_eq!(lines(&[], &axes), None);
        assert_eq!(lines(&[line("a", &[(f64::NAN, 1.0), (1.0, f64::INFINITY)])], &axes), None);
        let log = Axes { x_log: true, ..axes.clone() };
        assert_eq!(lines(&[line("a", &[(0.0, 1.0), (-3.0, 1.0)])], &log), None, "no positive x on a log axis");
        let constant = lines(&[line("a", &[(5.0, 7.0), (5.0, 7.0)])], &axes).unwrap();
        assert!(constant.contains("<polyline"));
        assert_eq!(grouped_bars(&[], &[line("a", &[(0.0, 1.0)])], &axes), None);
        assert_eq!(stacked_bars(&[], &[], &axes), None);
        assert_eq!(heat_map(&[], &["0".into()], &[], "c"), None);
    }

    #[test]
    fn bars_and_heat_maps_draw_a_rectangle_per_value() {
        let axes = Axes::linear("erase count", "blocks");
        let cats: Vec<String> = ["1", "2", "3"].map(String::from).to_vec();
        let bars = grouped_bars(&cats, &[line("a", &[(0.0, 4.0), (1.0, 0.0), (2.0, 9.0)])], &axes).unwrap();
        // Background, plotting area and one per bar (a zero-height bar too).
        assert!(bars.matches("<rect").count() >= 3 + 1, "{bars}");
        let parts = [line("cell", &[(0.0, 2.0), (1.0, 1.0)]), line("queue", &[(0.0, 1.0), (1.0, -1.0)])];
        let stacked = stacked_bars(&["read".into(), "write".into()], &parts, &axes).unwrap();
        assert!(stacked.contains("queue") && stacked.contains("write"));
        let heat = heat_map(
            &["channel 0".into(), "channel 1".into()],
            &["die 0".into(), "die 1".into()],
            &[vec![0.1, 0.9], vec![0.5, f64::NAN]],
            "busy",
        )
        .unwrap();
        assert!(heat.contains(">90%<") || heat.contains("90%"), "{heat}");
        assert!(heat.matches("<rect").count() >= 4 + 1);
    }

    #[test]
    fn extreme_values_draw_or_are_left_out_without_a_panic() {
        let axes = Axes::linear("x", "y");
        let log = Axes { x_log: true, y_log: true, ..axes.clone() };
        for pts in [
            vec![(-f64::MAX, f64::MAX), (f64::MAX, -f64::MAX)],
            vec![(1e-300, 2e-300), (2e-300, 1e-300)],
            vec![(0.0, 1e-320), (5e-324, 0.0)],
            vec![(1e300, 1.0), (1e300 * (1.0 + 1e-15), 1.0)],
        ] {
            for a in [&axes, &log] {
                let _ = lines(&[line("a", &pts)], a);
                let _ = scatter(&[line("a", &pts)], a);
            }
            let _ = grouped_bars(&["a".into()], &[line("a", &pts)], &axes);
            let _ = stacked_bars(&["a".into(), "b".into()], &[line("a", &pts)], &axes);
        }
        let _ = heat_map(&["r".into()], &vec!["c".to_string(); 5000], &[vec![f64::MAX; 5000]], "wide");
    }

    #[test]
    fn ticks_are_short() {
        assert_eq!(tick(1500.0), "1500");
        assert_eq!(tick(15000.0), "15k");
        assert_eq!(tick(2.5e6), "2.5M");
        assert_eq!(tick(2.0), "2");
        assert_eq!(tick(0.0), "0");
        assert_eq!(tick(0.01), "0.01");
        assert_eq!(tick(0.0625), "0.0625");
        assert_eq!(tick(0.00002), "2e-5");
    }
}
