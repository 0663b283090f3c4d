//! Calls still in flight when their trial ends or the gateway shuts down: a harness takes
//! the first event of a streamed answer with the official SDK and exits while the rest is
//! still coming. Closing the trial waits for the call and counts it; a call that outlasts
//! the wait, or the shutdown's grace, or that hevo is told to stop at once, is cancelled and
//! recorded with what it had seen.

use std::time::Duration;

use hevo_llm::{CallStatus, Caps, GatewayConfig, InFlight};

use crate::held_gateway::{assert_priced, HeldGateway};

#[tokio::test(flavor = "multi_thread")]
async fn a_trial_closed_while_its_stream_is_still_coming_waits_for_it_and_counts_it() {
    let t = HeldGateway::start(GatewayConfig::DRAIN_TIMEOUT).await;
    let key = t.trial("t0", Caps::UNLIMITED);
    let vars = [
        ("HEVO_TEST_SDK", "openai"),
        ("HEVO_TEST_PROMPT", "MODE:hold_stream"),
    ];
    let Some(out) = t.harness("first_chunk.py", &key, &vars) else {
        return;
    };
    assert_eq!(out["first"], "chat.completion.chunk", "{out}");
    // the harness is gone and the stream is held: close the trial, and once its key has
    // expired (the close is under way) let the rest of the stream come
    let closing = {
        let gateway = t.gateway.gateway().clone();
        let key = key.clone();
        tokio::spawn(async move { gateway.close_trial(&key).await })
    };
    while t.gateway.trial_usage(&key).is_some() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    t.upstream.release();
    let usage = closing.await.unwrap();
    let rows = t.rows("t0");
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_priced(&rows[0], CallStatus::Ok, (800, 200), 500);
    assert_eq!(usage.calls, 1, "{usage:?}");
    assert_eq!((usage.input_tokens, usage.cached_tokens), (800, 200));
    assert_eq!(usage.output_tokens, 500);
    assert!((usage.cost_usd - rows[0].cost_usd).abs() < 1e-12);
    assert_eq!(t.upstream.answered(), 1);
    // its trace has the response too
    let trace = std::fs::read_to_string(t.dir.path().join("trace/t0/model_calls.jsonl")).unwrap();
    assert_eq!(trace.lines().count(), 2, "{trace}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_that_outlasts_the_trials_close_is_cancelled_and_priced_by_what_it_saw() {
    // the held stream is never let go: closing waits a second, then cancels it
    let t = HeldGateway::start(Duration::from_secs(1)).await;
    let key = t.trial("t0", Caps::UNLIMITED);
    let vars = [
        ("HEVO_TEST_SDK", "anthropic"),
        ("HEVO_TEST_PROMPT", "MODE:hold_stream"),
    ];
    let Some(out) = t.harness("first_chunk.py", &key, &vars) else {
        return;
    };
    assert_eq!(out["first"], "message_start", "{out}");
    let usage = t.gateway.close_trial(&key).await;
    let rows = t.rows("t0");
    assert_eq!(rows.len(), 1, "{rows:#?}");
    // message_start reported the input (400 uncached, 600 cached) and 1 output token
    assert_priced(&rows[0], CallStatus::BackendError, (400, 600), 1);
    let error = rows[0].error.as_deref().unwrap();
    assert!(error.starts_with("cancelled"), "{error}");
    assert_eq!((usage.calls, usage.backend_errors), (0, 1), "{usage:?}");
    assert_eq!((usage.input_tokens, usage.cached_tokens), (400, 600));
    assert!((usage.cost_usd - rows[0].cost_usd).abs() < 1e-12);
    assert_eq!(t.gateway.run_in_flight(), InFlight::default());
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_records_the_calls_still_in_flight() {
    let t = HeldGateway::start(GatewayConfig::DRAIN_TIMEOUT).await;
    let key = t.trial("t0", Caps::UNLIMITED);
    let vars = [
        ("HEVO_TEST_SDK", "anthropic"),
        ("HEVO_TEST_PROMPT", "MODE:hold_stream"),
    ];
    let Some(_) = t.harness("first_chunk.py", &key, &vars) else {
        return;
    };
    // hevo stops while the trial's stream is held (and never let go): within its grace
    // the call cannot end, so it is cancelled and recorded before the shutdown returns
    let gateway = t.gateway.gateway().clone();
    t.gateway.shutdown_within(Duration::from_secs(1)).await;
    let rows = t.sink.records();
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_priced(&rows[0], CallStatus::BackendError, (400, 600), 1);
    assert!(rows[0].error.as_deref().unwrap().starts_with("cancelled"));
    let run = gateway.run_usage();
    assert!((run.cost_usd - rows[0].cost_usd).abs() < 1e-12, "{run:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn calls_cancelled_at_once_end_the_closes_waiting_for_them_and_are_recorded() {
    // closing would wait an hour for the held stream: the user will not wait (a second
    // Ctrl-C), so hevo cancels the calls still running while the close waits
    let t = HeldGateway::start(Duration::from_secs(3600)).await;
    let key = t.trial("t0", Caps::UNLIMITED);
    let vars = [
        ("HEVO_TEST_SDK", "anthropic"),
        ("HEVO_TEST_PROMPT", "MODE:hold_stream"),
    ];
    let Some(_) = t.harness("first_chunk.py", &key, &vars) else {
        return;
    };
    assert_eq!(t.gateway.live_calls(), 1);
    let closing = {
        let gateway = t.gateway.gateway().clone();
        let key = key.clone();
        tokio::spawn(async move { gateway.close_trial(&key).await })
    };
    while t.gateway.trial_usage(&key).is_some() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    t.gateway.cancel_calls();
    // only a guard against hanging: without the cancel, the close would take an hour
    let usage = tokio::time::timeout(Duration::from_secs(120), closing)
        .await
        .expect("the close still waits for the cancelled call")
        .unwrap();
    assert_eq!(t.gateway.live_calls(), 0);
    let rows = t.rows("t0");
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_priced(&rows[0], CallStatus::BackendError, (400, 600), 1);
    assert!(rows[0].error.as_deref().unwrap().starts_with("cancelled"));
    assert_eq!((usage.calls, usage.backend_errors), (0, 1), "{usage:?}");
    assert_eq!(t.upstream.answered(), 0);
}
