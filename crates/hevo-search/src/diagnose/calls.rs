//! A trial's model calls read back from the gateway's trace: request and response lines
//! paired by `seq`, with the tool calls and results they carry.

use serde_json::Value;

use super::tools::ToolLog;

/// One model call read back from a trace.
pub(super) struct Call {
    /// Line of its request (1-based), if traced.
    pub(super) request_line: Option<usize>,
    /// The request's messages (or the whole body), compact JSON.
    pub(super) prompt: Option<String>,
    /// Line of its response.
    pub(super) response_line: Option<usize>,
    /// The answer's text.
    pub(super) output: Option<String>,
    /// Input tokens (uncached + cached) the response reports.
    pub(super) input_tokens: Option<u64>,
    /// Output tokens it reports.
    pub(super) output_tokens: u64,
    /// The longest message of the request, in characters.
    pub(super) longest_message: usize,
}

/// Pairs the trace's request and response lines into calls (by `seq`), and collects the
/// tool calls and results they carry.
pub(super) fn read_calls(text: &str) -> (Vec<Call>, ToolLog) {
    let mut tools = ToolLog::default();
    let mut calls: Vec<(u64, Call)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let seq = v["seq"].as_u64().unwrap_or(i as u64);
        let idx = match calls.iter().position(|(s, _)| *s == seq) {
            Some(k) => k,
            None => {
                calls.push((
                    seq,
                    Call {
                        request_line: None,
                        prompt: None,
                        response_line: None,
                        output: None,
                        input_tokens: None,
                        output_tokens: 0,
                        longest_message: 0,
                    },
                ));
                calls.len() - 1
            }
        };
        let call = &mut calls[idx].1;
        let body = &v["body"];
        match v["type"].as_str() {
            Some("request") => {
                tools.request(body, i + 1);
                call.request_line = Some(i + 1);
                let prompt = body.get("messages").unwrap_or(body);
                call.prompt = Some(prompt.to_string());
                call.longest_message = body["messages"]
                    .as_array()
                    .map(|ms| {
                        ms.iter()
                            .map(|m| content_text(&m["content"]).chars().count())
                    })
                    .and_then(|it| it.max())
                    .unwrap_or(0);
            }
            Some("response") => {
                call.response_line = Some(i + 1);
                let text = body["choices"][0]["message"]["content"]
                    .as_str()
                    .map(str::to_string)
                    .or_else(|| {
                        body.get("content")
                            .map(content_text)
                            .filter(|s| !s.is_empty())
                    });
                call.output = text;
                let u = &body["usage"];
                let input = u["prompt_tokens"].as_u64().or_else(|| {
                    u["input_tokens"].as_u64().map(|x| {
                        x + u["cache_read_input_tokens"].as_u64().unwrap_or(0)
                            + u["cache_creation_input_tokens"].as_u64().unwrap_or(0)
                    })
                });
                call.input_tokens = input;
                call.output_tokens = u["completion_tokens"]
                    .as_u64()
                    .or_else(|| u["output_tokens"].as_u64())
                    .unwrap_or(0);
                let tokens = input.map(|x| x + call.output_tokens);
                tools.response(body, i + 1, tokens);
            }
            _ => {}
        }
    }
    (calls.into_iter().map(|(_, c)| c).collect(), tools)
}

/// The text of a message's content: a string, or the `text` of its parts.
pub(crate) fn content_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}
