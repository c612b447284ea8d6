//! SVG plots (plotters' SVG backend: text is written as SVG text, no font files needed):
//! latency percentiles against clients per workload, and throughput against clients.

use crate::error::{BenchError, Result};
use crate::result::{BenchResult, Driver, Figure};
use plotters::prelude::*;
use std::path::Path;

/// Draws every plot into `dir`; returns their file names.
pub fn draw_all(r: &BenchResult, dir: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    let mut workloads: Vec<(&str, &str)> = Vec::new();
    for f in r.figures.iter().filter(|f| f.driver == Driver::RustClosed) {
        if !workloads.contains(&(f.workload.as_str(), f.op.as_str())) {
            workloads.push((&f.workload, &f.op));
        }
    }
    for (w, op) in &workloads {
        let series: Vec<&Figure> = figures_of(r, w, op);
        if series.len() < 2 {
            continue;
        }
        let name = format!("latency-{w}-{op}.svg");
        latency(
            &series,
            &format!("{w}/{op} latency (Rust closed loop)"),
            &dir.join(&name),
        )?;
        names.push(name);
    }
    let name = "throughput.svg".to_string();
    if throughput(r, &workloads, &dir.join(&name))? {
        names.push(name);
    }
    Ok(names)
}

fn figures_of<'a>(r: &'a BenchResult, w: &str, op: &str) -> Vec<&'a Figure> {
    let mut v: Vec<&Figure> = r
        .figures
        .iter()
        .filter(|f| f.driver == Driver::RustClosed && f.workload == w && f.op == op)
        .collect();
    v.sort_by_key(|f| f.clients);
    v
}

fn plot_err(path: &Path) -> impl Fn(String) -> BenchError + '_ {
    move |message| BenchError::Plot {
        path: path.to_path_buf(),
        message,
    }
}

/// A percentile line: its label, how to read it from a figure, its colour.
type Line = (&'static str, fn(&Figure) -> f64, RGBColor);

fn latency(series: &[&Figure], title: &str, path: &Path) -> Result<()> {
    let err = plot_err(path);
    let max_c = series.iter().map(|f| f.clients).max().unwrap_or(1) as f64;
    let max_y = series.iter().map(|f| f.median.p999_us).fold(10.0, f64::max) * 1.5;
    let min_y = series
        .iter()
        .map(|f| f.median.p50_us)
        .fold(f64::INFINITY, f64::min)
        .max(1.0)
        / 1.5;
    let root = SVGBackend::new(path, (800, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..max_c * 1.05 + 0.5, (min_y..max_y).log_scale())
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .y_label_formatter(&|v| format!("{v:.0}"))
        .x_desc("clients")
        .y_desc("latency (µs, log scale)")
        .draw()
        .map_err(|e| err(e.to_string()))?;
    let lines: [Line; 4] = [
        ("p50", |f| f.median.p50_us, BLUE),
        ("p95", |f| f.median.p95_us, GREEN),
        ("p99", |f| f.median.p99_us, MAGENTA),
        ("p99.9", |f| f.median.p999_us, RED),
    ];
    for (label, get, color) in lines {
        let points: Vec<(f64, f64)> = series.iter().map(|f| (f.clients as f64, get(f))).collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color))
            .map_err(|e| err(e.to_string()))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        chart
            .draw_series(
                points
                    .into_iter()
                    .map(|p| Circle::new(p, 3, color.filled())),
            )
            .map_err(|e| err(e.to_string()))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE)
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(e.to_string()))?;
    root.present().map_err(|e| err(e.to_string()))
}

/// Throughput against clients, one line per workload's whole-iteration figure; false when
/// no workload has two client counts.
fn throughput(r: &BenchResult, workloads: &[(&str, &str)], path: &Path) -> Result<bool> {
    let err = plot_err(path);
    let whole = |w: &str, op: &str| match crate::workloads::workload(w) {
        Some(wl) => wl.script_op == op,
        None => op == "cycle" || op == "wake",
    };
    let series: Vec<(String, Vec<(f64, f64)>)> = workloads
        .iter()
        .filter(|(w, op)| whole(w, op))
        .map(|(w, op)| {
            let pts = figures_of(r, w, op)
                .iter()
                .map(|f| (f.clients as f64, f.median.throughput_per_s))
                .collect::<Vec<_>>();
            (format!("{w}/{op}"), pts)
        })
        .filter(|(_, pts)| pts.len() >= 2)
        .collect();
    if series.is_empty() {
        return Ok(false);
    }
    let max_c = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|x| x.0))
        .fold(1.0, f64::max);
    let ys = || series.iter().flat_map(|(_, p)| p.iter().map(|x| x.1));
    let max_y = ys().fold(10.0, f64::max) * 3.0;
    let min_y = ys().fold(f64::INFINITY, f64::min).max(1.0) / 1.5;
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption("throughput (Rust closed loop)", ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..max_c * 1.05 + 0.5, (min_y..max_y).log_scale())
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .y_label_formatter(&|v| format!("{v:.0}"))
        .x_desc("clients")
        .y_desc("iterations per second (log scale)")
        .draw()
        .map_err(|e| err(e.to_string()))?;
    for (i, (label, pts)) in series.into_iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(pts, color))
            .map_err(|e| err(e.to_string()))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE)
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(e.to_string()))?;
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(true)
}
