//! Why a `hevo.toml` could not be used: unreadable, malformed or out of range, each error
//! naming the file and what to fix.

use std::path::PathBuf;

/// Why a configuration could not be used (always the user's to fix).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error(
        "cannot read `{}`: {source}; pass a directory holding hevo.toml, or the file itself \
         (examples/threshold is a complete one; every key: docs/config.md)",
        path.display()
    )]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The TOML is malformed, has an unknown key or a value of the wrong type.
    #[error("{}{location}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// `:line:column` when known.
        location: String,
        /// What is wrong (toml's message names the key).
        message: String,
    },
    /// A value is out of its allowed range.
    #[error("{}{location}: `{key}` {problem}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// `:line` of the key when known ([`ConfigError::located`]).
        location: String,
        /// The dotted key.
        key: String,
        /// What is wrong and how to fix it.
        problem: String,
    },
}

impl ConfigError {
    /// An out-of-range `key` of `path`, its line not yet known.
    pub fn invalid(path: &std::path::Path, key: &str, problem: String) -> Self {
        ConfigError::Invalid {
            path: path.to_path_buf(),
            location: String::new(),
            key: key.into(),
            problem,
        }
    }

    /// An out-of-range `key` of `path`, with its line read from the file: for checks made
    /// after loading (the folders it names, the cluster it submits to).
    pub fn invalid_at_line(path: &std::path::Path, key: &str, problem: String) -> Self {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        ConfigError::invalid(path, key, problem).located(&text)
    }

    /// The error with the line of its key in `text` (the file's contents), when found.
    pub fn located(self, text: &str) -> Self {
        match self {
            ConfigError::Invalid {
                path,
                location,
                key,
                problem,
            } if location.is_empty() => ConfigError::Invalid {
                location: super::locate::key_line(text, &key)
                    .map(|l| format!(":{l}"))
                    .unwrap_or_default(),
                path,
                key,
                problem,
            },
            e => e,
        }
    }
}
