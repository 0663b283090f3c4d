//! The self-contained HTML report of a run (`runs/<run>/report.html`): inline SVG charts,
//! inline CSS, every number in the page text (a script only sorts the candidate table), no
//! network. Every string from the run (names and hypotheses come from an LLM) is escaped.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use super::diff::diff_dirs;
use super::series::{best_per_iteration, pareto, pool_per_iteration, spend_per_iteration};
use super::svg::{count_ticks, esc, score_ticks, value_ticks, Frame};
use super::{CandidateView, RunView};

/// The report's file name inside the run directory.
pub const REPORT_FILE: &str = "report.html";

/// The ids of the charts every report has (a test checks each is in the page).
pub const CHART_IDS: [&str; 4] = [
    "chart-best",
    "chart-candidates",
    "chart-spend",
    "chart-pool",
];

/// Colors of the proposer axes; any other axis gets [`OTHER_COLOR`].
const AXIS_COLORS: [(&str, &str); 3] = [
    ("seed", "#444444"),
    ("exploitation", "#1f77b4"),
    ("exploration", "#d62728"),
];
const OTHER_COLOR: &str = "#9467bd";

fn axis_color(axis: &str) -> &'static str {
    AXIS_COLORS
        .iter()
        .find(|(a, _)| *a == axis)
        .map_or(OTHER_COLOR, |(_, c)| c)
}

/// Renders the report and writes it to `<run>/report.html`; returns its path.
pub fn write_report(run: &RunView) -> std::io::Result<PathBuf> {
    let path = run.dir.join(REPORT_FILE);
    crate::archive::write_atomic(&path, render(run).as_bytes())?;
    Ok(path)
}

/// The report as one HTML document.
pub fn render(run: &RunView) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>hevo report: {}</title><style>{CSS}</style></head><body>\n",
        esc(&run.name)
    );
    s += &headline(run);
    s += "<h2 id=\"best\">Best estimate per iteration</h2>\n";
    s += "<p class=\"note\">The best candidate proposed up to each iteration, by its latest \
          estimate; bars are 95% intervals.</p>\n";
    s += &chart_best(run);
    s += "<h2 id=\"candidates\">Every candidate</h2>\n";
    s += "<p class=\"note\">Each candidate's estimate at the iteration that proposed it, \
          colored by the proposer's axis; bars are 95% intervals.</p>\n";
    s += &chart_candidates(run);
    s += "<h2 id=\"pareto\">Pass rate against cost</h2>\n";
    s += &chart_pareto(run);
    s += "<h2 id=\"spend\">Evaluation spend</h2>\n";
    s += &spend_section(run);
    s += "<h2 id=\"pool\">Task pool</h2>\n";
    s += "<p class=\"note\">Validation tasks by how often the candidates proposed so far \
          solved them: never, always, in the frontier band (1/3 to 2/3 of trials, where \
          candidates differ), or otherwise; unseen tasks have no trial yet.</p>\n";
    s += &chart_pool(run);
    if !run.test.is_empty() {
        s += &test_section(run);
    }
    s += &candidate_table(run);
    if !run.rejected.is_empty() {
        s += &rejected_table(run);
    }
    s += "<h2 id=\"details\">Candidates in detail</h2>\n";
    for c in &run.candidates {
        s += &candidate_section(run, c);
    }
    s += "<footer>Written by <code>hevo report</code>; all numbers are read from the run \
          directory (hevo.db, archive/, search.json, test/).</footer>\n";
    s += &format!("<script>{SORT_JS}</script>\n</body></html>\n");
    s
}

fn fmt_est(e: Option<hevo_stats::estimate::Estimate>) -> String {
    match e {
        Some(e) if e.value.is_finite() => {
            format!("{:.3} [{:.3}, {:.3}]", e.value, e.ci_low, e.ci_high)
        }
        _ => "–".into(),
    }
}

fn headline(run: &RunView) -> String {
    let (trials, spend) = run.total();
    let state = if run.finished {
        "finished"
    } else {
        "in progress (or stopped)"
    };
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
    row("search", esc(state));
    row("strategy", esc(run.strategy.as_deref().unwrap_or("–")));
    row(
        if run.finished { "pick" } else { "best so far" },
        best.map_or("–".into(), |b| {
            format!(
                "<a href=\"#cand-{}\">{}</a> (iteration {}): <b class=\"num\">{}</b>",
                b.seq,
                esc(&b.name),
                b.iteration,
                esc(&fmt_est(b.estimate))
            )
        }),
    );
    row(
        "candidates",
        format!(
            "{} archived over {} iteration(s), {} rejected before evaluation",
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

fn chart_best(run: &RunView) -> String {
    let best = best_per_iteration(run);
    let f = Frame::new(-0.25, run.iterations_done() as f64 + 0.25, 0.0, 1.0);
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

fn chart_candidates(run: &RunView) -> String {
    let f = Frame::new(-0.5, run.iterations_done() as f64 + 0.5, 0.0, 1.0);
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

fn chart_pareto(run: &RunView) -> String {
    let p = pareto(run);
    let max_cost = p.points.iter().map(|x| x.2).fold(0.0, f64::max);
    let x_ticks = value_ticks(if max_cost > 0.0 { max_cost } else { 1.0 });
    let x_max = x_ticks.last().map_or(1.0, |t| t.0);
    let f = Frame::new(0.0, x_max, 0.0, 1.0);
    let tiers = ["lite", "medium", "heavy"];
    let mut s = format!(
        "<p class=\"note\">Each candidate's estimate against its mean {} on validation; \
         the line joins the Pareto front (no candidate is both better and cheaper), and \
         the lite, medium and heavy picks are HarnessPro's closest-to-ideal candidates \
         under cost-leaning, balanced and pass-rate-leaning weights, among those at least \
         as good as the best seed (picks are drawn larger; a dark ring marks the front).{}</p>\n",
        p.cost_label,
        if max_cost > 0.0 {
            ""
        } else {
            " No trial used a token here, so every candidate sits at cost 0."
        }
    );
    s += &f.open(
        CHART_IDS[2],
        "estimate against cost per trial, with the Pareto front",
    );
    s += &f.axes_with(p.cost_label, &x_ticks, "estimate", &score_ticks());
    let mut front: Vec<(f64, f64)> = p
        .points
        .iter()
        .filter(|x| p.front.contains(&x.0))
        .map(|x| (x.2, x.1))
        .collect();
    front.sort_by(|a, b| a.0.total_cmp(&b.0));
    if front.len() > 1 {
        let pts: Vec<String> = front
            .iter()
            .map(|(c, v)| format!("{:.1},{:.1}", f.x(*c), f.y(*v)))
            .collect();
        let _ = writeln!(
            s,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"#ff7f0e\" stroke-width=\"1.5\"/>",
            pts.join(" ")
        );
    }
    for &(seq, value, cost) in &p.points {
        let c = &run.candidates[run
            .candidates
            .iter()
            .position(|c| c.seq == seq)
            .unwrap_or(0)];
        let picked: Vec<&str> = tiers
            .iter()
            .zip(p.picks)
            .filter(|(_, k)| *k == Some(seq))
            .map(|(t, _)| *t)
            .collect();
        let on_front = p.front.contains(&seq);
        let (x, y) = (f.x(cost), f.y(value));
        let _ = writeln!(
            s,
            "<a href=\"#cand-{seq}\"><circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{}\" fill=\"{}\" stroke=\"#333\" stroke-width=\"{}\"><title>{}: {:.3} at {} {}{}</title></circle></a>",
            if picked.is_empty() { 4.5 } else { 6.5 },
            axis_color(&c.axis),
            if on_front { 1.5 } else { 0.0 },
            esc(&c.name),
            value,
            cost_text(p.cost_label, cost),
            esc(p.cost_label),
            if picked.is_empty() { String::new() } else { format!(" ({} pick)", picked.join(", ")) }
        );
    }
    s += &f.legend(0, "#ff7f0e", "Pareto front");
    s += "</svg>\n";
    let _ = writeln!(
        s,
        "<table class=\"small\"><tr><th>pick</th><th>candidate</th><th>estimate</th><th>{}</th></tr>",
        esc(p.cost_label)
    );
    for (tier, k) in tiers.iter().zip(p.picks) {
        let Some(&(seq, value, cost)) = k.and_then(|k| p.points.iter().find(|x| x.0 == k)) else {
            continue;
        };
        let name = run
            .candidates
            .iter()
            .find(|c| c.seq == seq)
            .map_or("", |c| c.name.as_str());
        let _ = writeln!(
            s,
            "<tr><td>{tier}</td><td><a href=\"#cand-{seq}\">{}</a></td><td class=\"num\">{value:.3}</td><td class=\"num\">{}</td></tr>",
            esc(name),
            cost_text(p.cost_label, cost)
        );
    }
    s += "</table>\n";
    s
}

/// A cost per trial as text: whole tokens, or dollars to a hundredth of a cent.
fn cost_text(label: &str, cost: f64) -> String {
    if label.starts_with("tokens") {
        format!("{cost:.0}")
    } else {
        format!("${cost:.4}")
    }
}

fn spend_section(run: &RunView) -> String {
    let series = spend_per_iteration(run);
    let max = series.last().map_or(0, |a| a.full_trials.max(a.trials)) as f64;
    let ticks = count_ticks(max);
    let top = ticks.last().map_or(1.0, |t| t.0);
    let f = Frame::new(-0.5, run.iterations_done() as f64 + 0.5, 0.0, top);
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
    }
    s
}

fn chart_pool(run: &RunView) -> String {
    let pool = pool_per_iteration(run);
    let top = run.val_tasks.max(1) as f64;
    let f = Frame::new(-0.5, run.iterations_done() as f64 + 0.5, 0.0, top);
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

fn test_section(run: &RunView) -> String {
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

fn candidate_table(run: &RunView) -> String {
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

fn rejected_table(run: &RunView) -> String {
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

/// A path as a link from the report (in the run directory): relative when inside it.
fn href(run_dir: &Path, target: &Path) -> String {
    let rel = target.strip_prefix(run_dir).map_or_else(
        |_| format!("file://{}", target.display()),
        |r| r.display().to_string(),
    );
    esc(&rel)
}

fn candidate_section(run: &RunView, c: &CandidateView) -> String {
    let mut s = format!(
        "<section class=\"cand\" id=\"cand-{}\"><h3>{} <span class=\"muted\">#{} · iteration {} · {}</span></h3>\n",
        c.seq,
        esc(&c.name),
        c.seq,
        c.iteration,
        esc(&c.axis)
    );
    let _ = writeln!(
        s,
        "<p><b>Estimate:</b> <span class=\"num\">{}</span> · <b>status:</b> {} · <b>trials:</b> {} · \
         <b>spend:</b> {} tokens, ${:.4}</p>\n<p><b>Hypothesis:</b> {}</p>",
        esc(&fmt_est(c.estimate)),
        esc(&c.status),
        c.trials,
        c.spend.total_tokens(),
        c.spend.cost_usd,
        esc(&c.hypothesis)
    );
    let mut links = vec![format!(
        "<a href=\"{}\">archive directory</a>",
        href(&run.dir, &c.dir)
    )];
    if let Some(t) = &c.trace_dir {
        links.push(format!(
            "<a href=\"{}\">trial traces</a>",
            href(&run.dir, t)
        ));
    }
    let _ = writeln!(s, "<p>{}</p>", links.join(" · "));
    if !c.tasks.is_empty() {
        let solved = c.tasks.iter().filter(|t| t.outcome >= 1.0).count();
        let _ = writeln!(
            s,
            "<details><summary>{} task(s) evaluated, {solved} always solved</summary><table class=\"small\">\
             <tr><th>task</th><th>outcome</th><th>trials</th><th>status</th><th>error</th></tr>",
            c.tasks.len()
        );
        for t in &c.tasks {
            let _ = writeln!(
                s,
                "<tr><td>{}</td><td class=\"num\">{:.2}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td></tr>",
                esc(&t.task),
                t.outcome,
                t.trials,
                esc(&t.status),
                esc(t.error.as_deref().unwrap_or(""))
            );
        }
        s += "</table></details>\n";
    }
    match c
        .parent
        .as_deref()
        .and_then(|p| run.candidates.iter().find(|o| o.name == p))
    {
        Some(parent) => {
            let diff = diff_dirs(&parent.dir.join("code"), &c.dir.join("code"));
            let _ = write!(
                s,
                "<details open><summary>diff against {}</summary>",
                esc(&parent.name)
            );
            if diff.is_empty() {
                s += "<p class=\"muted\">no change in code</p>";
            } else {
                s += &diff_html(&diff);
            }
            s += "</details>\n";
        }
        None if c.parent.is_some() => {
            s += "<p class=\"muted\">its parent is not in the archive: no diff</p>\n";
        }
        None => s += "<p class=\"muted\">a seed: no parent to diff against</p>\n",
    }
    s += "</section>\n";
    s
}

/// A unified diff as a `<pre>` with added and removed lines marked.
fn diff_html(diff: &str) -> String {
    let mut s = String::from("<pre class=\"diff\">");
    for line in diff.lines() {
        let class = if line.starts_with("+++") || line.starts_with("---") {
            "file"
        } else if line.starts_with('+') {
            "add"
        } else if line.starts_with('-') {
            "del"
        } else if line.starts_with("@@") {
            "hunk"
        } else {
            "ctx"
        };
        // Block spans are the lines; a newline inside the <pre> would double them.
        let _ = write!(s, "<span class=\"{class}\">{}</span>", esc(line));
    }
    s += "</pre>";
    s
}

const CSS: &str = "
body{font:15px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1100px;margin:24px auto;padding:0 16px;color:#222}
h1{font-size:24px;margin:0 0 12px}h2{font-size:19px;margin:28px 0 6px;border-bottom:1px solid #ddd}
h3{font-size:16px;margin:0 0 6px}
dl.key{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:0}dt{color:#666}dd{margin:0}
.note,.muted{color:#666}.num{font-variant-numeric:tabular-nums;white-space:nowrap}
table{border-collapse:collapse;margin:8px 0}th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4}table.small{font-size:13px}
table.sortable th{cursor:pointer}
.dot{display:inline-block;width:10px;height:10px;border-radius:5px;margin-right:5px}
svg.chart{display:block;max-width:100%;height:auto;background:#fff}
svg .grid{stroke:#eee}svg .axis{stroke:#888}svg text{font-size:12px;fill:#333}svg .label{font-size:13px}
section.cand{border:1px solid #ddd;border-radius:6px;padding:10px 14px;margin:12px 0}
pre.diff{background:#fafafa;border:1px solid #eee;padding:8px;overflow-x:auto;font-size:12.5px;line-height:1.35}
pre.diff span{display:block;min-height:1.35em}.nowrap{white-space:nowrap}.add{background:#e6ffec;color:#116329}.del{background:#ffebe9;color:#82071e}
.hunk{color:#6639ba}.file{font-weight:bold}
footer{margin:32px 0;color:#888;font-size:13px}
";

/// Sorts the candidate table by a clicked column (numbers numerically); the page works
/// without it.
const SORT_JS: &str = "
document.querySelectorAll('table.sortable').forEach(function (table) {
  table.querySelectorAll('th').forEach(function (th, col) {
    th.addEventListener('click', function () {
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      var asc = th.getAttribute('data-sort') !== 'asc';
      table.querySelectorAll('th').forEach(function (h) { h.removeAttribute('data-sort'); });
      th.setAttribute('data-sort', asc ? 'asc' : 'desc');
      var key = function (r) {
        var t = r.cells[col].textContent.trim();
        var n = parseFloat(t.replace(/^\\[/, ''));
        return isNaN(n) ? t : n;
      };
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        var c = (typeof x === 'number' && typeof y === 'number') ? x - y : String(x).localeCompare(String(y));
        return asc ? c : -c;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
";
