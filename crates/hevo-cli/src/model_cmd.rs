//! `hevo model` (being written).

use std::process::ExitCode;

use crate::CliError;

/// Arguments of `hevo model`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `hevo model`.
pub fn run(_args: Args) -> Result<ExitCode, CliError> {
    Err(CliError::Internal(anyhow::anyhow!(
        "`hevo model` is not available in this build yet"
    )))
}
