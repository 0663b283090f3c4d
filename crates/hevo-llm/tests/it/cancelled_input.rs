//! Calls cancelled before their upstream reported any usage, which the provider may still
//! bill for the input it received: a harness's SDK gives up on a call that the upstream holds
//! and never answers (or takes a chat stream's first chunk, which reports no usage, and
//! exits), the trial is closed, its wait for the call runs out and the call is cancelled.
//! Its ledger row and the trial's totals then have the input tokens the call reserved (one
//! per request byte), priced at the uncached input price, its `error` saying that they are
//! an estimate; on every path a call takes: forwarded plain, forwarded with tools, a stream
//! before its headers, a stream after its first chunk, and translated.

use std::time::Duration;

use hevo_llm::{CallStatus, Caps, InFlight};

use crate::held_gateway::{assert_priced, HeldGateway, PRICE};

/// Runs `py/<script>` with `vars` as the harness of a trial whose close waits 1 s, the
/// upstream holding its one call for ever; then closes the trial and checks the call's row
/// (its output limit, `output_limit`, is what it reserved beside its input).
async fn cancelled_with_input_estimated(script: &str, vars: &[(&str, &str)], output_limit: u64) {
    let t = HeldGateway::start(Duration::from_secs(1)).await;
    let key = t.trial("t0", Caps::UNLIMITED);
    let Some(out) = t.harness(script, &key, vars) else {
        return;
    };
    assert_eq!(t.upstream.arrived(), 1, "{out}");
    // the harness is gone and the upstream holds the call, which still holds its reservation
    let held = t.gateway.run_in_flight();
    assert_eq!(held.calls, 1, "{held:?}");
    let input = held.tokens - output_limit;
    let usage = t.gateway.close_trial(&key).await;
    let rows = t.rows("t0");
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_priced(&rows[0], CallStatus::BackendError, (input, 0), 0);
    let error = rows[0].error.as_deref().unwrap();
    assert!(error.starts_with("cancelled, input estimated"), "{error}");
    assert_eq!((usage.calls, usage.backend_errors), (0, 1), "{usage:?}");
    assert_eq!((usage.input_tokens, usage.output_tokens), (input, 0));
    assert!(
        (usage.cost_usd - rows[0].cost_usd).abs() < 1e-12,
        "{usage:?}"
    );
    assert_eq!(t.gateway.run_in_flight(), InFlight::default());
    assert_eq!(t.upstream.answered(), 0);
}

/// `py/give_up.py` making one call of `kind`, given up on after 2 s (`max_tokens` 50).
async fn given_up(kind: &str) {
    let vars = [
        ("HEVO_TEST_KIND", kind),
        ("HEVO_TEST_CALLS", "1"),
        ("HEVO_TEST_TIMEOUT", "2"),
    ];
    cancelled_with_input_estimated("give_up.py", &vars, 50).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plain_chat_completion_cancelled_unanswered_is_priced_by_its_estimated_input() {
    given_up("translated").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_forwarded_message_cancelled_unanswered_is_priced_by_its_estimated_input() {
    given_up("forwarded").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stream_cancelled_before_its_headers_is_priced_by_its_estimated_input() {
    given_up("stream").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_translated_message_cancelled_unanswered_is_priced_by_its_estimated_input() {
    given_up("across").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_chat_stream_cancelled_before_its_usage_is_priced_by_its_estimated_input() {
    // a chat completion stream reports its usage in its last chunk; the first carry none
    let vars = [
        ("HEVO_TEST_SDK", "openai"),
        ("HEVO_TEST_PROMPT", "MODE:hold_stream"),
    ];
    cancelled_with_input_estimated("first_chunk.py", &vars, PRICE.output_limit(None)).await;
}
