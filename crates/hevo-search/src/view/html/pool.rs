//! The task pool: the validation tasks at each iteration by how often the candidates so far
//! solved them (never, frontier, other, always, unseen), as a chart and a table.

use std::fmt::Write;

use super::CHART_IDS;
use crate::view::series::pool_per_iteration;
use crate::view::svg::{count_ticks, Frame};
use crate::view::RunView;

/// The validation tasks per iteration stacked by solve rate, then the same counts as a
/// table.
pub(super) fn chart_pool(run: &RunView) -> String {
    let pool = pool_per_iteration(run);
    let top = run.val_tasks.max(1) as f64;
    let f = Frame::new(-0.5, run.last_iteration() as f64 + 0.5, 0.0, top);
    let mut s = f.open(
        CHART_IDS[3],
        "validation tasks by solve rate, per iteration",
    );
    s += &f.axes("iteration", "validation tasks", &count_ticks(top));
    let bands = [
        ("never solved", "#d62728"),
        ("frontier 1/3..2/3", "#ff7f0e"),
        ("other", "#bcbd22"),
        ("always solved", "#2ca02c"),
        ("unseen", "#dddddd"),
    ];
    for p in &pool {
        let x = f.x(p.iteration as f64) - 12.0;
        let mut below = 0.0;
        for ((label, color), n) in bands.iter().zip([
            p.never_solved,
            p.frontier,
            p.other,
            p.always_solved,
            p.unseen,
        ]) {
            if n == 0 {
                continue;
            }
            let (y0, y1) = (f.y(below), f.y(below + n as f64));
            let _ = writeln!(
                s,
                "<rect x=\"{x:.1}\" y=\"{y1:.1}\" width=\"24\" height=\"{:.1}\" fill=\"{color}\"><title>iteration {}: {n} {label}</title></rect>",
                y0 - y1,
                p.iteration
            );
            below += n as f64;
        }
    }
    for (i, (label, color)) in bands.iter().enumerate() {
        s += &f.legend(i, color, label);
    }
    s += "</svg>\n<table class=\"small\"><tr><th>iteration</th><th>never solved</th><th>frontier</th><th>other</th><th>always solved</th><th>unseen</th></tr>\n";
    for p in &pool {
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            p.iteration, p.never_solved, p.frontier, p.other, p.always_solved, p.unseen
        );
    }
    s += "</table>\n";
    s
}
