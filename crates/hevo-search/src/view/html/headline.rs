//! The headline at the top of the report: the run's key facts as a definition list.

use std::fmt::Write;

use super::format::fmt_est;
use crate::view::series::spend_per_iteration;
use crate::view::svg::esc;
use crate::view::RunView;

/// The title and the run's key facts: directory, state, strategy, pick (or best so far),
/// candidates, validation trials against full evaluation, and spend.
pub(super) fn headline(run: &RunView) -> String {
    let (trials, spend) = run.total();
    let state = run.state();
    let best = run.best();
    let mut s = format!(
        "<h1>hevo report: {}</h1>\n<dl class=\"key\">\n",
        esc(&run.name)
    );
    let mut row = |k: &str, v: String| {
        let _ = writeln!(s, "<dt>{}</dt><dd>{}</dd>", esc(k), v);
    };
    row(
        "run directory",
        format!("<code>{}</code>", esc(&run.dir.display().to_string())),
    );
    row("search", esc(&state));
    row("strategy", esc(run.strategy.as_deref().unwrap_or("–")));
    row(
        if run.finished { "pick" } else { "best so far" },
        best.map_or_else(
            || missing_pick(run),
            |b| {
                format!(
                    "<a href=\"#cand-{}\">{}</a> (iteration {}): <b class=\"num\">{}</b>",
                    b.seq,
                    esc(&b.name),
                    b.iteration,
                    esc(&fmt_est(b.estimate))
                )
            },
        ),
    );
    row(
        "candidates",
        format!(
            // A run its budget stopped mid-iteration has candidates of the iteration after
            // the last one done: "over N iterations" would miscount them.
            "{} archived ({} iteration(s) done), {} rejected before evaluation",
            run.candidates.len(),
            run.iterations_done(),
            run.rejected.len()
        ),
    );
    let full = spend_per_iteration(run).last().map_or(0, |a| a.full_trials);
    row(
        "validation trials",
        format!(
            "{trials} of {full} for full evaluation ({} tasks x {} trial(s) x {} candidates)",
            run.val_tasks,
            run.trials_per_task,
            run.candidates.len()
        ),
    );
    row(
        "spend",
        format!(
            "{} tokens, ${:.4}, {} model calls",
            spend.total_tokens(),
            spend.cost_usd,
            spend.calls
        ),
    );
    s += "</dl>\n";
    s
}

/// The pick cell when there is no candidate to show: the pick `search.json` names but the
/// archive lost, or none yet.
fn missing_pick(run: &RunView) -> String {
    match run.missing_pick() {
        Some(p) => format!(
            "<code>{}</code> (its directory is missing from <code>archive/candidates</code>: \
             restore it; <code>finalize</code> needs its code)",
            esc(p)
        ),
        None => "–".into(),
    }
}
