//! Evaluation spend: this search's cumulative validation trials against full evaluation's,
//! per iteration, and the totals in trials, tokens and dollars.

use std::fmt::Write;

use super::CHART_IDS;
use crate::view::series::spend_per_iteration;
use crate::view::svg::{count_ticks, Frame};
use crate::view::RunView;

/// Evaluation spend: the note, the chart of cumulative trials per iteration, and the table
/// of trials, tokens and dollars.
pub(super) fn spend_section(run: &RunView) -> String {
    let series = spend_per_iteration(run);
    let max = series.last().map_or(0, |a| a.full_trials.max(a.trials)) as f64;
    let ticks = count_ticks(max);
    let top = ticks.last().map_or(1.0, |t| t.0);
    let f = Frame::new(-0.5, run.last_iteration() as f64 + 0.5, 0.0, top);
    let mut s = String::from(
        "<p class=\"note\">Cumulative validation trials per iteration: what the search ran \
         against what full evaluation would have run (every candidate on every validation \
         task, every trial). Tokens and dollars of full evaluation are extrapolated at this \
         run's mean per trial.</p>\n",
    );
    s += &f.open(
        CHART_IDS[2],
        "trials run against full evaluation, per iteration",
    );
    s += &f.axes("iteration", "trials (cumulative)", &ticks);
    let base = f.y(0.0);
    for a in &series {
        let x = f.x(a.iteration as f64);
        for (dx, v, color, what) in [
            (-20.0, a.full_trials, "#cccccc", "full evaluation"),
            (0.0, a.trials, "#2ca02c", "this search"),
        ] {
            let y = f.y(v as f64);
            let _ = writeln!(
                s,
                "<rect x=\"{:.1}\" y=\"{y:.1}\" width=\"20\" height=\"{:.1}\" fill=\"{color}\"><title>iteration {}: {what} {v} trials</title></rect>",
                x + dx,
                (base - y).max(0.0),
                a.iteration
            );
        }
    }
    s += &f.legend(0, "#cccccc", "full evaluation");
    s += &f.legend(1, "#2ca02c", "this search");
    s += "</svg>\n";
    if let Some(t) = series.last() {
        let _ = write!(
            s,
            "<table class=\"small\"><tr><th></th><th>trials</th><th>tokens</th><th>dollars</th></tr>\n\
             <tr><td>this search</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">${:.4}</td></tr>\n\
             <tr><td>full evaluation</td><td class=\"num\">{}</td><td class=\"num\">{:.0}</td><td class=\"num\">${:.4}</td></tr>\n\
             <tr><td>share</td><td class=\"num\">{:.1}%</td><td colspan=\"2\"></td></tr></table>\n",
            t.trials,
            t.spend.total_tokens(),
            t.spend.cost_usd,
            t.full_trials,
            t.full_tokens(),
            t.full_usd(),
            100.0 * t.fraction()
        );
        if run.train.trials > 0 {
            let _ = writeln!(
                s,
                "<p class=\"note\">Besides these validation trials, HarnessPro's core sets \
                 ran {} trials on the train split: {} tokens, ${:.4}.</p>",
                run.train.trials,
                run.train.spend.total_tokens(),
                run.train.spend.cost_usd
            );
        }
    }
    s
}
