//! The progress reporter of `hevo eval`: turns the engine's typed events into a bar on a
//! terminal or throttled plain lines otherwise, always on stderr (stdout is data only).

use std::io::IsTerminal;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use hevo_runtime::executor::ProgressEvent;
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
    /// A bar on a terminal stderr, plain lines otherwise, nothing with `--no-progress`.
    pub fn choose(no_progress: bool) -> Mode {
        if no_progress {
            Mode::Quiet
        } else if std::io::stderr().is_terminal() {
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
    let mut pending_line: Option<String> = None;
    for ev in rx {
        match ev {
            ProgressEvent::RunStarted {
                total,
                already_done,
                jobs,
            } => {
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
                done,
                total,
                mean_outcome,
                ..
            } => {
                let msg = if mean_outcome.is_finite() {
                    format!("mean outcome {mean_outcome:.3}")
                } else {
                    "nothing scored yet".to_string()
                };
                if let Some(b) = &bar {
                    b.set_position(done as u64);
                    b.set_message(msg);
                } else if mode == Mode::Lines {
                    let line = format!("hevo: {done}/{total} trials done, {msg}");
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
