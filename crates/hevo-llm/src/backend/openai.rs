//! The `openai` backend: any OpenAI-compatible chat completions endpoint.

use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{json, Value};

use super::forward::{forward_http, url, Api, RawReply, RawRequest};
use super::retry::{send_json, RetryPolicy};
use super::{read_key, Backend, Completion, DeltaSender, MaxTokensField};
use crate::error::{BackendError, LlmError};
use crate::types::{ChatRequest, ChatResponse, FinishReason, TokenLogprob, TopLogprob, Usage};

/// Settings of an OpenAI-compatible upstream.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiConfig {
    /// The backend's name, as routes refer to it.
    pub name: String,
    /// Base URL up to and including the version, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// Environment variable holding the API key; `None` for an upstream without auth.
    pub api_key_env: Option<String>,
    /// Retries on 429, 5xx and network errors.
    pub retry: RetryPolicy,
    /// Timeout of one attempt.
    pub timeout: Duration,
    /// The field a translated request's output limit is sent in (forwarded requests keep
    /// their own); [`MaxTokensField::for_base_url`] by default.
    pub max_tokens_field: MaxTokensField,
}

impl OpenAiConfig {
    /// A config for `base_url` with the key in `api_key_env`, default retries and the
    /// output-limit field its host wants.
    pub fn new(name: &str, base_url: &str, api_key_env: Option<&str>) -> Self {
        let base_url = base_url.trim_end_matches('/').to_owned();
        Self {
            name: name.to_owned(),
            max_tokens_field: MaxTokensField::for_base_url(&base_url),
            base_url,
            api_key_env: api_key_env.map(str::to_owned),
            retry: RetryPolicy::default(),
            timeout: Duration::from_secs(600),
        }
    }
}

/// Calls an OpenAI-compatible `/chat/completions` endpoint (non-streaming upstream calls, so
/// usage is always reported; the gateway streams the answer to the harness).
#[derive(Debug)]
pub struct OpenAiBackend {
    config: OpenAiConfig,
    key: Option<String>,
    client: reqwest::Client,
}

impl OpenAiBackend {
    /// Reads the key from the configured variable and builds the HTTP client.
    ///
    /// # Errors
    /// [`LlmError::BackendConfig`] when the key variable is named but not set.
    pub fn new(config: OpenAiConfig) -> Result<Self, LlmError> {
        let key = match &config.api_key_env {
            Some(var) => Some(read_key(&config.name, var)?),
            None => None,
        };
        let client = super::http_client(&config.name, config.timeout)?;
        Ok(Self {
            config,
            key,
            client,
        })
    }

    async fn call(&self, request: ChatRequest) -> Result<Completion, BackendError> {
        let body = request_body(&request, self.config.max_tokens_field);
        let url = format!("{}/chat/completions", self.config.base_url);
        let (value, retries) = send_json(&self.config.retry, || {
            let builder = self.client.post(&url).json(&body);
            match &self.key {
                Some(key) => builder.bearer_auth(key),
                None => builder,
            }
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

impl Backend for OpenAiBackend {
    fn name(&self) -> &str {
        &self.config.name
    }

    /// The base URL; and the output-limit field when it is not the one the URL's host gets
    /// by default, since a server that ignores the field answers without the limit.
    fn cache_identity(&self) -> String {
        let field = self.config.max_tokens_field;
        if field == MaxTokensField::for_base_url(&self.config.base_url) {
            format!("openai {}", self.config.base_url)
        } else {
            format!("openai {} {}", self.config.base_url, field.as_str())
        }
    }

    fn complete(
        &self,
        request: ChatRequest,
        _deltas: Option<DeltaSender>,
    ) -> BoxFuture<'_, Result<Completion, BackendError>> {
        Box::pin(self.call(request))
    }

    fn forwards(&self, api: Api) -> bool {
        api.is_openai()
    }

    fn forward(&self, request: RawRequest) -> BoxFuture<'_, Result<RawReply, BackendError>> {
        Box::pin(async move {
            let url = url(&self.config.base_url, &request);
            forward_http(&self.config.retry, || {
                let mut builder = self.client.post(&url).json(&request.body);
                for (name, value) in &request.headers {
                    builder = builder.header(name, value);
                }
                match &self.key {
                    Some(key) => builder.bearer_auth(key),
                    None => builder,
                }
            })
            .await
        })
    }

    fn secret_env_vars(&self) -> Vec<String> {
        self.config.api_key_env.iter().cloned().collect()
    }
}

/// The chat completion `request` becomes, its output limit in `max_tokens_field`.
fn request_body(request: &ChatRequest, max_tokens_field: MaxTokensField) -> Value {
    let mut body = json!({ "model": request.model, "messages": request.messages });
    let map = body.as_object_mut().expect("object");
    if let Some(t) = request.temperature {
        map.insert("temperature".into(), json!(t));
    }
    if let Some(p) = request.top_p {
        map.insert("top_p".into(), json!(p));
    }
    if let Some(m) = request.max_tokens {
        map.insert(max_tokens_field.as_str().into(), json!(m));
    }
    if !request.stop.is_empty() {
        map.insert("stop".into(), json!(request.stop));
    }
    if let Some(s) = request.seed {
        map.insert("seed".into(), json!(s));
    }
    if request.logprobs {
        map.insert("logprobs".into(), json!(true));
        if request.top_logprobs > 0 {
            map.insert("top_logprobs".into(), json!(request.top_logprobs));
        }
    }
    body
}

/// A forwarded chat completion as a [`ChatResponse`], when the response cache can replay it
/// exactly: one choice of plain text that stopped or ran out of tokens. `None` for tool
/// calls, refusals, audio, several choices or anything else a [`ChatResponse`] would drop.
pub(super) fn plain_answer(value: &Value, model: &str) -> Option<ChatResponse> {
    let [choice] = value.get("choices")?.as_array()?.as_slice() else {
        return None;
    };
    let message = choice.get("message")?.as_object()?;
    let text_only = message.iter().all(|(key, v)| match key.as_str() {
        "role" | "content" => true,
        "annotations" => v.as_array().is_some_and(Vec::is_empty),
        _ => v.is_null(),
    });
    let finished = matches!(
        choice.get("finish_reason").and_then(Value::as_str),
        Some("stop" | "length")
    );
    let content = message.get("content").is_some_and(Value::is_string);
    if !(text_only && finished && content) {
        return None;
    }
    parse_response(value, model).ok()
}

fn parse_response(value: &Value, model: &str) -> Result<ChatResponse, BackendError> {
    let bad = |what: &str| BackendError::Transport(format!("upstream response has no {what}"));
    let choice = value.pointer("/choices/0").ok_or_else(|| bad("choices"))?;
    let content = choice
        .pointer("/message/content")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let finish_reason = match choice.get("finish_reason").and_then(Value::as_str) {
        Some("length") => FinishReason::Length,
        _ => FinishReason::Stop,
    };
    let usage = value.get("usage").ok_or_else(|| bad("usage"))?;
    let num = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_u64).unwrap_or(0);
    let usage = Usage {
        prompt_tokens: num(usage, "/prompt_tokens"),
        cached_tokens: num(usage, "/prompt_tokens_details/cached_tokens"),
        output_tokens: num(usage, "/completion_tokens"),
        ..Usage::default()
    };
    let logprobs = choice
        .pointer("/logprobs/content")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .map(|item| TokenLogprob {
                    token: item
                        .get("token")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                    logprob: item
                        .get("logprob")
                        .and_then(Value::as_f64)
                        .unwrap_or(f64::NEG_INFINITY),
                    top_logprobs: item
                        .get("top_logprobs")
                        .and_then(Value::as_array)
                        .map(|tops| {
                            tops.iter()
                                .map(|t| TopLogprob {
                                    token: t
                                        .get("token")
                                        .and_then(Value::as_str)
                                        .unwrap_or("")
                                        .into(),
                                    logprob: t
                                        .get("logprob")
                                        .and_then(Value::as_f64)
                                        .unwrap_or(f64::NEG_INFINITY),
                                })
                                .collect()
                        })
                        .unwrap_or_default(),
                })
                .collect()
        });
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
        logprobs,
        stop_sequence: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ChatMessage;

    #[test]
    fn the_output_limit_goes_in_the_backends_field_and_an_override_keys_the_cache_apart() {
        let mut request = ChatRequest::new("m", vec![ChatMessage::new("user", "hi")]);
        request.max_tokens = Some(7);
        let body = request_body(&request, MaxTokensField::MaxCompletionTokens);
        assert_eq!(body["max_completion_tokens"], 7);
        assert!(body.get("max_tokens").is_none(), "{body}");
        let body = request_body(&request, MaxTokensField::MaxTokens);
        assert_eq!(body["max_tokens"], 7);
        assert!(body.get("max_completion_tokens").is_none(), "{body}");

        let identity = |base: &str, field: Option<MaxTokensField>| {
            let mut config = OpenAiConfig::new("o", base, None);
            if let Some(field) = field {
                config.max_tokens_field = field;
            }
            OpenAiBackend::new(config).unwrap().cache_identity()
        };
        let local = "http://127.0.0.1:8080/v1";
        assert_eq!(identity(local, None), format!("openai {local}"));
        assert_eq!(
            identity(local, Some(MaxTokensField::MaxTokens)),
            identity(local, None)
        );
        assert_ne!(
            identity(local, Some(MaxTokensField::MaxCompletionTokens)),
            identity(local, None)
        );
        let openai = "https://api.openai.com/v1";
        assert_eq!(identity(openai, None), format!("openai {openai}"));
        assert_ne!(
            identity(openai, Some(MaxTokensField::MaxTokens)),
            identity(openai, None)
        );
    }
}
