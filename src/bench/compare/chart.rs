//! SVG charts of a comparison, drawn with plotters: throughput and CPU per
//! million operations as bars per case and system, and latency percentile
//! curves, on log axes (the figures span orders of magnitude: one durable
//! write at a time against sixteen pipelined requests).

use std::path::{Path, PathBuf};

use plotters::coord::combinators::LogCoord;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::sample::{Medians, CURVE};
use super::{CompareReport, WorkloadReport};

const SIZE: (u32, u32) = (960, 480);

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

fn err(e: impl std::fmt::Display) -> String {
    format!("drawing a chart: {e}")
}

/// A system's color, the same in every chart.
fn color(report: &CompareReport, system: &str) -> RGBColor {
    const COLORS: [RGBColor; 8] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
    ];
    let i = report
        .systems
        .iter()
        .position(|s| s.name == system)
        .unwrap_or(0);
    COLORS[i % COLORS.len()]
}

/// Draws every chart into `out`; returns the files.
pub fn draw_all(report: &CompareReport, out: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for w in &report.workloads {
        for (group, cases) in groups(w) {
            let stem = if group.is_empty() {
                w.name.clone()
            } else {
                format!("{}-{}", w.name, slug(&group))
            };
            let title = format!("{} {}", w.name, group).trim().to_string();
            let path = out.join(format!("{stem}-throughput.svg"));
            if bars(
                report,
                w,
                &cases,
                &path,
                &format!("{title}: operations per second (median)"),
                "ops/s",
                |m| m.ops_per_sec,
            )? {
                files.push(path);
            }
            let path = out.join(format!("{stem}-cpu.svg"));
            if bars(
                report,
                w,
                &cases,
                &path,
                &format!("{title}: CPU seconds per million operations (median)"),
                "CPU s per million ops",
                |m| m.cpu_per_mop,
            )? {
                files.push(path);
            }
        }
        if w.name != "server" {
            for c in &w.cases {
                let path = out.join(format!("{}-{}-latency.svg", w.name, slug(&c.name)));
                if curves(report, w, &c.name, &path)? {
                    files.push(path);
                }
            }
        }
    }
    Ok(files)
}

/// Cases drawn together: the server's by (clients, pipeline), the others
/// all in one chart.
fn groups(w: &WorkloadReport) -> Vec<(String, Vec<usize>)> {
    let mut out: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, c) in w.cases.iter().enumerate() {
        let group = if w.name == "server" {
            c.name.split_once(' ').map_or("", |(_, g)| g).to_string()
        } else {
            String::new()
        };
        match out.iter_mut().find(|(g, _)| *g == group) {
            Some((_, cases)) => cases.push(i),
            None => out.push((group, vec![i])),
        }
    }
    out
}

/// An axis value in few characters: 250, 2.5k, 1.2M.
fn human(v: f64) -> String {
    let trim = |s: String| {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if v >= 1e6 {
        format!("{}M", trim(format!("{:.1}", v / 1e6)))
    } else if v >= 1e3 {
        format!("{}k", trim(format!("{:.1}", v / 1e3)))
    } else if v >= 10.0 {
        format!("{v:.0}")
    } else {
        trim(format!("{v:.2}"))
    }
}

fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_string()
}

/// The systems that ran some case of `cases`.
fn ran(w: &WorkloadReport, cases: &[usize]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for &c in cases {
        for r in &w.cases[c].results {
            if r.medians.is_some() && !out.contains(&r.system) {
                out.push(r.system.clone());
            }
        }
    }
    out
}

/// A log axis from below the least to above the most of `values`.
fn log_range(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let (lo, hi) = values
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    (hi > 0.0).then(|| (lo / 2.0, hi * 2.0))
}

/// Grid lines: horizontal only (bars) or both ways (curves).
#[derive(Clone, Copy, PartialEq)]
enum Mesh {
    Horizontal,
    Both,
}

type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, LogCoord<f64>>>;

/// A white chart titled `title` over `x` with a log y axis from `y.0` to
/// `y.1`, about `labels` labels along x as `label` names them.
fn frame<'a, 'b>(
    root: &'a Area<'b>,
    title: &str,
    (x, labels): (std::ops::Range<f64>, usize),
    y: (f64, f64),
    label: &dyn Fn(&f64) -> String,
    y_desc: &str,
    x_mesh: Mesh,
) -> Result<Chart<'a, 'b>, String> {
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(80)
        .build_cartesian_2d(x, (y.0..y.1).log_scale())
        .map_err(err)?;
    let mut mesh = chart.configure_mesh();
    if x_mesh == Mesh::Horizontal {
        mesh.disable_x_mesh();
    }
    mesh.x_labels(labels)
        .x_label_formatter(label)
        .y_label_formatter(&|v| human(*v))
        .y_desc(y_desc)
        .draw()
        .map_err(err)?;
    Ok(chart)
}

/// Draws the legend and writes the file.
fn finish<'a, 'b: 'a>(chart: &mut Chart<'a, 'b>, root: &Area<'b>) -> Result<(), String> {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// Bars of `value` per case (groups along x) and system; false when there
/// is nothing to draw.
fn bars(
    report: &CompareReport,
    w: &WorkloadReport,
    cases: &[usize],
    path: &Path,
    title: &str,
    y_desc: &str,
    value: fn(&Medians) -> f64,
) -> Result<bool, String> {
    let systems = ran(w, cases);
    let of = |c: usize, s: &str| {
        w.cases[c]
            .medians(s)
            .map(value)
            .filter(|v| v.is_finite() && *v > 0.0)
    };
    let Some((lo, hi)) = log_range(
        cases
            .iter()
            .flat_map(|&c| systems.iter().filter_map(move |s| of(c, s))),
    ) else {
        return Ok(false);
    };
    // The server's cases of a chart share their (clients, pipeline), which
    // the title names.
    let labels: Vec<String> = cases
        .iter()
        .map(|&c| {
            let name = &w.cases[c].name;
            match name.split_once(" -c ") {
                Some((test, _)) if w.name == "server" => test.to_string(),
                _ => name.clone(),
            }
        })
        .collect();
    let root: Area = SVGBackend::new(path, SIZE).into_drawing_area();
    let n = cases.len();
    let label = |x: &f64| {
        let i = (x - 0.5).round();
        if (x - 0.5 - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < n {
            labels[i as usize].clone()
        } else {
            String::new()
        }
    };
    let mut chart = frame(
        &root,
        title,
        (0f64..n as f64, 2 * n + 1),
        (lo, hi),
        &label,
        y_desc,
        Mesh::Horizontal,
    )?;
    let width = 0.8 / systems.len() as f64;
    for (k, s) in systems.iter().enumerate() {
        let col = color(report, s);
        let rects: Vec<Rectangle<(f64, f64)>> = cases
            .iter()
            .enumerate()
            .filter_map(|(i, &c)| {
                let v = of(c, s)?;
                let x0 = i as f64 + 0.1 + k as f64 * width;
                Some(Rectangle::new(
                    [(x0, lo), (x0 + width * 0.95, v)],
                    col.filled(),
                ))
            })
            .collect();
        chart
            .draw_series(rects)
            .map_err(err)?
            .label(s.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], col.filled()));
    }
    finish(&mut chart, &root)?;
    Ok(true)
}

/// Latency percentile curves of every system on case `case` (with fio's
/// 4 KiB write+fdatasync, the floor, on the one-write-at-a-time cases).
fn curves(
    report: &CompareReport,
    w: &WorkloadReport,
    case: &str,
    path: &Path,
) -> Result<bool, String> {
    let Some(c) = w.case(case) else {
        return Ok(false);
    };
    let mut lines: Vec<(String, Vec<(f64, f64)>)> = c
        .results
        .iter()
        .filter_map(|r| Some((r.system.clone(), points(r.medians.as_ref()?))))
        .collect();
    if matches!(w.name.as_str(), "wal-pe" | "latency") {
        let floor = report
            .workload("floor")
            .and_then(|f| f.case("4k write+fdatasync"))
            .and_then(|f| f.medians("fio"));
        if let Some(f) = floor {
            lines.push(("fio floor (4k write+fdatasync)".into(), points(f)));
        }
    }
    lines.retain(|(_, p)| !p.is_empty());
    let Some((lo, hi)) = log_range(lines.iter().flat_map(|(_, p)| p.iter().map(|p| p.1))) else {
        return Ok(false);
    };
    let root: Area = SVGBackend::new(path, SIZE).into_drawing_area();
    let n = CURVE.len();
    let label = |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < n {
            CURVE[i as usize].0.to_string()
        } else {
            String::new()
        }
    };
    let title = format!("{} {case}: latency percentiles (median of rounds)", w.name);
    let x = -0.25f64..(n as f64 - 0.75);
    let mut chart = frame(
        &root,
        &title,
        (x, 2 * n),
        (lo, hi),
        &label,
        "microseconds",
        Mesh::Both,
    )?;
    for (system, pts) in lines {
        let col = if system.starts_with("fio") {
            BLACK
        } else {
            color(report, &system)
        };
        chart
            .draw_series(LineSeries::new(pts.clone(), col.stroke_width(2)))
            .map_err(err)?
            .label(system)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], col.stroke_width(2)));
        chart
            .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, col.filled())))
            .map_err(err)?;
    }
    finish(&mut chart, &root)?;
    Ok(true)
}

/// The percentiles a system reported, at their places along x.
fn points(m: &Medians) -> Vec<(f64, f64)> {
    CURVE
        .iter()
        .enumerate()
        .filter_map(|(i, (_, get))| get(&m.latency).filter(|v| *v > 0.0).map(|v| (i as f64, v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_slugs() {
        assert_eq!(slug("-c 50 -P 16"), "c-50-p-16");
        assert_eq!(slug("threads=100"), "threads-100");
        assert_eq!(slug("1 KiB sync put"), "1-kib-sync-put");
    }

    #[test]
    fn axis_values_are_short() {
        assert_eq!(human(80_000.0), "80k");
        assert_eq!(human(2_500.0), "2.5k");
        assert_eq!(human(1_250_000.0), "1.2M");
        assert_eq!(human(250.0), "250");
        assert_eq!(human(2.5), "2.5");
    }

    #[test]
    fn a_log_axis_spans_what_it_shows() {
        assert_eq!(
            log_range([10.0, 1000.0, 0.0].into_iter()),
            Some((5.0, 2000.0))
        );
        assert_eq!(log_range([0.0, f64::NAN].into_iter()), None);
    }
}
