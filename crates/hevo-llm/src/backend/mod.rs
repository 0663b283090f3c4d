//! Model backends behind one trait: an OpenAI-compatible HTTP upstream, Anthropic, and the
//! embedded local GGUF model.
//!
//! A backend only answers chat requests. Pricing, caps, caching, tracing and attribution are
//! the gateway's; a backend never sees which trial a call belongs to.

mod anthropic;
mod body;
mod forward;
mod local;
mod max_tokens_field;
mod openai;
mod retry;

use futures::future::BoxFuture;
use tokio::sync::mpsc::UnboundedSender;

pub use anthropic::{AnthropicBackend, AnthropicConfig};
pub(crate) use body::oversized;
pub use body::MAX_ANSWER_BYTES;
pub use forward::{Api, RawBody, RawReply, RawRequest};
pub use local::{LocalBackend, LocalConfig};
pub use max_tokens_field::MaxTokensField;
pub use openai::{OpenAiBackend, OpenAiConfig};
pub use retry::{Retries, RetryPolicy};

use crate::error::BackendError;
use crate::types::{ChatRequest, ChatResponse};

/// Where a streaming backend sends text as it is generated.
pub type DeltaSender = UnboundedSender<String>;

/// A backend's answer plus what it cost the infrastructure to get it.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// The answer.
    pub response: ChatResponse,
    /// Upstream attempts that failed with 429/5xx, a network error or a timeout before this
    /// answer.
    pub retries: Retries,
    /// Where the time went, for backends that measure it (the local model).
    pub timing: Option<GenerationTiming>,
}

/// Prompt-processing and generation time of one call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GenerationTiming {
    /// Prompt tokens actually evaluated (cached prefix excluded).
    pub prompt_tokens_evaluated: u64,
    /// Milliseconds spent evaluating them.
    pub prompt_ms: f64,
    /// Tokens generated.
    pub generated_tokens: u64,
    /// Milliseconds spent generating.
    pub generation_ms: f64,
}

/// Something that answers chat requests.
pub trait Backend: Send + Sync {
    /// The backend's name, as routes refer to it.
    fn name(&self) -> &str;

    /// What the response cache keys this backend's answers by, beside the request: whatever
    /// else can change the answer to the same request (an upstream's URL; the local model's
    /// file and how it is evaluated). Two backends with the same identity share cache entries.
    fn cache_identity(&self) -> String {
        self.name().to_owned()
    }

    /// Answers `request`. A backend that generates incrementally sends each piece of text to
    /// `deltas` (when given) as it appears; the concatenation of the pieces must equal the
    /// final `content`. A backend that does not stream ignores `deltas`.
    fn complete(
        &self,
        request: ChatRequest,
        deltas: Option<DeltaSender>,
    ) -> BoxFuture<'_, Result<Completion, BackendError>>;

    /// True when this backend forwards requests of `api` unchanged to an upstream that speaks
    /// it ([`Backend::forward`]). The gateway forwards every request of such an API that its
    /// translation into a [`ChatRequest`] cannot carry exactly, and every stream.
    fn forwards(&self, api: Api) -> bool {
        let _ = api;
        false
    }

    /// Sends `request` unchanged (but for this backend's key) to the upstream and returns its
    /// answer, streamed when it is a stream. Only called when [`Backend::forwards`] is true.
    fn forward(&self, request: RawRequest) -> BoxFuture<'_, Result<RawReply, BackendError>> {
        Box::pin(async move {
            Err(BackendError::BadRequest(format!(
                "backend `{}` does not serve {}",
                self.name(),
                request.api.as_str()
            )))
        })
    }

    /// Names of environment variables holding provider secrets this backend read. The engine
    /// removes them from every harness's environment.
    fn secret_env_vars(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Reads the API key from the environment variable `var`, failing with a message that names
/// the variable.
pub(crate) fn read_key(backend: &str, var: &str) -> Result<String, crate::LlmError> {
    match crate::provider_keys::var(var) {
        Some(key) if !key.trim().is_empty() => Ok(key),
        _ => Err(crate::LlmError::BackendConfig {
            backend: backend.to_owned(),
            message: format!(
                "environment variable `{var}` (its API key) is not set or empty: export \
                 {var}=<your key> and run again (hevo gives it to this backend only, never to \
                 harness code)"
            ),
        }),
    }
}

/// The HTTP client of a provider backend: one per backend. `timeout` is the longest the
/// upstream may stay silent: to accept the connection, to start its answer after the request
/// was sent, and between two pieces of the answer's body. A healthy stream that keeps
/// sending is never cut, however long it runs; a stalled one is cut after `timeout`.
pub(crate) fn http_client(
    backend: &str,
    timeout: std::time::Duration,
) -> Result<reqwest::Client, crate::LlmError> {
    reqwest::Client::builder()
        .connect_timeout(timeout)
        .read_timeout(timeout)
        .build()
        .map_err(|e| crate::LlmError::BackendConfig {
            backend: backend.to_owned(),
            message: e.to_string(),
        })
}
