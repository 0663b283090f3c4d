//! What a harness and the ledger see when the upstream misbehaves, with the official Python
//! SDKs in front of the [`faulty`](crate::faulty) upstream: streams longer than the backend's
//! timeout, a silent upstream, a refused provider key, nonsense `Retry-After` headers, an
//! answer without end, and Anthropic's prompt-cache writes.

use hevo_llm::{CallRecord, CallStatus};
use serde_json::{json, Value};

use crate::faulty::{Faulty, WORDS};

/// The ledger rows, in the order the calls were made (the SDK script makes them one by one).
fn rows(f: &Faulty) -> Vec<CallRecord> {
    f.sink.records()
}

/// Asserts that the harness got a 502 from the gateway (the SDK's `InternalServerError`),
/// whose message contains `says`.
fn assert_502(result: &Value, says: &str) {
    assert_eq!(
        (&result["ok"], &result["error"], &result["status"]),
        (&json!(false), &json!("InternalServerError"), &json!(502)),
        "{result}"
    );
    let message = result["message"].as_str().unwrap();
    assert!(message.contains(says), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn streams_longer_than_the_timeout_finish_and_a_silent_upstream_times_out() {
    let f = Faulty::start().await;
    let calls = json!([
        {"sdk": "openai", "model": "gpt-trickle", "stream": true},
        {"sdk": "anthropic", "model": "claude-trickle", "stream": true},
        {"sdk": "openai", "model": "gpt-trickle"},
        {"sdk": "anthropic", "model": "claude-trickle", "tools": true},
        {"sdk": "openai", "model": "gpt-silent"},
    ]);
    let Some(results) = f.sdk_calls(calls) else {
        return;
    };
    // every answer arrived in pieces over longer than the 1 s timeout, never silent for it
    for result in &results[..4] {
        assert_eq!(result["ok"], true, "{result}");
        assert_eq!(result["text"], WORDS, "{result}");
    }
    let rows = rows(&f);
    for row in &rows[..4] {
        assert_eq!(row.status, CallStatus::Ok, "{row:?}");
        assert_eq!((row.output_tokens, row.retries), (500, 0), "{row:?}");
        assert!(row.cost_usd > 0.0);
    }
    // a silent upstream: each attempt timed out, was retried and counted, and is named so
    assert_502(&results[4], "timed out");
    let silent = &rows[4];
    assert_eq!(
        (silent.status, silent.retries),
        (CallStatus::BackendError, 2)
    );
    assert_eq!(f.received("silent"), 3, "1 attempt + 2 retries");
    let error = silent.error.as_deref().unwrap();
    assert!(
        error.contains("upstream timed out") && error.contains("(after 2 retries)"),
        "{error}"
    );
    assert!(!error.contains("unreachable"), "{error}");
    assert!(silent
        .upstream_error
        .as_deref()
        .unwrap()
        .contains("timed out"));
    let usage = f.gateway.trial_usage(&f.key).unwrap();
    assert_eq!((usage.calls, usage.backend_errors), (4, 1));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_provider_key_is_an_infra_fault_and_not_retried() {
    let f = Faulty::start().await;
    let calls = json!([
        {"sdk": "openai", "model": "gpt-refused-401"},
        {"sdk": "openai", "model": "gpt-refused-401", "stream": true},
        {"sdk": "openai", "model": "gpt-refused-403", "tools": true},
        {"sdk": "anthropic", "model": "claude-refused-401"},
        {"sdk": "anthropic", "model": "claude-refused-403", "stream": true},
    ]);
    let Some(results) = f.sdk_calls(calls) else {
        return;
    };
    // the harness's own key was fine: it gets 502, never 401 (AuthenticationError) or 403
    for result in &results {
        assert_502(result, "refused the key or account of hevo's backend");
    }
    let rows = rows(&f);
    assert_eq!(rows.len(), 5);
    for row in &rows {
        assert_eq!((row.status, row.retries), (CallStatus::BackendError, 0));
        let error = row.error.as_deref().unwrap();
        assert!(error.contains("HTTP 40"), "{error}");
    }
    assert_eq!(
        (f.received("refused-401"), f.received("refused-403")),
        (3, 2),
        "a refused key is not retried"
    );
    // backend errors are what make a failing trial `infra_error` rather than the harness's
    let usage = f.gateway.trial_usage(&f.key).unwrap();
    assert_eq!((usage.calls, usage.backend_errors), (0, 5));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_answer_without_end_is_cut_at_the_ceiling_and_not_retried() {
    let f = Faulty::start().await;
    let calls = json!([
        {"sdk": "openai", "model": "gpt-flood"},
        {"sdk": "openai", "model": "gpt-flood", "stream": true},
        {"sdk": "anthropic", "model": "claude-flood"},
        {"sdk": "anthropic", "model": "claude-flood", "stream": true},
    ]);
    let Some(results) = f.sdk_calls(calls) else {
        return;
    };
    let ceiling = format!("passed {} MiB", hevo_llm::MAX_ANSWER_BYTES >> 20);
    // a whole answer: the harness gets a 502 naming the ceiling
    assert_502(&results[0], &ceiling);
    assert_502(&results[2], &ceiling);
    // a stream had begun (200): it is cut, and the SDK does not take it for whole
    for result in [&results[1], &results[3]] {
        assert_eq!(result["ok"], json!(false), "{result}");
    }
    let rows = rows(&f);
    assert_eq!(rows.len(), 4);
    for row in &rows {
        assert_eq!((row.status, row.retries), (CallStatus::BackendError, 0));
        let error = row.error.as_deref().unwrap();
        assert!(error.contains(&ceiling), "{error}");
    }
    assert_eq!(f.received("flood"), 4, "an oversized answer is not retried");
    let usage = f.gateway.trial_usage(&f.key).unwrap();
    assert_eq!((usage.calls, usage.backend_errors), (0, 4));
}

#[tokio::test(flavor = "multi_thread")]
async fn negative_nan_and_huge_retry_after_headers_neither_panic_nor_stall() {
    let f = Faulty::start().await;
    let calls = json!([
        {"sdk": "openai", "model": "gpt-retry-after-neg"},
        {"sdk": "openai", "model": "gpt-retry-after-nan"},
        {"sdk": "openai", "model": "gpt-retry-after-huge", "stream": true},
        {"sdk": "anthropic", "model": "claude-retry-after-huge"},
        {"sdk": "openai", "model": "gpt-plain"},
    ]);
    let Some(results) = f.sdk_calls(calls) else {
        return;
    };
    for result in &results[..4] {
        assert_502(result, "HTTP 503: busy (after 2 retries)");
    }
    assert_eq!(results[4]["text"], WORDS, "the gateway still answers");
    for model in ["retry-after-neg", "retry-after-nan"] {
        assert_eq!(f.received(model), 3, "{model}: 1 attempt + 2 retries");
    }
    assert_eq!(f.received("retry-after-huge"), 6);
    let rows = rows(&f);
    for row in &rows[..4] {
        assert_eq!((row.status, row.retries), (CallStatus::BackendError, 2));
    }
    assert_eq!(rows[4].status, CallStatus::Ok);
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_cache_writes_are_recorded_and_priced_above_input() {
    let f = Faulty::start().await;
    let calls = json!([
        {"sdk": "anthropic", "model": "claude-sonnet-4"},
        {"sdk": "anthropic", "model": "claude-sonnet-4", "stream": true},
        {"sdk": "anthropic", "model": "claude-sonnet-4", "tools": true},
    ]);
    let Some(results) = f.sdk_calls(calls) else {
        return;
    };
    assert!(results.iter().all(|r| r["ok"] == true), "{results:?}");
    // 100 input tokens at $3, 200 written for 5 minutes at $3.75, 100 for an hour at $6,
    // 600 read at $0.30 and 500 output at $15 per million (claude-sonnet-4)
    let expected = (100.0 * 3.0 + 200.0 * 3.75 + 100.0 * 6.0 + 600.0 * 0.3 + 500.0 * 15.0) / 1e6;
    let rows = rows(&f);
    assert_eq!(rows.len(), 3);
    for row in &rows {
        assert_eq!(row.status, CallStatus::Ok, "{row:?}");
        assert_eq!(
            (
                row.input_tokens,
                row.cached_tokens,
                row.cache_write_tokens,
                row.cache_write_1h_tokens,
                row.output_tokens
            ),
            (400, 600, 300, 100, 500),
            "{} {row:?}",
            row.endpoint
        );
        assert!(
            (row.cost_usd - expected).abs() < 1e-12,
            "{}: ${} instead of ${expected}",
            row.endpoint,
            row.cost_usd
        );
    }
    let usage = f.gateway.trial_usage(&f.key).unwrap();
    assert!((usage.cost_usd - 3.0 * expected).abs() < 1e-12);
}
