//! `hevo report`: writes the run's self-contained HTML report.

use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use hevo_search::view::{html, RunView};
use serde_json::json;

use crate::status_cmd::view_error;
use crate::CliError;

/// Arguments of `hevo report`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Writes RUN/report.html (or FILE with --out): one self-contained file \
    (inline SVG, no network) with the best estimate per iteration, every candidate's \
    estimate, the evaluation spend against full evaluation, the task pool, the candidate \
    table with lineage and each candidate's diff against its parent. It works while a search \
    is running. Its links to archive directories and traces are relative to the folder the \
    report is written in. docs/report.md explains how to read it.\n\nExamples:\n  \
    hevo report examples/threshold/runs/threshold\n  \
    hevo report /shared/runs/threshold --out threshold-report.html"
)]
pub struct Args {
    /// The run directory (the one `hevo run` printed).
    #[arg(value_name = "RUN")]
    pub run: PathBuf,
    /// Write the report to FILE instead of RUN/report.html (e.g. when you cannot write the
    /// run directory); its links into the run directory are then relative to FILE's folder.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Print one JSON document (the report's path) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `hevo report`.
pub fn run(args: Args) -> Result<ExitCode, CliError> {
    let view = RunView::open(&args.run).map_err(view_error)?;
    let path = args
        .out
        .clone()
        .unwrap_or_else(|| args.run.join(html::REPORT_FILE));
    if let Some(problem) = not_a_file(&path) {
        return Err(CliError::user(format!(
            "cannot write `{}`: {problem}",
            path.display()
        )));
    }
    html::write_report(&view, &path).map_err(|e| write_error(&args, &path, e))?;
    let mut out = std::io::stdout().lock();
    let text = if args.json {
        format!("{}\n", json!({ "report": path }))
    } else {
        format!("report: {}\n", path.display())
    };
    out.write_all(text.as_bytes())
        .map_err(|e| CliError::Internal(e.into()))?;
    Ok(ExitCode::SUCCESS)
}

/// Why `path` cannot take the report, if it cannot: something other than a regular file is
/// there. The report is written beside it and renamed into place, which would replace a
/// symbolic link, a FIFO or a device node (as root, `/dev/stdout` itself) with the file.
fn not_a_file(path: &Path) -> Option<String> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    let kind = meta.file_type();
    if kind.is_file() {
        return None;
    }
    Some(if kind.is_dir() {
        format!(
            "it is a folder; give a file, e.g. --out {}",
            path.join(html::REPORT_FILE).display()
        )
    } else if kind.is_symlink() {
        let target = std::fs::read_link(path).unwrap_or_default();
        format!(
            "it is a symbolic link (to `{}`), which writing the report would replace; give \
             the file itself, or another path",
            target.display()
        )
    } else {
        "it is not a regular file (a FIFO, socket or device), which writing the report would \
         replace; give the path of a file (the report is one self-contained HTML file)"
            .into()
    })
}

/// Why the report could not be written at `path`: the user's error, with the fix, when the
/// folder is not theirs to write or does not exist.
fn write_error(args: &Args, path: &Path, e: std::io::Error) -> CliError {
    let what = format!("cannot write `{}`: {e}", path.display());
    match (e.kind(), &args.out) {
        (ErrorKind::PermissionDenied, None) => CliError::user(format!(
            "{what}; you cannot write the run directory: write the report elsewhere with \
             `hevo report {} --out FILE`, FILE in a folder you can write",
            args.run.display()
        )),
        (ErrorKind::PermissionDenied | ErrorKind::NotFound, Some(_)) => CliError::user(format!(
            "{what}; give --out a file in a folder that exists and you can write"
        )),
        _ => CliError::Internal(anyhow::anyhow!("{what}")),
    }
}
