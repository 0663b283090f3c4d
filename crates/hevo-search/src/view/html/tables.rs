//! The tables after the charts: the test split, every candidate (sortable), and the
//! candidates rejected before evaluation.

use std::fmt::Write;

use super::format::{axis_color, fmt_est};
use crate::view::svg::esc;
use crate::view::RunView;

/// The test split: one row per harness `finalize` evaluated, next to its validation
/// estimate.
pub(super) fn test_section(run: &RunView) -> String {
    let mut s = String::from(
        "<h2 id=\"test\">Test split (finalize)</h2>\n<p class=\"note\">Evaluated once, \
         after the search, outside the archive: no proposer saw these numbers.</p>\n\
         <table><tr><th>harness</th><th>role</th><th>test pass rate [95% interval]</th>\
         <th>validation estimate</th><th>tasks</th><th>trials</th><th>dollars</th></tr>\n",
    );
    for t in &run.test {
        let val = run.candidates.iter().find(|c| c.name == t.name);
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">${:.4}</td></tr>",
            esc(&t.name),
            esc(&t.role),
            esc(&fmt_est(Some(t.pass_rate))),
            esc(&fmt_est(val.and_then(|c| c.estimate))),
            t.tasks,
            t.trials,
            t.cost_usd
        );
    }
    s += "</table>\n";
    s
}

/// The sortable table of every archived candidate, linked to their sections.
pub(super) fn candidate_table(run: &RunView) -> String {
    let mut s = String::from(
        "<h2 id=\"table\">Candidates</h2>\n<p class=\"note\">Click a column header to sort \
         (the table reads the same without scripts).</p>\n<table id=\"cand-table\" \
         class=\"sortable\"><thead><tr><th>#</th><th>name</th><th>iteration</th>\
         <th>parent</th><th>axis</th><th>status</th><th>estimate</th><th>95% interval</th>\
         <th>trials</th><th>dollars</th><th>hypothesis</th></tr></thead><tbody>\n",
    );
    for c in &run.candidates {
        let parent = match c.parent.as_deref() {
            Some(p) => match run.candidates.iter().find(|o| o.name == p) {
                Some(o) => format!("<a href=\"#cand-{}\">{}</a>", o.seq, esc(p)),
                None => esc(p),
            },
            None => "–".into(),
        };
        let (value, ci) = match c.estimate.filter(|e| e.value.is_finite()) {
            Some(e) => (
                format!("{:.3}", e.value),
                format!("[{:.3}, {:.3}]", e.ci_low, e.ci_high),
            ),
            None => ("–".into(), "–".into()),
        };
        let _ = writeln!(
            s,
            "<tr><td class=\"num\">{}</td><td><a href=\"#cand-{}\">{}</a></td><td class=\"num\">{}</td><td>{parent}</td>\
             <td class=\"nowrap\"><span class=\"dot\" style=\"background:{}\"></span>{}</td><td>{}</td><td class=\"num\">{value}</td>\
             <td class=\"num\">{ci}</td><td class=\"num\">{}</td><td class=\"num\">{:.4}</td><td>{}</td></tr>",
            c.seq,
            c.seq,
            esc(&c.name),
            c.iteration,
            axis_color(&c.axis),
            esc(&c.axis),
            esc(&c.status),
            c.trials,
            c.spend.cost_usd,
            esc(&c.hypothesis)
        );
    }
    s += "</tbody></table>\n";
    s
}

/// The candidates rejected before evaluation, with the reason.
pub(super) fn rejected_table(run: &RunView) -> String {
    let mut s = String::from(
        "<h2 id=\"rejected\">Rejected before evaluation</h2>\n<table><tr><th>iteration</th>\
         <th>name</th><th>reason</th><th>hypothesis</th></tr>\n",
    );
    for r in &run.rejected {
        let _ = writeln!(
            s,
            "<tr><td class=\"num\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            r.iteration,
            esc(&r.name),
            esc(&r.reason),
            esc(&r.hypothesis)
        );
    }
    s += "</table>\n";
    s
}
