//! How trials reach the model layer: a fresh gateway key per trial, its spend on close, and
//! every call persisted in the run's store.
//!
//! The trial runner asks a [`ModelAccess`] for credentials right before it starts a harness
//! process and returns them right after the process ends; the key is valid only in between
//! (a later call gets 401), so every call is attributed to exactly one trial. Harness code
//! only ever receives the gateway's URL and this key, never a provider key.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Mutex;

use hevo_llm::{CallRecord, Caps, Gateway, LedgerSink, TrialKey, TrialUsage};

/// Where a harness's model SDKs are pointed (the gateway) and the key valid for one trial.
///
/// Until the model layer provides a gateway, [`ModelEnv::offline`] points to an address
/// where nothing listens, so a harness that calls a model fails fast instead of reaching a
/// real provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelEnv {
    /// `OPENAI_BASE_URL` given to the harness.
    pub openai_base_url: String,
    /// `OPENAI_API_KEY` given to the harness.
    pub openai_api_key: String,
    /// `ANTHROPIC_BASE_URL` given to the harness.
    pub anthropic_base_url: String,
    /// `ANTHROPIC_API_KEY` given to the harness.
    pub anthropic_api_key: String,
}

/// The closed local port of [`ModelEnv::offline`] (discard): a sandbox gets no relay for it,
/// so a call there is refused inside the sandbox as outside.
pub const OFFLINE_PORT: u16 = 9;

impl ModelEnv {
    /// No live gateway: URLs point to a closed local port, keys are placeholders.
    pub fn offline() -> ModelEnv {
        ModelEnv {
            openai_base_url: format!("http://127.0.0.1:{OFFLINE_PORT}/v1"),
            openai_api_key: "hevo-no-gateway".into(),
            anthropic_base_url: format!("http://127.0.0.1:{OFFLINE_PORT}"),
            anthropic_api_key: "hevo-no-gateway".into(),
        }
    }

    /// The four variables as `(name, value)` pairs.
    pub fn vars(&self) -> [(String, String); 4] {
        [
            ("OPENAI_BASE_URL".into(), self.openai_base_url.clone()),
            ("OPENAI_API_KEY".into(), self.openai_api_key.clone()),
            ("ANTHROPIC_BASE_URL".into(), self.anthropic_base_url.clone()),
            ("ANTHROPIC_API_KEY".into(), self.anthropic_api_key.clone()),
        ]
    }
}

/// An open trial's credentials, returned to [`ModelAccess::close`].
#[derive(Debug)]
pub struct Ticket(Option<TrialKey>);

impl Ticket {
    /// A ticket of a [`ModelAccess`] that is not the gateway's (its keys are its own).
    pub fn unbacked() -> Ticket {
        Ticket(None)
    }
}

/// Hands out per-trial model credentials and reports each trial's spend.
pub trait ModelAccess: Send + Sync {
    /// Opens a trial: the variables that point its SDKs at the gateway with a fresh key.
    /// Calls are traced to `<trace_dir>/model_calls.jsonl`. `spent` is what the trial's
    /// earlier attempts used (a retry after an infrastructure error): its caps are what is
    /// left of the trial's.
    fn open(
        &self,
        trial_id: &str,
        trace_dir: &Path,
        spent: &TrialUsage,
    ) -> Result<(ModelEnv, Ticket), String>;
    /// Expires the trial's key and returns its totals (spend, cap and upstream faults), once
    /// the calls it still had in flight have ended.
    fn close(&self, ticket: Ticket) -> CloseFuture<'_>;
    /// The model names a harness asks for whose calls go to `upstream_model` (the name the
    /// ledger records); none where no gateway routes models.
    fn routes_to(&self, upstream_model: &str) -> Vec<String> {
        let _ = upstream_model;
        Vec::new()
    }
}

/// What [`ModelAccess::close`] returns: the trial's totals, once its calls have ended.
pub type CloseFuture<'a> = Pin<Box<dyn Future<Output = TrialUsage> + Send + 'a>>;

impl std::fmt::Debug for dyn ModelAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ModelAccess")
    }
}

/// A run's secret for trial keys that survive a restart of hevo (jobs on a cluster outlive
/// it): a trial's key is `hevo-` and the first 48 hex digits of
/// SHA-256(secret ‖ SHA-256(trial id ‖ 0 ‖ trace dir)), the same for the same trial of the
/// same run in the old hevo and the new one, and unguessable without the secret. Both inputs
/// have a fixed length, so SHA-256's length extension cannot make one key from another.
///
/// Kept in `<run dir>/gateway.secret` (mode 0600). Local trials never need it (a restarted
/// hevo starts them again); on Slurm a job can read its own key in its spool anyway, so the
/// file adds nothing the cluster's container wrapper does not already have to keep from jobs.
#[derive(Clone)]
pub struct KeySecret([u8; 32]);

impl KeySecret {
    /// The file name under the run directory.
    pub const FILE: &'static str = "gateway.secret";

    /// Reads the run's secret, creating it (32 bytes from the OS) on first use.
    ///
    /// # Errors
    /// The file cannot be read or created, or it is not 32 bytes (named, with the fix).
    pub fn load_or_create(run_dir: &Path) -> Result<KeySecret, String> {
        use std::io::{Read, Write};
        let path = run_dir.join(Self::FILE);
        match std::fs::read(&path) {
            Ok(bytes) => {
                let secret: [u8; 32] = bytes.try_into().map_err(|b: Vec<u8>| {
                    format!(
                        "{}: {} bytes, expected 32; delete it (jobs still running from before \
                         then lose model access)",
                        path.display(),
                        b.len()
                    )
                })?;
                Ok(KeySecret(secret))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut secret = [0u8; 32];
                std::fs::File::open("/dev/urandom")
                    .and_then(|mut f| f.read_exact(&mut secret))
                    .map_err(|e| format!("cannot read /dev/urandom: {e}"))?;
                let tmp = run_dir.join(format!("{}.tmp", Self::FILE));
                let write = || -> std::io::Result<()> {
                    use std::os::unix::fs::OpenOptionsExt;
                    let mut f = std::fs::OpenOptions::new()
                        .write(true)
                        .create(true)
                        .truncate(true)
                        .mode(0o600)
                        .open(&tmp)?;
                    f.write_all(&secret)?;
                    f.sync_all()?;
                    std::fs::rename(&tmp, &path)
                };
                write().map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                Ok(KeySecret(secret))
            }
            Err(e) => Err(format!("cannot read {}: {e}", path.display())),
        }
    }

    /// The key of trial `trial_id` traced under `trace_dir`.
    pub fn key(&self, trial_id: &str, trace_dir: &Path) -> String {
        use sha2::{Digest, Sha256};
        let mut inner = Sha256::new();
        inner.update(trial_id.as_bytes());
        inner.update([0u8]);
        inner.update(trace_dir.as_os_str().as_encoded_bytes());
        let mut outer = Sha256::new();
        outer.update(self.0);
        outer.update(inner.finalize());
        format!("hevo-{}", &hex::encode(outer.finalize())[..48])
    }
}

/// [`ModelAccess`] over a running gateway.
#[derive(Clone)]
pub struct GatewayAccess {
    gateway: Gateway,
    openai_base_url: String,
    anthropic_base_url: String,
    trial_caps: Caps,
    secret: Option<KeySecret>,
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
            secret: None,
        }
    }

    /// Trials get keys derived from `secret` instead of random ones, so a job that outlives
    /// a restarted hevo keeps its model access.
    pub fn with_key_secret(mut self, secret: KeySecret) -> Self {
        self.secret = Some(secret);
        self
    }
}

impl ModelAccess for GatewayAccess {
    fn open(
        &self,
        trial_id: &str,
        trace_dir: &Path,
        spent: &TrialUsage,
    ) -> Result<(ModelEnv, Ticket), String> {
        let caps = self.trial_caps.after(spent);
        let key = match &self.secret {
            Some(secret) => self.gateway.open_keyed_trial(
                trial_id,
                Default::default(),
                trace_dir,
                caps,
                secret.key(trial_id, trace_dir),
            ),
            None => self.gateway.open_trial(trial_id, trace_dir, caps),
        }
        .map_err(|e| e.to_string())?;
        let env = ModelEnv {
            openai_base_url: self.openai_base_url.clone(),
            openai_api_key: key.as_str().to_string(),
            anthropic_base_url: self.anthropic_base_url.clone(),
            anthropic_api_key: key.as_str().to_string(),
        };
        Ok((env, Ticket(Some(key))))
    }

    fn close(&self, ticket: Ticket) -> CloseFuture<'_> {
        Box::pin(async move {
            match ticket.0 {
                Some(key) => self.gateway.close_trial(&key).await,
                None => TrialUsage::default(),
            }
        })
    }

    fn routes_to(&self, upstream_model: &str) -> Vec<String> {
        self.gateway.routes_to(upstream_model)
    }
}

/// A [`LedgerSink`] that writes every model call into the run's SQLite store
/// (`model_calls`), next to the trial rows: answered, refused (`budget_exceeded`) and failed
/// calls alike, each with its upstream retries and errors.
///
/// It holds its own connection (WAL allows the trial writer and this one to take turns; a
/// busy timeout makes them wait for each other instead of failing).
pub struct SqliteSink {
    conn: Mutex<rusqlite::Connection>,
    path: PathBuf,
    /// The run whose candidates the store numbers ([`crate::store::run_id`]).
    run: String,
}

impl SqliteSink {
    /// Opens (creating the schema if needed) the store at `path`, the `hevo.db` of a run
    /// directory. Calls of that run's trials get their candidate, trial index and task
    /// ([`TrialRef::parse`]); calls of other runs recorded through the same gateway (a
    /// search's smoke tests `<run>/smoke/...` and test split `<run>/test/...`,
    /// [`crate::store::nested_run_id`], whose candidate numbers are their own stores')
    /// keep only their trial key.
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
            run: crate::store::run_id(path.parent().unwrap_or(Path::new(""))),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl LedgerSink for SqliteSink {
    fn record(&self, r: &CallRecord) {
        let at = TrialRef::parse(&r.trial_id, &self.run);
        let conn = self.conn.lock().expect("ledger connection lock");
        let result = conn.execute(
            "INSERT INTO model_calls (trial_key, model, input_tokens, cached_tokens, output_tokens, \
             cost_usd, latency_ms, cache_hit, status, candidate_id, trial_index, task_id, \
             retries, error, upstream_error, endpoint, seq, started_at_ms, cache_write_tokens, \
             cache_write_1h_tokens) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, \
             ?18, ?19, ?20)",
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
                at.candidate,
                at.trial_index,
                at.task,
                r.retries,
                r.error,
                r.upstream_error,
                r.endpoint,
                r.seq as i64,
                r.started_at_ms as i64,
                r.cache_write_tokens as i64,
                r.cache_write_1h_tokens as i64,
            ],
        );
        if let Err(e) = result {
            tracing::warn!(error = %e, "cannot record a model call in the store");
        }
    }
}

/// The candidate, trial index and task a ledger trial id names.
///
/// Trial ids are `<run>/c<candidate>/<trial index>/<task id>` (the task last, so a task id
/// may hold `/`); `prepare` is `<run>/c<candidate>/prepare`. Other ids (e.g. a proposer's),
/// and the ids of another run, name none of them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrialRef {
    /// The candidate's store id.
    pub candidate: Option<i64>,
    /// The trial index.
    pub trial_index: Option<u32>,
    /// The task id.
    pub task: Option<String>,
}

impl TrialRef {
    /// The start of every ledger id of candidate `candidate`'s trials in run `run`:
    /// `<run>/c<candidate>/` (a trial's id goes on with `<trial index>/<task id>`).
    pub fn prefix(run: &str, candidate: i64) -> String {
        format!("{run}/c{candidate}/")
    }

    /// Parses a ledger trial id of run `run` (see the type's documentation).
    pub fn parse(trial_id: &str, run: &str) -> TrialRef {
        let mut parts = trial_id.splitn(4, '/');
        if parts.next() != Some(run) {
            return TrialRef::default();
        }
        let Some(candidate) = parts
            .next()
            .and_then(|c| c.strip_prefix('c'))
            .and_then(|c| c.parse().ok())
        else {
            return TrialRef::default();
        };
        let trial_index = parts.next().and_then(|i| i.parse().ok());
        let task = trial_index.and(parts.next()).map(str::to_string);
        TrialRef {
            candidate: Some(candidate),
            trial_index,
            task,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_keys_are_stable_per_trial_and_differ_between_trials_and_runs() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let first = KeySecret::load_or_create(a.path()).unwrap();
        let again = KeySecret::load_or_create(a.path()).unwrap();
        let other_run = KeySecret::load_or_create(b.path()).unwrap();
        let dir = Path::new("/runs/r/traces/c1/0/t");
        let key = first.key("run/c1/0/t", dir);
        assert_eq!(key, again.key("run/c1/0/t", dir));
        assert_eq!(key.len(), "hevo-".len() + 48);
        assert_ne!(key, first.key("run/c1/1/t", dir));
        assert_ne!(
            key,
            first.key("run/c1/0/t", Path::new("/runs/r/traces/c1/1/t"))
        );
        assert_ne!(key, other_run.key("run/c1/0/t", dir));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(a.path().join(KeySecret::FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::write(a.path().join(KeySecret::FILE), b"short").unwrap();
        let err = KeySecret::load_or_create(a.path()).err().unwrap();
        assert!(err.contains("5 bytes, expected 32"), "{err}");
    }

    /// A store made before `model_calls` had a call's endpoint, position, start and cache
    /// writes: its rows stay readable, and new rows get every column of the ledger.
    #[test]
    fn the_store_keeps_every_ledger_column_and_old_stores_gain_them() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("hevo.db");
        let old = rusqlite::Connection::open(&path).unwrap();
        old.execute_batch(
            "CREATE TABLE model_calls (id INTEGER PRIMARY KEY, trial_key TEXT NOT NULL, \
             candidate_id INTEGER, task_id TEXT, trial_index INTEGER, model TEXT NOT NULL, \
             input_tokens INTEGER NOT NULL DEFAULT 0, cached_tokens INTEGER NOT NULL DEFAULT 0, \
             output_tokens INTEGER NOT NULL DEFAULT 0, cost_usd REAL NOT NULL DEFAULT 0, \
             latency_ms INTEGER, cache_hit INTEGER NOT NULL DEFAULT 0, status TEXT NOT NULL, \
             retries INTEGER NOT NULL DEFAULT 0, error TEXT, upstream_error TEXT, \
             created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')));
             INSERT INTO model_calls (trial_key, model, input_tokens, status) \
             VALUES ('r/c1/0/old', 'm', 7, 'ok');
             PRAGMA user_version = 3;",
        )
        .unwrap();
        drop(old);
        let sink = SqliteSink::open(&path).unwrap();
        sink.record(&call("r/c1/0/t"));
        let conn = rusqlite::Connection::open(&path).unwrap();
        type Row = (
            String,
            Option<String>,
            Option<i64>,
            Option<i64>,
            i64,
            i64,
            i64,
        );
        let rows: Vec<Row> = conn
            .prepare(
                "SELECT trial_key, endpoint, seq, started_at_ms, input_tokens, \
                 cache_write_tokens, cache_write_1h_tokens FROM model_calls ORDER BY id",
            )
            .unwrap()
            .query_map([], |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                ))
            })
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            rows,
            vec![
                ("r/c1/0/old".into(), None, None, None, 7, 0, 0),
                (
                    "r/c1/0/t".into(),
                    Some("anthropic.messages".into()),
                    Some(4),
                    Some(1_700_000_000_123),
                    400,
                    300,
                    100
                ),
            ]
        );
    }

    /// A retried, cache-writing Anthropic call of trial `trial_id`, as the ledger records it.
    fn call(trial_id: &str) -> CallRecord {
        CallRecord {
            trial_id: trial_id.into(),
            candidate_id: None,
            task_id: None,
            endpoint: "anthropic.messages".into(),
            seq: 4,
            started_at_ms: 1_700_000_000_123,
            model: "claude-sonnet-4".into(),
            input_tokens: 400,
            cached_tokens: 600,
            cache_write_tokens: 300,
            cache_write_1h_tokens: 100,
            output_tokens: 500,
            cost_usd: 0.00933,
            latency_ms: 12.0,
            cache_hit: false,
            status: hevo_llm::CallStatus::Ok,
            retries: 1,
            upstream_error: Some("upstream returned HTTP 503: busy".into()),
            error: None,
        }
    }

    /// The gateway of `hevo run` records the smoke tests' and the test split's calls too;
    /// their candidate numbers are those of their own stores, not the run's.
    #[test]
    fn only_the_runs_own_calls_are_given_its_candidates() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("r").join("hevo.db");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let sink = SqliteSink::open(&path).unwrap();
        for key in [
            "r/c2/1/t1",
            "r/test/c2/0/t1",
            "r/smoke/c1/0/t1",
            "rr/c2/1/t1",
        ] {
            sink.record(&call(key));
        }
        let conn = rusqlite::Connection::open(&path).unwrap();
        type Row = (String, Option<i64>, Option<i64>, Option<String>);
        let rows: Vec<Row> = conn
            .prepare("SELECT trial_key, candidate_id, trial_index, task_id FROM model_calls")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            rows,
            vec![
                ("r/c2/1/t1".into(), Some(2), Some(1), Some("t1".into())),
                ("r/test/c2/0/t1".into(), None, None, None),
                ("r/smoke/c1/0/t1".into(), None, None, None),
                ("rr/c2/1/t1".into(), None, None, None),
            ]
        );
    }

    #[test]
    fn trial_ids_name_candidate_trial_and_task() {
        let r = TrialRef::parse("eval-x/c3/1/group/task-7", "eval-x");
        assert_eq!(r.candidate, Some(3));
        assert_eq!(r.trial_index, Some(1));
        assert_eq!(r.task.as_deref(), Some("group/task-7"));
        let p = TrialRef::parse("run/c2/prepare", "run");
        assert_eq!((p.candidate, p.trial_index, p.task), (Some(2), None, None));
        assert_eq!(
            TrialRef::parse("proposer/iter-1", "run"),
            TrialRef::default()
        );
        // Another run's candidate 1 is not this run's.
        assert_eq!(TrialRef::parse("test/c1/0/t", "run"), TrialRef::default());
        assert_eq!(TrialRef::parse("smoke/c1/0/t", "run"), TrialRef::default());
        // Nor is the test split's of a run named `test` (`crate::store::nested_run_id`).
        assert_eq!(
            TrialRef::parse("test/test/c1/0/t", "test"),
            TrialRef::default()
        );
    }
}
