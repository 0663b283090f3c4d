//! `hevo report`: writes the run's self-contained HTML report.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use hevo_search::view::{html, RunView};
use serde_json::json;

use crate::status_cmd::view_error;
use crate::CliError;

/// Arguments of `hevo report`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Writes RUN/report.html: one self-contained file (inline SVG, no network) \
    with the best estimate per iteration, every candidate's estimate, the evaluation spend \
    against full evaluation, the task pool, the candidate table with lineage and each \
    candidate's diff against its parent. It works while a search is running. docs/report.md \
    explains how to read it.\n\nExample:\n  hevo report examples/threshold/runs/threshold"
)]
pub struct Args {
    /// The run directory (the one `hevo run` printed).
    #[arg(value_name = "RUN")]
    pub run: PathBuf,
    /// Print one JSON document (the report's path) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `hevo report`.
pub fn run(args: Args) -> Result<ExitCode, CliError> {
    let view = RunView::open(&args.run).map_err(view_error)?;
    let path = html::write_report(&view).map_err(|e| {
        CliError::Internal(anyhow::anyhow!(
            "cannot write `{}`: {e}",
            args.run.join(html::REPORT_FILE).display()
        ))
    })?;
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
