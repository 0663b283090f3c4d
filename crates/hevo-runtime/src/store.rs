//! The SQLite store of a run directory (`<run>/hevo.db`, WAL mode, one writer).
//!
//! Tables: `runs`, `candidates`, `tasks`, `draws` (what a strategy drew per candidate,
//! with inclusion probabilities),
//! `trials`, `model_calls`, `estimates` and `decisions` (HarnessPro's per-epoch choices: core
//! set, survivors, plans, as JSON). A trial row is written once, when the trial has
//! finished; `(candidate_id, task_id, trial_index)` is unique, so a killed run resumes by
//! running exactly the units that have no row yet. The only row ever replaced is an
//! `infra_error` one (a fault of ours, retried on resume). This module holds SQL only: no
//! processes, no scoring.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OpenFlags, OptionalExtension};

use crate::spend::Spend;

/// The schema version stored in `PRAGMA user_version`.
pub const SCHEMA_VERSION: i64 = 3;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    config TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE TABLE IF NOT EXISTS candidates (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    name TEXT NOT NULL,
    code_hash TEXT NOT NULL,
    params TEXT NOT NULL,
    code_path TEXT,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    UNIQUE (run_id, code_hash, params)
);
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY,
    split TEXT NOT NULL,
    grp TEXT,
    line INTEGER
);
CREATE TABLE IF NOT EXISTS draws (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    candidate_id INTEGER NOT NULL,
    label TEXT NOT NULL,
    task_id TEXT NOT NULL,
    inclusion_prob REAL NOT NULL,
    UNIQUE (run_id, candidate_id, label, task_id)
);
CREATE TABLE IF NOT EXISTS trials (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    candidate_id INTEGER NOT NULL,
    task_id TEXT NOT NULL,
    trial_index INTEGER NOT NULL,
    outcome REAL NOT NULL,
    status TEXT NOT NULL,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    cached_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL DEFAULT 0,
    model_calls INTEGER NOT NULL DEFAULT 0,
    wall_ms INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 1,
    trace_path TEXT,
    error TEXT,
    answer TEXT,
    task_key TEXT NOT NULL DEFAULT '',
    finished_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    UNIQUE (candidate_id, task_id, trial_index)
);
CREATE INDEX IF NOT EXISTS trials_task ON trials (task_id);
CREATE TABLE IF NOT EXISTS model_calls (
    id INTEGER PRIMARY KEY,
    trial_key TEXT NOT NULL,
    candidate_id INTEGER,
    task_id TEXT,
    trial_index INTEGER,
    model TEXT NOT NULL,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    cached_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL DEFAULT 0,
    latency_ms INTEGER,
    cache_hit INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL,
    retries INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    upstream_error TEXT,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE TABLE IF NOT EXISTS estimates (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    candidate_id INTEGER NOT NULL,
    label TEXT NOT NULL,
    value REAL,
    se REAL,
    ci_low REAL,
    ci_high REAL,
    estimator TEXT NOT NULL,
    tasks_used INTEGER NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE TABLE IF NOT EXISTS decisions (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    UNIQUE (run_id, epoch, kind)
);
";

/// A store operation that failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database could not be opened or prepared.
    #[error("cannot open the store `{}`: {source}", path.display())]
    Open {
        /// The database file.
        path: PathBuf,
        /// The SQLite error.
        #[source]
        source: rusqlite::Error,
    },
    /// The database was written by a newer hevo.
    #[error("the store `{}` has schema version {found}; this hevo knows {SCHEMA_VERSION}", path.display())]
    Version {
        /// The database file.
        path: PathBuf,
        /// The version found.
        found: i64,
    },
    /// A query failed.
    #[error("store query ({what}) failed: {source}")]
    Query {
        /// What was being done.
        what: &'static str,
        /// The SQLite error.
        #[source]
        source: rusqlite::Error,
    },
}

fn q(what: &'static str) -> impl FnOnce(rusqlite::Error) -> StoreError {
    move |source| StoreError::Query { what, source }
}

/// A task as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskRow {
    /// Task id.
    pub id: String,
    /// `train`, `val` or `test`.
    pub split: String,
    /// Stratum.
    pub group: Option<String>,
    /// Line in `tasks.jsonl`.
    pub line: usize,
}

/// A finished trial as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct TrialRow {
    /// Run id.
    pub run_id: String,
    /// Candidate id.
    pub candidate_id: i64,
    /// Task id.
    pub task_id: String,
    /// 0-based repetition index.
    pub trial_index: u32,
    /// Outcome in `[0, 1]`.
    pub outcome: f64,
    /// Status name (see `TrialStatus`).
    pub status: String,
    /// What the trial's model calls cost (its gateway key's totals).
    pub spend: Spend,
    /// Harness wall time in milliseconds.
    pub wall_ms: u64,
    /// How many attempts it took (retries of infrastructure faults).
    pub attempts: u32,
    /// The trace prefix: files `<trace_path>.stdout`, `.stderr`, `.scorer-<i>.*`.
    pub trace_path: Option<String>,
    /// The cause of a non-pass, non-fail status.
    pub error: Option<String>,
    /// The parsed answer as JSON text, when there was one.
    pub answer: Option<String>,
    /// The content key of the task it ran (input, expected, scorer; see
    /// [`crate::suite::task_key`]): a row whose key is not the task's current one is stale.
    pub task_key: String,
}

/// An estimate as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct EstimateRow {
    /// Run id.
    pub run_id: String,
    /// Candidate id.
    pub candidate_id: i64,
    /// What was estimated (e.g. `val`).
    pub label: String,
    /// The point value (`None` when nothing was scored).
    pub value: Option<f64>,
    /// Standard error.
    pub se: Option<f64>,
    /// Lower end of the 95% interval.
    pub ci_low: f64,
    /// Upper end of the 95% interval.
    pub ci_high: f64,
    /// Estimator name.
    pub estimator: String,
    /// Number of tasks the estimate used.
    pub tasks_used: usize,
}

/// An open store. Use one per writer thread.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

impl Store {
    /// Opens (creating if needed) the store at `path` in WAL mode.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let open = |source| StoreError::Open {
            path: path.to_path_buf(),
            source,
        };
        let conn = Connection::open(path).map_err(open)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(open)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(open)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(open)?;
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(open)?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::Version {
                path: path.to_path_buf(),
                found: version,
            });
        }
        conn.execute_batch(SCHEMA).map_err(open)?;
        // Columns added to existing tables (nullable or defaulted, so older readers still
        // read them): version 3 keys every trial by its task's content (older rows have no
        // key and are re-run once); a model call's retries and errors came later.
        for (table, column, decl) in [
            ("trials", "task_key", "TEXT NOT NULL DEFAULT ''"),
            ("model_calls", "retries", "INTEGER NOT NULL DEFAULT 0"),
            ("model_calls", "error", "TEXT"),
            ("model_calls", "upstream_error", "TEXT"),
        ] {
            let present: bool = conn
                .query_row(
                    "SELECT COUNT(*) FROM pragma_table_info(?1) WHERE name = ?2",
                    params![table, column],
                    |r| r.get::<_, i64>(0),
                )
                .map_err(open)?
                > 0;
            if !present {
                conn.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {decl}"))
                    .map_err(open)?;
            }
        }
        conn.pragma_update(None, "user_version", SCHEMA_VERSION)
            .map_err(open)?;
        Ok(Store {
            conn,
            path: path.to_path_buf(),
        })
    }

    /// Opens an existing store read-only (e.g. to watch a running evaluation).
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(
            |source| StoreError::Open {
                path: path.to_path_buf(),
                source,
            },
        )?;
        let _ = conn.busy_timeout(std::time::Duration::from_secs(10));
        Ok(Store {
            conn,
            path: path.to_path_buf(),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The underlying connection, for queries this module does not offer.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// Records a run (kept as is if it exists).
    pub fn ensure_run(&self, id: &str, kind: &str, config: &str) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT INTO runs (id, kind, config) VALUES (?1, ?2, ?3) ON CONFLICT(id) DO NOTHING",
                params![id, kind, config],
            )
            .map_err(q("insert run"))?;
        Ok(())
    }

    /// Returns the id of the candidate with this code and parameters, creating it if new.
    pub fn ensure_candidate(
        &self,
        run_id: &str,
        name: &str,
        code_hash: &str,
        params: &str,
        code_path: Option<&str>,
    ) -> Result<i64, StoreError> {
        self.conn
            .execute(
                "INSERT INTO candidates (run_id, name, code_hash, params, code_path)
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING",
                params![run_id, name, code_hash, params, code_path],
            )
            .map_err(q("insert candidate"))?;
        self.conn
            .query_row(
                "SELECT id FROM candidates WHERE run_id = ?1 AND code_hash = ?2 AND params = ?3",
                params![run_id, code_hash, params],
                |r| r.get(0),
            )
            .map_err(q("find candidate"))
    }

    /// Inserts or updates tasks.
    pub fn upsert_tasks(&mut self, tasks: &[TaskRow]) -> Result<(), StoreError> {
        let tx = self.conn.transaction().map_err(q("begin"))?;
        {
            let mut st = tx
                .prepare(
                    "INSERT INTO tasks (id, split, grp, line) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT(id) DO UPDATE SET split = excluded.split, grp = excluded.grp,
                     line = excluded.line",
                )
                .map_err(q("insert tasks"))?;
            for t in tasks {
                st.execute(params![t.id, t.split, t.group, t.line as i64])
                    .map_err(q("insert tasks"))?;
            }
        }
        tx.commit().map_err(q("commit tasks"))
    }

    /// Records what a strategy drew for one candidate: each task with its inclusion
    /// probability under the design (1 for a task every candidate gets). Recording a task
    /// again replaces its probability (a sequential design's final one wins).
    pub fn record_draws(
        &mut self,
        run_id: &str,
        candidate_id: i64,
        label: &str,
        tasks: &[(String, f64)],
    ) -> Result<(), StoreError> {
        let tx = self.conn.transaction().map_err(q("begin"))?;
        {
            let mut st = tx
                .prepare(
                    "INSERT INTO draws (run_id, candidate_id, label, task_id, inclusion_prob)
                     VALUES (?1, ?2, ?3, ?4, ?5)
                     ON CONFLICT DO UPDATE SET inclusion_prob = excluded.inclusion_prob",
                )
                .map_err(q("insert draw"))?;
            for (task, p) in tasks {
                st.execute(params![run_id, candidate_id, label, task, p])
                    .map_err(q("insert draw"))?;
            }
        }
        tx.commit().map_err(q("commit draws"))
    }

    /// The draws recorded for a candidate under `label`: task id and inclusion probability.
    pub fn draws_of(
        &self,
        run_id: &str,
        candidate_id: i64,
        label: &str,
    ) -> Result<Vec<(String, f64)>, StoreError> {
        let mut st = self
            .conn
            .prepare(
                "SELECT task_id, inclusion_prob FROM draws
                 WHERE run_id = ?1 AND candidate_id = ?2 AND label = ?3 ORDER BY task_id",
            )
            .map_err(q("read draws"))?;
        let rows = st
            .query_map(params![run_id, candidate_id, label], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .map_err(q("read draws"))?;
        rows.collect::<Result<_, _>>().map_err(q("read draws"))
    }

    /// The `(task, trial index)` units of a candidate that are finished (any status but
    /// `infra_error`, which is retried) on the task as it is now: a row whose task key is
    /// not `task_keys[task]` (the task's input, expected answer or scorer changed) is not.
    pub fn finished_units(
        &self,
        candidate_id: i64,
        task_keys: &HashMap<String, String>,
    ) -> Result<HashSet<(String, u32)>, StoreError> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT task_id, trial_index, task_key FROM trials
                 WHERE candidate_id = ?1 AND status != 'infra_error'",
            )
            .map_err(q("finished units"))?;
        let rows = st
            .query_map([candidate_id], |r| {
                Ok((r.get::<_, String>(0)?, r.get(1)?, r.get::<_, String>(2)?))
            })
            .map_err(q("finished units"))?;
        let mut out = HashSet::new();
        for row in rows {
            let (task, index, key) = row.map_err(q("finished units"))?;
            if task_keys.get(&task) == Some(&key) {
                out.insert((task, index));
            }
        }
        Ok(out)
    }

    /// The mean wall time per task over all scored trials in this store (any candidate).
    pub fn mean_wall_ms_by_task(&self) -> Result<HashMap<String, f64>, StoreError> {
        let mut st = self
            .conn
            .prepare(
                "SELECT task_id, AVG(wall_ms) FROM trials
                 WHERE status != 'infra_error' GROUP BY task_id",
            )
            .map_err(q("past wall times"))?;
        let rows = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(q("past wall times"))?;
        rows.collect::<Result<_, _>>().map_err(q("past wall times"))
    }

    /// Writes finished trials in one transaction. A unit that already has a row keeps it,
    /// unless that row is an `infra_error` or was run on other task content.
    pub fn insert_trials(&mut self, rows: &[TrialRow]) -> Result<(), StoreError> {
        let tx = self.conn.transaction().map_err(q("begin"))?;
        {
            let mut st = tx
                .prepare_cached(
                    "INSERT INTO trials (run_id, candidate_id, task_id, trial_index, outcome,
                       status, input_tokens, cached_tokens, output_tokens, cost_usd,
                       wall_ms, attempts, trace_path, error, answer, model_calls, task_key)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
                       ?17)
                     ON CONFLICT(candidate_id, task_id, trial_index) DO UPDATE SET
                       run_id = excluded.run_id, outcome = excluded.outcome,
                       status = excluded.status, input_tokens = excluded.input_tokens,
                       cached_tokens = excluded.cached_tokens,
                       output_tokens = excluded.output_tokens, cost_usd = excluded.cost_usd,
                       model_calls = excluded.model_calls,
                       wall_ms = excluded.wall_ms,
                       attempts = excluded.attempts, trace_path = excluded.trace_path,
                       error = excluded.error, answer = excluded.answer,
                       task_key = excluded.task_key,
                       finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
                     WHERE trials.status = 'infra_error' OR trials.task_key != excluded.task_key",
                )
                .map_err(q("insert trial"))?;
            for r in rows {
                st.execute(params![
                    r.run_id,
                    r.candidate_id,
                    r.task_id,
                    r.trial_index,
                    r.outcome,
                    r.status,
                    sql_count(r.spend.input_tokens),
                    sql_count(r.spend.cached_tokens),
                    sql_count(r.spend.output_tokens),
                    r.spend.cost_usd,
                    r.wall_ms as i64,
                    r.attempts,
                    r.trace_path,
                    r.error,
                    r.answer,
                    sql_count(r.spend.calls),
                    r.task_key,
                ])
                .map_err(q("insert trial"))?;
            }
        }
        tx.commit().map_err(q("commit trials"))
    }

    /// All trial rows of a candidate, ordered by task and trial index.
    pub fn trials_of(&self, candidate_id: i64) -> Result<Vec<TrialRow>, StoreError> {
        let mut st = self
            .conn
            .prepare(
                "SELECT run_id, candidate_id, task_id, trial_index, outcome, status, input_tokens,
                   cached_tokens, output_tokens, cost_usd, wall_ms, attempts,
                   trace_path, error, answer, model_calls, task_key
                 FROM trials WHERE candidate_id = ?1 ORDER BY task_id, trial_index",
            )
            .map_err(q("read trials"))?;
        let rows = st
            .query_map([candidate_id], |r| {
                Ok(TrialRow {
                    run_id: r.get(0)?,
                    candidate_id: r.get(1)?,
                    task_id: r.get(2)?,
                    trial_index: r.get(3)?,
                    outcome: r.get(4)?,
                    status: r.get(5)?,
                    spend: Spend {
                        input_tokens: r.get::<_, i64>(6)?.max(0) as u64,
                        cached_tokens: r.get::<_, i64>(7)?.max(0) as u64,
                        output_tokens: r.get::<_, i64>(8)?.max(0) as u64,
                        cost_usd: r.get(9)?,
                        calls: r.get::<_, i64>(15)?.max(0) as u64,
                    },
                    wall_ms: r.get::<_, i64>(10)?.max(0) as u64,
                    attempts: r.get(11)?,
                    trace_path: r.get(12)?,
                    error: r.get(13)?,
                    answer: r.get(14)?,
                    task_key: r.get(16)?,
                })
            })
            .map_err(q("read trials"))?;
        rows.collect::<Result<_, _>>().map_err(q("read trials"))
    }

    /// The number of trial rows in the store (all candidates).
    pub fn trial_count(&self) -> Result<usize, StoreError> {
        self.conn
            .query_row("SELECT COUNT(*) FROM trials", [], |r| r.get::<_, i64>(0))
            .map(|n| n as usize)
            .map_err(q("count trials"))
    }

    /// The id of a candidate by code hash and parameters, if it exists.
    pub fn find_candidate(
        &self,
        run_id: &str,
        code_hash: &str,
        params: &str,
    ) -> Result<Option<i64>, StoreError> {
        self.conn
            .query_row(
                "SELECT id FROM candidates WHERE run_id = ?1 AND code_hash = ?2 AND params = ?3",
                params![run_id, code_hash, params],
                |r| r.get(0),
            )
            .optional()
            .map_err(q("find candidate"))
    }

    /// The id of the first candidate whose code lives at `code_path`, if any.
    pub fn candidate_at(&self, code_path: &str) -> Result<Option<i64>, StoreError> {
        self.conn
            .query_row(
                "SELECT id FROM candidates WHERE code_path = ?1 ORDER BY id LIMIT 1",
                [code_path],
                |r| r.get(0),
            )
            .optional()
            .map_err(q("find candidate by path"))
    }

    /// Records an estimate, replacing an earlier one of the same run, candidate and label:
    /// a run resumed (or repeated) after it finished writes its estimates again, and the
    /// table keeps one row per candidate (the chaos test, `hevo-cli/tests/chaos.rs`, found
    /// them doubled).
    pub fn insert_estimate(&self, e: &EstimateRow) -> Result<(), StoreError> {
        self.conn
            .execute(
                "DELETE FROM estimates WHERE run_id = ?1 AND candidate_id = ?2 AND label = ?3",
                params![e.run_id, e.candidate_id, e.label],
            )
            .map_err(q("replace estimate"))?;
        self.conn
            .execute(
                "INSERT INTO estimates (run_id, candidate_id, label, value, se, ci_low, ci_high,
                   estimator, tasks_used) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    e.run_id,
                    e.candidate_id,
                    e.label,
                    e.value,
                    e.se,
                    e.ci_low,
                    e.ci_high,
                    e.estimator,
                    e.tasks_used as i64
                ],
            )
            .map_err(q("insert estimate"))?;
        Ok(())
    }
}

impl Store {
    /// Records one decision of a run's epoch (`kind` e.g. `core_set`, `survivors`, `plans`)
    /// as JSON text; recording the same `(run, epoch, kind)` again replaces it (a resumed
    /// epoch decides again from the same data).
    pub fn record_decision(
        &self,
        run_id: &str,
        epoch: u32,
        kind: &str,
        body: &str,
    ) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO decisions (run_id, epoch, kind, body) VALUES (?1, ?2, ?3, ?4)",
                params![run_id, epoch, kind, body],
            )
            .map_err(q("record decision"))?;
        Ok(())
    }

    /// Every decision of `run_id`: `(epoch, kind, body)` in epoch order.
    pub fn decisions_of(&self, run_id: &str) -> Result<Vec<(u32, String, String)>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT epoch, kind, body FROM decisions WHERE run_id = ?1 ORDER BY epoch, id")
            .map_err(q("read decisions"))?;
        let rows = stmt
            .query_map([run_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .map_err(q("read decisions"))?;
        rows.collect::<Result<_, _>>().map_err(q("read decisions"))
    }
}

/// A token count as SQLite's signed integer (saturating; no real count comes close).
fn sql_count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(task: &str, idx: u32, status: &str) -> TrialRow {
        TrialRow {
            run_id: "r".into(),
            candidate_id: 1,
            task_id: task.into(),
            trial_index: idx,
            outcome: 1.0,
            status: status.into(),
            spend: Default::default(),
            wall_ms: 10,
            attempts: 1,
            trace_path: None,
            error: None,
            answer: None,
            task_key: "k".into(),
        }
    }

    #[test]
    fn a_finished_trial_is_written_once_and_infra_errors_are_replaced() {
        let d = tempfile::tempdir().unwrap();
        let mut s = Store::open(&d.path().join("hevo.db")).unwrap();
        s.ensure_run("r", "eval", "{}").unwrap();
        let c = s.ensure_candidate("r", "h", "abc", "{}", None).unwrap();
        assert_eq!(c, s.ensure_candidate("r", "h", "abc", "{}", None).unwrap());
        s.insert_trials(&[row("a", 0, "pass"), row("b", 0, "infra_error")])
            .unwrap();
        s.insert_trials(&[row("a", 0, "fail"), row("b", 0, "pass")])
            .unwrap();
        let rows = s.trials_of(c).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].status, "pass");
        assert_eq!(rows[1].status, "pass");
        let keys: HashMap<String, String> =
            [("a".into(), "k".into()), ("b".into(), "k".into())].into();
        assert_eq!(s.finished_units(c, &keys).unwrap().len(), 2);
        // A changed task is not finished, and its new row replaces the stale one.
        let changed: HashMap<String, String> =
            [("a".into(), "k2".into()), ("b".into(), "k".into())].into();
        assert_eq!(s.finished_units(c, &changed).unwrap().len(), 1);
        let mut fresh = row("a", 0, "fail");
        fresh.task_key = "k2".into();
        s.insert_trials(&[fresh]).unwrap();
        assert_eq!(s.trials_of(c).unwrap()[0].status, "fail");
        assert_eq!(s.finished_units(c, &changed).unwrap().len(), 2);
        assert_eq!(s.mean_wall_ms_by_task().unwrap()["a"], 10.0);
        // Reopening keeps everything.
        drop(s);
        let s = Store::open(&d.path().join("hevo.db")).unwrap();
        assert_eq!(s.trial_count().unwrap(), 2);
    }
}
