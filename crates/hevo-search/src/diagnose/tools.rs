//! The analyzer's tool checks: tool calls a model asked for and the results the harness fed
//! back, read from the gateway's trace in all three dialects (OpenAI chat `tool_calls` and
//! `role: "tool"` messages, Anthropic `tool_use` / `tool_result` blocks, Responses
//! `function_call` / `function_call_output` items), and two kinds of waste in them:
//!
//! - `rerun_passed_check`: a tool call repeated with the same name and arguments after its
//!   first result already said it passed (`5 passed`, `OK`, `exit code 0`), asked for once
//!   that result was in the prompt;
//! - `repeated_tool_output`: the same call, with the same arguments, answered with the same
//!   result more than once (the repeats learned nothing).
//!
//! A tool use is identified by its id (`tool_call_id`, `tool_use_id`, `call_id`); one that
//! reappears in every later request's history is the same use, first seen where it was
//! asked for (the response line) or else where it first appears in a request.

use serde_json::Value;

/// A tool call and what came back, with where each was first seen in the trace.
#[derive(Debug)]
pub(crate) struct ToolUse {
    /// The dialect's id of the call.
    id: String,
    /// Name and arguments, compact: two uses with the same key are the same call.
    key: String,
    /// The 1-based trace line where the call was asked for (its response), or first seen.
    asked_line: usize,
    /// Input plus output tokens of the model call whose response asked for it, if known.
    asked_tokens: Option<u64>,
    /// The result's text, once fed back.
    result: Option<String>,
    /// The 1-based line of the first request holding the result.
    result_line: Option<usize>,
}

/// Tool uses and results of one trace, in order of appearance.
#[derive(Debug, Default)]
pub(crate) struct ToolLog {
    uses: Vec<ToolUse>,
}

impl ToolLog {
    fn use_of(&mut self, id: &str, name: &str, args: &Value, line: usize, tokens: Option<u64>) {
        if id.is_empty() || self.uses.iter().any(|u| u.id == id) {
            return;
        }
        // Arguments arrive as a JSON string (OpenAI) or an object (Anthropic): compare
        // them parsed, so spacing does not tell two identical calls apart.
        let args = match args {
            Value::String(s) => {
                serde_json::from_str::<Value>(s).unwrap_or(Value::String(s.clone()))
            }
            v => v.clone(),
        };
        self.uses.push(ToolUse {
            id: id.to_string(),
            key: format!("{name} {args}"),
            asked_line: line,
            asked_tokens: tokens,
            result: None,
            result_line: None,
        });
    }

    fn result_of(&mut self, id: &str, text: String, line: usize) {
        if let Some(u) = self.uses.iter_mut().find(|u| u.id == id) {
            if u.result.is_none() {
                u.result = Some(text);
                u.result_line = Some(line);
            }
        }
    }

    /// Records what a response asked for (line `line`, the call's tokens).
    pub(crate) fn response(&mut self, body: &Value, line: usize, tokens: Option<u64>) {
        let openai = std::iter::once(&body["choices"][0]["message"]);
        let anthropic = std::iter::once(body);
        let responses = body["output"].as_array().into_iter().flatten();
        for part in openai.chain(anthropic).chain(responses) {
            for (id, name, args) in uses_in(part) {
                self.use_of(id, name, args, line, tokens);
            }
        }
    }

    /// Records the tool history and results a request carries (line `line`).
    pub(crate) fn request(&mut self, body: &Value, line: usize) {
        let messages = body["messages"].as_array().into_iter().flatten();
        let items = body["input"].as_array().into_iter().flatten();
        for part in messages.chain(items) {
            for (id, name, args) in uses_in(part) {
                self.use_of(id, name, args, line, None);
            }
            for (id, content) in results_in(part) {
                let text = super::content_text(content);
                self.result_of(id, text, line);
            }
        }
    }

    /// The two kinds of waste, each as `(kind, finding, cost, first line, last line)`.
    pub(crate) fn waste(&self) -> Vec<(&'static str, String, String, usize, usize)> {
        let mut out = Vec::new();
        let mut keys: Vec<&str> = Vec::new();
        for u in &self.uses {
            if !keys.contains(&u.key.as_str()) {
                keys.push(&u.key);
            }
        }
        for key in keys {
            let same: Vec<&ToolUse> = self.uses.iter().filter(|u| u.key == key).collect();
            if same.len() < 2 {
                continue;
            }
            let first = same[0];
            let shown = shorten(key, 80);
            let cost = |repeats: &[&ToolUse]| -> String {
                let known: Vec<u64> = repeats.iter().filter_map(|u| u.asked_tokens).collect();
                if known.is_empty() {
                    format!(
                        "{} repeated tool run(s); their tokens are not in the trace",
                        repeats.len()
                    )
                } else {
                    format!(
                        "{} tokens in the {} model call(s) that asked for the {} repeat(s), plus the tools' own time",
                        known.iter().sum::<u64>(),
                        known.len(),
                        repeats.len()
                    )
                }
            };
            let passed_at = first
                .result
                .as_deref()
                .filter(|r| looks_passed(r))
                .and(first.result_line);
            if let Some(known) = passed_at {
                let reruns: Vec<&ToolUse> = same[1..]
                    .iter()
                    .copied()
                    .filter(|u| u.asked_line > known)
                    .collect();
                if let Some(last) = reruns.last() {
                    out.push((
                        "rerun_passed_check",
                        format!(
                            "`{shown}` passed (`{}`) and was run {} more time(s) after that result was in the prompt",
                            shorten(first.result.as_deref().unwrap_or(""), 60),
                            reruns.len()
                        ),
                        cost(&reruns),
                        known,
                        last.result_line.unwrap_or(last.asked_line).max(last.asked_line),
                    ));
                    continue;
                }
            }
            let same_result = same
                .iter()
                .all(|u| u.result.is_some() && u.result == first.result);
            if same_result {
                let last = same[same.len() - 1];
                out.push((
                    "repeated_tool_output",
                    format!(
                        "`{shown}` ran {} times with the same arguments and returned the same result each time",
                        same.len()
                    ),
                    cost(&same[1..]),
                    first.asked_line.min(first.result_line.unwrap_or(first.asked_line)),
                    last.result_line.unwrap_or(last.asked_line).max(last.asked_line),
                ));
            }
        }
        out
    }
}

/// The tool uses in one message, content-carrying body or item: OpenAI chat `tool_calls`,
/// Anthropic `tool_use` blocks, a Responses `function_call` item; as (id, name, arguments).
fn uses_in(v: &Value) -> Vec<(&str, &str, &Value)> {
    let mut out = Vec::new();
    for tc in v["tool_calls"].as_array().into_iter().flatten() {
        let f = &tc["function"];
        out.push((str_of(&tc["id"]), str_of(&f["name"]), &f["arguments"]));
    }
    for block in v["content"].as_array().into_iter().flatten() {
        if block["type"] == "tool_use" {
            out.push((
                str_of(&block["id"]),
                str_of(&block["name"]),
                &block["input"],
            ));
        }
    }
    if v["type"] == "function_call" {
        out.push((str_of(&v["call_id"]), str_of(&v["name"]), &v["arguments"]));
    }
    out
}

/// The tool results in one message or item: an OpenAI `role: "tool"` message, Anthropic
/// `tool_result` blocks, a Responses `function_call_output` item; as (id, content).
fn results_in(v: &Value) -> Vec<(&str, &Value)> {
    let mut out = Vec::new();
    if v["role"] == "tool" {
        out.push((str_of(&v["tool_call_id"]), &v["content"]));
    }
    for block in v["content"].as_array().into_iter().flatten() {
        if block["type"] == "tool_result" {
            out.push((str_of(&block["tool_use_id"]), &block["content"]));
        }
    }
    if v["type"] == "function_call_output" {
        out.push((str_of(&v["call_id"]), &v["output"]));
    }
    out
}

fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

fn shorten(s: &str, max: usize) -> String {
    let one_line = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= max {
        one_line
    } else {
        one_line.chars().take(max).collect::<String>() + "..."
    }
}

/// Whether a tool result says a check passed: a pass word (`passed`, `ok`, `success`,
/// `exit code 0`, ...) and no failure word (`fail`, `error`, `traceback`, ...), once
/// counts of zero (`0 failed`, `0 errors`) are discounted.
pub(crate) fn looks_passed(result: &str) -> bool {
    let mut t = result.to_lowercase();
    for zero in [
        "0 failed",
        "0 failures",
        "0 errors",
        "0 error",
        "failed: 0",
        "errors: 0",
    ] {
        t = t.replace(zero, "");
    }
    let bad = [
        "fail",
        "error",
        "traceback",
        "exception",
        "not ok",
        "exit code 1",
        "exit status 1",
    ];
    let good = [
        "passed",
        "pass",
        "ok",
        "success",
        "succeeded",
        "exit code 0",
        "exit status 0",
        "returncode 0",
        "\"exit_code\": 0",
        "\"exit_code\":0",
    ];
    !bad.iter().any(|b| t.contains(b)) && good.iter().any(|g| has_word(&t, g))
}

/// `word` in `text` with no letter or digit right before or after it.
fn has_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pass_words_are_read_with_zero_counts_discounted() {
        for yes in [
            "===== 5 passed in 0.12s =====",
            "OK",
            "Ran 3 tests\n\nOK",
            "exit code 0",
            "5 passed, 0 failed",
            "build succeeded",
        ] {
            assert!(looks_passed(yes), "{yes}");
        }
        for no in [
            "1 failed, 4 passed",
            "FAILED (errors=1)",
            "Traceback (most recent call last)",
            "token",
            "bypass",
            "exit code 1",
            "no tests ran",
        ] {
            assert!(!looks_passed(no), "{no}");
        }
    }
}
