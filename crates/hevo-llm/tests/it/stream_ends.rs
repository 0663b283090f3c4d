//! How a forwarded stream ended decides its ledger row: a stream cut mid-way, one that ends
//! with the API's error event (Anthropic's `event: error`, the Responses API's
//! `response.failed`) and one that stops without its last event are `backend_error`, still
//! priced by the usage they had reported; a stream that ends as it should is `ok`.

use hevo_llm::{CallStatus, Caps, GatewayConfig};

use crate::held_gateway::{assert_priced, HeldGateway};

#[tokio::test(flavor = "multi_thread")]
async fn streams_that_break_off_or_end_in_an_error_are_backend_errors_priced_by_what_they_saw() {
    let t = HeldGateway::start(GatewayConfig::DRAIN_TIMEOUT).await;
    let key = t.trial("t0", Caps::UNLIMITED);
    let Some(out) = t.harness("stream_ends.py", &key, &[]) else {
        return;
    };
    let usage = t.gateway.close_trial(&key).await;
    let mut rows = t.rows("t0");
    rows.sort_by_key(|r| r.seq);
    assert_eq!(rows.len(), 7, "{rows:#?}");
    let error = |i: usize| rows[i].error.clone().unwrap_or_default();
    // a chat completion cut before its usage chunk: nothing to price
    assert_priced(&rows[0], CallStatus::BackendError, (0, 0), 0);
    assert!(error(0).contains("broke off"), "{}", error(0));
    // Anthropic's message_start had reported the input and 1 output token
    assert_priced(&rows[1], CallStatus::BackendError, (400, 600), 1);
    assert!(error(1).contains("broke off"), "{}", error(1));
    assert_priced(&rows[2], CallStatus::BackendError, (400, 600), 1);
    assert!(error(2).contains("Overloaded"), "{}", error(2));
    assert_eq!(rows[3].status, CallStatus::BackendError, "{:#?}", rows[3]);
    assert!(error(3).contains("response.failed"), "{}", error(3));
    assert_priced(&rows[4], CallStatus::BackendError, (400, 600), 1);
    assert!(error(4).contains("without"), "{}", error(4));
    assert_eq!(rows[5].status, CallStatus::BackendError, "{:#?}", rows[5]);
    assert!(error(5).contains("without"), "{}", error(5));
    assert_priced(&rows[6], CallStatus::Ok, (400, 600), 500);
    // the SDK saw the error event as an error; the whole stream went through
    let streams = &out["streams"];
    assert!(streams[2]["error"].is_string(), "{out}");
    assert_eq!(streams[6]["error"], serde_json::Value::Null, "{out}");
    assert_eq!((usage.calls, usage.backend_errors), (1, 6), "{usage:?}");
    let ledger: f64 = rows.iter().map(|r| r.cost_usd).sum();
    assert!((ledger - usage.cost_usd).abs() < 1e-12, "{usage:?}");
    assert_eq!(
        (usage.input_tokens, usage.cached_tokens, usage.output_tokens),
        (4 * 400, 4 * 600, 3 + 500)
    );
}
