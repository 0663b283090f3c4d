//! Caps held under concurrency: the official SDKs firing many calls at once against trial and
//! run caps (exactly `max_calls` answered, dollars within one call's maximum), concurrency and
//! bytes-in-flight limits (observed at a slow upstream; hevo's peak memory under 40
//! concurrent 30 MB requests, measured in a child process), upstream retries and errors in
//! the ledger, and capped traces.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::routing::post;
use axum::{Json, Router};
use hevo_llm::{
    Backend, CallStatus, Caps, Gateway, GatewayConfig, GatewayHandle, InFlight, MemorySink,
    ModelPrice, ModelRoute, OpenAiBackend, OpenAiConfig, PriceTable, TrialUsage,
};
use serde_json::{json, Value};

use crate::clients::{python_with_sdks, run, Through};
use crate::common::{body, Setup, TestContext};

/// Runs `py/sdk_burst.py`: `calls` concurrent calls with `sdk` over `keys`. (Not named
/// `concurrent.py`: beside the SDK scripts that name shadows Python's `concurrent` package.)
fn fire(t: &Through, sdk: &str, calls: usize, keys: &[String]) -> Option<Value> {
    let python = python_with_sdks()?;
    let mut command = Command::new(python);
    command.arg(format!(
        "{}/tests/it/py/sdk_burst.py",
        env!("CARGO_MANIFEST_DIR")
    ));
    let mut env = t.env();
    env.extend([
        ("HEVO_TEST_SDK".to_owned(), sdk.to_owned()),
        ("HEVO_TEST_CALLS".to_owned(), calls.to_string()),
        ("HEVO_TEST_KEYS".to_owned(), keys.join(",")),
    ]);
    let (ok, output) = tokio::task::block_in_place(|| run(command, &env, &t.work()));
    assert!(ok, "sdk_burst.py failed:\n{output}");
    let line = output
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("sdk_burst.py printed no JSON:\n{output}"));
    Some(serde_json::from_str(line).unwrap())
}

fn count(t: &Through, status: CallStatus) -> usize {
    t.sink
        .records()
        .iter()
        .filter(|r| r.status == status)
        .count()
}

#[tokio::test(flavor = "multi_thread")]
async fn sdk_64_concurrent_calls_against_max_calls_10_answer_exactly_10() {
    let caps = Caps {
        max_calls: Some(10),
        ..Caps::UNLIMITED
    };
    let price = ModelPrice::paid(1.0, 0.25, 4.0);
    let t = Through::start_capped("unused.txt", caps, Caps::UNLIMITED, price).await;
    let Some(out) = fire(&t, "openai", 64, &[t.key.as_str().to_owned()]) else {
        return;
    };
    assert_eq!(
        (&out["answered"], &out["refused"], &out["other"]),
        (&json!(10), &json!(54), &json!(0)),
        "{out}"
    );
    let refusal = out["refusal"].as_str().unwrap();
    assert!(
        refusal.contains("429") && refusal.contains("call cap reached"),
        "{refusal}"
    );
    assert_eq!(t.upstream.seen().len(), 10);
    assert_eq!(count(&t, CallStatus::Ok), 10);
    assert_eq!(count(&t, CallStatus::BudgetExceeded), 54);
    let usage = t.gateway.trial_usage(&t.key).unwrap();
    assert_eq!(usage.calls, 10);
    assert!(usage.budget_exceeded);
    assert_eq!(t.gateway.run_in_flight(), InFlight::default());
}

#[tokio::test(flavor = "multi_thread")]
async fn sdk_dollar_cap_holds_within_one_calls_maximum() {
    // $100 / $1000 per million: a scripted answer (9 output tokens) costs about $0.01; a
    // call's maximum (every body byte an input token, 16 output tokens) about $0.03.
    let price = ModelPrice::paid(100.0, 100.0, 1000.0);
    let cap = 0.05;
    let caps = Caps {
        max_cost_usd: Some(cap),
        ..Caps::UNLIMITED
    };
    let t = Through::start_capped("unused.txt", caps, Caps::UNLIMITED, price).await;
    let Some(out) = fire(&t, "anthropic", 64, &[t.key.as_str().to_owned()]) else {
        return;
    };
    assert_eq!(out["other"], 0, "{out}");
    let answered = out["answered"].as_u64().unwrap();
    assert!((1..64).contains(&answered), "{out}");
    assert_eq!(
        out["answered"].as_u64().unwrap() + out["refused"].as_u64().unwrap(),
        64
    );
    assert!(out["refusal"]
        .as_str()
        .unwrap()
        .contains("dollar cap reached"));
    let usage = t.gateway.trial_usage(&t.key).unwrap();
    // one call's maximum: its body (the SDK sends under 512 bytes) all input, 16 output
    let one_call_max = price.max_cost(512, Some(16));
    assert!(
        usage.cost_usd <= cap + one_call_max,
        "spent ${} against a ${cap} cap (one call at most ${one_call_max})",
        usage.cost_usd
    );
    let ledger: f64 = t.sink.records().iter().map(|r| r.cost_usd).sum();
    assert!(
        (ledger - usage.cost_usd).abs() < 1e-12,
        "the ledger is exact"
    );
    assert_eq!(usage.calls, answered);
    assert_eq!(t.gateway.run_in_flight(), InFlight::default());
}

#[tokio::test(flavor = "multi_thread")]
async fn sdk_run_cap_of_200_holds_against_256_concurrent_calls_of_8_trials() {
    let run_caps = Caps {
        max_calls: Some(200),
        ..Caps::UNLIMITED
    };
    let price = ModelPrice::paid(1.0, 0.25, 4.0);
    let t = Through::start_capped("unused.txt", Caps::UNLIMITED, run_caps, price).await;
    let mut keys = vec![t.key.as_str().to_owned()];
    for i in 2..=8 {
        let dir = t.dir.path().join(format!("trace-{i}"));
        let key = t
            .gateway
            .open_trial(&format!("trial-{i}"), &dir, Caps::UNLIMITED)
            .unwrap();
        keys.push(key.as_str().to_owned());
    }
    let Some(out) = fire(&t, "openai", 256, &keys) else {
        return;
    };
    assert_eq!(
        (&out["answered"], &out["refused"], &out["other"]),
        (&json!(200), &json!(56), &json!(0)),
        "{out}"
    );
    assert!(out["refusal"].as_str().unwrap().contains("run call cap"));
    assert_eq!(t.gateway.run_usage().calls, 200);
    assert_eq!(t.upstream.seen().len(), 200);
    assert_eq!(count(&t, CallStatus::Ok), 200);
    assert_eq!(t.gateway.run_in_flight(), InFlight::default());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_cap_holds_within_one_calls_maximum_under_concurrency() {
    let t = TestContext::start(Setup::default()).await;
    let cap = 300;
    let key = t.trial(
        "tokens",
        Caps {
            max_tokens: Some(cap),
            ..Caps::UNLIMITED
        },
    );
    let mut request = body("mock-1", "a b c");
    request["max_tokens"] = json!(5);
    let bytes = serde_json::to_vec(&request).unwrap().len() as u64;
    let calls = (0..40).map(|_| t.chat(Some(key.as_str()), request.clone()));
    let statuses: Vec<u16> = futures::future::join_all(calls)
        .await
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    let answered = statuses.iter().filter(|s| **s == 200).count();
    assert_eq!(
        answered + statuses.iter().filter(|s| **s == 429).count(),
        40
    );
    let usage = t.gateway.close_trial(&key).await;
    assert_eq!(usage.calls as usize, answered);
    assert!(answered < 40, "the cap refused nothing: {statuses:?}");
    assert!(
        usage.total_tokens() <= cap + bytes + 5,
        "{} tokens against a cap of {cap} (one call at most {})",
        usage.total_tokens(),
        bytes + 5
    );
}

/// An OpenAI-compatible upstream that takes its time (so calls overlap), accepts any body
/// size, and records how many requests it held at once and the largest body.
#[derive(Default)]
struct Slow {
    now: AtomicUsize,
    most: AtomicUsize,
    served: AtomicUsize,
    largest: AtomicUsize,
}

async fn slow_chat(State(slow): State<Arc<Slow>>, body: Bytes) -> Json<Value> {
    let now = slow.now.fetch_add(1, Ordering::SeqCst) + 1;
    slow.most.fetch_max(now, Ordering::SeqCst);
    slow.largest.fetch_max(body.len(), Ordering::SeqCst);
    drop(body);
    tokio::time::sleep(Duration::from_millis(50)).await;
    slow.now.fetch_sub(1, Ordering::SeqCst);
    slow.served.fetch_add(1, Ordering::SeqCst);
    Json(json!({
        "id": "slow", "object": "chat.completion", "model": "slow-1",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
    }))
}

async fn start_slow() -> (String, Arc<Slow>) {
    let slow = Arc::new(Slow::default());
    let app = Router::new()
        .route("/v1/chat/completions", post(slow_chat))
        .layer(DefaultBodyLimit::disable())
        .with_state(slow.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/v1"), slow)
}

/// A gateway routing `slow-1` to `upstream`, with `run_caps`.
fn slow_gateway(upstream: &str, run_caps: Caps) -> (GatewayHandle, Arc<MemorySink>) {
    let backend: Arc<dyn Backend> =
        Arc::new(OpenAiBackend::new(OpenAiConfig::new("slow", upstream, None)).unwrap());
    let prices = PriceTable::empty()
        .with_overrides([("slow-1".to_owned(), ModelPrice::paid(1.0, 1.0, 1.0))])
        .unwrap();
    let mut config = GatewayConfig::new(vec![ModelRoute::new("slow-1", "slow", "slow-1")], prices);
    config.run_caps = run_caps;
    let sink = Arc::new(MemorySink::new());
    let gateway = Gateway::start(config, vec![backend], sink.clone()).unwrap();
    (gateway, sink)
}

async fn post_chat(
    client: &reqwest::Client,
    gateway: &GatewayHandle,
    key: &str,
    body: Bytes,
) -> u16 {
    client
        .post(format!("{}/chat/completions", gateway.openai_base_url()))
        .bearer_auth(key)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .map(|r| r.status().as_u16())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn calls_in_flight_are_limited_per_trial_and_per_gateway() {
    let (upstream, slow) = start_slow().await;
    let dir = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let request = Bytes::from(serde_json::to_vec(&body("slow-1", "hi")).unwrap());

    // one trial limited to 3 at once
    let (gateway, _) = slow_gateway(&upstream, Caps::UNLIMITED);
    let trial_caps = Caps {
        max_concurrent: Some(3),
        ..Caps::UNLIMITED
    };
    let key = gateway.open_trial("t", dir.path(), trial_caps).unwrap();
    let calls = (0..24).map(|_| post_chat(&client, &gateway, key.as_str(), request.clone()));
    let statuses = futures::future::join_all(calls).await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    assert_eq!(slow.served.load(Ordering::SeqCst), 24);
    let most = slow.most.load(Ordering::SeqCst);
    assert!((1..=3).contains(&most), "{most} calls of the trial at once");

    // four trials, the gateway limited to 4 at once
    slow.most.store(0, Ordering::SeqCst);
    let run_caps = Caps {
        max_concurrent: Some(4),
        ..Caps::UNLIMITED
    };
    let (gateway, _) = slow_gateway(&upstream, run_caps);
    let keys: Vec<_> = (0..4)
        .map(|i| {
            gateway
                .open_trial(&format!("t{i}"), dir.path(), Caps::UNLIMITED)
                .unwrap()
        })
        .collect();
    let calls =
        (0..32).map(|i| post_chat(&client, &gateway, keys[i % 4].as_str(), request.clone()));
    let statuses = futures::future::join_all(calls).await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    let most = slow.most.load(Ordering::SeqCst);
    assert!(
        (1..=4).contains(&most),
        "{most} calls of the gateway at once"
    );
}

/// Set in the child process of the memory test: the upstream's URL.
const CHILD_VAR: &str = "HEVO_TEST_GATEWAY_CHILD";
/// What starts each line the child reports on: libtest may have written `test NAME ... `
/// on the same line before the test body ran, so the parent looks for this, not for `{`.
const REPORT: &str = "gateway-child: ";
/// How long the parent waits for the child's next report before killing it (a hang guard:
/// the test fails with "the child ended" instead of holding CI until its time runs out).
const CHILD_SILENCE: Duration = Duration::from_secs(600);

/// The peak resident set (`VmHWM`) of this process, in KiB.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/self/status")
}

/// The child half of the memory test: a gateway (default byte and concurrency limits) in
/// front of `upstream` with 40 trials; prints their keys, waits for a line on stdin, prints
/// its peak RSS and exits.
fn gateway_child(upstream: &str) -> ! {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _enter = runtime.enter();
    let dir = tempfile::tempdir().unwrap();
    let (gateway, _) = slow_gateway(upstream, Caps::UNLIMITED);
    let caps = Caps {
        max_trace_bytes: Some(64 << 10),
        ..Caps::UNLIMITED
    };
    let keys: Vec<String> = (0..40)
        .map(|i| {
            let key = gateway
                .open_trial(&format!("t{i}"), &dir.path().join(i.to_string()), caps)
                .unwrap();
            key.as_str().to_owned()
        })
        .collect();
    println!(
        "{REPORT}{}",
        json!({"base": gateway.openai_base_url(), "keys": keys, "start_kib": peak_rss_kib()})
    );
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    println!(
        "{REPORT}{}",
        json!({"peak_kib": peak_rss_kib(), "run": gateway.run_usage()})
    );
    std::process::exit(0)
}

#[test]
fn gateway_memory_stays_bounded_under_40_concurrent_30_mb_requests() {
    if let Ok(upstream) = std::env::var(CHILD_VAR) {
        gateway_child(&upstream);
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (upstream, slow) = runtime.block_on(start_slow());
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "caps::gateway_memory_stays_bounded_under_40_concurrent_30_mb_requests",
            "--exact",
            "--nocapture",
            "--quiet",
            "--test-threads=1",
        ])
        .env(CHILD_VAR, &upstream)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let (heard, silence) = std::sync::mpsc::channel::<()>();
    let pid = child.id();
    std::thread::spawn(move || {
        loop {
            match silence.recv_timeout(CHILD_SILENCE) {
                Ok(()) => continue,
                // the test is over and has reaped the child: its pid may belong to another
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
                    return;
                }
            }
        }
    });
    let mut json_line = || loop {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "the child ended");
        let _ = heard.send(());
        if let Some(at) = line.find(REPORT) {
            return serde_json::from_str::<Value>(&line[at + REPORT.len()..]).unwrap();
        }
    };
    let ready = json_line();
    let base = ready["base"].as_str().unwrap().to_owned();
    let keys: Vec<String> = serde_json::from_value(ready["keys"].clone()).unwrap();
    // one 30 MB body, shared by the 40 requests (the test process holds it once)
    let content = "a".repeat(30_000_000);
    let request = Bytes::from(
        serde_json::to_vec(&json!({"model": "slow-1", "max_tokens": 1,
            "messages": [{"role": "user", "content": content}]}))
        .unwrap(),
    );
    drop(content);
    let statuses: Vec<u16> = runtime.block_on(async {
        let client = reqwest::Client::new();
        let calls = keys.iter().map(|key| {
            let client = client.clone();
            let request = request.clone();
            let url = format!("{base}/chat/completions");
            async move {
                client
                    .post(url)
                    .bearer_auth(key)
                    .header("content-type", "application/json")
                    .body(request)
                    .send()
                    .await
                    .map(|r| r.status().as_u16())
                    .unwrap_or(0)
            }
        });
        futures::future::join_all(calls).await
    });
    writeln!(child.stdin.as_mut().unwrap(), "report").unwrap();
    let report = json_line();
    child.wait().unwrap();
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    assert_eq!(slow.served.load(Ordering::SeqCst), 40);
    assert!(slow.largest.load(Ordering::SeqCst) >= 30_000_000);
    let run: TrialUsage = serde_json::from_value(report["run"].clone()).unwrap();
    assert_eq!(run.calls, 40);
    let start = ready["start_kib"].as_u64().unwrap();
    let peak = report["peak_kib"].as_u64().unwrap();
    eprintln!(
        "gateway peak RSS: {} MiB (at start {} MiB) for 40 concurrent 30 MB requests",
        peak / 1024,
        start / 1024
    );
    // 40 bodies at once would be 1.2 GB raw and several GB parsed; the default gateway
    // budget (128 MiB of bodies in flight) keeps 4 of them in memory at a time
    assert!(
        peak < 1024 * 1024,
        "the gateway's peak RSS was {} MiB",
        peak / 1024
    );
}

#[tokio::test]
async fn upstream_retries_and_errors_are_in_the_ledger() {
    let t = TestContext::start(Setup::default()).await;
    let key = t.trial("r", Caps::UNLIMITED);
    t.upstream.log.flaky_left.store(2, Ordering::SeqCst);
    assert_eq!(t.chat(Some(key.as_str()), body("flaky", "x")).await.0, 200);
    let (status, _) = t.chat(Some(key.as_str()), body("broken", "x")).await;
    assert_eq!(status, 502);
    let records = t.sink.records();
    let flaky = &records[0];
    assert_eq!((flaky.status, flaky.retries), (CallStatus::Ok, 2));
    let absorbed = flaky.upstream_error.as_deref().unwrap();
    assert!(absorbed.contains("HTTP"), "{absorbed}");
    let broken = &records[1];
    assert_eq!(
        (broken.status, broken.retries),
        (CallStatus::BackendError, 3)
    );
    let error = broken.error.as_deref().unwrap();
    assert!(
        error.contains("HTTP 500") && error.contains("after 3 retries"),
        "{error}"
    );
    assert!(broken
        .upstream_error
        .as_deref()
        .unwrap()
        .contains("HTTP 500"));
    let usage = t.gateway.close_trial(&key).await;
    assert_eq!((usage.calls, usage.backend_errors), (1, 1));
    assert_eq!(t.gateway.run_in_flight(), InFlight::default());
}

#[tokio::test]
async fn traces_are_capped_per_trial_and_per_run_and_the_ledger_stays_exact() {
    let run_caps = Caps {
        max_trace_bytes: Some(6000),
        ..Caps::UNLIMITED
    };
    let t = TestContext::start(Setup {
        run_caps,
        ..Setup::default()
    })
    .await;
    let trial_caps = Caps {
        max_trace_bytes: Some(4000),
        ..Caps::UNLIMITED
    };
    let a = t.trial("a", trial_caps);
    let b = t.trial("b", trial_caps);
    for _ in 0..20 {
        assert_eq!(t.chat(Some(a.as_str()), body("mock-1", "x y")).await.0, 200);
    }
    for _ in 0..20 {
        assert_eq!(t.chat(Some(b.as_str()), body("mock-1", "x y")).await.0, 200);
    }
    let size = |id: &str| {
        std::fs::metadata(t.dir.path().join(id).join("model_calls.jsonl"))
            .unwrap()
            .len()
    };
    for (id, scope) in [("a", "trial"), ("b", "run")] {
        let lines = t.trace(id);
        let last = lines.last().unwrap();
        assert_eq!(last["type"], "truncated", "{id}: {last}");
        assert_eq!(last["scope"], scope, "{id}: {last}");
        assert_eq!(lines.iter().filter(|l| l["type"] == "truncated").count(), 1);
        assert!(lines.len() < 41);
    }
    assert!(size("a") <= 4000 + 600, "{}", size("a"));
    assert!(size("a") + size("b") <= 6000 + 1200);
    // the ledger has every call
    assert_eq!(t.sink.records().len(), 40);
    assert_eq!(t.gateway.run_usage().calls, 40);
}

/// An OpenAI-compatible upstream whose every choice uses 1,000 output tokens, `n` of them
/// per call, after 50 ms (so calls overlap).
async fn choices_chat(Json(body): Json<Value>) -> Json<Value> {
    let n = body["n"].as_u64().unwrap_or(1);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let choices: Vec<Value> = (0..n)
        .map(|i| {
            json!({"index": i, "message": {"role": "assistant", "content": "ok"},
                        "finish_reason": "length"})
        })
        .collect();
    Json(json!({
        "id": "n", "object": "chat.completion", "model": "slow-1", "choices": choices,
        "usage": {"prompt_tokens": 10, "completion_tokens": 1000 * n,
                  "total_tokens": 10 + 1000 * n},
    }))
}

/// `n` choices without `max_tokens` reserve `n` times the model's default output limit: a
/// harness asked for 8 choices of 1,000 tokens while only one was reserved, and overshot a
/// 10,000-token cap by every call it fired at once (the audit: $3.77 against $0.05).
#[tokio::test(flavor = "multi_thread")]
async fn n_choices_without_a_limit_reserve_n_default_outputs() {
    let app = Router::new().route("/v1/chat/completions", post(choices_chat));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let backend: Arc<dyn Backend> = Arc::new(
        OpenAiBackend::new(OpenAiConfig::new("up", &format!("http://{addr}/v1"), None)).unwrap(),
    );
    let mut price = ModelPrice::paid(1.0, 1.0, 1.0);
    price.max_output = Some(1000);
    let prices = PriceTable::empty()
        .with_overrides([("slow-1".to_owned(), price)])
        .unwrap();
    let config = GatewayConfig::new(vec![ModelRoute::new("slow-1", "up", "slow-1")], prices);
    let sink = Arc::new(MemorySink::new());
    let gateway = Gateway::start(config, vec![backend], sink).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cap = 10_000;
    let caps = Caps {
        max_tokens: Some(cap),
        ..Caps::UNLIMITED
    };
    let key = gateway.open_trial("n", dir.path(), caps).unwrap();
    let mut request = body("slow-1", "hi");
    request["n"] = json!(8);
    let request = Bytes::from(serde_json::to_vec(&request).unwrap());
    let client = reqwest::Client::new();
    let calls = (0..12).map(|_| post_chat(&client, &gateway, key.as_str(), request.clone()));
    let statuses = futures::future::join_all(calls).await;
    assert!(statuses.contains(&200), "{statuses:?}");
    let usage = gateway.gateway().close_trial(&key).await;
    let one_call_max = request.len() as u64 + 8 * 1000;
    assert!(
        usage.total_tokens() <= cap + one_call_max,
        "{} tokens against a cap of {cap} (one call at most {one_call_max}): {statuses:?}",
        usage.total_tokens()
    );
}
