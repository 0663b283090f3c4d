//! How a failed command becomes a message on stderr and an exit code.

use std::process::ExitCode;

use hevo_runtime::cancel::CancelReason;
use hevo_runtime::printable::printable;

/// A command's failure: whose fault it is decides the exit code.
#[derive(Debug)]
pub enum CliError {
    /// The user's input is wrong (bad file, bad flag, bad config): exit code 2.
    User(anyhow::Error),
    /// Something failed on our side: exit code 1.
    Internal(anyhow::Error),
    /// A signal stopped the command; finished work is kept and the same command resumes:
    /// exit code 128 + the signal (130, 143).
    Stopped(CancelReason, anyhow::Error),
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
            CliError::Stopped(reason, err) => {
                eprintln!("hevo: {}", printable(&chain_text(&err)));
                return ExitCode::from(reason.exit_code());
            }
        };
        // Causes can quote a harness's or an agent's output.
        eprintln!("error: {}", printable(&chain_text(&err)));
        ExitCode::from(code)
    }
}

/// What `--json` prints on stdout when a signal stopped the command: scripts read why it
/// stopped and how to resume (the same command line) from the same place as a finished
/// command's document (`{"stopped": "SIGINT", "exit_code": 130, "run_dir": ..., "resume":
/// ...}`).
pub fn print_stopped_json(reason: CancelReason, run_dir: &std::path::Path) {
    let resume = command_line();
    println!(
        "{}",
        serde_json::json!({
            "stopped": reason.to_string(),
            "exit_code": reason.exit_code(),
            "run_dir": run_dir,
            "resume": resume,
        })
    );
}

/// This process's command line as a shell would take it back: what a stopped command tells
/// the user to run again, every flag kept (`--finalize`, `--no-progress`). An argument with
/// anything but letters, digits and `_./=:,@+-` is single-quoted.
pub fn command_line() -> String {
    std::env::args()
        .map(|arg| {
            let plain = !arg.is_empty()
                && arg
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_./=:,@+-".contains(c));
            if plain {
                arg
            } else {
                format!("'{}'", arg.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The error and its causes, `: `-separated as `{:#}` prints them, leaving out a cause whose
/// text is already there: many errors write their source into their own message and also
/// return it as `source()`, which `{:#}` would print twice ("File exists (os error 17):
/// File exists (os error 17)").
fn chain_text(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let cause = cause.to_string();
        if text.is_empty() {
            text = cause;
        } else if !text.contains(&cause) {
            text = format!("{text}: {cause}");
        }
    }
    text
}

impl From<anyhow::Error> for CliError {
    fn from(err: anyhow::Error) -> Self {
        CliError::Internal(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that writes its source into its message and returns it as `source()`.
    #[derive(Debug)]
    struct Doubled {
        source: std::io::Error,
    }

    impl std::fmt::Display for Doubled {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "cannot create `x`: {}", self.source)
        }
    }

    impl std::error::Error for Doubled {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.source)
        }
    }

    #[test]
    fn a_cause_already_in_the_message_is_printed_once() {
        let io = || std::io::Error::new(std::io::ErrorKind::AlreadyExists, "File exists");
        let err = anyhow::Error::new(Doubled { source: io() });
        assert_eq!(chain_text(&err), "cannot create `x`: File exists");
        let err = anyhow::Error::new(io()).context("cannot create `y`");
        assert_eq!(chain_text(&err), "cannot create `y`: File exists");
    }
}
