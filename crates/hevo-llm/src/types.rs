//! Provider-neutral chat requests and responses: what the gateway hands a backend and gets back.
//!
//! Both HTTP dialects (OpenAI, Anthropic) are translated into these types, so backends, the
//! response cache and the ledger see one shape.

use serde::{Deserialize, Serialize};

/// One chat message with plain-text content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant` (or `tool`).
    pub role: String,
    /// The message text.
    pub content: String,
}

impl ChatMessage {
    /// A message with the given role and text.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: role.into(),
            content: content.into(),
        }
    }
}

/// A chat completion request, after the gateway has parsed and routed it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The model name the backend should run (already mapped from the name the harness used).
    pub model: String,
    /// The conversation, system message first if any.
    pub messages: Vec<ChatMessage>,
    /// Sampling temperature; `None` means the provider default (1.0, not deterministic).
    pub temperature: Option<f32>,
    /// Nucleus sampling cut-off.
    pub top_p: Option<f32>,
    /// Upper bound on generated tokens.
    pub max_tokens: Option<u32>,
    /// Generation stops before any of these strings; they are not part of the output.
    pub stop: Vec<String>,
    /// Seed for sampling; with a seed, sampling is reproducible.
    pub seed: Option<u64>,
    /// Return the log-probability of each generated token.
    pub logprobs: bool,
    /// With `logprobs`, also return this many most likely alternatives per position (0 to 20).
    pub top_logprobs: u32,
    /// Who asks: the gateway's trial id (empty outside the gateway). The local model serves
    /// its callers in turn, so one that floods it cannot starve the others. Not part of the
    /// request itself: never sent upstream, not in the response cache's key.
    #[serde(skip)]
    pub caller: String,
}

impl ChatRequest {
    /// A request with default sampling for `model` and `messages`.
    pub fn new(model: impl Into<String>, messages: Vec<ChatMessage>) -> Self {
        Self {
            model: model.into(),
            messages,
            temperature: None,
            top_p: None,
            max_tokens: None,
            stop: Vec::new(),
            seed: None,
            logprobs: false,
            top_logprobs: 0,
            caller: String::new(),
        }
    }

    /// True when the same request must give the same answer: temperature 0 or a fixed seed.
    /// Only such requests are served from the response cache.
    pub fn is_deterministic(&self) -> bool {
        self.temperature == Some(0.0) || self.seed.is_some()
    }
}

/// Token counts of one call, as the provider reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// All prompt tokens, cached ones included.
    pub prompt_tokens: u64,
    /// The part of `prompt_tokens` served from the provider's prompt cache (cheaper).
    pub cached_tokens: u64,
    /// The part of `prompt_tokens` written to the provider's prompt cache (Anthropic bills
    /// writes above uncached input), 1-hour writes included.
    #[serde(default)]
    pub cache_write_tokens: u64,
    /// The part of `cache_write_tokens` written to the 1-hour cache (billed higher still).
    #[serde(default)]
    pub cache_write_1h_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
}

impl Usage {
    /// Prompt tokens not served from a prompt cache.
    pub fn uncached_tokens(&self) -> u64 {
        self.prompt_tokens.saturating_sub(self.cached_tokens)
    }

    /// Every token of the call, prompt and output.
    pub fn total_tokens(&self) -> u64 {
        self.prompt_tokens + self.output_tokens
    }
}

/// Why generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The model ended its turn or a stop string was hit.
    Stop,
    /// `max_tokens` was reached.
    Length,
}

/// The log-probability of one candidate token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopLogprob {
    /// The token's text.
    pub token: String,
    /// Natural-log probability.
    pub logprob: f64,
}

/// The log-probability of one generated token, with the most likely alternatives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenLogprob {
    /// The generated token's text.
    pub token: String,
    /// Its natural-log probability.
    pub logprob: f64,
    /// The `top_logprobs` most likely tokens at this position, most likely first.
    pub top_logprobs: Vec<TopLogprob>,
}

/// A backend's answer to a [`ChatRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The model that answered, as the backend names it.
    pub model: String,
    /// The generated text.
    pub content: String,
    /// Why generation stopped.
    pub finish_reason: FinishReason,
    /// Token counts.
    pub usage: Usage,
    /// Per-token log-probabilities, when requested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<Vec<TokenLogprob>>,
    /// The stop string that ended generation, when the backend says which (Anthropic's
    /// `stop_sequence`); `finish_reason` is then [`FinishReason::Stop`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_sequence: Option<String>,
}
