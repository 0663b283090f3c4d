//! `hevo replay` (being written).

use std::process::ExitCode;

use crate::CliError;

/// Arguments of `hevo replay`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `hevo replay`.
pub fn run(_args: Args) -> Result<ExitCode, CliError> {
    Err(CliError::Internal(anyhow::anyhow!(
        "`hevo replay` is not available in this build yet"
    )))
}
