//! The self-contained HTML report of a run (`runs/<run>/report.html`, or the file `hevo
//! report --out` names; its links into the run directory are relative to its folder):
//! inline SVG charts, inline CSS, every number in the page text (a script only sorts the
//! candidate table), no network. Every string from the run (names and hypotheses come from
//! an LLM) is escaped.
//!
//! [`render`] lays the page out top to bottom as docs/report.md describes it, one part per
//! file: `headline.rs`, the charts (`estimates.rs`, `pareto.rs`, `spend.rs`, `pool.rs`,
//! drawn with `view/svg.rs`), `tables.rs`, the per-candidate `details.rs`, the inline CSS
//! and script in `assets.rs`, and what they share in `format.rs`.

mod assets;
mod details;
mod estimates;
mod format;
mod headline;
mod pareto;
mod pool;
mod spend;
mod tables;

use std::fmt::Write;
use std::path::Path;

use self::assets::{CSS, SORT_JS};
use self::details::candidate_section;
use self::estimates::{chart_best, chart_candidates};
use self::headline::headline;
use self::pareto::chart_pareto;
use self::pool::chart_pool;
use self::spend::spend_section;
use self::tables::{candidate_table, rejected_table, test_section};
use super::svg::esc;
use super::RunView;

/// The report's file name inside the run directory, where it is written by default.
pub const REPORT_FILE: &str = "report.html";

/// The ids of the charts every report has (a test checks each is in the page).
pub const CHART_IDS: [&str; 4] = [
    "chart-best",
    "chart-candidates",
    "chart-spend",
    "chart-pool",
];

/// The id of the pass rate against cost chart, which only a pareto run's report has.
pub const PARETO_CHART_ID: &str = "chart-pareto";

/// Renders the report and writes it to `path` (by default `<run>/`[`REPORT_FILE`]), its
/// links relative to `path`'s folder. A folder that does not exist is `NotFound`.
pub fn write_report(run: &RunView, path: &Path) -> std::io::Result<()> {
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let page_dir = std::fs::canonicalize(folder)?;
    crate::archive::write_atomic(path, render(run, &page_dir).as_bytes())
}

/// The report as one HTML document, to be saved in the folder `page_dir` (absolute,
/// canonical like [`RunView::dir`]), which its links start from.
pub fn render(run: &RunView, page_dir: &Path) -> String {
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
        s += &candidate_section(run, c, page_dir);
    }
    s += "<footer>Written by <code>hevo report</code>; all numbers are read from the run \
          directory (hevo.db, archive/, search.json, test/).</footer>\n";
    s += &format!("<script>{SORT_JS}</script>\n</body></html>\n");
    s
}
