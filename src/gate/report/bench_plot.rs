//! The bench suite's figures as an inline SVG per major: a bar per op at its p50, a tick at
//! its p95 and a whisker to its p99, the floor (the durable single-row UPDATE measured in
//! the same run at the same client count) as a dashed mark on each row, and each op's p50
//! as a ratio to that floor. Plain SVG text, no script, no font or image to load.

use super::html_text;
use crate::gate::outcome::{GateRun, LatencyFigure};
use std::fmt::Write as _;

/// The workload whose op is the floor of the others.
const FLOOR_WORKLOAD: &str = "floor-update";

// Layout, in px.
const LABEL_W: f64 = 210.0;
const PLOT_W: f64 = 400.0;
const NOTE_W: f64 = 190.0;
const ROW_H: f64 = 22.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 24.0;

/// `figure`'s p50 as a multiple of its floor's (the floor op at the same client count).
pub fn ratio_to_floor(figures: &[LatencyFigure], figure: &LatencyFigure) -> Option<f64> {
    let floor = figures
        .iter()
        .find(|f| f.workload == FLOOR_WORKLOAD && f.clients == figure.clients)?;
    (floor.p50_us > 0.0).then(|| figure.p50_us / floor.p50_us)
}

/// One `<figure>` per major with bench figures; empty when none has any.
pub fn html(run: &GateRun) -> String {
    let mut out = String::new();
    for m in &run.majors {
        let figures: Vec<LatencyFigure> = m
            .suites
            .iter()
            .flat_map(|s| s.figures.iter().cloned())
            .collect();
        if figures.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "<figure class=\"bench\">{}<figcaption>PG {}: p50 bar, p95 tick, p99 whisker (us); \
             dashed: the floor, a durable single-row UPDATE at the same clients</figcaption>\
             </figure>",
            svg(&figures),
            m.major
        );
    }
    out
}

/// The SVG of one major's figures.
fn svg(figures: &[LatencyFigure]) -> String {
    let max = figures.iter().map(|f| f.p99_us).fold(1.0_f64, f64::max);
    let x = |us: f64| LABEL_W + PLOT_W * (us / max).clamp(0.0, 1.0);
    let height = TOP + ROW_H * figures.len() as f64 + BOTTOM;
    let width = LABEL_W + PLOT_W + NOTE_W;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" \
         role=\"img\" font-family=\"sans-serif\" font-size=\"12\">\
         <text x=\"{LABEL_W}\" y=\"16\">0</text>\
         <text x=\"{:.0}\" y=\"16\" text-anchor=\"end\">{max:.0} us</text>",
        LABEL_W + PLOT_W
    );
    for (i, f) in figures.iter().enumerate() {
        let y = TOP + ROW_H * i as f64;
        let mid = y + ROW_H / 2.0;
        let floor = f.workload == FLOOR_WORKLOAD;
        let _ = write!(
            out,
            "<g class=\"row\"><title>{} @{}: p50 {:.0} us, p95 {:.0} us, p99 {:.0} us, {:.0}/s</title>\
             <text x=\"0\" y=\"{:.1}\">{}</text>\
             <rect x=\"{LABEL_W}\" y=\"{:.1}\" width=\"{:.1}\" height=\"12\" fill=\"{}\"/>\
             <line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{mid:.1}\" y2=\"{mid:.1}\" stroke=\"#333\"/>\
             <line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#333\" stroke-width=\"2\"/>",
            html_text(&format!("{}/{}", f.workload, f.op)),
            f.clients,
            f.p50_us,
            f.p95_us,
            f.p99_us,
            f.throughput_per_s,
            mid + 4.0,
            html_text(&format!("{}/{} @{}", f.workload, f.op, f.clients)),
            y + 5.0,
            x(f.p50_us) - LABEL_W,
            if floor { "#999" } else { "#4a7fd0" },
            x(f.p50_us),
            x(f.p99_us),
            x(f.p95_us),
            x(f.p95_us),
            y + 6.0,
            y + 16.0,
        );
        let note = match ratio_to_floor(figures, f) {
            _ if floor => format!("{:.0} us, the floor", f.p50_us),
            Some(r) => {
                let floor_x = x(f.p50_us / r);
                let _ = write!(
                    out,
                    "<line x1=\"{floor_x:.1}\" x2=\"{floor_x:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" \
                     stroke=\"#c00\" stroke-dasharray=\"3,2\"/>",
                    y + 2.0,
                    y + ROW_H - 2.0
                );
                format!("{:.0} us, {r:.2}x floor", f.p50_us)
            }
            None => format!("{:.0} us, no floor measured", f.p50_us),
        };
        let _ = write!(
            out,
            "<text x=\"{:.0}\" y=\"{:.1}\">{}</text></g>",
            LABEL_W + PLOT_W + 8.0,
            mid + 4.0,
            html_text(&note)
        );
    }
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figure(workload: &str, op: &str, clients: u32, p50: f64) -> LatencyFigure {
        LatencyFigure {
            workload: workload.into(),
            op: op.into(),
            clients,
            driver: "rust-closed".into(),
            count: 100,
            throughput_per_s: 1_000.0,
            p50_us: p50,
            p95_us: p50 * 2.0,
            p99_us: p50 * 3.0,
        }
    }

    #[test]
    fn each_op_is_drawn_with_its_ratio_to_the_floor_at_its_client_count() {
        let figures = vec![
            figure("W1-cycle", "grant", 1, 600.0),
            figure("W1-cycle", "grant", 4, 1_800.0),
            figure("floor-update", "update", 1, 400.0),
            figure("floor-update", "update", 4, 900.0),
            figure("W9", "odd", 16, 100.0),
        ];
        assert_eq!(ratio_to_floor(&figures, &figures[0]), Some(1.5));
        assert_eq!(ratio_to_floor(&figures, &figures[1]), Some(2.0));
        assert_eq!(ratio_to_floor(&figures, &figures[4]), None);
        let svg = svg(&figures);
        assert!(svg.contains(">600 us, 1.50x floor</text>"), "{svg}");
        assert!(svg.contains(">1800 us, 2.00x floor</text>"), "{svg}");
        assert!(svg.contains(">400 us, the floor</text>"), "{svg}");
        assert!(svg.contains(">100 us, no floor measured</text>"), "{svg}");
        assert_eq!(svg.matches("<g class=\"row\">").count(), 5);
        assert_eq!(
            svg.matches("stroke-dasharray").count(),
            2,
            "a floor mark per op with one"
        );
        // The scale ends at the largest p99 (the 4-client grant's 5,400 us): its p50 bar
        // is a third of the plot.
        assert!(svg.contains(">5400 us</text>"), "{svg}");
        assert!(svg.contains("width=\"133.3\" height=\"12\""), "{svg}");
    }
}
