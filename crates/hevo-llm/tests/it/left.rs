//! Calls whose caller went away: the official SDKs give up on calls (a timeout shorter than
//! the upstream takes) that the upstream still answers, and bills. Each such call still
//! ends, priced and recorded, and holds its reservation against the caps and its slot
//! against the concurrency limit until it has: answered by translation, forwarded, and a
//! stream whose headers had not come yet.

use hevo_llm::{CallStatus, Caps, GatewayConfig, InFlight};
use serde_json::Value;

use crate::held_gateway::{assert_priced, HeldGateway};

/// How long the SDK waits for each answer (the upstream holds it until released).
const GIVE_UP_AFTER: &str = "3";

/// What [`give_up`] saw.
struct GaveUp {
    /// The harness's report.
    out: Value,
    /// Calls the upstream held at once (all it received before it was let go).
    held: usize,
    /// Calls the upstream received in all.
    arrived: usize,
}

/// Runs `py/give_up.py` (`calls` calls of `kind`) in a trial with `caps`, then lets the
/// upstream answer and closes the trial; asserts that every call the upstream received is
/// in the ledger, priced by `input` and 500 output tokens, and in the trial's totals.
async fn give_up(kind: &str, calls: usize, caps: Caps, input: (u64, u64)) -> Option<GaveUp> {
    let t = HeldGateway::start(GatewayConfig::DRAIN_TIMEOUT).await;
    let key = t.trial("t0", caps);
    let calls = calls.to_string();
    let vars = [
        ("HEVO_TEST_KIND", kind),
        ("HEVO_TEST_CALLS", calls.as_str()),
        ("HEVO_TEST_TIMEOUT", GIVE_UP_AFTER),
    ];
    let out = t.harness("give_up.py", &key, &vars)?;
    assert_eq!(out["other"], 0, "{out}");
    let held = t.upstream.arrived();
    // the harness is gone; the upstream now answers every call it holds
    t.upstream.release();
    let usage = t.gateway.close_trial(&key).await;
    let arrived = t.upstream.arrived();
    assert_eq!(t.upstream.answered(), arrived);
    let rows = t.rows("t0");
    let ok: Vec<_> = rows.iter().filter(|r| r.status == CallStatus::Ok).collect();
    assert_eq!(ok.len(), arrived, "{kind}: {rows:#?}");
    for row in &ok {
        assert_priced(row, CallStatus::Ok, input, 500);
    }
    let refused = rows
        .iter()
        .filter(|r| r.status == CallStatus::BudgetExceeded)
        .count();
    assert_eq!(Some(refused as u64), out["refused"].as_u64(), "{out}");
    assert_eq!(ok.len() + refused, rows.len(), "{rows:#?}");
    assert_eq!(usage.calls as usize, arrived, "{usage:?}");
    let ledger: f64 = rows.iter().map(|r| r.cost_usd).sum();
    assert!((ledger - usage.cost_usd).abs() < 1e-12, "{usage:?}");
    assert_eq!(t.gateway.run_in_flight(), InFlight::default());
    Some(GaveUp { out, held, arrived })
}

/// Six calls given up on, in a trial that may make three.
async fn call_cap_holds(kind: &str, input: (u64, u64)) {
    let caps = Caps {
        max_calls: Some(3),
        ..Caps::UNLIMITED
    };
    let Some(GaveUp { out, arrived, .. }) = give_up(kind, 6, caps, input).await else {
        return;
    };
    assert!(
        arrived <= 3,
        "{kind}: {arrived} calls reached the upstream: {out}"
    );
    assert!(out["refused"].as_u64().unwrap() >= 1, "{out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn translated_calls_given_up_on_are_recorded_and_held_against_the_call_cap() {
    call_cap_holds("translated", (800, 200)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn forwarded_calls_given_up_on_are_recorded_and_held_against_the_call_cap() {
    call_cap_holds("forwarded", (400, 600)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn streams_given_up_on_before_their_headers_are_recorded_and_held_against_the_call_cap() {
    call_cap_holds("stream", (800, 200)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_given_up_on_keeps_its_slot_until_the_upstream_has_answered() {
    let caps = Caps {
        max_concurrent: Some(2),
        ..Caps::UNLIMITED
    };
    let Some(GaveUp { out, held, .. }) = give_up("translated", 4, caps, (800, 200)).await else {
        return;
    };
    // two calls hold the trial's two slots while the upstream holds them; the others wait
    // for a slot, before they are calls, until their SDK gives up
    assert_eq!(out["timeout"], 4, "{out}");
    assert!(
        held <= 2,
        "{held} calls reached the upstream at once: {out}"
    );
}
