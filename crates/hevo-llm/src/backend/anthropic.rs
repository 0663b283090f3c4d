//! The `anthropic` backend: Anthropic's Messages API.

use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{json, Value};

use super::forward::{forward_http, url, Api, RawReply, RawRequest};
use super::retry::{send_json, RetryPolicy};
use super::{read_key, Backend, Completion, DeltaSender};
use crate::error::{BackendError, LlmError};
use crate::types::{ChatRequest, ChatResponse, FinishReason};

/// The API version sent when the caller named none.
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Settings of an Anthropic upstream.
#[derive(Debug, Clone, PartialEq)]
pub struct AnthropicConfig {
    /// The backend's name, as routes refer to it.
    pub name: String,
    /// Base URL without the version, e.g. `https://api.anthropic.com`.
    pub base_url: String,
    /// Environment variable holding the API key.
    pub api_key_env: String,
    /// Retries on 429, 5xx (529 overloaded included) and network errors.
    pub retry: RetryPolicy,
    /// Timeout of one attempt.
    pub timeout: Duration,
    /// `max_tokens` sent when the request has none (the Messages API requires one).
    pub default_max_tokens: u32,
}

impl AnthropicConfig {
    /// A config for `base_url` with the key in `api_key_env` and default retries.
    pub fn new(name: &str, base_url: &str, api_key_env: &str) -> Self {
        Self {
            name: name.to_owned(),
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key_env: api_key_env.to_owned(),
            retry: RetryPolicy::default(),
            timeout: Duration::from_secs(600),
            default_max_tokens: 4096,
        }
    }
}

/// Calls Anthropic's `POST /v1/messages`.
#[derive(Debug)]
pub struct AnthropicBackend {
    config: AnthropicConfig,
    key: String,
    client: reqwest::Client,
}

impl AnthropicBackend {
    /// Reads the key from the configured variable and builds the HTTP client.
    ///
    /// # Errors
    /// [`LlmError::BackendConfig`] when the key variable is not set.
    pub fn new(config: AnthropicConfig) -> Result<Self, LlmError> {
        let key = read_key(&config.name, &config.api_key_env)?;
        let client = super::http_client(&config.name, config.timeout)?;
        Ok(Self {
            config,
            key,
            client,
        })
    }

    async fn call(&self, request: ChatRequest) -> Result<Completion, BackendError> {
        if request.logprobs {
            return Err(BackendError::BadRequest(
                "the anthropic backend cannot return logprobs".into(),
            ));
        }
        let body = request_body(&request, self.config.default_max_tokens);
        let url = format!("{}/v1/messages", self.config.base_url);
        let (value, retries) = send_json(&self.config.retry, || {
            self.client
                .post(&url)
                .header("x-api-key", &self.key)
                .header("anthropic-version", ANTHROPIC_VERSION)
                .json(&body)
        })
        .await?;
        let response = parse_response(&value, &request.model)?;
        Ok(Completion {
            response,
            retries,
            timing: None,
        })
    }
}

impl Backend for AnthropicBackend {
    fn name(&self) -> &str {
        &self.config.name
    }

    fn cache_identity(&self) -> String {
        format!("anthropic {}", self.config.base_url)
    }

    fn complete(
        &self,
        request: ChatRequest,
        _deltas: Option<DeltaSender>,
    ) -> BoxFuture<'_, Result<Completion, BackendError>> {
        Box::pin(self.call(request))
    }

    fn forwards(&self, api: Api) -> bool {
        !api.is_openai()
    }

    fn forward(&self, request: RawRequest) -> BoxFuture<'_, Result<RawReply, BackendError>> {
        Box::pin(async move {
            let url = url(&format!("{}/v1", self.config.base_url), &request);
            let has_version = request
                .headers
                .iter()
                .any(|(n, _)| n == "anthropic-version");
            forward_http(&self.config.retry, || {
                let mut builder = self
                    .client
                    .post(&url)
                    .header("x-api-key", &self.key)
                    .json(&request.body);
                if !has_version {
                    builder = builder.header("anthropic-version", ANTHROPIC_VERSION);
                }
                for (name, value) in &request.headers {
                    builder = builder.header(name, value);
                }
                builder
            })
            .await
        })
    }

    fn secret_env_vars(&self) -> Vec<String> {
        vec![self.config.api_key_env.clone()]
    }
}

fn request_body(request: &ChatRequest, default_max_tokens: u32) -> Value {
    let system: Vec<&str> = request
        .messages
        .iter()
        .filter(|m| m.role == "system")
        .map(|m| m.content.as_str())
        .collect();
    let messages: Vec<Value> = request
        .messages
        .iter()
        .filter(|m| m.role != "system")
        .map(|m| json!({ "role": m.role, "content": m.content }))
        .collect();
    let mut body = json!({
        "model": request.model,
        "messages": messages,
        "max_tokens": request.max_tokens.unwrap_or(default_max_tokens),
    });
    let map = body.as_object_mut().expect("object");
    if !system.is_empty() {
        map.insert("system".into(), json!(system.join("\n\n")));
    }
    if let Some(t) = request.temperature {
        map.insert("temperature".into(), json!(t.min(1.0)));
    }
    if let Some(p) = request.top_p {
        map.insert("top_p".into(), json!(p));
    }
    if !request.stop.is_empty() {
        map.insert("stop_sequences".into(), json!(request.stop));
    }
    body
}

/// A forwarded message as a [`ChatResponse`], when the response cache can replay it exactly:
/// text blocks only, ended by the turn's end, `max_tokens` or a stop sequence (kept in
/// [`ChatResponse::stop_sequence`]). `None` for tool use, thinking, citations or anything
/// else a [`ChatResponse`] would drop.
pub(super) fn plain_answer(value: &Value, model: &str) -> Option<ChatResponse> {
    let blocks = value.get("content")?.as_array()?;
    let text_only = blocks.iter().all(|block| {
        block.as_object().is_some_and(|b| {
            b.get("type").and_then(Value::as_str) == Some("text")
                && b.get("text").is_some_and(Value::is_string)
                && b.iter()
                    .all(|(k, v)| k == "type" || k == "text" || v.is_null())
        })
    });
    let finished = match value.get("stop_reason").and_then(Value::as_str) {
        Some("end_turn" | "max_tokens") => true,
        Some("stop_sequence") => value.get("stop_sequence").is_some_and(Value::is_string),
        _ => false,
    };
    if !(text_only && finished) {
        return None;
    }
    parse_response(value, model).ok()
}

fn parse_response(value: &Value, model: &str) -> Result<ChatResponse, BackendError> {
    let blocks = value
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| BackendError::Transport("upstream response has no content".into()))?;
    let content: String = blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect();
    let stop_reason = value.get("stop_reason").and_then(Value::as_str);
    let finish_reason = match stop_reason {
        Some("max_tokens") => FinishReason::Length,
        _ => FinishReason::Stop,
    };
    let stop_sequence = match stop_reason {
        Some("stop_sequence") => value
            .get("stop_sequence")
            .and_then(Value::as_str)
            .map(str::to_owned),
        _ => None,
    };
    let usage = crate::gateway::usage::of(Api::Messages, &value["usage"]);
    let model = value
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or(model)
        .to_owned();
    Ok(ChatResponse {
        model,
        content,
        finish_reason,
        usage,
        logprobs: None,
        stop_sequence,
    })
}
