//! The gateway in front of the embedded GGUF model. Needs the default model: run
//! `hevo model pull` first (these tests fail, not skip, without it).

use std::path::PathBuf;
use std::sync::Arc;

use hevo_llm::{
    model_file, Backend, Caps, ChatMessage, ChatRequest, Gateway, GatewayConfig, LocalBackend,
    LocalConfig, MemorySink, ModelRoute, OpenAiBackend, OpenAiConfig, PriceTable,
};
use serde_json::{json, Value};

use crate::common::sse_events;

fn model_path() -> PathBuf {
    model_file::require_default_model().unwrap_or_else(|e| {
        panic!("{e}\nthe local-model tests need the default model: run `hevo model pull`")
    })
}

/// The model with two workers, loaded from a private copy of the GGUF: the process-wide
/// registry shares one loaded model per file, and these tests run in parallel and assert on
/// what each worker's KV cache holds, so each gets its own workers. The directory must live
/// as long as the backend.
fn local_backend() -> (LocalBackend, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("model.gguf");
    std::fs::copy(model_path(), &copy).unwrap();
    let mut config = LocalConfig::new("local", copy);
    config.threads = 1;
    config.parallel = 2;
    let backend = LocalBackend::load(config).unwrap();
    assert_eq!(backend.parallel(), 2);
    (backend, dir)
}

fn local() -> (Arc<dyn Backend>, tempfile::TempDir) {
    let (backend, dir) = local_backend();
    let template = backend.chat_template().to_owned();
    assert!(
        template.contains("<|im_start|>") && template.contains("<|im_end|>"),
        "{template}"
    );
    (Arc::new(backend), dir)
}

fn route() -> Vec<ModelRoute> {
    vec![ModelRoute::new(
        "smollm2",
        "local",
        model_file::DEFAULT_MODEL_NAME,
    )]
}

/// A system prompt longer than one 64-token chunk, so a repeated prompt reuses a chunk.
const SYSTEM: &str = "You are a terse assistant. Answer every question in a few words, \
    without greetings, explanations, lists, caveats or follow-up questions. If you do not \
    know, say so in one word. Never repeat the question. Prefer common names of things.";

/// Tokens the local backend reuses from a cached prompt of `n` tokens repeated: whole
/// 64-token chunks, and never the last token (its logits must be computed).
fn reused_of(n: u64) -> u64 {
    (n - 1) / 64 * 64
}

fn chat(extra: Value) -> Value {
    let mut body = json!({
        "model": "smollm2",
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "Name three colors."},
        ],
        "temperature": 0,
        "max_tokens": 8,
    });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body
}

async fn post(client: &reqwest::Client, base: &str, key: &str, body: &Value) -> reqwest::Response {
    client
        .post(format!("{base}/chat/completions"))
        .bearer_auth(key)
        .json(body)
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_model_behind_the_gateway() {
    let sink = Arc::new(MemorySink::new());
    let (local, _model_dir) = local();
    let gw = Gateway::start(
        GatewayConfig::new(route(), PriceTable::builtin()),
        vec![local],
        sink.clone(),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let key = gw.open_trial("local", dir.path(), Caps::UNLIMITED).unwrap();
    let client = reqwest::Client::new();
    let base = gw.openai_base_url();

    // greedy, twice: same text; the second call reuses the KV cache for the whole prompt
    let first: Value = post(&client, &base, key.as_str(), &chat(json!({})))
        .await
        .json()
        .await
        .unwrap();
    let text = first["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(!text.is_empty(), "{first}");
    let prompt_tokens = first["usage"]["prompt_tokens"].as_u64().unwrap();
    assert!(prompt_tokens > 10, "{first}");
    assert!(first["usage"]["completion_tokens"].as_u64().unwrap() <= 8);
    let second: Value = post(&client, &base, key.as_str(), &chat(json!({})))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(second["choices"][0]["message"]["content"], text.as_str());
    assert!(prompt_tokens > 64, "{first}");
    assert_eq!(
        second["usage"]["prompt_tokens_details"]["cached_tokens"],
        reused_of(prompt_tokens)
    );

    // a trailing assistant message is a prefill: the model continues it (cut before a
    // whitespace so the prefix tokenizes as the model generated it)
    let cut = text
        .char_indices()
        .skip(1)
        .find(|(_, c)| c.is_whitespace())
        .map(|(i, _)| i)
        .unwrap_or_else(|| panic!("no whitespace in the greedy reply {text:?}"));
    let mut prefilled = chat(json!({}));
    prefilled["messages"]
        .as_array_mut()
        .unwrap()
        .push(json!({"role": "assistant", "content": &text[..cut]}));
    let cont: Value = post(&client, &base, key.as_str(), &prefilled)
        .await
        .json()
        .await
        .unwrap();
    let rest = cont["choices"][0]["message"]["content"].as_str().unwrap();
    let joined = format!("{}{rest}", &text[..cut]);
    assert!(
        joined.starts_with(&text),
        "prefill {:?} + continuation {rest:?} should extend the reply {text:?}",
        &text[..cut]
    );
    assert!(cont["usage"]["prompt_tokens"].as_u64().unwrap() > prompt_tokens);

    // streaming gives the same text in several chunks
    let sse = post(&client, &base, key.as_str(), &chat(json!({"stream": true})))
        .await
        .text()
        .await
        .unwrap();
    let deltas: Vec<String> = sse_events(&sse)
        .into_iter()
        .filter(|(_, d)| d != "[DONE]")
        .filter_map(|(_, d)| {
            serde_json::from_str::<Value>(&d).unwrap()["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .filter(|d| !d.is_empty())
        .collect();
    assert!(
        deltas.len() > 1,
        "the local model streams token by token: {deltas:?}"
    );
    assert_eq!(deltas.concat(), text);

    // a stop string cuts the text before it
    let cut = text.char_indices().nth(text.chars().count() / 2).unwrap().0;
    let stop: String = text[cut..].chars().take(2).collect();
    let stopped: Value = post(
        &client,
        &base,
        key.as_str(),
        &chat(json!({"stop": [stop.clone()]})),
    )
    .await
    .json()
    .await
    .unwrap();
    let expected = &text[..text.find(&stop).unwrap()];
    assert_eq!(
        stopped["choices"][0]["message"]["content"], expected,
        "stop {stop:?}"
    );
    assert_eq!(stopped["choices"][0]["finish_reason"], "stop");

    // log-probabilities of the next token: greedy picks the most likely one
    let lp: Value = post(
        &client,
        &base,
        key.as_str(),
        &chat(json!({"max_tokens": 1, "logprobs": true, "top_logprobs": 5})),
    )
    .await
    .json()
    .await
    .unwrap();
    let item = &lp["choices"][0]["logprobs"]["content"][0];
    let top = item["top_logprobs"].as_array().unwrap();
    assert_eq!(top.len(), 5);
    let values: Vec<f64> = top.iter().map(|t| t["logprob"].as_f64().unwrap()).collect();
    assert!(values.windows(2).all(|w| w[0] >= w[1]), "{values:?}");
    assert!(values.iter().map(|v| v.exp()).sum::<f64>() <= 1.0 + 1e-6);
    assert_eq!(item["token"], top[0]["token"]);
    assert!((item["logprob"].as_f64().unwrap() - values[0]).abs() < 1e-9);

    // seeded sampling is reproducible
    let seeded = chat(json!({"temperature": 1.0, "seed": 42, "max_tokens": 6}));
    let a: Value = post(&client, &base, key.as_str(), &seeded)
        .await
        .json()
        .await
        .unwrap();
    let b: Value = post(&client, &base, key.as_str(), &seeded)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        a["choices"][0]["message"]["content"],
        b["choices"][0]["message"]["content"]
    );

    let usage = gw.close_trial(&key).await;
    assert_eq!(usage.calls, 8);
    assert_eq!(usage.cost_usd, 0.0, "the local model is free");
    assert!(usage.cached_tokens > 0);
    gw.shutdown().await;
}

/// What the embedded model serves beyond chat completions (the Responses API, Anthropic's
/// messages with a system message inside `messages`) and what it refuses with a 400 that
/// names the field: tools, thinking, structured output, embeddings, token counting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_model_serves_text_in_every_dialect_and_refuses_the_rest_by_name() {
    let sink = Arc::new(MemorySink::new());
    let (local, _model_dir) = local();
    let gw = Gateway::start(
        GatewayConfig::new(route(), PriceTable::builtin()),
        vec![local],
        sink.clone(),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let key = gw.open_trial("local", dir.path(), Caps::UNLIMITED).unwrap();
    let client = reqwest::Client::new();
    let base = gw.anthropic_base_url();
    let send = |path: &str, body: Value| {
        client
            .post(format!("{base}{path}"))
            .header("x-api-key", key.as_str())
            .json(&body)
            .send()
    };
    let r: Value = send(
        "/v1/responses",
        json!({"model": "smollm2", "instructions": SYSTEM, "input": "Name three colors.",
               "max_output_tokens": 8, "temperature": 0}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(r["object"], "response", "{r}");
    assert_eq!(r["model"], model_file::DEFAULT_MODEL_NAME);
    assert!(!r["output"][0]["content"][0]["text"]
        .as_str()
        .unwrap()
        .is_empty());
    let m: Value = send(
        "/v1/messages",
        json!({"model": "smollm2", "max_tokens": 8, "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "Name three colors."}]}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(m["type"], "message", "{m}");
    let tools = json!([{"type": "function", "function": {"name": "f", "parameters": {}}}]);
    let refused = [
        (
            "/v1/chat/completions",
            chat(json!({"tools": tools})),
            "`tools`",
        ),
        (
            "/v1/chat/completions",
            chat(json!({"response_format": {"type": "json_object"}})),
            "`response_format`",
        ),
        (
            "/v1/messages",
            json!({"model": "smollm2", "max_tokens": 8, "thinking": {"type": "enabled",
                   "budget_tokens": 1024}, "messages": [{"role": "user", "content": "x"}]}),
            "`thinking`",
        ),
        (
            "/v1/embeddings",
            json!({"model": "smollm2", "input": "x"}),
            "embeddings",
        ),
        (
            "/v1/messages/count_tokens",
            json!({"model": "smollm2", "messages": [{"role": "user", "content": "x"}]}),
            "token counting",
        ),
    ];
    for (path, body, needle) in refused {
        let response = send(path, body).await.unwrap();
        assert_eq!(response.status(), 400, "{path}");
        let err: Value = response.json().await.unwrap();
        let message = err["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(needle) && message.contains("`local`"),
            "{path}: {message}"
        );
    }
    let usage = gw.close_trial(&key).await;
    assert_eq!(usage.calls, 2);
    gw.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_backend_in_front_of_a_second_gateway_running_the_local_model() {
    let (local, _model_dir) = local();
    let inner = Gateway::start(
        GatewayConfig::new(route(), PriceTable::builtin()),
        vec![local],
        Arc::new(MemorySink::new()),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let inner_key = inner
        .open_trial("inner", &dir.path().join("inner"), Caps::UNLIMITED)
        .unwrap();
    std::env::set_var("HEVO_TEST_INNER_KEY", inner_key.as_str());
    let backend = OpenAiBackend::new(OpenAiConfig::new(
        "up",
        &inner.openai_base_url(),
        Some("HEVO_TEST_INNER_KEY"),
    ))
    .unwrap();
    let prices = PriceTable::empty()
        .with_toml("[\"smollm2\"]\nfree = true\n")
        .unwrap();
    let sink = Arc::new(MemorySink::new());
    let outer = Gateway::start(
        GatewayConfig::new(vec![ModelRoute::new("m", "up", "smollm2")], prices),
        vec![Arc::new(backend)],
        sink.clone(),
    )
    .unwrap();
    let key = outer
        .open_trial("outer", &dir.path().join("outer"), Caps::UNLIMITED)
        .unwrap();
    let client = reqwest::Client::new();
    let mut body = chat(json!({"max_tokens": 4}));
    body["model"] = json!("m");
    let direct: Value = post(
        &client,
        &inner.openai_base_url(),
        inner_key.as_str(),
        &chat(json!({"max_tokens": 4})),
    )
    .await
    .json()
    .await
    .unwrap();
    let via: Value = post(&client, &outer.openai_base_url(), key.as_str(), &body)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        via["choices"][0]["message"]["content"],
        direct["choices"][0]["message"]["content"]
    );
    assert_eq!(
        via["usage"]["prompt_tokens"],
        direct["usage"]["prompt_tokens"]
    );
    let records = sink.records();
    assert_eq!(records[0].trial_id, "outer");
    assert_eq!(
        records[0].cached_tokens + records[0].input_tokens,
        direct["usage"]["prompt_tokens"].as_u64().unwrap()
    );
    assert_eq!(inner.close_trial(&inner_key).await.calls, 2);
}

fn greedy(messages: &[(&str, &str)]) -> ChatRequest {
    let messages = messages
        .iter()
        .map(|(role, text)| ChatMessage::new(*role, *text))
        .collect();
    let mut request = ChatRequest::new(model_file::DEFAULT_MODEL_NAME, messages);
    request.temperature = Some(0.0);
    request.max_tokens = Some(6);
    request
}

/// Two conversations at once on two workers: each is answered as it is alone, and each
/// one's next turn goes back to the worker holding its first turn in its KV cache (with one
/// worker, or no affinity, at least one of them would re-evaluate its whole prompt).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_answer_two_conversations_and_keep_each_in_its_cache() {
    let (backend, _model_dir) = local_backend();
    let system_a = format!("{SYSTEM} You answer questions about geography.");
    let system_b = "You are a cheerful poet. Reply in rhymes about the sea and the sky. \
        Every line has eight syllables, every verse four lines, and every poem ends with a \
        line about the moon. Never explain the poem and never address the reader.";
    let system_a = system_a.as_str();
    let first_a = greedy(&[("system", system_a), ("user", "Name a river in Europe.")]);
    let first_b = greedy(&[("system", system_b), ("user", "Write a line about waves.")]);
    let (a1, b1) = tokio::join!(
        backend.complete(first_a.clone(), None),
        backend.complete(first_b.clone(), None)
    );
    let (a1, b1) = (a1.unwrap().response, b1.unwrap().response);

    // Alone, one after the other: the same greedy replies.
    let alone_a = backend.complete(first_a, None).await.unwrap().response;
    let alone_b = backend.complete(first_b, None).await.unwrap().response;
    assert_eq!(alone_a.content, a1.content);
    assert_eq!(alone_b.content, b1.content);

    let next_a = greedy(&[
        ("system", system_a),
        ("user", "Name a river in Europe."),
        ("assistant", &a1.content),
        ("user", "And one in Asia?"),
    ]);
    let next_b = greedy(&[
        ("system", system_b),
        ("user", "Write a line about waves."),
        ("assistant", &b1.content),
        ("user", "Now one about clouds."),
    ]);
    let (a2, b2) = tokio::join!(
        backend.complete(next_a, None),
        backend.complete(next_b, None)
    );
    for (first, next) in [(&a1, a2.unwrap().response), (&b1, b2.unwrap().response)] {
        // The first prompt's whole chunks are reused.
        assert!(first.usage.prompt_tokens > 64);
        assert_eq!(
            next.usage.cached_tokens,
            first.usage.prompt_tokens / 64 * 64,
            "next turn reused {} of the first turn's {} prompt tokens",
            next.usage.cached_tokens,
            first.usage.prompt_tokens
        );
        assert!(next.usage.prompt_tokens > first.usage.prompt_tokens);
    }
}

fn label_logprobs(response: &hevo_llm::ChatResponse) -> Vec<(String, f64)> {
    response.logprobs.as_ref().unwrap()[0]
        .top_logprobs
        .iter()
        .map(|t| (t.token.clone(), t.logprob))
        .collect()
}

/// A prompt's log-probs are bit-for-bit the same whatever the worker answered before: after a
/// prompt sharing 85 of its tokens, after one sharing a different part, after an unrelated
/// one. (Reusing a cached prefix of any length moved them by up to 0.15 before prompts were
/// cut into fixed chunks.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_do_not_depend_on_what_the_cache_held() {
    let (backend, _model_dir) = local_backend();
    let system = "Classify the following text as one of: business, entertainment, politics, \
        sports, tech. "
        .repeat(4);
    let scored = |text: &str| {
        let mut request = greedy(&[("system", &system), ("user", text)]);
        request.max_tokens = Some(1);
        request.logprobs = true;
        request.top_logprobs = 20;
        request
    };
    let text = "The European Central Bank has left its key interest rate unchanged at 2% for \
        the 19th month in succession. Borrowing costs have remained on hold amid concerns \
        about the strength of economic growth.";
    let fresh = backend.complete(scored(text), None).await.unwrap().response;
    let mut reused = 0;
    for before in [
        "Some other text entirely, about sports.",
        "The European Central Bank raised",
        "x",
    ] {
        backend.complete(scored(before), None).await.unwrap();
        backend.complete(scored(before), None).await.unwrap();
        let again = backend.complete(scored(text), None).await.unwrap().response;
        reused = reused.max(again.usage.cached_tokens);
        assert_eq!(
            label_logprobs(&again),
            label_logprobs(&fresh),
            "after {before:?}"
        );
    }
    assert!(reused >= 64, "the cache was reused: {reused} tokens");
}

/// One trial floods the local model (16 requests at once on its two workers), then another
/// trial sends one: the model serves its callers in turn, so the second trial's request is
/// answered after at most a few of the first trial's, not after its whole backlog (it was
/// the 17th of 17 when the queue was first come, first served).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trial_that_floods_the_local_model_does_not_starve_another() {
    let (local, _model_dir) = local();
    let gw = Gateway::start(
        GatewayConfig::new(route(), PriceTable::builtin()),
        vec![local],
        Arc::new(MemorySink::new()),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let flood = gw
        .open_trial("flood", &dir.path().join("a"), Caps::UNLIMITED)
        .unwrap();
    let other = gw
        .open_trial("other", &dir.path().join("b"), Caps::UNLIMITED)
        .unwrap();
    let client = reqwest::Client::new();
    let base = gw.openai_base_url();
    let done = Arc::new(std::sync::Mutex::new(Vec::new()));
    let send = |key: String, label: &'static str| {
        let (client, base, done) = (client.clone(), base.clone(), done.clone());
        tokio::spawn(async move {
            let body = chat(json!({"max_tokens": 24}));
            let reply = post(&client, &base, &key, &body).await;
            assert!(reply.status().is_success(), "{label}: {}", reply.status());
            done.lock().unwrap().push(label);
        })
    };
    let mut tasks: Vec<_> = (0..16)
        .map(|_| send(flood.as_str().to_owned(), "flood"))
        .collect();
    // Every flood request is in the gateway (and so, a moment later, queued) first.
    while gw.live_calls() < 16 {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    tasks.push(send(other.as_str().to_owned(), "other"));
    for t in tasks {
        t.await.unwrap();
    }
    let order = done.lock().unwrap().clone();
    let before = order.iter().position(|l| *l == "other").unwrap();
    assert!(
        before <= 8,
        "the other trial's request was answered after {before} of the flood's 16: {order:?}"
    );
    gw.close_trial(&flood).await;
    gw.close_trial(&other).await;
}
