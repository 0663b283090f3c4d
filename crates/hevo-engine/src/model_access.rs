//! How trials reach the model layer: a fresh gateway key per trial, its spend on close, and
//! every call persisted in the run's store.
//!
//! The trial runner asks a [`ModelAccess`] for credentials right before it starts a harness
//! process and returns them right after the process ends; the key is valid only in between
//! (a later call gets 401), so every call is attributed to exactly one trial. Harness code
//! only ever receives the gateway's URL and this key, never a provider key.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use hevo_llm::{CallRecord, Caps, Gateway, LedgerSink, TrialKey};

use crate::trial::ModelEnv;

/// What one trial spent on model calls.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ModelSpend {
    /// Calls answered.
    pub calls: u64,
    /// Uncached input tokens.
    pub input_tokens: u64,
    /// Cached input tokens.
    pub cached_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Dollars (response-cache hits at the price they would have had).
    pub cost_usd: f64,
    /// A per-trial or per-run cap was reached (a call got HTTP 429).
    pub budget_exceeded: bool,
    /// Calls that failed upstream after the gateway's retries (infrastructure faults).
    pub backend_errors: u64,
}

/// An open trial's credentials, returned to [`ModelAccess::close`].
#[derive(Debug)]
pub struct Ticket(TrialKey);

/// Hands out per-trial model credentials and reports each trial's spend.
pub trait ModelAccess: Send + Sync {
    /// Opens a trial: the variables that point its SDKs at the gateway with a fresh key.
    /// Calls are traced to `<trace_dir>/model_calls.jsonl`.
    fn open(&self, trial_id: &str, trace_dir: &Path) -> Result<(ModelEnv, Ticket), String>;
    /// Expires the trial's key and returns what it spent.
    fn close(&self, ticket: Ticket) -> ModelSpend;
}

impl std::fmt::Debug for dyn ModelAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ModelAccess")
    }
}

/// [`ModelAccess`] over a running gateway.
#[derive(Clone)]
pub struct GatewayAccess {
    gateway: Gateway,
    openai_base_url: String,
    anthropic_base_url: String,
    trial_caps: Caps,
}

impl GatewayAccess {
    /// Access through `gateway` (served at the given base URLs), each trial capped by `caps`.
    pub fn new(
        gateway: Gateway,
        openai_base_url: String,
        anthropic_base_url: String,
        trial_caps: Caps,
    ) -> Self {
        GatewayAccess {
            gateway,
            openai_base_url,
            anthropic_base_url,
            trial_caps,
        }
    }
}

impl ModelAccess for GatewayAccess {
    fn open(&self, trial_id: &str, trace_dir: &Path) -> Result<(ModelEnv, Ticket), String> {
        let key = self
            .gateway
            .open_trial(trial_id, trace_dir, self.trial_caps)
            .map_err(|e| e.to_string())?;
        let env = ModelEnv {
            openai_base_url: self.openai_base_url.clone(),
            openai_api_key: key.as_str().to_string(),
            anthropic_base_url: self.anthropic_base_url.clone(),
            anthropic_api_key: key.as_str().to_string(),
        };
        Ok((env, Ticket(key)))
    }

    fn close(&self, ticket: Ticket) -> ModelSpend {
        let u = self.gateway.close_trial(&ticket.0);
        ModelSpend {
            calls: u.calls,
            input_tokens: u.input_tokens,
            cached_tokens: u.cached_tokens,
            output_tokens: u.output_tokens,
            cost_usd: u.cost_usd,
            budget_exceeded: u.budget_exceeded,
            backend_errors: u.backend_errors,
        }
    }
}

/// A [`LedgerSink`] that writes every model call into the run's SQLite store
/// (`model_calls`), next to the trial rows.
///
/// It holds its own connection (WAL allows the trial writer and this one to take turns; a
/// busy timeout makes them wait for each other instead of failing).
pub struct SqliteSink {
    conn: Mutex<rusqlite::Connection>,
    path: PathBuf,
}

impl SqliteSink {
    /// Opens (creating the schema if needed) the store at `path`.
    pub fn open(path: &Path) -> Result<SqliteSink, crate::store::StoreError> {
        // Opening through the store creates the schema and sets WAL.
        drop(crate::store::Store::open(path)?);
        let conn =
            rusqlite::Connection::open(path).map_err(|source| crate::store::StoreError::Open {
                path: path.to_path_buf(),
                source,
            })?;
        let _ = conn.busy_timeout(std::time::Duration::from_secs(30));
        Ok(SqliteSink {
            conn: Mutex::new(conn),
            path: path.to_path_buf(),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl LedgerSink for SqliteSink {
    fn record(&self, r: &CallRecord) {
        let conn = self.conn.lock().expect("ledger connection lock");
        let result = conn.execute(
            "INSERT INTO model_calls (trial_key, model, input_tokens, cached_tokens, output_tokens, \
             cost_usd, latency_ms, cache_hit, status) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            rusqlite::params![
                r.trial_id,
                r.model,
                r.input_tokens as i64,
                r.cached_tokens as i64,
                r.output_tokens as i64,
                r.cost_usd,
                r.latency_ms.round() as i64,
                r.cache_hit,
                r.status.as_str(),
            ],
        );
        if let Err(e) = result {
            tracing::warn!(error = %e, "cannot record a model call in the store");
        }
    }
}
