//! [`Ending`]: whether a forwarded stream ended as its API ends a stream.
//!
//! A stream that is cut short or ends in an error still cost what the upstream generated,
//! but it is not an answer: the call is a backend error, priced by the usage seen. Each API
//! ends a good stream with its own last event (a chat completion with `data: [DONE]`,
//! Anthropic's messages with `message_stop`, the Responses API with `response.completed`
//! or `response.incomplete`) and reports a failure with an error event (`event: error`, the
//! Responses API's `response.failed`, a chunk carrying an `error` object).

use serde_json::Value;

use crate::backend::Api;

/// What a stream's events said about its end so far.
#[derive(Debug, Default)]
pub(crate) struct Ending {
    done: bool,
    error: Option<String>,
}

impl Ending {
    /// Takes one event: its `event:` name, its `data:` and that data parsed.
    pub(crate) fn observe(
        &mut self,
        api: Api,
        name: Option<&str>,
        data: &str,
        value: Option<&Value>,
    ) {
        let kind = value
            .and_then(|v| v.get("type"))
            .and_then(Value::as_str)
            .or(name);
        let done = match api {
            Api::ChatCompletions => data.trim() == "[DONE]",
            Api::Messages => kind == Some("message_stop"),
            Api::Responses => matches!(kind, Some("response.completed" | "response.incomplete")),
            Api::Embeddings | Api::CountTokens => false,
        };
        self.done |= done;
        let failed = name == Some("error")
            || matches!(kind, Some("error" | "response.failed"))
            || value.is_some_and(|v| v.get("error").is_some_and(Value::is_object));
        if failed && self.error.is_none() {
            let message = value
                .and_then(|v| {
                    v.pointer("/error/message")
                        .or_else(|| v.pointer("/response/error/message"))
                        .or_else(|| v.get("message"))
                })
                .and_then(Value::as_str)
                .unwrap_or(data);
            let what = kind.unwrap_or("error");
            self.error = Some(format!(
                "the upstream stream ended with `{what}`: {}",
                message.chars().take(500).collect::<String>()
            ));
        }
    }

    /// Why the stream is not a whole answer, now that it has ended: an error event, or no
    /// last event. `None` when it ended as it should.
    pub(crate) fn failure(&self, api: Api) -> Option<String> {
        if let Some(error) = &self.error {
            return Some(error.clone());
        }
        if self.done {
            return None;
        }
        let last = match api {
            Api::ChatCompletions => "`data: [DONE]`",
            Api::Messages => "`message_stop`",
            Api::Responses => "`response.completed`",
            Api::Embeddings | Api::CountTokens => return None,
        };
        Some(format!(
            "the upstream stream ended without its last event ({last})"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ending(api: Api, events: &[(Option<&str>, Value)]) -> Option<String> {
        let mut ending = Ending::default();
        for (name, value) in events {
            ending.observe(api, *name, &value.to_string(), Some(value));
        }
        ending.failure(api)
    }

    #[test]
    fn each_api_ends_a_good_stream_with_its_own_last_event() {
        let start = (Some("message_start"), json!({"type": "message_start"}));
        let stop = (Some("message_stop"), json!({"type": "message_stop"}));
        assert_eq!(ending(Api::Messages, &[start.clone(), stop]), None);
        let cut = ending(Api::Messages, std::slice::from_ref(&start)).unwrap();
        assert!(cut.contains("message_stop"), "{cut}");
        let error = json!({"type": "error", "error": {"type": "overloaded_error",
                                                       "message": "Overloaded"}});
        let failed = ending(Api::Messages, &[start, (Some("error"), error)]).unwrap();
        assert!(failed.contains("Overloaded"), "{failed}");
        let failed = json!({"type": "response.failed",
                            "response": {"error": {"message": "server broke"}}});
        let failed = ending(Api::Responses, &[(Some("response.failed"), failed)]).unwrap();
        assert!(failed.contains("response.failed") && failed.contains("server broke"));
        let done = json!({"type": "response.completed", "response": {}});
        assert_eq!(ending(Api::Responses, &[(None, done)]), None);
        let mut chat = Ending::default();
        chat.observe(Api::ChatCompletions, None, "[DONE]", None);
        assert_eq!(chat.failure(Api::ChatCompletions), None);
    }
}
