//! What the holding upstream (`held`) answers, per API: the whole answer, and a stream's
//! events before the hold, after it, and the API's error ending. Every answer reports the
//! same usage: 1000 input tokens (600 of them cached for Anthropic, 200 for OpenAI) and 500
//! output tokens; a stream's first events report nothing but Anthropic's `message_start`
//! (400 uncached and 600 cached input tokens, 1 output token).

use serde_json::{json, Value};

/// One API's answer: the whole body, and a stream's events before and after the hold.
pub struct Script {
    /// The answer of a plain request.
    pub whole: Value,
    /// A stream's events before the hold.
    pub first: Vec<String>,
    /// Its events after the hold, up to its last.
    pub rest: Vec<String>,
    /// The API's error ending (after `first`).
    pub error: Vec<String>,
}

fn event(name: Option<&str>, data: &Value) -> String {
    match name {
        Some(name) => format!("event: {name}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

pub fn chat(model: &str, include_usage: bool) -> Script {
    let usage = json!({"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500,
                       "prompt_tokens_details": {"cached_tokens": 200}});
    let chunk = |delta: Value, finish: Value| {
        event(
            None,
            &json!({"id": "chatcmpl-held", "object": "chat.completion.chunk", "created": 0,
                "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
        )
    };
    let mut rest = vec![
        chunk(json!({"content": "w1"}), Value::Null),
        chunk(json!({}), json!("stop")),
    ];
    if include_usage {
        rest.push(event(
            None,
            &json!({"id": "chatcmpl-held", "object": "chat.completion.chunk", "created": 0,
                    "model": model, "choices": [], "usage": usage}),
        ));
    }
    rest.push("data: [DONE]\n\n".into());
    Script {
        whole: json!({"id": "chatcmpl-held", "object": "chat.completion", "created": 0,
            "model": model, "choices": [{"index": 0, "finish_reason": "stop", "logprobs": null,
            "message": {"role": "assistant", "content": "w0 w1"}}], "usage": usage}),
        first: vec![
            chunk(json!({"role": "assistant", "content": ""}), Value::Null),
            chunk(json!({"content": "w0 "}), Value::Null),
        ],
        rest,
        error: vec![event(
            None,
            &json!({"error": {"message": "overloaded", "type": "server_error"}}),
        )],
    }
}

pub fn messages(model: &str) -> Script {
    let message = |usage: Value, content: Value, stop: Value| {
        json!({"id": "msg_held", "type": "message", "role": "assistant", "model": model,
               "content": content, "stop_reason": stop, "stop_sequence": null, "usage": usage})
    };
    let input = json!({"input_tokens": 400, "cache_read_input_tokens": 600,
                       "cache_creation_input_tokens": 0, "output_tokens": 1});
    let delta = |text: &str| {
        event(
            Some("content_block_delta"),
            &json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "text_delta", "text": text}}),
        )
    };
    let mut whole_usage = input.clone();
    whole_usage["output_tokens"] = json!(500);
    Script {
        whole: message(
            whole_usage,
            json!([{"type": "text", "text": "w0 w1"}]),
            json!("end_turn"),
        ),
        first: vec![
            event(
                Some("message_start"),
                &json!({"type": "message_start",
                        "message": message(input, json!([]), Value::Null)}),
            ),
            event(
                Some("content_block_start"),
                &json!({"type": "content_block_start", "index": 0,
                        "content_block": {"type": "text", "text": ""}}),
            ),
            delta("w0 "),
        ],
        rest: vec![
            delta("w1"),
            event(
                Some("content_block_stop"),
                &json!({"type": "content_block_stop", "index": 0}),
            ),
            event(
                Some("message_delta"),
                &json!({"type": "message_delta", "usage": {"output_tokens": 500},
                        "delta": {"stop_reason": "end_turn", "stop_sequence": null}}),
            ),
            event(Some("message_stop"), &json!({"type": "message_stop"})),
        ],
        error: vec![event(
            Some("error"),
            &json!({"type": "error",
                    "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        )],
    }
}

pub fn responses(model: &str) -> Script {
    let usage = json!({"input_tokens": 1000, "input_tokens_details": {"cached_tokens": 200},
        "output_tokens": 500, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 1500});
    let item = json!({"type": "message", "id": "msg_1", "status": "completed",
        "role": "assistant", "content": [{"type": "output_text", "text": "w0 w1",
        "annotations": []}]});
    let response = |status: &str, output: Value, usage: Value| {
        json!({"id": "resp_held", "object": "response", "created_at": 0, "status": status,
               "model": model, "output": output, "usage": usage, "error": null,
               "incomplete_details": null, "tools": [], "parallel_tool_calls": true,
               "tool_choice": "auto"})
    };
    let ev = |kind: &str, mut v: Value| {
        v["type"] = json!(kind);
        event(Some(kind), &v)
    };
    let at = |extra: Value| {
        let mut v = json!({"item_id": "msg_1", "output_index": 0, "content_index": 0});
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        v
    };
    let pending = response("in_progress", json!([]), Value::Null);
    let mut failed = response("failed", json!([]), Value::Null);
    failed["error"] = json!({"code": "server_error", "message": "overloaded"});
    Script {
        whole: response("completed", json!([item]), usage.clone()),
        first: vec![
            ev("response.created", json!({"response": pending})),
            ev("response.in_progress", json!({"response": pending})),
            ev(
                "response.output_item.added",
                json!({"output_index": 0, "item": {"type": "message", "id": "msg_1",
                    "status": "in_progress", "role": "assistant", "content": []}}),
            ),
            ev(
                "response.content_part.added",
                at(json!({"part": {"type": "output_text", "text": "", "annotations": []}})),
            ),
            ev("response.output_text.delta", at(json!({"delta": "w0 "}))),
        ],
        rest: vec![
            ev("response.output_text.delta", at(json!({"delta": "w1"}))),
            ev("response.output_text.done", at(json!({"text": "w0 w1"}))),
            ev(
                "response.content_part.done",
                at(json!({"part": {"type": "output_text", "text": "w0 w1",
                                   "annotations": []}})),
            ),
            ev(
                "response.output_item.done",
                json!({"output_index": 0, "item": item}),
            ),
            ev(
                "response.completed",
                json!({"response": response("completed", json!([item]), usage)}),
            ),
        ],
        error: vec![ev("response.failed", json!({"response": failed}))],
    }
}
