//! SVG line plots for `hashtile-bench sweep`, drawn with `plotters`' SVG backend.
//!
//! SVG text is written as `<text>` elements and rendered by the viewer, so no font files are read or needed
//! (plotters' built-in size estimate lays the labels out). A figure is a grid of panels sharing one legend
//! order and one colour per series name, like the multi-panel figures of the BGHT paper.

use plotters::prelude::*;
use std::path::Path;

/// One line of a panel: a name (the legend entry) and its points. A `None` y is a missing measurement (for
/// example a build that failed at that load factor): the line is broken there instead of bridging the gap.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend entry; also picks the colour, so a name has the same colour in every panel of a figure.
    pub name: String,
    /// `(x, y)` points in x order.
    pub points: Vec<(f64, Option<f64>)>,
}

/// One chart of a figure.
#[derive(Debug, Clone)]
pub struct Panel {
    /// Title above the chart.
    pub title: String,
    /// Lines of the chart.
    pub series: Vec<Series>,
}

/// How the x axis labels its ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XAxis {
    /// Plain numbers (load factors).
    Linear,
    /// x holds `log2(N)`; ticks are written `2^k`.
    Log2,
}

/// A figure: panels on a grid of `cols` columns, under one caption.
#[derive(Debug, Clone)]
pub struct Figure {
    /// Caption of the whole figure.
    pub caption: String,
    /// Label of every panel's x axis.
    pub x_label: String,
    /// Label of every panel's y axis.
    pub y_label: String,
    /// Tick labelling of the x axis.
    pub x_axis: XAxis,
    /// Fixed y range; `None` fits `0 ..= 1.1 * max` over the panel.
    pub y_range: Option<(f64, f64)>,
    /// Panels per row.
    pub cols: usize,
    /// The panels, row by row.
    pub panels: Vec<Panel>,
}

/// Pixel size of one panel.
const PANEL_W: u32 = 480;
/// Pixel size of one panel.
const PANEL_H: u32 = 360;
/// Height of the figure caption strip.
const CAPTION_H: u32 = 40;
/// Height of the legend strip under the caption.
const LEGEND_H: u32 = 30;
/// Narrowest figure (keeps the caption of a one-panel figure readable).
const MIN_W: u32 = 760;
/// Legend font size (px).
const LEGEND_FONT: u32 = 16;

/// Writes `fig` as an SVG file at `path`.
pub fn write_svg(path: &Path, fig: &Figure) -> Result<(), String> {
    draw(path, fig).map_err(|e| format!("plotting {}: {e}", path.display()))
}

/// The colour of the `i`-th distinct series name (a fixed, readable palette).
fn colour(i: usize) -> RGBColor {
    const COLOURS: [RGBColor; 8] = [
        RGBColor(31, 119, 180),
        RGBColor(214, 39, 40),
        RGBColor(44, 160, 44),
        RGBColor(255, 127, 14),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
    ];
    COLOURS[i % COLOURS.len()]
}

/// Splits a series into runs of consecutive present points (a line is drawn through each run).
fn segments(points: &[(f64, Option<f64>)]) -> Vec<Vec<(f64, f64)>> {
    let mut out = vec![Vec::new()];
    for &(x, y) in points {
        match y {
            Some(y) if y.is_finite() => out.last_mut().expect("non-empty").push((x, y)),
            _ => {
                if !out.last().expect("non-empty").is_empty() {
                    out.push(Vec::new());
                }
            }
        }
    }
    out.retain(|s| !s.is_empty());
    out
}

/// `lo..hi` widened by `pad` of its width on both sides (and made non-empty).
fn padded(lo: f64, hi: f64, pad: f64) -> (f64, f64) {
    if hi > lo {
        let w = hi - lo;
        (lo - w * pad, hi + w * pad)
    } else {
        (lo - 0.5, hi + 0.5)
    }
}

/// Draws the legend strip: a coloured line and the name of each series, centred in `area` (`width` px wide).
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    names: &[&str],
    width: u32,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    const LINE: i32 = 24;
    const GAP: i32 = 28;
    // SVG text is measured by the viewer; estimate ~0.6 em per character to centre the strip.
    let text_w = |name: &str| (name.chars().count() as f64 * 0.6 * LEGEND_FONT as f64) as i32;
    let total: i32 = names
        .iter()
        .map(|n| LINE + 6 + text_w(n) + GAP)
        .sum::<i32>()
        - GAP;
    let mut x = ((width as i32 - total) / 2).max(4);
    let y = (LEGEND_H / 2) as i32;
    let style = ("sans-serif", LEGEND_FONT)
        .into_text_style(area)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (i, name) in names.iter().enumerate() {
        let c = colour(i);
        area.draw(&PathElement::new(
            vec![(x, y), (x + LINE, y)],
            c.stroke_width(3),
        ))?;
        area.draw(&Circle::new((x + LINE / 2, y), 3, c.filled()))?;
        area.draw(&Text::new(
            name.to_string(),
            (x + LINE + 6, y),
            style.clone(),
        ))?;
        x += LINE + 6 + text_w(name) + GAP;
    }
    Ok(())
}

/// Draws the figure; errors are plotters' drawing errors.
fn draw(path: &Path, fig: &Figure) -> Result<(), Box<dyn std::error::Error>> {
    let cols = fig.cols.max(1);
    let rows = fig.panels.len().div_ceil(cols).max(1);
    let width = (PANEL_W * cols as u32).max(MIN_W);
    let size = (width, PANEL_H * rows as u32 + CAPTION_H + LEGEND_H);
    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE)?;
    let rest = root.titled(&fig.caption, ("sans-serif", 26))?;
    let (legend, body) = rest.split_vertically(LEGEND_H);
    let areas = body.split_evenly((rows, cols));

    // One colour per series name across the whole figure, in order of first appearance, shown once in a
    // legend strip under the caption (per-panel legends would cover the lines).
    let mut names: Vec<&str> = Vec::new();
    for s in fig.panels.iter().flat_map(|p| &p.series) {
        if !names.contains(&s.name.as_str()) {
            names.push(&s.name);
        }
    }
    draw_legend(&legend, &names, width)?;

    // x range shared by all panels.
    let xs = fig
        .panels
        .iter()
        .flat_map(|p| &p.series)
        .flat_map(|s| s.points.iter().map(|p| p.0));
    let (x_lo, x_hi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
        (lo.min(x), hi.max(x))
    });
    let (x_lo, x_hi) = if x_lo.is_finite() {
        padded(x_lo, x_hi, 0.03)
    } else {
        (0.0, 1.0)
    };

    for (area, panel) in areas.iter().zip(&fig.panels) {
        let (y_lo, y_hi) = fig.y_range.unwrap_or_else(|| {
            let max = panel
                .series
                .iter()
                .flat_map(|s| s.points.iter().filter_map(|p| p.1))
                .filter(|y| y.is_finite())
                .fold(0.0f64, f64::max);
            (0.0, if max > 0.0 { max * 1.1 } else { 1.0 })
        });
        let mut builder = ChartBuilder::on(area);
        if !panel.title.is_empty() {
            builder.caption(&panel.title, ("sans-serif", 20));
        }
        let mut chart = builder
            .margin(12)
            .x_label_area_size(46)
            .y_label_area_size(64)
            .build_cartesian_2d(x_lo..x_hi, y_lo..y_hi)?;
        let x_fmt = |x: &f64| match fig.x_axis {
            XAxis::Linear => format!("{x:.2}"),
            XAxis::Log2 => format!("2^{}", x.round() as i64),
        };
        let mut mesh = chart.configure_mesh();
        mesh.x_desc(fig.x_label.as_str())
            .y_desc(fig.y_label.as_str())
            .x_label_formatter(&x_fmt)
            .label_style(("sans-serif", 15))
            .axis_desc_style(("sans-serif", 16))
            .light_line_style(WHITE.mix(0.0));
        if fig.x_axis == XAxis::Log2 {
            // Integer exponents only.
            let ticks = (x_hi.floor() - x_lo.ceil()) as usize + 1;
            mesh.x_labels(ticks.clamp(2, 12));
        }
        mesh.draw()?;

        for s in &panel.series {
            let i = names
                .iter()
                .position(|n| *n == s.name)
                .expect("name collected above");
            let c = colour(i);
            for seg in segments(&s.points) {
                chart.draw_series(seg.iter().map(|&p| Circle::new(p, 3, c.filled())))?;
                chart.draw_series(LineSeries::new(seg, c.stroke_width(2)))?;
            }
        }
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_break_at_missing_points() {
        let pts = [
            (1.0, Some(1.0)),
            (2.0, Some(2.0)),
            (3.0, None),
            (4.0, Some(4.0)),
            (5.0, Some(f64::NAN)),
        ];
        assert_eq!(
            segments(&pts),
            vec![vec![(1.0, 1.0), (2.0, 2.0)], vec![(4.0, 4.0)]]
        );
        assert!(segments(&[(1.0, None)]).is_empty());
    }

    #[test]
    fn svg_holds_every_series() {
        let dir = std::env::temp_dir().join(format!("hashtile-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.svg");
        let fig = Figure {
            caption: "caption".into(),
            x_label: "load factor".into(),
            y_label: "M keys/s".into(),
            x_axis: XAxis::Linear,
            y_range: None,
            cols: 2,
            panels: vec![
                Panel {
                    title: "insert".into(),
                    series: vec![
                        Series {
                            name: "alpha".into(),
                            points: vec![(0.5, Some(3.0)), (0.9, Some(2.0))],
                        },
                        Series {
                            name: "beta".into(),
                            points: vec![(0.5, Some(1.0)), (0.9, None)],
                        },
                    ],
                },
                Panel {
                    title: "find".into(),
                    series: vec![],
                },
            ],
        };
        write_svg(&path, &fig).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        for text in ["caption", "insert", "find", "alpha", "beta", "load factor"] {
            assert!(svg.contains(text), "{text} missing from the SVG");
        }
        assert!(svg.contains("<polyline"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
