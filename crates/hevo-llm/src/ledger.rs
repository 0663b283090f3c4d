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
    /// Prompt tokens not served from a prompt cache.
    pub input_tokens: u64,
    /// Prompt tokens served from a prompt cache (priced at the cached-input rate).
    pub cached_tokens: u64,
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
    /// Upstream retries the backend needed (infra faults absorbed by the gateway).
    pub retries: u32,
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

/// Spending limits. A call that arrives when a limit is already reached gets HTTP 429 and the
/// trial is marked `budget_exceeded`; the call that crosses a limit is answered (its tokens
/// are already spent) and marks the trial too.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Caps {
    /// Most tokens (prompt + output, cached included).
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// Most dollars.
    #[serde(default)]
    pub max_cost_usd: Option<f64>,
    /// Most calls.
    #[serde(default)]
    pub max_calls: Option<u64>,
}

impl Caps {
    /// No limits.
    pub const UNLIMITED: Caps = Caps {
        max_tokens: None,
        max_cost_usd: None,
        max_calls: None,
    };

    /// The first limit `usage` has reached, described for a 429 body; `None` while under all.
    pub fn reached(&self, usage: &TrialUsage) -> Option<String> {
        if let Some(max) = self.max_calls {
            if usage.calls >= max {
                return Some(format!(
                    "call cap reached: {} of {max} calls used",
                    usage.calls
                ));
            }
        }
        if let Some(max) = self.max_tokens {
            if usage.total_tokens() >= max {
                return Some(format!(
                    "token cap reached: {} of {max} tokens used",
                    usage.total_tokens()
                ));
            }
        }
        if let Some(max) = self.max_cost_usd {
            if usage.cost_usd >= max {
                return Some(format!(
                    "dollar cap reached: ${:.6} of ${max:.6} spent",
                    usage.cost_usd
                ));
            }
        }
        None
    }

    /// True when `usage` is over a limit (strictly above a token or dollar cap).
    pub fn exceeded(&self, usage: &TrialUsage) -> bool {
        self.max_tokens.is_some_and(|m| usage.total_tokens() > m)
            || self.max_cost_usd.is_some_and(|m| usage.cost_usd > m)
            || self.max_calls.is_some_and(|m| usage.calls > m)
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
