//! The ledger: one [`CallRecord`] per model call, running totals per trial and per run, and the
//! caps that stop a trial (or the whole run) from spending more than it may.
//!
//! The gateway computes the records; where they are stored is the caller's business through
//! [`LedgerSink`] (the engine writes them to SQLite; tests use [`MemorySink`]).

use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// How one call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallStatus {
    /// Answered (by the backend or the response cache).
    Ok,
    /// Refused with HTTP 429 because a trial or run cap was reached.
    BudgetExceeded,
    /// The request was malformed or invalid (HTTP 400/404).
    BadRequest,
    /// The backend failed (upstream error after retries, network, crash): an infra fault.
    BackendError,
}

impl CallStatus {
    /// The lowercase name stored in the ledger.
    pub fn as_str(self) -> &'static str {
        match self {
            CallStatus::Ok => "ok",
            CallStatus::BudgetExceeded => "budget_exceeded",
            CallStatus::BadRequest => "bad_request",
            CallStatus::BackendError => "backend_error",
        }
    }
}

/// The most characters of a model name a ledger row keeps (a name no route has is the
/// caller's, and can be any size).
pub const RECORD_MODEL_CHARS: usize = 256;

/// The most characters of an error message a ledger row keeps (messages quote what the
/// caller sent).
pub const RECORD_ERROR_CHARS: usize = 4096;

/// `text`'s first `max` characters, saying how much was cut.
fn clipped(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((end, _)) => format!("{}... ({} bytes cut)", &text[..end], text.len() - end),
    }
}

/// One model call, as the ledger stores it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    /// The trial the call's key belongs to.
    pub trial_id: String,
    /// The candidate the trial evaluates, when the key was opened with one
    /// ([`TrialLabels::candidate_id`]).
    #[serde(default)]
    pub candidate_id: Option<String>,
    /// The task the trial runs, when the key was opened with one ([`TrialLabels::task_id`]).
    #[serde(default)]
    pub task_id: Option<String>,
    /// The API called, e.g. `openai.chat_completions` or `anthropic.messages`.
    #[serde(default)]
    pub endpoint: String,
    /// Position of the call within its trial (0, 1, ...).
    pub seq: u64,
    /// Milliseconds since the Unix epoch when the call arrived.
    pub started_at_ms: u64,
    /// The model that was priced (the upstream model name).
    pub model: String,
    /// Prompt tokens not served from a prompt cache (cache writes included).
    pub input_tokens: u64,
    /// Prompt tokens served from a prompt cache (priced at the cached-input rate).
    pub cached_tokens: u64,
    /// The part of `input_tokens` written to the provider's prompt cache (priced at the
    /// cache-write rate), 1-hour writes included.
    #[serde(default)]
    pub cache_write_tokens: u64,
    /// The part of `cache_write_tokens` written to the 1-hour cache (priced at its rate).
    #[serde(default)]
    pub cache_write_1h_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Dollars from the price table (for a response-cache hit: what the call would have cost).
    pub cost_usd: f64,
    /// Wall time at the gateway, request in to response out.
    pub latency_ms: f64,
    /// Served from hevo's response cache without calling the backend.
    pub cache_hit: bool,
    /// How the call ended.
    pub status: CallStatus,
    /// Upstream attempts that failed and were retried (429, 5xx, network), whether the call
    /// then succeeded or not; what the last of them answered is in `upstream_error`.
    pub retries: u32,
    /// The upstream's last failure for this call (e.g. `HTTP 503: overloaded`): the one a
    /// retry absorbed on an answered call, or the one that failed it.
    #[serde(default)]
    pub upstream_error: Option<String>,
    /// The error message, when `status` is not `ok`.
    pub error: Option<String>,
}

/// What a trial key is about, copied into each of its [`CallRecord`]s so per-candidate and
/// per-task spending can be read off the ledger.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrialLabels {
    /// The candidate (harness) the trial evaluates, or the proposer iteration's id.
    pub candidate_id: Option<String>,
    /// The task the trial runs.
    pub task_id: Option<String>,
}

/// Receives every [`CallRecord`], in the order calls finish. Implementations must be cheap or
/// hand off to a writer task: `record` runs on the gateway's request path.
pub trait LedgerSink: Send + Sync {
    /// Stores one record.
    fn record(&self, record: &CallRecord);
}

/// A [`LedgerSink`] that keeps records in memory (for tests and `hevo model run`).
#[derive(Debug, Default)]
pub struct MemorySink {
    records: Mutex<Vec<CallRecord>>,
}

impl MemorySink {
    /// An empty sink.
    pub fn new() -> Self {
        Self::default()
    }

    /// A copy of every record so far.
    pub fn records(&self) -> Vec<CallRecord> {
        self.records.lock().expect("ledger lock").clone()
    }
}

impl LedgerSink for MemorySink {
    fn record(&self, record: &CallRecord) {
        self.records
            .lock()
            .expect("ledger lock")
            .push(record.clone());
    }
}

/// A [`LedgerSink`] that drops every record.
#[derive(Debug, Default, Clone, Copy)]
pub struct NullSink;

impl LedgerSink for NullSink {
    fn record(&self, _record: &CallRecord) {}
}

/// Spending and resource limits of a trial (`[caps.trial]`) or of the whole run
/// (`[caps.run]`).
///
/// Spending caps hold under concurrency: before a call is forwarded it reserves a slot and
/// its maximum tokens and cost ([`InFlight`]); it is admitted only while the answered calls
/// plus the calls in flight stay under every cap, and its reservation is replaced by what it
/// really spent when it ends (or released when it fails; a caller that leaves does not end
/// it). So at most `max_calls` calls are answered, and tokens and dollars exceed their cap by
/// at most one call's maximum. A refused call gets HTTP 429 and marks the trial `budget_exceeded`; so
/// does a call whose real spend crosses a cap.
///
/// `max_concurrent`, `max_bytes_in_flight` and `max_trace_bytes` bound resources rather than
/// spending; unset they take the defaults in [`Caps::concurrency`], [`Caps::bytes_in_flight`]
/// and [`Caps::trace_bytes`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Caps {
    /// Most tokens (prompt + output, cached included).
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// Most dollars.
    #[serde(default)]
    pub max_cost_usd: Option<f64>,
    /// Most calls answered.
    #[serde(default)]
    pub max_calls: Option<u64>,
    /// Most calls in flight at once; more wait for a slot.
    #[serde(default)]
    pub max_concurrent: Option<u64>,
    /// Most request-body bytes held in memory at once, counted as they arrive; a body that
    /// does not fit waits on disk until enough bytes are free.
    #[serde(default)]
    pub max_bytes_in_flight: Option<u64>,
    /// Most bytes written to `model_calls.jsonl` traces; past it a `truncated` marker line
    /// ends the trace (the ledger still has every call).
    #[serde(default)]
    pub max_trace_bytes: Option<u64>,
}

/// What the calls in flight may at most still spend, held against the caps.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct InFlight {
    /// Calls admitted and not yet ended.
    pub calls: u64,
    /// Their maximum tokens (input bound + output limit).
    pub tokens: u64,
    /// Their maximum dollars.
    pub cost_usd: f64,
}

impl InFlight {
    /// One call's maximum.
    pub fn one(tokens: u64, cost_usd: f64) -> InFlight {
        InFlight {
            calls: 1,
            tokens,
            cost_usd,
        }
    }

    /// Adds `other`'s reservation.
    pub fn add(&mut self, other: &InFlight) {
        // Saturating: a reservation near u64::MAX must hold the cap shut, not wrap it open.
        self.calls = self.calls.saturating_add(other.calls);
        self.tokens = self.tokens.saturating_add(other.tokens);
        self.cost_usd += other.cost_usd;
    }

    /// Removes `other`'s reservation (added before).
    pub fn remove(&mut self, other: &InFlight) {
        self.calls = self.calls.saturating_sub(other.calls);
        self.tokens = self.tokens.saturating_sub(other.tokens);
        self.cost_usd = (self.cost_usd - other.cost_usd).max(0.0);
        if self.calls == 0 {
            // no drift from float sums once nothing is in flight
            self.cost_usd = 0.0;
        }
    }
}

/// Per-trial default of [`Caps::max_concurrent`].
pub const TRIAL_CONCURRENCY: u64 = 16;
/// Per-run (gateway) default of [`Caps::max_concurrent`].
pub const RUN_CONCURRENCY: u64 = 256;
/// Per-trial default of [`Caps::max_bytes_in_flight`].
pub const TRIAL_BYTES_IN_FLIGHT: u64 = 64 << 20;
/// Per-run (gateway) default of [`Caps::max_bytes_in_flight`].
pub const RUN_BYTES_IN_FLIGHT: u64 = 128 << 20;
/// Per-trial default of [`Caps::max_trace_bytes`].
pub const TRIAL_TRACE_BYTES: u64 = 32 << 20;
/// Per-run default of [`Caps::max_trace_bytes`].
pub const RUN_TRACE_BYTES: u64 = 2 << 30;

/// Whether a [`Caps`] is a trial's or the run's (their resource defaults differ).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// One trial.
    Trial,
    /// The whole run (every trial, one gateway).
    Run,
}

impl Caps {
    /// These caps less what `spent` already used: what is left for a trial's next attempt
    /// (its earlier attempts' calls were answered and billed).
    pub fn after(&self, spent: &TrialUsage) -> Caps {
        Caps {
            max_tokens: self
                .max_tokens
                .map(|m| m.saturating_sub(spent.total_tokens())),
            max_cost_usd: self.max_cost_usd.map(|m| (m - spent.cost_usd).max(0.0)),
            max_calls: self.max_calls.map(|m| m.saturating_sub(spent.calls)),
            ..*self
        }
    }

    /// No spending limits (resource limits at their defaults).
    pub const UNLIMITED: Caps = Caps {
        max_tokens: None,
        max_cost_usd: None,
        max_calls: None,
        max_concurrent: None,
        max_bytes_in_flight: None,
        max_trace_bytes: None,
    };

    /// The first limit that refuses one more call, given what is answered (`usage`) and
    /// what is in flight, described for a 429 body; `None` admits the call.
    pub fn refusal(&self, usage: &TrialUsage, in_flight: &InFlight) -> Option<String> {
        let pending = |n: u64| {
            if n == 0 {
                String::new()
            } else {
                format!(" (+{n} in flight)")
            }
        };
        if let Some(max) = self.max_calls {
            if usage.calls + in_flight.calls >= max {
                return Some(format!(
                    "call cap reached: {} of {max} calls used{}",
                    usage.calls,
                    pending(in_flight.calls)
                ));
            }
        }
        if let Some(max) = self.max_tokens {
            if usage.total_tokens() + in_flight.tokens >= max {
                return Some(format!(
                    "token cap reached: {} of {max} tokens used{}",
                    usage.total_tokens(),
                    if in_flight.calls == 0 {
                        String::new()
                    } else {
                        format!(" (+up to {} reserved by calls in flight)", in_flight.tokens)
                    }
                ));
            }
        }
        if let Some(max) = self.max_cost_usd {
            if usage.cost_usd + in_flight.cost_usd >= max {
                return Some(format!(
                    "dollar cap reached: ${:.6} of ${max:.6} spent{}",
                    usage.cost_usd,
                    if in_flight.calls == 0 {
                        String::new()
                    } else {
                        format!(
                            " (+up to ${:.6} reserved by calls in flight)",
                            in_flight.cost_usd
                        )
                    }
                ));
            }
        }
        None
    }

    /// The first limit `usage` has reached with nothing in flight; `None` while under all.
    pub fn reached(&self, usage: &TrialUsage) -> Option<String> {
        self.refusal(usage, &InFlight::default())
    }

    /// True when `usage` is over a limit (strictly above a token or dollar cap).
    pub fn exceeded(&self, usage: &TrialUsage) -> bool {
        self.max_tokens.is_some_and(|m| usage.total_tokens() > m)
            || self.max_cost_usd.is_some_and(|m| usage.cost_usd > m)
            || self.max_calls.is_some_and(|m| usage.calls > m)
    }

    /// [`Caps::max_concurrent`] or the scope's default (at least 1).
    pub fn concurrency(&self, scope: Scope) -> u64 {
        let default = match scope {
            Scope::Trial => TRIAL_CONCURRENCY,
            Scope::Run => RUN_CONCURRENCY,
        };
        self.max_concurrent.unwrap_or(default).max(1)
    }

    /// [`Caps::max_bytes_in_flight`] or the scope's default.
    pub fn bytes_in_flight(&self, scope: Scope) -> u64 {
        self.max_bytes_in_flight.unwrap_or(match scope {
            Scope::Trial => TRIAL_BYTES_IN_FLIGHT,
            Scope::Run => RUN_BYTES_IN_FLIGHT,
        })
    }

    /// [`Caps::max_trace_bytes`] or the scope's default.
    pub fn trace_bytes(&self, scope: Scope) -> u64 {
        self.max_trace_bytes.unwrap_or(match scope {
            Scope::Trial => TRIAL_TRACE_BYTES,
            Scope::Run => RUN_TRACE_BYTES,
        })
    }
}

impl CallRecord {
    /// This record as a ledger row keeps it: its model name and messages cut at
    /// [`RECORD_MODEL_CHARS`] and [`RECORD_ERROR_CHARS`], so a harness cannot grow the run's
    /// store by sending 20 MB model names that every refusal quotes.
    pub fn bounded(&self) -> CallRecord {
        let mut record = self.clone();
        record.model = clipped(&record.model, RECORD_MODEL_CHARS);
        record.error = record.error.map(|e| clipped(&e, RECORD_ERROR_CHARS));
        record.upstream_error = record
            .upstream_error
            .map(|e| clipped(&e, RECORD_ERROR_CHARS));
        record
    }
}

/// Running totals of a trial (or of a whole run).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TrialUsage {
    /// Calls answered (backend or cache); refused and failed calls are not counted.
    pub calls: u64,
    /// Uncached prompt tokens.
    pub input_tokens: u64,
    /// Cached prompt tokens.
    pub cached_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Dollars, response-cache hits included at the price they would have had.
    pub cost_usd: f64,
    /// Calls served from hevo's response cache.
    pub cache_hits: u64,
    /// Calls that failed at the backend after retries (infra faults: retry the trial).
    pub backend_errors: u64,
    /// A cap was reached: at least one call was refused with 429, or a call crossed a cap.
    pub budget_exceeded: bool,
}

impl TrialUsage {
    /// Every token counted: uncached + cached input + output.
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens + self.cached_tokens + self.output_tokens
    }

    /// Adds another trial's (or attempt's) totals to these.
    pub fn absorb(&mut self, other: &TrialUsage) {
        self.calls += other.calls;
        self.input_tokens += other.input_tokens;
        self.cached_tokens += other.cached_tokens;
        self.output_tokens += other.output_tokens;
        self.cost_usd += other.cost_usd;
        self.cache_hits += other.cache_hits;
        self.backend_errors += other.backend_errors;
        self.budget_exceeded |= other.budget_exceeded;
    }

    /// Adds one answered call.
    pub fn add(&mut self, record: &CallRecord) {
        self.calls += 1;
        self.input_tokens += record.input_tokens;
        self.cached_tokens += record.cached_tokens;
        self.output_tokens += record.output_tokens;
        self.cost_usd += record.cost_usd;
        self.cache_hits += u64::from(record.cache_hit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_reached_and_exceeded() {
        let caps = Caps {
            max_tokens: Some(100),
            ..Caps::UNLIMITED
        };
        let mut usage = TrialUsage {
            input_tokens: 60,
            output_tokens: 39,
            ..Default::default()
        };
        assert!(caps.reached(&usage).is_none());
        usage.output_tokens = 40;
        assert!(caps.reached(&usage).unwrap().contains("token cap"));
        assert!(!caps.exceeded(&usage));
        usage.output_tokens = 41;
        assert!(caps.exceeded(&usage));
        assert!(Caps::UNLIMITED.reached(&usage).is_none());
    }
}

#[cfg(test)]
mod bounded_tests {
    use super::*;

    #[test]
    fn a_record_keeps_at_most_its_bounds_of_model_and_messages() {
        let huge = "m".repeat(20 << 20);
        let record = CallRecord {
            trial_id: "t".into(),
            candidate_id: None,
            task_id: None,
            endpoint: "openai.chat_completions".into(),
            seq: 0,
            started_at_ms: 0,
            model: huge.clone(),
            input_tokens: 0,
            cached_tokens: 0,
            cache_write_tokens: 0,
            cache_write_1h_tokens: 0,
            output_tokens: 0,
            cost_usd: 0.0,
            latency_ms: 0.0,
            cache_hit: false,
            status: CallStatus::BadRequest,
            retries: 0,
            upstream_error: Some(format!("é{huge}")),
            error: Some(format!("model `{huge}` is not served")),
        };
        let b = record.bounded();
        assert!(b.model.len() < RECORD_MODEL_CHARS + 40, "{}", b.model.len());
        assert!(b
            .model
            .ends_with(&format!("({} bytes cut)", huge.len() - RECORD_MODEL_CHARS)));
        assert!(b.error.unwrap().len() < RECORD_ERROR_CHARS + 40);
        assert!(b.upstream_error.unwrap().starts_with('é'));
        let small = CallRecord {
            model: "gpt".into(),
            error: Some("short".into()),
            ..record
        };
        assert_eq!(small.bounded().model, "gpt");
        assert_eq!(small.bounded().error.as_deref(), Some("short"));
    }
}
