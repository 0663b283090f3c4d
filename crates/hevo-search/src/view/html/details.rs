//! "Candidates in detail": one section per candidate, with links into the run directory,
//! its per-task outcomes and its code diff against its parent.

use std::fmt::Write;
use std::path::Path;

use super::format::fmt_est;
use crate::view::diff::diff_dirs;
use crate::view::svg::esc;
use crate::view::{CandidateView, RunView};

/// A path as a link from the report (in the run directory): relative when inside it.
fn href(run_dir: &Path, target: &Path) -> String {
    let rel = target.strip_prefix(run_dir).map_or_else(
        |_| format!("file://{}", target.display()),
        |r| r.display().to_string(),
    );
    esc(&rel)
}

/// One candidate's section: its numbers and hypothesis, links to its archive directory and
/// traces, its per-task outcomes (folded) and its diff against its parent.
pub(super) fn candidate_section(run: &RunView, c: &CandidateView) -> String {
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
