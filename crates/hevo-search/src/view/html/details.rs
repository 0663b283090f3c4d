//! "Candidates in detail": one section per candidate, with links into the run directory,
//! its per-task outcomes and its code diff against its parent.

use std::fmt::Write;
use std::path::{Component, Path, PathBuf};

use super::format::fmt_est;
use crate::view::diff::diff_dirs;
use crate::view::svg::esc;
use crate::view::{CandidateView, RunView};

/// A path as a link from the report in `page_dir`: relative to that folder when it is in
/// the run directory (so the page keeps working when both move together), `file://`
/// otherwise.
fn href(run_dir: &Path, page_dir: &Path, target: &Path) -> String {
    let link = match target.starts_with(run_dir) {
        true => relative(page_dir, target).display().to_string(),
        false => format!("file://{}", target.display()),
    };
    esc(&link)
}

/// The path from the folder `from` to `to`, both absolute: `..` for each of `from`'s
/// components past what they share, then the rest of `to` (`.` when they are the same).
fn relative(from: &Path, to: &Path) -> PathBuf {
    let (a, b): (Vec<Component>, Vec<Component>) =
        (from.components().collect(), to.components().collect());
    let shared = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut rel: PathBuf = a[shared..].iter().map(|_| Component::ParentDir).collect();
    rel.extend(&b[shared..]);
    if rel.as_os_str().is_empty() {
        rel.push(".");
    }
    rel
}

/// One candidate's section: its numbers and hypothesis, links to its archive directory and
/// traces (from the page in `page_dir`), its per-task outcomes (folded) and its diff
/// against its parent.
pub(super) fn candidate_section(run: &RunView, c: &CandidateView, page_dir: &Path) -> String {
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
        href(&run.dir, page_dir, &c.dir)
    )];
    if let Some(t) = &c.trace_dir {
        links.push(format!(
            "<a href=\"{}\">trial traces</a>",
            href(&run.dir, page_dir, t)
        ));
    }
    let _ = writeln!(s, "<p>{}</p>", links.join(" · "));
    if !c.tasks.is_empty() {
        let solved = c.tasks.iter().filter(|t| t.outcome >= 1.0).count();
        // A sampled estimate weighs each task by 1 / its inclusion probability (`hevo show`).
        let sampled = c.sampled();
        let weight_head = if sampled {
            "<th title=\"1 / the chance the task had to be drawn: its weight in the estimate\">weight</th>"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "<details><summary>{} task(s) evaluated, {solved} always solved</summary><table class=\"small\">\
             <tr><th>task</th><th>outcome</th><th>trials</th>{weight_head}<th>status</th><th>error</th></tr>",
            c.tasks.len()
        );
        for t in &c.tasks {
            let weight = match (sampled, t.weight()) {
                (false, _) => String::new(),
                (true, Some(w)) => format!("<td class=\"num\">{w:.1}</td>"),
                (true, None) => "<td class=\"num\">-</td>".to_string(),
            };
            let _ = writeln!(
                s,
                "<tr><td>{}</td><td class=\"num\">{:.2}</td><td class=\"num\">{}</td>{weight}<td>{}</td><td>{}</td></tr>",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_from_the_page_to_the_run_are_relative_to_its_folder() {
        let run = Path::new("/w/runs/r");
        let at = |page: &str, target: &str| href(run, Path::new(page), Path::new(target));
        assert_eq!(at("/w/runs/r", "/w/runs/r/traces/c1"), "traces/c1");
        assert_eq!(
            at("/tmp/out", "/w/runs/r/archive/x"),
            "../../w/runs/r/archive/x"
        );
        assert_eq!(at("/w/runs/r/sub", "/w/runs/r/archive"), "../archive");
        assert_eq!(at("/w/runs/r", "/w/runs/r"), ".");
        assert_eq!(at("/w/runs/r", "/elsewhere/t"), "file:///elsewhere/t");
    }
}
