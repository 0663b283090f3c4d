//! [`MaxTokensField`]: the field in which an `openai` backend sends a translated request's
//! output limit, `max_tokens` or `max_completion_tokens`.
//!
//! The gateway builds a chat completion itself only for a request it translated (an
//! Anthropic message routed to an `openai` backend); a request of OpenAI's own APIs is
//! forwarded unchanged and keeps the field its caller chose. OpenAI deprecated `max_tokens`
//! for `max_completion_tokens`, and its reasoning models (o1, o3, o4-mini, gpt-5, ...) refuse
//! `max_tokens` with a 400. Other OpenAI-compatible servers do not all know the new name, and
//! some ignore it without a word, so the limit is dropped and generation is unlimited:
//! llama.cpp's server until February 2026 (ggml-org/llama.cpp#19831), llama-cpp-python
//! (abetlen/llama-cpp-python#1907); Ollama and vLLM differ by version. So the field follows
//! the backend's base URL ([`MaxTokensField::for_base_url`]): OpenAI's API and Azure OpenAI get
//! `max_completion_tokens`, any other host `max_tokens`; `max_tokens_field` in the backend's
//! table of `hevo.toml` overrides the choice.

use serde::Deserialize;

/// The chat completions field carrying a translated request's output limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxTokensField {
    /// `max_tokens`: what every OpenAI-compatible server knows; refused by OpenAI's reasoning
    /// models.
    MaxTokens,
    /// `max_completion_tokens`: what OpenAI's API wants; ignored by some other servers.
    MaxCompletionTokens,
}

impl MaxTokensField {
    /// The values `max_tokens_field` accepts, as written in `hevo.toml`.
    pub const ALLOWED: [&'static str; 2] = ["max_tokens", "max_completion_tokens"];

    /// The field's name in a request body.
    pub fn as_str(self) -> &'static str {
        match self {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        }
    }

    /// The field for an upstream at `base_url`: `max_completion_tokens` when its host is
    /// OpenAI's API (`api.openai.com`) or an Azure OpenAI resource (`*.openai.azure.com`),
    /// `max_tokens` for any other host, and for a URL that does not parse.
    pub fn for_base_url(base_url: &str) -> Self {
        let host = reqwest::Url::parse(base_url)
            .ok()
            .and_then(|url| url.host_str().map(str::to_ascii_lowercase));
        match host.as_deref() {
            Some("api.openai.com") => MaxTokensField::MaxCompletionTokens,
            Some(host) if host.ends_with(".openai.azure.com") => {
                MaxTokensField::MaxCompletionTokens
            }
            _ => MaxTokensField::MaxTokens,
        }
    }

    /// Reads the value of `max_tokens_field`; the error names the key and the values allowed.
    pub fn parse(value: &str) -> Result<Self, String> {
        match value {
            "max_tokens" => Ok(MaxTokensField::MaxTokens),
            "max_completion_tokens" => Ok(MaxTokensField::MaxCompletionTokens),
            other => Err(format!(
                "max_tokens_field = {other:?} is not one of {:?} (the chat completions field \
                 that carries a translated request's output limit)",
                Self::ALLOWED
            )),
        }
    }
}

impl<'de> Deserialize<'de> for MaxTokensField {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = String::deserialize(d)?;
        Self::parse(&value).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_and_azure_openai_get_max_completion_tokens_and_other_hosts_max_tokens() {
        let completion = [
            "https://api.openai.com/v1",
            "https://API.OpenAI.com/v1/",
            "https://api.openai.com:443/v1",
            "https://my-resource.openai.azure.com/openai/v1",
        ];
        for url in completion {
            assert_eq!(
                MaxTokensField::for_base_url(url),
                MaxTokensField::MaxCompletionTokens,
                "{url}"
            );
        }
        let tokens = [
            "http://127.0.0.1:8080/v1",
            "http://localhost:11434/v1",
            "https://openrouter.ai/api/v1",
            "https://api.openai.com.evil.example/v1",
            "https://notapi.openai.com/v1",
            "https://openai.azure.com.example/v1",
            "https://proxy.example/api.openai.com/v1",
            "not a url",
        ];
        for url in tokens {
            assert_eq!(
                MaxTokensField::for_base_url(url),
                MaxTokensField::MaxTokens,
                "{url}"
            );
        }
    }

    #[test]
    fn a_wrong_value_names_the_key_and_the_values_allowed() {
        assert_eq!(
            MaxTokensField::parse("max_completion_tokens"),
            Ok(MaxTokensField::MaxCompletionTokens)
        );
        assert_eq!(
            MaxTokensField::parse("max_tokens"),
            Ok(MaxTokensField::MaxTokens)
        );
        let err = MaxTokensField::parse("max_output_tokens").unwrap_err();
        for part in [
            "max_tokens_field",
            "max_output_tokens",
            "\"max_tokens\"",
            "\"max_completion_tokens\"",
        ] {
            assert!(err.contains(part), "{part}: {err}");
        }
    }
}
