//! `hevo eval` (being written).

use std::process::ExitCode;

use crate::CliError;

/// Arguments of `hevo eval`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `hevo eval`.
pub fn run(_args: Args) -> Result<ExitCode, CliError> {
    Err(CliError::Internal(anyhow::anyhow!(
        "`hevo eval` is not available in this build yet"
    )))
}
