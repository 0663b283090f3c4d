//! The progress reporter of `hevo eval`: turns the engine's typed events into a bar on a
//! terminal or throttled plain lines otherwise (and in CI), always on stderr (stdout is
//! data only), with the first trial of each failure class shown as it happens. The bar
//! draws no colors, so `NO_COLOR` needs nothing here.

use std::io::IsTerminal;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use hevo_runtime::executor::ProgressEvent;
use hevo_runtime::failures::{self, Failures, TrialRef};
use hevo_search::run::clock;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How progress is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Nothing.
    Quiet,
    /// A bar on the terminal.
    Bar,
    /// A plain line at most once a second.
    Lines,
}

impl Mode {
    /// Nothing with `--no-progress`; a bar on a terminal stderr; plain lines when stderr
    /// is not a terminal or `CI` is set (as CI services do).
    pub fn choose(no_progress: bool) -> Mode {
        Mode::of(
            no_progress,
            std::io::stderr().is_terminal(),
            std::env::var("CI").ok().as_deref(),
        )
    }

    /// [`Mode::choose`] from its inputs.
    pub fn of(no_progress: bool, terminal: bool, ci: Option<&str>) -> Mode {
        let ci = ci.is_some_and(|v| !v.is_empty() && v != "0" && v != "false");
        if no_progress {
            Mode::Quiet
        } else if terminal && !ci {
            Mode::Bar
        } else {
            Mode::Lines
        }
    }
}

/// Consumes events until the sender is dropped.
pub fn render(rx: mpsc::Receiver<ProgressEvent>, mode: Mode) {
    let mut bar: Option<ProgressBar> = None;
    let mut last_line = Instant::now();
    let mut started = Instant::now();
    let mut pending_line: Option<String> = None;
    let mut seen = std::collections::HashSet::new();
    for ev in rx {
        match ev {
            ProgressEvent::RunStarted {
                total,
                already_done,
                jobs,
            } => {
                started = Instant::now();
                if mode != Mode::Quiet {
                    if already_done > 0 {
                        eprintln!(
                            "hevo: resuming: {already_done} trial(s) already finished, {total} to run"
                        );
                    } else {
                        eprintln!("hevo: {total} trial(s) to run on {jobs} job(s)");
                    }
                }
                if mode == Mode::Bar && total > 0 {
                    let b = ProgressBar::with_draw_target(
                        Some(total as u64),
                        ProgressDrawTarget::stderr_with_hz(4),
                    );
                    b.set_style(
                        ProgressStyle::with_template(
                            "{bar:30} {pos}/{len} trials  {msg}  [{elapsed_precise} < {eta}]",
                        )
                        .unwrap_or_else(|_| ProgressStyle::default_bar()),
                    );
                    bar = Some(b);
                }
            }
            ProgressEvent::TrialStarted { .. } => {}
            ProgressEvent::TrialRetry {
                task_id,
                trial_index,
                attempt,
                error,
            } => {
                let line = format!(
                    "hevo: retrying {task_id} #{trial_index} after attempt {attempt}: {error}"
                );
                match (&bar, mode) {
                    (Some(b), _) => b.println(line),
                    (None, Mode::Lines) => eprintln!("{line}"),
                    _ => {}
                }
            }
            ProgressEvent::TrialFinished {
                task_id,
                trial_index,
                status,
                done,
                total,
                mean_outcome,
                error,
                trace,
                ..
            } => {
                // The first trial of each failure class, as it happens.
                let class = failures::class_of(status.as_str(), error.as_deref());
                if let Some(class) = class.filter(|c| mode != Mode::Quiet && seen.insert(*c)) {
                    let mut one = Failures::default();
                    one.add(TrialRef {
                        candidate: "",
                        task: &task_id,
                        trial: trial_index,
                        status: status.as_str(),
                        error: error.as_deref(),
                        trace: trace.as_deref(),
                    });
                    let lines = one.lines("  ");
                    let head = format!(
                        "hevo: first {class} ({}): task {task_id} trial {trial_index}",
                        status.as_str()
                    );
                    for line in std::iter::once(head).chain(lines.into_iter().skip(1)) {
                        match &bar {
                            Some(b) => b.println(line),
                            None => eprintln!("{line}"),
                        }
                    }
                }
                let msg = if mean_outcome.is_finite() {
                    format!("mean outcome {mean_outcome:.3}")
                } else {
                    "nothing scored yet".to_string()
                };
                if let Some(b) = &bar {
                    b.set_position(done as u64);
                    b.set_message(msg);
                } else if mode == Mode::Lines {
                    let line = lines_line(done, total, &msg, started.elapsed().as_secs_f64());
                    if done == total || last_line.elapsed() >= Duration::from_secs(1) {
                        eprintln!("{line}");
                        last_line = Instant::now();
                        pending_line = None;
                    } else {
                        pending_line = Some(line);
                    }
                }
            }
            ProgressEvent::Cancelling => {
                let line = "hevo: stopping: killing running trials (finished ones are stored)";
                match &bar {
                    Some(b) => b.println(line),
                    None if mode != Mode::Quiet => eprintln!("{line}"),
                    None => {}
                }
            }
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if let Some(line) = pending_line {
        eprintln!("{line}");
    }
}

/// One progress line of [`Mode::Lines`]: `done` of `total` trials, `msg`, the time since the
/// run started and an ETA from the rate so far.
fn lines_line(done: usize, total: usize, msg: &str, elapsed_s: f64) -> String {
    let eta = elapsed_s / done.max(1) as f64 * total.saturating_sub(done) as f64;
    format!(
        "hevo: {done}/{total} trials done, {msg}, {} elapsed, ETA {}",
        clock(elapsed_s),
        clock(eta)
    )
}

#[cfg(test)]
mod tests {
    use super::Mode;

    #[test]
    fn a_plain_line_has_the_elapsed_time_and_an_eta_from_the_rate() {
        assert_eq!(
            super::lines_line(23, 50, "mean outcome 0.826", 46.0),
            "hevo: 23/50 trials done, mean outcome 0.826, 0:46 elapsed, ETA 0:54"
        );
        assert_eq!(
            super::lines_line(50, 50, "mean outcome 1.000", 3725.0),
            "hevo: 50/50 trials done, mean outcome 1.000, 1:02:05 elapsed, ETA 0:00"
        );
    }

    #[test]
    fn the_mode_follows_the_flag_the_terminal_and_ci() {
        assert_eq!(Mode::of(true, true, None), Mode::Quiet);
        assert_eq!(Mode::of(true, false, Some("true")), Mode::Quiet);
        assert_eq!(Mode::of(false, true, None), Mode::Bar);
        assert_eq!(Mode::of(false, true, Some("true")), Mode::Lines);
        assert_eq!(Mode::of(false, true, Some("1")), Mode::Lines);
        assert_eq!(Mode::of(false, true, Some("false")), Mode::Bar);
        assert_eq!(Mode::of(false, true, Some("")), Mode::Bar);
        assert_eq!(Mode::of(false, false, None), Mode::Lines);
    }
}
