//! How a failed command becomes a message on stderr and an exit code.

use std::process::ExitCode;

/// A command's failure: whose fault it is decides the exit code.
#[derive(Debug)]
pub enum CliError {
    /// The user's input is wrong (bad file, bad flag, bad config): exit code 2.
    User(anyhow::Error),
    /// Something failed on our side: exit code 1.
    Internal(anyhow::Error),
}

impl CliError {
    /// The user's mistake described by `msg` (exit code 2): say what is wrong and the fix.
    pub fn user(msg: impl std::fmt::Display) -> CliError {
        CliError::User(anyhow::anyhow!("{msg}"))
    }

    /// Prints the error chain to stderr and returns the matching exit code.
    pub fn report(self) -> ExitCode {
        let (err, code) = match self {
            CliError::User(err) => (err, 2),
            CliError::Internal(err) => (err, 1),
        };
        eprintln!("error: {err:#}");
        ExitCode::from(code)
    }
}

impl From<anyhow::Error> for CliError {
    fn from(err: anyhow::Error) -> Self {
        CliError::Internal(err)
    }
}
