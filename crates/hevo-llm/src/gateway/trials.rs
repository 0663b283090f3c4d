//! Trials and their keys: opening a trial with a fresh (or given) key and its trace, closing
//! it (after its calls in flight), looking a key up and authenticating a call by it, and the
//! trials' and the run's totals.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use rand::RngCore;

use crate::error::LlmError;
use crate::ledger::{Caps, InFlight, Scope, TrialLabels, TrialUsage};

use super::limits::Budget;
use super::live::{Entered, Live};
use super::trace::TraceFile;
use super::{ApiError, Dialect, ErrorKind, Gateway, Trial, TrialKey, TrialState};

impl Gateway {
    /// Registers a trial and returns its fresh random key. Its calls are traced to
    /// `<trace_dir>/model_calls.jsonl` (created if needed) and limited by `caps`.
    ///
    /// # Errors
    /// [`LlmError::Io`] when the trace file cannot be created.
    pub fn open_trial(
        &self,
        trial_id: &str,
        trace_dir: &Path,
        caps: Caps,
    ) -> Result<TrialKey, LlmError> {
        self.open_labeled_trial(trial_id, TrialLabels::default(), trace_dir, caps)
    }

    /// [`Gateway::open_trial`] for a trial whose calls' ledger rows carry `labels` (the
    /// candidate and task it is about).
    ///
    /// # Errors
    /// [`LlmError::Io`] when the trace file cannot be created.
    pub fn open_labeled_trial(
        &self,
        trial_id: &str,
        labels: TrialLabels,
        trace_dir: &Path,
        caps: Caps,
    ) -> Result<TrialKey, LlmError> {
        let mut bytes = [0u8; 24];
        rand::rngs::OsRng.fill_bytes(&mut bytes);
        let key = format!("hevo-{}", hex::encode(bytes));
        self.open_keyed_trial(trial_id, labels, trace_dir, caps, key)
    }

    /// [`Gateway::open_labeled_trial`] with a key the caller chose instead of a random one:
    /// a job that outlived a restarted hevo keeps calling with the key it was given, and
    /// that key must work again (see `hevo_runtime::model_access::KeySecret`).
    ///
    /// # Errors
    /// [`LlmError::Io`] when the trace file cannot be created, [`LlmError::KeyInUse`] when
    /// `key` is already an open trial's.
    pub fn open_keyed_trial(
        &self,
        trial_id: &str,
        labels: TrialLabels,
        trace_dir: &Path,
        caps: Caps,
        key: String,
    ) -> Result<TrialKey, LlmError> {
        std::fs::create_dir_all(trace_dir).map_err(|e| LlmError::io(trace_dir, e))?;
        let path = trace_dir.join("model_calls.jsonl");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| LlmError::io(&path, e))?;
        let trial = Arc::new(Trial {
            id: trial_id.to_owned(),
            labels,
            caps,
            state: Mutex::new(TrialState::default()),
            trace: Mutex::new(Some(TraceFile::new(file, caps.trace_bytes(Scope::Trial)))),
            budget: Budget::new(
                caps.concurrency(Scope::Trial),
                caps.bytes_in_flight(Scope::Trial),
            ),
            bound: std::sync::atomic::AtomicBool::new(false),
            refusals: std::sync::atomic::AtomicU64::new(0),
            live: Live::default(),
        });
        match self
            .inner
            .trials
            .write()
            .expect("trials lock")
            .entry(key.clone())
        {
            std::collections::hash_map::Entry::Occupied(_) => return Err(LlmError::KeyInUse),
            std::collections::hash_map::Entry::Vacant(slot) => slot.insert(trial),
        };
        Ok(TrialKey(key))
    }

    /// Expires `key` (later calls get 401), waits for the trial's calls still in flight to
    /// end (at most the config's `drain_timeout`; those still running then are cancelled and
    /// recorded with what they had seen), closes the trace file and returns the trial's
    /// totals, every call of the trial included. An unknown or already closed key gives
    /// empty totals.
    pub async fn close_trial(&self, key: &TrialKey) -> TrialUsage {
        let Some(trial) = self
            .inner
            .trials
            .write()
            .expect("trials lock")
            .remove(&key.0)
        else {
            return TrialUsage::default();
        };
        let cancelled = trial.live.drain(self.inner.drain_timeout).await;
        if cancelled > 0 {
            tracing::warn!(
                trial = %trial.id,
                "cancelled {cancelled} model call(s) still running {:?} after the trial ended",
                self.inner.drain_timeout
            );
        }
        if let Some(mut trace) = trial.trace.lock().expect("trace lock").take() {
            let _ = trace.flush();
        }
        let usage = trial.state.lock().expect("trial lock").usage;
        usage
    }

    /// The live totals of an open trial.
    pub fn trial_usage(&self, key: &TrialKey) -> Option<TrialUsage> {
        let trials = self.inner.trials.read().expect("trials lock");
        trials
            .get(&key.0)
            .map(|t| t.state.lock().expect("trial lock").usage)
    }

    /// Totals of every call of the run so far.
    pub fn run_usage(&self) -> TrialUsage {
        self.inner.run.lock().expect("run lock").usage
    }

    /// What the run's calls in flight have reserved against the run's caps.
    pub fn run_in_flight(&self) -> InFlight {
        self.inner.run.lock().expect("run lock").in_flight
    }

    /// The open trial `key` belongs to.
    pub(super) fn trial_of(&self, key: &str) -> Option<Arc<Trial>> {
        self.inner
            .trials
            .read()
            .expect("trials lock")
            .get(key)
            .cloned()
    }

    /// The open trial `key` belongs to, or the 401 for a missing, unknown or expired key.
    pub(super) fn authenticate(
        &self,
        key: Option<&str>,
        dialect: Dialect,
    ) -> Result<Arc<Trial>, ApiError> {
        let trials = self.inner.trials.read().expect("trials lock");
        find(&trials, key, dialect).cloned()
    }

    /// [`Gateway::authenticate`] for a call, counted as live in its trial and in the run
    /// from now on. Counted under the trials lock, so a trial being closed either sees the
    /// call (and waits for it) or the call sees the key expired.
    pub(super) fn enter(
        &self,
        key: Option<&str>,
        dialect: Dialect,
    ) -> Result<(Arc<Trial>, [Entered; 2]), ApiError> {
        let trials = self.inner.trials.read().expect("trials lock");
        let trial = find(&trials, key, dialect)?;
        let entered = [trial.live.enter(), self.inner.live.enter()];
        Ok((Arc::clone(trial), entered))
    }
}

fn find<'a>(
    trials: &'a HashMap<String, Arc<Trial>>,
    key: Option<&str>,
    dialect: Dialect,
) -> Result<&'a Arc<Trial>, ApiError> {
    let Some(key) = key else {
        return Err(ApiError::new(
            dialect,
            ErrorKind::Authentication,
            "missing API key: send the trial key hevo put in OPENAI_API_KEY / \
             ANTHROPIC_API_KEY",
        ));
    };
    trials.get(key).ok_or_else(|| {
        ApiError::new(
            dialect,
            ErrorKind::Authentication,
            "invalid API key: unknown or expired trial key (each key is valid only while \
             its trial runs)",
        )
    })
}
