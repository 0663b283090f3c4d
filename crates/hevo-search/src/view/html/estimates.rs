//! The two charts of estimates by iteration: the best so far, and every candidate colored by
//! its proposer's axis; with the error bar both draw.

use std::fmt::Write;

use super::format::{axis_color, fmt_est};
use super::CHART_IDS;
use crate::view::series::best_per_iteration;
use crate::view::svg::{esc, score_ticks, Frame};
use crate::view::RunView;

/// An error bar with end caps at x from `lo` to `hi`, with a `<title>` tooltip.
fn interval(f: &Frame, x: f64, lo: f64, hi: f64, color: &str) -> String {
    let (y0, y1) = (f.y(lo), f.y(hi));
    format!(
        "<line x1=\"{x:.1}\" y1=\"{y0:.1}\" x2=\"{x:.1}\" y2=\"{y1:.1}\" stroke=\"{color}\" stroke-width=\"1.5\"/>\
         <line x1=\"{:.1}\" y1=\"{y0:.1}\" x2=\"{:.1}\" y2=\"{y0:.1}\" stroke=\"{color}\"/>\
         <line x1=\"{:.1}\" y1=\"{y1:.1}\" x2=\"{:.1}\" y2=\"{y1:.1}\" stroke=\"{color}\"/>\n",
        x - 4.0,
        x + 4.0,
        x - 4.0,
        x + 4.0
    )
}

/// The best estimate per iteration: the chart, then the same numbers as a table.
pub(super) fn chart_best(run: &RunView) -> String {
    let best = best_per_iteration(run);
    let f = Frame::new(-0.25, run.last_iteration() as f64 + 0.25, 0.0, 1.0);
    let mut s = f.open(
        CHART_IDS[0],
        "best estimate per iteration with 95% intervals",
    );
    s += &f.axes("iteration", "estimate", &score_ticks());
    let points: Vec<String> = best
        .iter()
        .map(|b| {
            format!(
                "{:.1},{:.1}",
                f.x(b.iteration as f64),
                f.y(b.estimate.value)
            )
        })
        .collect();
    if points.len() > 1 {
        let _ = writeln!(
            s,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\"/>",
            points.join(" ")
        );
    }
    for b in &best {
        let x = f.x(b.iteration as f64);
        s += &interval(&f, x, b.estimate.ci_low, b.estimate.ci_high, "#1f77b4");
        let _ = writeln!(
            s,
            "<circle cx=\"{x:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"#1f77b4\"><title>iteration {}: {} {}</title></circle>",
            f.y(b.estimate.value),
            b.iteration,
            esc(&b.name),
            esc(&fmt_est(Some(b.estimate)))
        );
    }
    s += &f.legend(0, "#1f77b4", "best so far");
    s += "</svg>\n";
    // The same numbers as text, readable without the chart.
    s += "<table class=\"small\"><tr><th>iteration</th><th>best candidate</th><th>estimate [95% interval]</th></tr>\n";
    for b in &best {
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td></tr>",
            b.iteration,
            esc(&b.name),
            esc(&fmt_est(Some(b.estimate)))
        );
    }
    s += "</table>\n";
    s
}

/// Every candidate's estimate at the iteration that proposed it, colored by axis; a point
/// links to the candidate's section.
pub(super) fn chart_candidates(run: &RunView) -> String {
    let f = Frame::new(-0.5, run.last_iteration() as f64 + 0.5, 0.0, 1.0);
    let mut s = f.open(
        CHART_IDS[1],
        "every candidate's estimate by iteration, colored by axis",
    );
    s += &f.axes("iteration", "estimate", &score_ticks());
    let per_it = |it: u32| run.candidates.iter().filter(|c| c.iteration == it).count();
    let mut axes: Vec<&str> = Vec::new();
    for c in &run.candidates {
        if !axes.contains(&c.axis.as_str()) {
            axes.push(&c.axis);
        }
        let Some(e) = c.estimate.filter(|e| e.value.is_finite()) else {
            continue;
        };
        // Spread the candidates of one iteration across its column.
        let n = per_it(c.iteration);
        let k = run
            .candidates
            .iter()
            .filter(|o| o.iteration == c.iteration && o.seq < c.seq)
            .count();
        let offset = if n > 1 {
            -0.3 + 0.6 * k as f64 / (n - 1) as f64
        } else {
            0.0
        };
        let x = f.x(c.iteration as f64 + offset);
        let color = axis_color(&c.axis);
        s += &interval(&f, x, e.ci_low, e.ci_high, color);
        let _ = writeln!(
            s,
            "<a href=\"#cand-{}\"><circle cx=\"{x:.1}\" cy=\"{:.1}\" r=\"4.5\" fill=\"{color}\"><title>{} ({}, iteration {}): {}</title></circle></a>",
            c.seq,
            f.y(e.value),
            esc(&c.name),
            esc(&c.axis),
            c.iteration,
            esc(&fmt_est(Some(e)))
        );
    }
    for (i, a) in axes.iter().enumerate() {
        s += &f.legend(i, axis_color(a), a);
    }
    s += "</svg>\n";
    s
}
