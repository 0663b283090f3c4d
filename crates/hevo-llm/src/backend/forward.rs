//! Forwarding a provider request unchanged: the path every request a translation cannot carry
//! exactly (tools, thinking, structured output, the Responses API, ...) takes to an upstream
//! that speaks the same API.
//!
//! The gateway hands the backend the request's JSON (with the model name mapped), the headers
//! that belong to the provider's protocol (`anthropic-beta`, `anthropic-version`) and the query
//! string; the backend adds its own key, retries 429/5xx, network failures and timeouts before
//! any byte reached the caller, and returns the upstream's status and body, streamed when the
//! caller asked for a stream.

use axum::body::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use serde_json::Value;

use super::retry::{send_raw, Retries, RetryPolicy};
use crate::error::BackendError;

/// A provider API an HTTP request speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Api {
    /// OpenAI `POST /v1/chat/completions`.
    ChatCompletions,
    /// OpenAI `POST /v1/responses`.
    Responses,
    /// OpenAI `POST /v1/embeddings`.
    Embeddings,
    /// Anthropic `POST /v1/messages`.
    Messages,
    /// Anthropic `POST /v1/messages/count_tokens`.
    CountTokens,
}

impl Api {
    /// The path below the API version, e.g. `chat/completions`.
    pub fn path(self) -> &'static str {
        match self {
            Api::ChatCompletions => "chat/completions",
            Api::Responses => "responses",
            Api::Embeddings => "embeddings",
            Api::Messages => "messages",
            Api::CountTokens => "messages/count_tokens",
        }
    }

    /// The name the ledger and traces use, e.g. `openai.chat_completions`.
    pub fn as_str(self) -> &'static str {
        match self {
            Api::ChatCompletions => "openai.chat_completions",
            Api::Responses => "openai.responses",
            Api::Embeddings => "openai.embeddings",
            Api::Messages => "anthropic.messages",
            Api::CountTokens => "anthropic.count_tokens",
        }
    }

    /// True for the APIs of OpenAI, false for Anthropic's.
    pub fn is_openai(self) -> bool {
        matches!(
            self,
            Api::ChatCompletions | Api::Responses | Api::Embeddings
        )
    }
}

/// A request to forward as it is.
#[derive(Debug, Clone)]
pub struct RawRequest {
    /// Which API.
    pub api: Api,
    /// The JSON body, with `model` already mapped to the upstream's name.
    pub body: Value,
    /// Protocol headers to pass on (lowercase names), e.g. `anthropic-beta`.
    pub headers: Vec<(String, String)>,
    /// The query string without `?` (Claude Code sends `beta=true`), if any.
    pub query: Option<String>,
}

impl RawRequest {
    /// True when the body asks for a stream (`"stream": true`).
    pub fn stream(&self) -> bool {
        self.body.get("stream").and_then(Value::as_bool) == Some(true)
    }
}

/// The body of a forwarded answer.
pub enum RawBody {
    /// The whole body (JSON, or an upstream's error body).
    Full(Bytes),
    /// A stream of server-sent events, passed on chunk by chunk as it arrives.
    Stream(BoxStream<'static, Result<Bytes, BackendError>>),
}

impl std::fmt::Debug for RawBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RawBody::Full(bytes) => write!(f, "Full({} bytes)", bytes.len()),
            RawBody::Stream(_) => f.write_str("Stream"),
        }
    }
}

/// An upstream's answer to a [`RawRequest`]: its status (an error status that is the request's
/// fault, such as 400, is passed on too; an infrastructure fault, such as 401 or 503, is an
/// error instead), content type and body.
#[derive(Debug)]
pub struct RawReply {
    /// HTTP status.
    pub status: u16,
    /// `Content-Type` of the body.
    pub content_type: String,
    /// The body.
    pub body: RawBody,
    /// Attempts that failed with 429/5xx, a network error or a timeout before this one.
    pub retries: Retries,
}

/// Sends `build()` with retries and wraps the answer: streamed when it is a stream of events.
pub(crate) async fn forward_http(
    policy: &RetryPolicy,
    build: impl Fn() -> reqwest::RequestBuilder,
) -> Result<RawReply, BackendError> {
    let (response, retries) = send_raw(policy, build).await?;
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_owned();
    let body = if content_type.starts_with("text/event-stream") {
        RawBody::Stream(
            response
                .bytes_stream()
                .map(|chunk| chunk.map_err(|e| BackendError::http(&e)))
                .boxed(),
        )
    } else {
        RawBody::Full(response.bytes().await.map_err(|e| BackendError::http(&e))?)
    };
    Ok(RawReply {
        status,
        content_type,
        body,
        retries,
    })
}

/// The URL of `request` below `base` (which ends before the API path), with its query.
pub(crate) fn url(base: &str, request: &RawRequest) -> String {
    match &request.query {
        Some(q) if !q.is_empty() => format!("{base}/{}?{q}", request.api.path()),
        _ => format!("{base}/{}", request.api.path()),
    }
}
