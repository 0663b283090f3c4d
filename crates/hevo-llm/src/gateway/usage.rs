//! Token counts from a provider's own `usage` object, in each API's shape: what a forwarded
//! call is priced by.

use serde_json::{Map, Value};

use crate::backend::Api;
use crate::types::Usage;

/// The [`Usage`] in `usage`, an API's `usage` object (missing counts are 0).
pub(crate) fn of(api: Api, usage: &Value) -> Usage {
    let num = |p: &str| usage.pointer(p).and_then(Value::as_u64).unwrap_or(0);
    match api {
        Api::ChatCompletions | Api::Embeddings => Usage {
            prompt_tokens: num("/prompt_tokens"),
            cached_tokens: num("/prompt_tokens_details/cached_tokens"),
            output_tokens: num("/completion_tokens"),
            ..Usage::default()
        },
        Api::Responses => Usage {
            prompt_tokens: num("/input_tokens"),
            cached_tokens: num("/input_tokens_details/cached_tokens"),
            output_tokens: num("/output_tokens"),
            ..Usage::default()
        },
        // Anthropic reports uncached, cache-read and cache-written input apart, the writes
        // also split by how long they are kept (`cache_creation`); count_tokens answers
        // `input_tokens` but generates nothing and costs nothing.
        Api::Messages => {
            let cache_read = num("/cache_read_input_tokens");
            let written_1h = num("/cache_creation/ephemeral_1h_input_tokens");
            let written = num("/cache_creation_input_tokens")
                .max(num("/cache_creation/ephemeral_5m_input_tokens") + written_1h);
            Usage {
                prompt_tokens: num("/input_tokens") + cache_read + written,
                cached_tokens: cache_read,
                cache_write_tokens: written,
                cache_write_1h_tokens: written_1h,
                output_tokens: num("/output_tokens"),
            }
        }
        Api::CountTokens => Usage::default(),
    }
}

/// Collects usage and the answering model from an answer's JSON or its stream's events.
///
/// Streams report usage in pieces: Anthropic's `message_start` (input) and `message_delta`
/// (output, cumulative), OpenAI's last chunk, the Responses API's `response.completed`. Later
/// values of a field replace earlier ones.
#[derive(Debug, Default)]
pub(crate) struct UsageWatch {
    usage: Map<String, Value>,
    model: Option<String>,
    seen: bool,
}

impl UsageWatch {
    /// Takes what `value` (a whole answer or one event's data) says.
    pub(crate) fn observe(&mut self, value: &Value) {
        let holders = [Some(value), value.get("message"), value.get("response")];
        for holder in holders.into_iter().flatten() {
            if let Some(Value::Object(usage)) = holder.get("usage") {
                self.seen = true;
                for (k, v) in usage {
                    if !v.is_null() {
                        self.usage.insert(k.clone(), v.clone());
                    }
                }
            }
            if self.model.is_none() {
                if let Some(model) = holder.get("model").and_then(Value::as_str) {
                    self.model = Some(model.to_owned());
                }
            }
        }
    }

    /// The usage seen so far, in `api`'s shape.
    pub(crate) fn usage(&self, api: Api) -> Usage {
        of(api, &Value::Object(self.usage.clone()))
    }

    /// True once any usage was seen.
    pub(crate) fn seen(&self) -> bool {
        self.seen
    }

    /// The model the upstream says answered.
    pub(crate) fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn anthropic_stream_usage_is_merged_across_events() {
        let mut watch = UsageWatch::default();
        watch.observe(
            &json!({"type": "message_start", "message": {"model": "claude-x",
            "usage": {"input_tokens": 10, "cache_read_input_tokens": 5,
                      "cache_creation_input_tokens": 2, "output_tokens": 1}}}),
        );
        watch.observe(&json!({"type": "message_delta", "usage": {"output_tokens": 7}}));
        let usage = watch.usage(Api::Messages);
        assert_eq!(
            (
                usage.prompt_tokens,
                usage.cached_tokens,
                usage.cache_write_tokens,
                usage.output_tokens
            ),
            (17, 5, 2, 7)
        );
        assert_eq!(watch.model(), Some("claude-x"));
    }

    #[test]
    fn anthropic_cache_writes_are_counted_with_their_one_hour_part() {
        let usage = of(
            Api::Messages,
            &json!({"input_tokens": 100, "cache_creation_input_tokens": 300,
                    "cache_read_input_tokens": 600, "output_tokens": 500,
                    "cache_creation": {"ephemeral_5m_input_tokens": 200,
                                       "ephemeral_1h_input_tokens": 100}}),
        );
        assert_eq!(
            (
                usage.prompt_tokens,
                usage.uncached_tokens(),
                usage.cached_tokens,
                usage.cache_write_tokens,
                usage.cache_write_1h_tokens
            ),
            (1000, 400, 600, 300, 100)
        );
        // a breakdown without the total still counts every write
        let usage = of(
            Api::Messages,
            &json!({"input_tokens": 1, "cache_creation": {"ephemeral_1h_input_tokens": 8}}),
        );
        assert_eq!((usage.prompt_tokens, usage.cache_write_tokens), (9, 8));
    }

    #[test]
    fn responses_usage_counts_cached_input_inside_input() {
        let mut watch = UsageWatch::default();
        watch.observe(
            &json!({"type": "response.completed", "response": {"model": "gpt-x",
            "usage": {"input_tokens": 20, "input_tokens_details": {"cached_tokens": 8},
                      "output_tokens": 3}}}),
        );
        let usage = watch.usage(Api::Responses);
        assert_eq!((usage.prompt_tokens, usage.uncached_tokens()), (20, 12));
    }
}
