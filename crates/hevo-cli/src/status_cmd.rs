//! `hevo status`, `hevo show` and `hevo ls`: a run in the terminal, also while a search is
//! running (they only read the run directory).

use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::anyhow;
use hevo_runtime::printable::{one_line, printable};
use hevo_search::runner::Effort;
use hevo_search::view::diff::diff_dirs;
use hevo_search::view::series::spend_per_iteration;
use hevo_search::view::{list_runs, require_run, CandidateView, RunView, ViewError};
use hevo_stats::estimate::Estimate;
use serde_json::{json, Value};

use crate::words::counted;
use crate::CliError;

/// Arguments of `hevo status`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Safe to run while `hevo run` is writing the run directory.\n\n\
    Example:\n  hevo status examples/threshold/runs/threshold"
)]
pub struct StatusArgs {
    /// The run directory.
    #[arg(value_name = "RUN")]
    pub run: PathBuf,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `hevo show`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  hevo show examples/threshold/runs/threshold seed.i3c1")]
pub struct ShowArgs {
    /// The run directory.
    #[arg(value_name = "RUN")]
    pub run: PathBuf,
    /// The candidate's name (as `hevo status` lists it).
    #[arg(value_name = "CANDIDATE")]
    pub candidate: String,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `hevo ls`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  hevo ls\n  hevo ls examples/threshold/runs --json")]
pub struct LsArgs {
    /// The directory holding run directories.
    #[arg(value_name = "DIR", default_value = "runs")]
    pub dir: PathBuf,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Maps a view error to exit 2 (a run or candidate that does not exist) or 1.
pub fn view_error(e: ViewError) -> CliError {
    if e.is_user_error() {
        CliError::User(anyhow!("{e}"))
    } else {
        CliError::Internal(e.into())
    }
}

/// Writes `text` to stdout, without trailing blanks on its lines (padded empty columns).
fn print(text: &str) -> Result<ExitCode, CliError> {
    let mut tidy: String = text
        .lines()
        .map(|l| l.trim_end().to_string() + "\n")
        .collect();
    if !text.ends_with('\n') {
        tidy.pop();
    }
    let mut out = std::io::stdout().lock();
    match out.write_all(tidy.as_bytes()) {
        // A closed pipe (`| head`) is a clean stop.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(CliError::Internal(e.into())),
        _ => Ok(ExitCode::SUCCESS),
    }
}

fn est(e: Option<Estimate>) -> String {
    match e {
        Some(e) if e.value.is_finite() => {
            format!("{:.3} [{:.3}, {:.3}]", e.value, e.ci_low, e.ci_high)
        }
        _ => "-".into(),
    }
}

fn est_json(e: Option<Estimate>) -> Value {
    match e {
        Some(e) if e.value.is_finite() => {
            json!({"value": e.value, "se": e.se, "ci_low": e.ci_low, "ci_high": e.ci_high})
        }
        _ => Value::Null,
    }
}

/// Runs `hevo status`.
pub fn status(args: StatusArgs) -> Result<ExitCode, CliError> {
    let run = RunView::open(&args.run).map_err(view_error)?;
    if args.json {
        return print(&format!("{}\n", status_json(&run)));
    }
    print(&status_text(&run))
}

fn status_json(run: &RunView) -> Value {
    let (trials, spend) = run.total();
    let full = spend_per_iteration(run).last().map_or(0, |a| a.full_trials);
    json!({
        "run": run.name,
        "run_dir": run.dir,
        "finished": run.finished,
        "stopped_early": run.stopped_early,
        "missing_pick": run.missing_pick(),
        "strategy": run.strategy,
        "iterations_done": run.iterations_done(),
        "candidates": run.candidates.iter().map(|c| json!({
            "seq": c.seq, "name": c.name, "iteration": c.iteration, "parent": c.parent,
            "axis": c.axis, "status": c.status, "estimate": est_json(c.estimate),
            "trials": c.trials, "cost_usd": c.spend.cost_usd,
        })).collect::<Vec<_>>(),
        "rejected": run.rejected,
        "trials": trials,
        "full_trials": full,
        "val_tasks": run.val_tasks,
        "trials_per_task": run.trials_per_task,
        "spend": spend,
        "train": run.train,
        "best": run.best().map(|b| json!({"name": b.name, "iteration": b.iteration, "estimate": est_json(b.estimate)})),
        "tiers": run.tiers.iter().map(|(t, n)| (t.clone(), json!(n))).collect::<serde_json::Map<_, _>>(),
        "test": run.test.iter().map(|t| json!({"name": t.name, "role": t.role,
            "pass_rate": est_json(Some(t.pass_rate)), "tasks": t.tasks, "trials": t.trials,
            "cost_usd": t.cost_usd})).collect::<Vec<_>>(),
        "failures": run.failures.to_json(),
        "test_failures": run.test_failures.to_json(),
    })
}

/// The line of the trials on the train split (HarnessPro's core-set runs), whose spend no
/// validation total holds; nothing when there are none.
pub(crate) fn train_line(train: &Effort) -> String {
    if train.trials == 0 {
        return String::new();
    }
    format!(
        "core-set trials (train split): {}, {}; in no validation total\n",
        counted(train.trials, "trial"),
        train.spend
    )
}

/// Untrusted text of several lines (a hypothesis, a rejection's reason) inside hevo's
/// output: [`printable`], each line after the first indented, so none can pass for a line
/// of hevo's own.
fn continued(text: &str) -> String {
    printable(text).replace('\n', "\n    ")
}

fn status_text(run: &RunView) -> String {
    let (trials, spend) = run.total();
    let full = spend_per_iteration(run).last().map_or(0, |a| a.full_trials);
    let mut s = format!("run {}: {}\n", run.name, run.state());
    let _ = writeln!(s, "directory: {}", run.dir.display());
    let _ = writeln!(s, "strategy: {}", run.strategy.as_deref().unwrap_or("-"));
    let _ = writeln!(
        s,
        "iterations done: {}; candidates: {} archived, {} rejected",
        run.iterations_done(),
        run.candidates.len(),
        run.rejected.len()
    );
    let share = if full > 0 {
        100.0 * trials as f64 / full as f64
    } else {
        0.0
    };
    let _ = writeln!(
        s,
        "validation trials: {trials} of {full} for full evaluation ({share:.1}%)"
    );
    let _ = writeln!(s, "spend: {spend}");
    s += &train_line(&run.train);
    if let Some(p) = run.missing_pick() {
        let _ = writeln!(
            s,
            "pick: {p} (its directory is missing from archive/candidates: restore it; \
             finalize needs its code)"
        );
    }
    if let Some(b) = run.best() {
        let _ = writeln!(
            s,
            "{}: {} (iteration {}) {}",
            if run.finished { "pick" } else { "best so far" },
            one_line(&b.name),
            b.iteration,
            est(b.estimate)
        );
    }
    if !run.tiers.is_empty() {
        let tiers: Vec<String> = run
            .tiers
            .iter()
            .map(|(t, n)| format!("{t} {}", one_line(n)))
            .collect();
        let _ = writeln!(s, "tiers: {}", tiers.join(", "));
    }
    let _ = writeln!(
        s,
        "\n  {:>3} {:<24} {:>4} {:<24} {:<13} {:<12} {:>20} {:>6}",
        "#", "candidate", "iter", "parent", "axis", "status", "estimate [95% CI]", "trials"
    );
    for c in &run.candidates {
        let _ = writeln!(
            s,
            "  {:>3} {:<24} {:>4} {:<24} {:<13} {:<12} {:>20} {:>6}",
            c.seq,
            one_line(&c.name),
            c.iteration,
            one_line(c.parent.as_deref().unwrap_or("-")),
            one_line(&c.axis),
            c.status,
            match (c.estimate, c.raw_mean()) {
                (None, Some(m)) => format!("raw mean {m:.3}"),
                (e, _) => est(e),
            },
            c.trials
        );
    }
    for r in &run.rejected {
        let _ = writeln!(
            s,
            "  rejected in iteration {}: {}: {}",
            r.iteration,
            one_line(&r.name),
            continued(&r.reason)
        );
    }
    for (what, failures) in [("validation", &run.failures), ("test", &run.test_failures)] {
        if !failures.is_empty() {
            let _ = writeln!(
                s,
                "\nfailed {what} trials: {}, the first of each class:",
                failures.total()
            );
            for line in failures.lines("  ") {
                let _ = writeln!(s, "{line}");
            }
        }
    }
    if !run.test.is_empty() {
        let _ = writeln!(s, "\ntest split (finalize):");
        for t in &run.test {
            let _ = writeln!(
                s,
                "  {:<24} {:<12} {:>20} on {} tasks",
                one_line(&t.name),
                t.role,
                est(Some(t.pass_rate)),
                t.tasks
            );
        }
        // A search run further after finalize can have picked another candidate.
        if let Some(pick) = run
            .pick
            .as_ref()
            .filter(|p| !run.test.iter().any(|t| &t.name == *p))
        {
            let _ = writeln!(
                s,
                "  (the pick `{}` has no test score yet: the rows above are of an earlier \
                 finalize; run `hevo finalize {}`)",
                one_line(pick),
                run.dir.display()
            );
        }
    }
    s
}

/// Runs `hevo show`.
pub fn show(args: ShowArgs) -> Result<ExitCode, CliError> {
    let run = RunView::open(&args.run).map_err(view_error)?;
    let c = run.candidate(&args.candidate).map_err(view_error)?;
    let diff = parent_diff(&run, c);
    if args.json {
        let mut doc = serde_json::to_value(c).map_err(|e| CliError::Internal(e.into()))?;
        doc["estimate"] = est_json(c.estimate);
        doc["diff"] = json!(diff);
        doc["test"] = json!(run.test.iter().find(|t| t.name == c.name).map(|t| json!({
            "role": t.role, "pass_rate": est_json(Some(t.pass_rate)), "tasks": t.tasks,
            "trials": t.trials, "cost_usd": t.cost_usd})));
        return print(&format!("{doc}\n"));
    }
    print(&show_text(&run, c, diff.as_deref()))
}

/// The diff against the parent, when the parent is in the archive.
fn parent_diff(run: &RunView, c: &CandidateView) -> Option<String> {
    let parent = run
        .candidates
        .iter()
        .find(|o| Some(&o.name) == c.parent.as_ref())?;
    Some(diff_dirs(&parent.dir.join("code"), &c.dir.join("code")))
}

fn show_text(run: &RunView, c: &CandidateView, diff: Option<&str>) -> String {
    let mut s = format!(
        "candidate {} (#{}, iteration {}, {})\n",
        one_line(&c.name),
        c.seq,
        c.iteration,
        one_line(&c.axis)
    );
    let parent = c.parent.as_deref().map_or("- (a seed)".into(), one_line);
    let _ = writeln!(s, "parent: {parent}");
    let _ = writeln!(s, "hypothesis: {}", continued(&c.hypothesis));
    let _ = writeln!(s, "status: {}", c.status);
    let se = c.estimate.map_or(String::new(), |e| {
        if e.se.is_finite() {
            format!(" (se {:.3})", e.se)
        } else {
            String::new()
        }
    });
    let _ = writeln!(s, "estimate: {}{se}", est(c.estimate));
    let _ = writeln!(
        s,
        "trials: {} on {} validation task(s); spend: {} model calls, {} tokens, ${:.4}",
        c.trials,
        c.tasks.len(),
        c.spend.calls,
        c.spend.total_tokens(),
        c.spend.cost_usd
    );
    let _ = writeln!(s, "archive: {}", c.dir.display());
    // The harness folder itself (what `hevo eval` takes), not the archive entry around it.
    let _ = writeln!(s, "code: {}", c.dir.join("code").display());
    if let Some(t) = &c.trace_dir {
        let _ = writeln!(s, "traces: {}", t.display());
    }
    if let Some(t) = run.test.iter().find(|t| t.name == c.name) {
        let _ = writeln!(
            s,
            "test ({}): {} on {} tasks",
            t.role,
            est(Some(t.pass_rate)),
            t.tasks
        );
    }
    // A sampled estimate weighs each task by 1 / its inclusion probability: shown, so that a
    // surprising estimate can be traced to the rarely drawn tasks that moved it.
    let sampled = c.sampled();
    if let Some(mean) = c.raw_mean().filter(|_| sampled) {
        let _ = writeln!(
            s,
            "sampled: mean outcome {mean:.3} on the {} of {} validation tasks it ran; the \
             estimate weighs each task's outcome by 1 / the chance the task had to be drawn \
             (weight, below), so a rarely drawn task moves it most",
            c.tasks.len(),
            run.val_tasks
        );
    }
    if !c.tasks.is_empty() {
        let weight = if sampled { "  weight" } else { "" };
        let _ = writeln!(
            s,
            "\n  {:<20} {:>7} {:>6}{weight} {:<10} error",
            "task", "outcome", "trials", "status"
        );
        for t in &c.tasks {
            let w = match (sampled, t.weight()) {
                (false, _) => String::new(),
                (true, Some(w)) => format!(" {w:>7.1}"),
                (true, None) => format!(" {:>7}", "-"),
            };
            let _ = writeln!(
                s,
                "  {:<20} {:>7.2} {:>6}{w} {:<10} {}",
                t.task,
                t.outcome,
                t.trials,
                t.status,
                printable(t.error.as_deref().unwrap_or(""))
            );
        }
    }
    match diff {
        Some("") => s += "\nno change in code against its parent\n",
        Some(d) => {
            let _ = write!(
                s,
                "\ndiff against {}:\n{}",
                one_line(c.parent.as_deref().unwrap_or("")),
                printable(d)
            );
        }
        None => {}
    }
    s
}

/// Runs `hevo ls`.
pub fn ls(args: LsArgs) -> Result<ExitCode, CliError> {
    if !args.dir.is_dir() {
        return Err(CliError::User(anyhow!(
            "`{}` is not a directory; pass the directory that holds your runs (default: runs/): \
             `hevo run DIR` keeps its runs in DIR/runs/, beside its hevo.toml (e.g. \
             `hevo ls examples/threshold/runs`)",
            args.dir.display()
        )));
    }
    // A run directory itself lists as that one run (its `smoke/` and `test/` stores are
    // its own, not evaluations of their own).
    let one_run = require_run(&args.dir).is_ok();
    let dirs = if one_run {
        vec![args.dir.clone()]
    } else {
        list_runs(&args.dir)
    };
    let runs: Vec<(PathBuf, Result<RunView, ViewError>)> = dirs
        .into_iter()
        .map(|p| {
            let v = RunView::open(&p);
            (p, v)
        })
        .collect();
    if args.json {
        let evals = if one_run {
            vec![]
        } else {
            eval_runs(&args.dir)
        };
        let doc: Vec<Value> = runs
            .iter()
            .map(|(p, v)| match v {
                Ok(r) => {
                    let (trials, spend) = r.total();
                    json!({"kind": "search", "run": r.name, "run_dir": p, "finished": r.finished,
                       "candidates": r.candidates.len(), "iterations_done": r.iterations_done(),
                       "trials": trials, "cost_usd": spend.cost_usd,
                       "best": r.best().map(|b| json!({"name": b.name, "estimate": est_json(b.estimate)}))})
                }
                Err(e) => json!({"kind": "search", "run_dir": p, "error": e.to_string()}),
            })
            // The text lists `hevo eval` runs too; so does the JSON.
            .chain(evals.iter().map(|p| json!({"kind": "eval", "run_dir": p})))
            .collect();
        return print(&format!("{}\n", json!(doc)));
    }
    print(&ls_text(&args.dir, &runs, one_run))
}

fn ls_text(dir: &Path, runs: &[(PathBuf, Result<RunView, ViewError>)], one_run: bool) -> String {
    let evals: Vec<String> = if one_run {
        vec![]
    } else {
        eval_runs(dir).iter().map(|p| run_label(dir, p)).collect()
    };
    let evals_line = if evals.is_empty() {
        String::new()
    } else {
        format!(
            "\nevaluations (`hevo eval`; the same command again prints its report from the store): {}\n",
            evals.join(", ")
        )
    };
    if runs.is_empty() {
        return format!("no search runs under {}\n{evals_line}", dir.display());
    }
    let mut s = format!(
        "{:<28} {:<11} {:>5} {:>10} {:>7} {:<24} {:>20}\n",
        "run", "state", "iters", "candidates", "trials", "best", "estimate [95% CI]"
    );
    for (p, v) in runs {
        match v {
            Ok(r) => {
                let (trials, _) = r.total();
                let best = r.best();
                let _ = writeln!(
                    s,
                    "{:<28} {:<11} {:>5} {:>10} {:>7} {:<24} {:>20}",
                    run_label(dir, p),
                    if r.finished {
                        "finished"
                    } else {
                        "in progress"
                    },
                    r.iterations_done(),
                    r.candidates.len(),
                    trials,
                    one_line(best.map_or("-", |b| b.name.as_str())),
                    est(best.and_then(|b| b.estimate))
                );
            }
            Err(e) => {
                let _ = writeln!(s, "{:<28} unreadable: {e}", run_label(dir, p));
            }
        }
    }
    s + &evals_line
}

/// The directories under `dir` that `hevo eval` wrote (a store, no archive), sorted by name.
fn eval_runs(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.join("hevo.db").is_file() && !p.join("archive").exists())
        .collect();
    out.sort();
    out
}

/// A run's path as `ls` prints it: relative to the listed directory (the directory itself
/// when it is the run).
fn run_label(dir: &Path, run: &Path) -> String {
    match run.strip_prefix(dir) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
        _ => run.display().to_string(),
    }
}
