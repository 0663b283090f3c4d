//! The gateway in front of an OpenAI-compatible upstream on loopback.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use hevo_llm::{CallStatus, Caps};
use serde_json::json;

use crate::common::{body, sse_events, MockUpstream, Setup, TestContext};

#[tokio::test]
async fn concurrent_trials_are_attributed_to_their_own_keys() {
    let t = TestContext::start(Setup::default()).await;
    let keys: Vec<_> = (0..3)
        .map(|i| t.trial(&format!("trial-{i}"), Caps::UNLIMITED))
        .collect();
    let mut calls = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        // trial i makes i + 2 calls, each with (i + 1) extra words
        for j in 0..(i + 2) {
            let user = vec!["w"; i + 1].join(" ");
            let key = key.as_str().to_owned();
            let t = &t;
            calls.push(async move {
                let (status, resp) = t.chat(Some(&key), body("mock-1", &user)).await;
                assert_eq!(status, 200, "{resp}");
                assert_eq!(
                    resp["choices"][0]["message"]["content"],
                    format!("echo: {user}")
                );
                j
            });
        }
    }
    futures::future::join_all(calls).await;
    for (i, key) in keys.iter().enumerate() {
        let usage = t.gateway.close_trial(key).await;
        let n = (i + 2) as u64;
        assert_eq!(usage.calls, n, "trial {i}");
        // 10 + 4 (system) + (i+1) prompt words; "echo:" + (i+1) output words
        assert_eq!(
            usage.input_tokens + usage.cached_tokens,
            n * (15 + i as u64)
        );
        assert_eq!(usage.output_tokens, n * (i as u64 + 2));
        assert!(!usage.budget_exceeded);
    }
    let records = t.sink.records();
    assert_eq!(records.len(), 2 + 3 + 4);
    for i in 0..3 {
        let id = format!("trial-{i}");
        let mine: Vec<_> = records.iter().filter(|r| r.trial_id == id).collect();
        assert_eq!(mine.len(), i + 2);
        let mut seqs: Vec<u64> = mine.iter().map(|r| r.seq).collect();
        seqs.sort();
        assert_eq!(seqs, (0..(i as u64 + 2)).collect::<Vec<_>>());
    }
    let run = t.gateway.run_usage();
    assert_eq!(run.calls, 9);
    assert!((run.cost_usd - records.iter().map(|r| r.cost_usd).sum::<f64>()).abs() < 1e-12);
}

#[tokio::test]
async fn unknown_missing_and_expired_keys_get_401() {
    let t = TestContext::start(Setup::default()).await;
    let (status, resp) = t.chat(None, body("mock-1", "hi")).await;
    assert_eq!(status, 401);
    assert_eq!(resp["error"]["code"], "invalid_api_key");
    let (status, resp) = t.chat(Some("hevo-not-a-key"), body("mock-1", "hi")).await;
    assert_eq!(status, 401);
    assert!(resp["error"]["message"]
        .as_str()
        .unwrap()
        .contains("unknown or expired"));

    let key = t.trial("t", Caps::UNLIMITED);
    assert_eq!(
        t.chat(Some(key.as_str()), body("mock-1", "hi")).await.0,
        200
    );
    let models = t
        .client
        .get(format!("{}/models", t.gateway.openai_base_url()))
        .bearer_auth(key.as_str())
        .send()
        .await
        .unwrap();
    assert_eq!(models.status(), 200);
    let models: serde_json::Value = models.json().await.unwrap();
    assert!(models["data"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["id"] == "gpt-4o-mini"));

    t.gateway.close_trial(&key).await;
    let (status, _) = t.chat(Some(key.as_str()), body("mock-1", "hi")).await;
    assert_eq!(status, 401, "a closed trial's key expires");
    let models = t
        .client
        .get(format!("{}/models", t.gateway.openai_base_url()))
        .bearer_auth(key.as_str())
        .send()
        .await
        .unwrap();
    assert_eq!(models.status(), 401);
    assert_eq!(t.upstream.log.requests.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn malformed_bodies_get_openai_errors_that_say_what_is_wrong() {
    let t = TestContext::start(Setup::default()).await;
    let key = t.trial("t", Caps::UNLIMITED);
    let url = format!("{}/chat/completions", t.gateway.openai_base_url());
    let resp = t
        .client
        .post(&url)
        .bearer_auth(key.as_str())
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let err: serde_json::Value = resp.json().await.unwrap();
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not valid JSON"),
        "{err}"
    );
    assert_eq!(err["error"]["type"], "invalid_request_error");

    let cases = [
        (json!({"model": "mock-1"}), "messages"),
        (
            json!({"model": "mock-1", "messages": []}),
            "at least one message",
        ),
        (
            json!({"model": "mock-1", "messages": [{"role": "user", "content": "x"}],
                "temperature": 7}),
            "temperature",
        ),
        (
            json!({"model": "mock-1", "messages": [{"role": "user", "content": "x"}],
                "top_logprobs": 3}),
            "logprobs",
        ),
        (
            json!({"model": "mock-1", "messages": [{"role": "user", "content": 5}]}),
            "messages[0].content must be a string",
        ),
    ];
    for (bad, needle) in cases {
        let (status, err) = t.chat(Some(key.as_str()), bad.clone()).await;
        assert_eq!(status, 400, "{bad}");
        let msg = err["error"]["message"].as_str().unwrap();
        assert!(msg.contains(needle), "{bad} -> {msg}");
    }
    let (status, err) = t.chat(Some(key.as_str()), body("no-such-model", "x")).await;
    assert_eq!(status, 404);
    assert!(
        err["error"]["message"].as_str().unwrap().contains("mock-1"),
        "{err}"
    );
    assert_eq!(t.upstream.log.requests.load(Ordering::SeqCst), 0);
    let records = t.sink.records();
    assert_eq!(records.len(), 7);
    assert!(records
        .iter()
        .all(|r| r.status == CallStatus::BadRequest && r.error.is_some()));
}

#[tokio::test]
async fn trial_cap_answers_429_and_marks_budget_exceeded() {
    let t = TestContext::start(Setup::default()).await;
    let caps = Caps {
        max_tokens: Some(20),
        ..Caps::UNLIMITED
    };
    let key = t.trial("capped", caps);
    let other = t.trial("free", Caps::UNLIMITED);
    // 10 + 4 + 2 = 16 prompt + 3 output = 19 tokens: under the cap
    assert_eq!(
        t.chat(Some(key.as_str()), body("mock-1", "a b")).await.0,
        200
    );
    // crosses the cap (answered: its tokens are spent) ...
    assert_eq!(
        t.chat(Some(key.as_str()), body("mock-1", "a b")).await.0,
        200
    );
    assert!(t.gateway.trial_usage(&key).unwrap().budget_exceeded);
    // ... and the next one is refused
    let resp = t
        .client
        .post(format!("{}/chat/completions", t.gateway.openai_base_url()))
        .bearer_auth(key.as_str())
        .json(&body("mock-1", "a b"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.headers()["x-should-retry"], "false");
    let err: serde_json::Value = resp.json().await.unwrap();
    let msg = err["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("budget exceeded") && msg.contains("token cap") && msg.contains("capped"),
        "{msg}"
    );
    assert_eq!(err["error"]["code"], "budget_exceeded");
    // other trials are not affected
    assert_eq!(
        t.chat(Some(other.as_str()), body("mock-1", "a b")).await.0,
        200
    );
    let usage = t.gateway.close_trial(&key).await;
    assert!(usage.budget_exceeded);
    assert_eq!(usage.calls, 2);
    assert_eq!(t.upstream.log.requests.load(Ordering::SeqCst), 3);
    let refused: Vec<_> = t
        .sink
        .records()
        .into_iter()
        .filter(|r| r.status == CallStatus::BudgetExceeded)
        .collect();
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].trial_id, "capped");
}

#[tokio::test]
async fn run_cap_in_dollars_stops_every_trial() {
    // the first call costs (16 * 1 + 3 * 4) / 1e6 = $0.000028, the second $0.000025
    let caps = Caps {
        max_cost_usd: Some(0.00005),
        ..Caps::UNLIMITED
    };
    let t = TestContext::start(Setup {
        run_caps: caps,
        ..Setup::default()
    })
    .await;
    let a = t.trial("a", Caps::UNLIMITED);
    let b = t.trial("b", Caps::UNLIMITED);
    assert_eq!(t.chat(Some(a.as_str()), body("mock-1", "a b")).await.0, 200);
    assert_eq!(t.chat(Some(b.as_str()), body("mock-1", "a b")).await.0, 200);
    let (status, err) = t.chat(Some(a.as_str()), body("mock-1", "a b")).await;
    assert_eq!(status, 429);
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("run dollar cap"),
        "{err}"
    );
    assert!(t.gateway.close_trial(&a).await.budget_exceeded);
    assert!(
        t.gateway.close_trial(&b).await.budget_exceeded,
        "b crossed the run cap"
    );
}

#[tokio::test]
async fn streaming_sends_sse_chunks_with_usage() {
    let t = TestContext::start(Setup::default()).await;
    let key = t.trial("s", Caps::UNLIMITED);
    let mut req = body("mock-1", "one two three");
    req["stream"] = json!(true);
    req["stream_options"] = json!({"include_usage": true});
    let resp = t
        .client
        .post(format!("{}/chat/completions", t.gateway.openai_base_url()))
        .bearer_auth(key.as_str())
        .json(&req)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let events = sse_events(&resp.text().await.unwrap());
    assert_eq!(events.last().unwrap().1, "[DONE]");
    let chunks: Vec<serde_json::Value> = events[..events.len() - 1]
        .iter()
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect();
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "echo: one two three");
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    assert!(chunks
        .iter()
        .all(|c| c["object"] == "chat.completion.chunk"));
    let finish: Vec<_> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["finish_reason"].as_str())
        .collect();
    assert_eq!(finish, ["stop"]);
    let usage = &chunks.last().unwrap()["usage"];
    assert_eq!(usage["completion_tokens"], 4);
    assert_eq!(usage["prompt_tokens"], 17);
    let usage = t.gateway.close_trial(&key).await;
    assert_eq!((usage.calls, usage.output_tokens), (1, 4));
    // the stream came from the upstream, event by event; the trace keeps its events
    let trace = t.trace("s");
    assert_eq!(trace[1]["body"]["stream"], true);
    assert_eq!(trace[1]["body"]["usage"]["output_tokens"], 4);
    let traced: String = trace[1]["body"]["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["data"]["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(traced, "echo: one two three");
}

#[tokio::test]
async fn cached_prompt_tokens_are_counted_and_priced_apart() {
    let t = TestContext::start(Setup::default()).await;
    let key = t.trial("c", Caps::UNLIMITED);
    let (_, first) = t.chat(Some(key.as_str()), body("mock-1", "x")).await;
    assert_eq!(first["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    // the same system prompt again: the mock reports its 4 words as cached
    let (_, second) = t.chat(Some(key.as_str()), body("mock-1", "x")).await;
    assert_eq!(second["usage"]["prompt_tokens_details"]["cached_tokens"], 4);
    let records = t.sink.records();
    assert_eq!((records[1].input_tokens, records[1].cached_tokens), (11, 4));
    let expected = (11.0 * 1.0 + 4.0 * 0.25 + 2.0 * 4.0) / 1e6;
    assert!(
        (records[1].cost_usd - expected).abs() < 1e-15,
        "{}",
        records[1].cost_usd
    );
    let usage = t.gateway.close_trial(&key).await;
    assert_eq!((usage.input_tokens, usage.cached_tokens), (15 + 11, 4));
}

#[tokio::test]
async fn deterministic_requests_hit_the_response_cache_at_full_price() {
    let cache = tempfile::tempdir().unwrap();
    let setup = || Setup {
        cache_dir: Some(cache.path().to_owned()),
        ..Setup::default()
    };
    let t = TestContext::start(setup()).await;
    let key = t.trial("k", Caps::UNLIMITED);
    let mut req = body("mock-1", "cache me");
    req["temperature"] = json!(0);
    let (_, first) = t.chat(Some(key.as_str()), req.clone()).await;
    let (_, second) = t.chat(Some(key.as_str()), req.clone()).await;
    assert_eq!(first["choices"], second["choices"]);
    assert_eq!(t.upstream.log.requests.load(Ordering::SeqCst), 1);
    // not deterministic: never cached
    let mut hot = body("mock-1", "cache me");
    hot["temperature"] = json!(0.7);
    t.chat(Some(key.as_str()), hot.clone()).await;
    t.chat(Some(key.as_str()), hot).await;
    assert_eq!(t.upstream.log.requests.load(Ordering::SeqCst), 3);
    let records = t.sink.records();
    assert_eq!(
        records.iter().map(|r| r.cache_hit).collect::<Vec<_>>(),
        [false, true, false, false]
    );
    assert_eq!(
        records[1].cost_usd, records[0].cost_usd,
        "a hit costs what the call would have"
    );
    assert!(records[1].cost_usd > 0.0);
    let usage = t.gateway.close_trial(&key).await;
    assert_eq!((usage.calls, usage.cache_hits), (4, 1));

    // a second run (new gateway, same cache dir, same upstream) hits too; a fixed seed is
    // deterministic
    let same_upstream = MockUpstream {
        base_url: t.upstream.base_url.clone(),
        log: Arc::clone(&t.upstream.log),
    };
    let t2 = TestContext::start_with(setup(), same_upstream).await;
    let key2 = t2.trial("k2", Caps::UNLIMITED);
    t2.chat(Some(key2.as_str()), req.clone()).await;
    let mut seeded = body("mock-1", "seeded");
    seeded["seed"] = json!(7);
    seeded["temperature"] = json!(1.0);
    t2.chat(Some(key2.as_str()), seeded.clone()).await;
    t2.chat(Some(key2.as_str()), seeded).await;
    assert_eq!(t2.upstream.log.requests.load(Ordering::SeqCst), 3 + 1);
    let hits: Vec<bool> = t2.sink.records().iter().map(|r| r.cache_hit).collect();
    assert_eq!(hits, [true, false, true]);

    // another upstream (another URL) may answer the same request differently: a miss
    let t3 = TestContext::start(setup()).await;
    let key3 = t3.trial("k3", Caps::UNLIMITED);
    t3.chat(Some(key3.as_str()), req).await;
    assert_eq!(t3.upstream.log.requests.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn traces_hold_every_request_and_response_in_order() {
    let t = TestContext::start(Setup::default()).await;
    let key = t.trial("tr", Caps::UNLIMITED);
    t.chat(Some(key.as_str()), body("mock-1", "first")).await;
    t.chat(Some(key.as_str()), json!({"model": "mock-1"})).await;
    t.chat(Some(key.as_str()), body("mock-1", "third")).await;
    t.gateway.close_trial(&key).await;
    let trace = t.trace("tr");
    let kinds: Vec<(u64, &str)> = trace
        .iter()
        .map(|l| (l["seq"].as_u64().unwrap(), l["type"].as_str().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [
            (0, "request"),
            (0, "response"),
            (1, "request"),
            (1, "response"),
            (2, "request"),
            (2, "response")
        ]
    );
    assert_eq!(trace[0]["body"]["messages"][1]["content"], "first");
    assert_eq!(trace[1]["status"], 200);
    assert_eq!(
        trace[1]["body"]["choices"][0]["message"]["content"],
        "echo: first"
    );
    assert_eq!(trace[3]["status"], 400);
    assert!(trace[3]["body"]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("messages"));
    assert!(trace
        .iter()
        .all(|l| l["api"] == "openai" && l["ts_ms"].as_u64().is_some()));
}

#[tokio::test]
async fn upstream_429_and_5xx_are_retried_as_infra_faults() {
    let t = TestContext::start(Setup::default()).await;
    let key = t.trial("r", Caps::UNLIMITED);
    t.upstream.log.flaky_left.store(2, Ordering::SeqCst);
    let (status, resp) = t.chat(Some(key.as_str()), body("flaky", "x")).await;
    assert_eq!(status, 200, "{resp}");
    assert_eq!(t.upstream.log.requests.load(Ordering::SeqCst), 3);
    let (status, err) = t.chat(Some(key.as_str()), body("broken", "x")).await;
    assert_eq!(status, 502);
    assert!(
        err["error"]["message"].as_str().unwrap().contains("500"),
        "{err}"
    );
    assert_eq!(
        t.upstream.log.requests.load(Ordering::SeqCst),
        3 + 4,
        "1 try + 3 retries"
    );
    let records = t.sink.records();
    assert_eq!((records[0].status, records[0].retries), (CallStatus::Ok, 2));
    assert_eq!(records[1].status, CallStatus::BackendError);
    let usage = t.gateway.close_trial(&key).await;
    assert_eq!(usage.calls, 1, "failed calls are not counted as answered");
    assert_eq!(usage.backend_errors, 1);
}

#[tokio::test]
async fn provider_key_never_reaches_the_harness() {
    const SECRET: &str = "sk-provider-secret-0123456789";
    // SAFETY of set_var: this variable name is used by this test only.
    std::env::set_var("HEVO_TEST_PROVIDER_KEY", SECRET);
    let t = TestContext::start(Setup {
        key_env: Some("HEVO_TEST_PROVIDER_KEY".into()),
        ..Setup::default()
    })
    .await;
    let key = t.trial("env", Caps::UNLIMITED);
    assert_eq!(
        t.gateway.provider_key_vars(),
        ["HEVO_TEST_PROVIDER_KEY".to_owned()]
    );
    // a "harness": a real child process started the way the engine does
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", "env"]);
    for var in t.gateway.provider_key_vars() {
        cmd.env_remove(var);
    }
    cmd.envs(t.gateway.harness_env(&key));
    let env = String::from_utf8(cmd.output().unwrap().stdout).unwrap();
    assert!(
        !env.contains(SECRET),
        "the provider key leaked into the harness environment"
    );
    assert!(env.contains(&format!("OPENAI_API_KEY={}", key.as_str())));
    assert!(env.contains(&format!("OPENAI_BASE_URL={}", t.gateway.openai_base_url())));
    assert!(env.contains(&format!("ANTHROPIC_API_KEY={}", key.as_str())));
    // the gateway used it upstream, and no answer shows it
    let (_, ok) = t.chat(Some(key.as_str()), body("mock-1", "x")).await;
    let (_, err) = t.chat(Some(key.as_str()), body("broken", "x")).await;
    assert_eq!(
        t.upstream.log.auth.lock().unwrap()[0],
        format!("Bearer {SECRET}")
    );
    for answer in [ok, err] {
        assert!(!answer.to_string().contains(SECRET));
    }
    t.gateway.close_trial(&key).await;
    let trace = std::fs::read_to_string(t.dir.path().join("env/model_calls.jsonl")).unwrap();
    assert!(!trace.contains(SECRET));
}

#[tokio::test]
async fn unpriced_models_stop_the_gateway_at_startup() {
    let upstream = crate::common::mock_upstream().await;
    let backend =
        hevo_llm::OpenAiBackend::new(hevo_llm::OpenAiConfig::new("up", &upstream.base_url, None))
            .unwrap();
    let config = hevo_llm::GatewayConfig::new(
        vec![hevo_llm::ModelRoute::new("x", "up", "some-new-model")],
        hevo_llm::PriceTable::builtin(),
    );
    let err = hevo_llm::Gateway::start(
        config,
        vec![std::sync::Arc::new(backend)],
        std::sync::Arc::new(hevo_llm::NullSink),
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("`some-new-model` has no price"),
        "{err}"
    );
}

#[tokio::test]
async fn shutdown_stops_serving() {
    let t = TestContext::start(Setup::default()).await;
    let url = t.gateway.openai_base_url();
    let TestContext {
        gateway, client, ..
    } = t;
    gateway.shutdown().await;
    assert!(client.get(format!("{url}/models")).send().await.is_err());
}
