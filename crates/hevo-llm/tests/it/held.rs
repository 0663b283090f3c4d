//! An upstream on loopback that holds its answers until the test lets them go, and a gateway
//! in front of it: for the tests of calls that outlive their caller, their trial or the
//! gateway, and of streams that end badly.
//!
//! It speaks OpenAI's chat completions and Responses API and Anthropic's messages, plain
//! and streamed (raw HTTP/1.1, one request per connection, a stream's events each flushed
//! as a chunk), and reads what to do from `MODE:<mode>` in the request body:
//!
//! - `plain` (no mode): answers at once;
//! - `hold`: answers (headers included) only once [`Held::release`] was called;
//! - `hold_stream`: a stream sends its first events at once (Anthropic's `message_start`
//!   carries the input tokens), the rest once released; a plain answer waits like `hold`;
//! - `break`: a stream sends its first events, then the connection is cut mid-body;
//! - `error_event`: a stream sends its first events, then ends with the API's error
//!   (Anthropic's `event: error`, the Responses API's `response.failed`, an error chunk);
//! - `no_end`: a stream sends its first events, then ends cleanly without its last event.
//!
//! Every answer reports the same usage: 1000 input tokens (600 of them cached for Anthropic,
//! 200 for OpenAI) and 500 output tokens.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hevo_llm::{
    AnthropicBackend, AnthropicConfig, Backend, CallRecord, CallStatus, Caps, Gateway,
    GatewayConfig, GatewayHandle, MemorySink, ModelPrice, ModelRoute, OpenAiBackend, OpenAiConfig,
    PriceTable, TrialKey, Usage,
};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::clients::{python_with_sdks, run, UPSTREAM_KEY_VAR};

/// The price of the upstream models: $1 / $0.25 / $4 per million tokens.
pub const PRICE: ModelPrice = ModelPrice::paid(1.0, 0.25, 4.0);

struct Shared {
    gate: watch::Sender<bool>,
    arrived: AtomicUsize,
    answered: AtomicUsize,
}

/// A running holding upstream.
pub struct Held {
    /// `http://127.0.0.1:PORT` (the Anthropic base; OpenAI's is this + `/v1`).
    pub base: String,
    shared: Arc<Shared>,
}

impl Held {
    /// Lets every held answer go, now and from now on.
    pub fn release(&self) {
        self.shared.gate.send_replace(true);
    }

    /// Requests received so far.
    pub fn arrived(&self) -> usize {
        self.shared.arrived.load(Ordering::SeqCst)
    }

    /// Answers sent in full so far (a stream: up to its last event).
    pub fn answered(&self) -> usize {
        self.shared.answered.load(Ordering::SeqCst)
    }
}

/// Starts a holding upstream on a free port.
pub async fn start() -> Held {
    let shared = Arc::new(Shared {
        gate: watch::Sender::new(false),
        arrived: AtomicUsize::new(0),
        answered: AtomicUsize::new(0),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let serving = shared.clone();
    tokio::spawn(async move {
        loop {
            let (socket, _) = listener.accept().await.unwrap();
            tokio::spawn(answer(serving.clone(), socket));
        }
    });
    Held {
        base: format!("http://{addr}"),
        shared,
    }
}

async fn opened(shared: &Shared) {
    let _ = shared.gate.subscribe().wait_for(|open| *open).await;
}

fn mode(body: &Value) -> String {
    let text = body.to_string();
    text.split("MODE:")
        .nth(1)
        .map(|rest| {
            rest.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        })
        .unwrap_or_else(|| "plain".into())
}

/// One API's answer: the whole body, and a stream's events before and after the hold.
struct Script {
    whole: Value,
    first: Vec<String>,
    rest: Vec<String>,
    error: Vec<String>,
}

fn event(name: Option<&str>, data: &Value) -> String {
    match name {
        Some(name) => format!("event: {name}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

fn chat(model: &str, include_usage: bool) -> Script {
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

fn messages(model: &str) -> Script {
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

fn responses(model: &str) -> Script {
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

/// Reads one request (`Content-Length` body) from `socket`: its path and JSON body.
async fn read_request(socket: &mut TcpStream) -> Option<(String, Value)> {
    let mut buf = Vec::new();
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let mut chunk = [0u8; 8192];
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let path = head.split_whitespace().nth(1)?.to_owned();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        let mut chunk = [0u8; 8192];
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some((path, serde_json::from_slice(&body).ok()?))
}

/// Writes `event` as one chunk of a chunked body, flushed.
async fn chunk(socket: &mut TcpStream, event: &str) -> std::io::Result<()> {
    let framed = format!("{:x}\r\n{event}\r\n", event.len());
    socket.write_all(framed.as_bytes()).await?;
    socket.flush().await
}

/// Answers one request on `socket` as its mode says (see the module documentation); raw
/// HTTP/1.1, so that a stream can be cut after its first events have surely been sent.
async fn answer(shared: Arc<Shared>, mut socket: TcpStream) -> std::io::Result<()> {
    let Some((path, body)) = read_request(&mut socket).await else {
        return Ok(());
    };
    shared.arrived.fetch_add(1, Ordering::SeqCst);
    let mode = mode(&body);
    let model = body["model"].as_str().unwrap_or("").to_owned();
    let script = match path.as_str() {
        "/v1/chat/completions" => chat(
            &model,
            body["stream_options"]["include_usage"] == json!(true),
        ),
        "/v1/messages" => messages(&model),
        _ => responses(&model),
    };
    let streamed = body["stream"] == json!(true);
    if mode == "hold" || (mode == "hold_stream" && !streamed) {
        opened(&shared).await;
    }
    if !streamed {
        let whole = script.whole.to_string();
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n",
            whole.len()
        );
        socket.write_all(head.as_bytes()).await?;
        socket.write_all(whole.as_bytes()).await?;
        socket.flush().await?;
        shared.answered.fetch_add(1, Ordering::SeqCst);
        return socket.shutdown().await;
    }
    socket
        .write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
              transfer-encoding: chunked\r\nconnection: close\r\n\r\n",
        )
        .await?;
    for event in &script.first {
        chunk(&mut socket, event).await?;
    }
    match mode.as_str() {
        // the first events are sent; the body ends without its last chunk
        "break" => return socket.shutdown().await,
        "error_event" => {
            for event in &script.error {
                chunk(&mut socket, event).await?;
            }
        }
        "no_end" => {}
        _ => {
            if mode == "hold_stream" {
                opened(&shared).await;
            }
            for event in &script.rest {
                chunk(&mut socket, event).await?;
            }
            shared.answered.fetch_add(1, Ordering::SeqCst);
        }
    }
    socket.write_all(b"0\r\n\r\n").await?;
    socket.flush().await?;
    socket.shutdown().await
}

/// A holding upstream, a gateway in front of it (`gpt-test` on an `openai` backend,
/// `claude-test` on an `anthropic` one, both priced [`PRICE`]) and what it recorded.
pub struct HeldGateway {
    /// Temp dir (traces, the clients' home).
    pub dir: tempfile::TempDir,
    /// The upstream.
    pub upstream: Held,
    /// The gateway.
    pub gateway: GatewayHandle,
    /// Every ledger row.
    pub sink: Arc<MemorySink>,
}

impl HeldGateway {
    /// Starts both; closing a trial waits at most `drain_timeout` for its calls.
    pub async fn start(drain_timeout: Duration) -> Self {
        Self::start_with(|config| config.drain_timeout = drain_timeout).await
    }

    /// Starts both, the gateway with the config `configure` makes of the default one.
    pub async fn start_with(configure: impl FnOnce(&mut GatewayConfig)) -> Self {
        let upstream = start().await;
        std::env::set_var(UPSTREAM_KEY_VAR, "upstream-secret");
        let openai: Arc<dyn Backend> = Arc::new(
            OpenAiBackend::new(OpenAiConfig::new(
                "up-openai",
                &format!("{}/v1", upstream.base),
                Some(UPSTREAM_KEY_VAR),
            ))
            .unwrap(),
        );
        let anthropic: Arc<dyn Backend> = Arc::new(
            AnthropicBackend::new(AnthropicConfig::new(
                "up-anthropic",
                &upstream.base,
                UPSTREAM_KEY_VAR,
            ))
            .unwrap(),
        );
        let prices = PriceTable::empty()
            .with_overrides(["gpt-up", "claude-up"].map(|m| (m.to_owned(), PRICE)))
            .unwrap();
        let mut config = GatewayConfig::new(
            vec![
                ModelRoute::new("gpt-test", "up-openai", "gpt-up"),
                ModelRoute::new("claude-test", "up-anthropic", "claude-up"),
            ],
            prices,
        );
        configure(&mut config);
        let sink = Arc::new(MemorySink::new());
        let gateway = Gateway::start(config, vec![openai, anthropic], sink.clone()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        Self {
            dir,
            upstream,
            gateway,
            sink,
        }
    }

    /// Opens trial `id` with `caps`.
    pub fn trial(&self, id: &str, caps: Caps) -> TrialKey {
        let trace = self.dir.path().join("trace").join(id);
        self.gateway.open_trial(id, &trace, caps).unwrap()
    }

    /// Runs `py/<script>` as a harness of the trial `key` with `vars` added to its
    /// environment; returns the JSON line it printed last, or `None` when the SDKs are not
    /// installed (the test is then skipped, loudly).
    pub fn harness(&self, script: &str, key: &TrialKey, vars: &[(&str, &str)]) -> Option<Value> {
        let python = python_with_sdks()?;
        let mut command = std::process::Command::new(python);
        command.arg(
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("tests/it/py")
                .join(script),
        );
        let mut env = self.gateway.harness_env(key);
        env.push((
            "HOME".into(),
            self.dir.path().join("home").display().to_string(),
        ));
        env.extend(vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        let (ok, output) = tokio::task::block_in_place(|| run(command, &env, self.dir.path()));
        assert!(ok, "{script} failed:\n{output}");
        let line = output
            .lines()
            .rev()
            .find(|l| l.starts_with('{'))
            .unwrap_or_else(|| panic!("{script} printed no JSON:\n{output}"));
        Some(serde_json::from_str(line).unwrap())
    }

    /// The ledger rows of `trial`.
    pub fn rows(&self, trial: &str) -> Vec<CallRecord> {
        let rows = self.sink.records();
        rows.into_iter().filter(|r| r.trial_id == trial).collect()
    }
}

/// Asserts that `row` is a call priced by `input` (uncached, cached) and `output` tokens.
pub fn assert_priced(row: &CallRecord, status: CallStatus, input: (u64, u64), output: u64) {
    assert_eq!(row.status, status, "{row:#?}");
    assert_eq!(
        (row.input_tokens, row.cached_tokens, row.output_tokens),
        (input.0, input.1, output),
        "{row:#?}"
    );
    let cost = PRICE.cost(&Usage {
        prompt_tokens: input.0 + input.1,
        cached_tokens: input.1,
        output_tokens: output,
    });
    assert!((row.cost_usd - cost).abs() < 1e-12, "{row:#?}");
}
