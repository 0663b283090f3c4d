//! Gateway overhead per call: the same request sent straight to an upstream and through the
//! gateway, interleaved in one run, over keep-alive connections on loopback.
//!
//! Why: every model call of every trial pays this overhead; the target is under 1 ms at p50.
//! The upstream is a minimal axum server that answers instantly with a fixed completion, so
//! the difference between the two paths is the gateway's own work: parsing, key lookup, cap
//! check, the upstream HTTP hop, pricing, the ledger record, two trace lines (written and
//! flushed) and rendering.
//!
//! Run: `cargo bench -p hevo-llm --bench gateway` (`HEVO_BENCH_CALLS`, default 2000).

use std::sync::Arc;
use std::time::Instant;

use axum::routing::post;
use axum::Router;
use hevo_llm::{
    Caps, Gateway, GatewayConfig, MemorySink, ModelPrice, ModelRoute, OpenAiBackend, OpenAiConfig,
    PriceTable,
};
use serde_json::json;

const ANSWER: &str = r#"{"id":"x","object":"chat.completion","model":"bench","choices":[{"index":0,"message":{"role":"assistant","content":"positive"},"finish_reason":"stop"}],"usage":{"prompt_tokens":120,"completion_tokens":1,"total_tokens":121,"prompt_tokens_details":{"cached_tokens":100}}}"#;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let calls: usize = std::env::var("HEVO_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let upstream = Router::new().route(
        "/v1/chat/completions",
        post(|| async { ([("content-type", "application/json")], ANSWER) }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up_addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, upstream).await.unwrap() });
    let up_url = format!("http://{up_addr}/v1");

    let backend = OpenAiBackend::new(OpenAiConfig::new("up", &up_url, None)).unwrap();
    let prices = PriceTable::empty()
        .with_overrides([("bench".to_owned(), ModelPrice::paid(1.0, 0.1, 4.0))])
        .unwrap();
    let sink = Arc::new(MemorySink::new());
    let gateway = Gateway::start(
        GatewayConfig::new(vec![ModelRoute::new("bench", "up", "bench")], prices),
        vec![Arc::new(backend)],
        sink.clone(),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let key = gateway
        .open_trial("bench", dir.path(), Caps::UNLIMITED)
        .unwrap();

    let body = json!({
        "model": "bench",
        "temperature": 0,
        "max_tokens": 1,
        "messages": [
            {"role": "system", "content": "Classify the sentiment of the review as positive or negative. ".repeat(8)},
            {"role": "user", "content": "The film was long, but the ending made it worth every minute."},
        ],
    });
    let client = reqwest::Client::new();
    let direct_url = format!("{up_url}/chat/completions");
    let gateway_url = format!("{}/chat/completions", gateway.openai_base_url());
    let send = |url: &str, auth: bool| {
        let mut req = client.post(url).json(&body);
        if auth {
            req = req.bearer_auth(key.as_str());
        }
        async move {
            let start = Instant::now();
            let resp = req.send().await.unwrap();
            assert!(resp.status().is_success());
            let _ = resp.bytes().await.unwrap();
            start.elapsed().as_secs_f64() * 1e3
        }
    };
    for _ in 0..200 {
        send(&direct_url, false).await;
        send(&gateway_url, true).await;
    }
    let mut direct = Vec::with_capacity(calls);
    let mut via = Vec::with_capacity(calls);
    for _ in 0..calls {
        direct.push(send(&direct_url, false).await);
        via.push(send(&gateway_url, true).await);
    }
    direct.sort_by(f64::total_cmp);
    via.sort_by(f64::total_cmp);
    let (d50, d99) = (percentile(&direct, 0.5), percentile(&direct, 0.99));
    let (g50, g99) = (percentile(&via, 0.5), percentile(&via, 0.99));
    let usage = gateway.close_trial(&key).await;
    assert_eq!(usage.calls as usize, calls + 200);
    println!("calls per path: {calls} (after 200 warm-up calls each)");
    println!("| path | p50 ms | p99 ms |");
    println!("|---|---|---|");
    println!("| upstream directly | {d50:.3} | {d99:.3} |");
    println!("| through the gateway | {g50:.3} | {g99:.3} |");
    println!("| gateway overhead | {:.3} | {:.3} |", g50 - d50, g99 - d99);
    gateway.shutdown().await;
}
