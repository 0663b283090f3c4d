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
use crate::types::ChatResponse;

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

    /// A forwarded answer of this API as hevo's [`ChatResponse`], when it is plain text the
    /// response cache can replay exactly (see `openai::plain_answer` and
    /// `anthropic::plain_answer`); `None` otherwise, and for the APIs never translated.
    /// `model` names the answer when the upstream does not.
    pub(crate) fn plain_answer(self, value: &Value, model: &str) -> Option<ChatResponse> {
        match self {
            Api::ChatCompletions => super::openai::plain_answer(value, model),
            Api::Messages => super::anthropic::plain_answer(value, model),
            Api::Responses | Api::Embeddings | Api::CountTokens => None,
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
        RawBody::Full(super::body::read_body(response).await?)
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_plain_text_answers_are_taken_for_the_cache() {
        let chat = |message: Value, finish: &str| {
            json!({"model": "m", "choices": [{"index": 0, "message": message,
                   "finish_reason": finish}], "usage": {"prompt_tokens": 3}})
        };
        let text = chat(
            json!({"role": "assistant", "content": "hi", "refusal": null}),
            "stop",
        );
        let answer = Api::ChatCompletions.plain_answer(&text, "x").unwrap();
        assert_eq!(
            (answer.content.as_str(), answer.usage.prompt_tokens),
            ("hi", 3)
        );
        let call = json!({"role": "assistant", "content": null,
                          "tool_calls": [{"id": "c", "type": "function"}]});
        assert!(Api::ChatCompletions
            .plain_answer(&chat(call, "tool_calls"), "x")
            .is_none());
        let refused = json!({"role": "assistant", "content": "", "refusal": "no"});
        assert!(Api::ChatCompletions
            .plain_answer(&chat(refused, "stop"), "x")
            .is_none());
        let message = |blocks: Value, stop: &str| {
            json!({"model": "m", "content": blocks, "stop_reason": stop,
                   "usage": {"input_tokens": 2, "output_tokens": 1}})
        };
        let text = json!([{"type": "text", "text": "hi"}]);
        assert!(Api::Messages
            .plain_answer(&message(text, "end_turn"), "x")
            .is_some());
        let tool = json!([{"type": "tool_use", "id": "t", "name": "f", "input": {}}]);
        assert!(Api::Messages
            .plain_answer(&message(tool, "tool_use"), "x")
            .is_none());
        let response = json!({"object": "response", "output": [], "usage": {}});
        assert!(Api::Responses.plain_answer(&response, "x").is_none());
    }
}
