//! Finished trials: written once, read back per candidate, counted; the units a resumed run
//! still has to run.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use rusqlite::{params, Row};

use super::{q, Store, StoreError, TrialRow};
use crate::spend::Spend;
use crate::task::Split;

impl Store {
    /// The `(task, trial index)` units of a candidate that are finished (any status but
    /// `infra_error`, which is retried) on the task as it is now: a row whose task key is
    /// not `task_keys[task]` (the task's input, expected answer or scorer changed) is not.
    ///
    /// Nor is a `timeout` row that ran for less than `time_limit`, the per-trial limit in
    /// force now: it was stopped by a shorter limit (an earlier `--timeout`), so it says
    /// nothing about the trial under this one and runs again. A timed-out trial runs at
    /// least its limit (it is killed after it), so one that reached the current limit would
    /// time out again and is kept. The limit is judged by the row's own wall time rather
    /// than being part of the run directory's identity: the trials that finished within
    /// the limit stay valid, and a `--run-dir` given by hand is covered too.
    pub fn finished_units(
        &self,
        candidate_id: i64,
        task_keys: &HashMap<String, String>,
        time_limit: Duration,
    ) -> Result<HashSet<(String, u32)>, StoreError> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT task_id, trial_index, task_key FROM trials
                 WHERE candidate_id = ?1 AND status != 'infra_error'
                   AND NOT (status = 'timeout' AND wall_ms < ?2)",
            )
            .map_err(q("finished units"))?;
        let limit_ms = i64::try_from(time_limit.as_millis()).unwrap_or(i64::MAX);
        let rows = st
            .query_map(params![candidate_id, limit_ms], |r| {
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
    /// unless that row is an `infra_error`, a `timeout` (run again under a longer limit,
    /// see [`Store::finished_units`]) or was run on other task content.
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
                     WHERE trials.status IN ('infra_error', 'timeout')
                       OR trials.task_key != excluded.task_key",
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
                   cached_tokens, output_tokens, cost_usd, model_calls, wall_ms, attempts,
                   trace_path, error, answer, task_key
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
                    spend: spend_at(r, 6)?,
                    wall_ms: r.get::<_, i64>(11)?.max(0) as u64,
                    attempts: r.get(12)?,
                    trace_path: r.get(13)?,
                    error: r.get(14)?,
                    answer: r.get(15)?,
                    task_key: r.get(16)?,
                })
            })
            .map_err(q("read trials"))?;
        rows.collect::<Result<_, _>>().map_err(q("read trials"))
    }

    /// The trial rows on the tasks of `split` (all candidates, every status) and the sum of
    /// their spend: e.g. HarnessPro's core-set runs on the train split, which no
    /// candidate's validation total holds.
    pub fn split_spend(&self, split: Split) -> Result<(u64, Spend), StoreError> {
        self.conn
            .query_row(
                "SELECT COUNT(*), COALESCE(SUM(t.input_tokens), 0), COALESCE(SUM(t.cached_tokens), 0),
                        COALESCE(SUM(t.output_tokens), 0), COALESCE(SUM(t.cost_usd), 0.0),
                        COALESCE(SUM(t.model_calls), 0)
                 FROM trials t JOIN tasks k ON k.id = t.task_id WHERE k.split = ?1",
                [split.as_str()],
                |r| Ok((r.get::<_, i64>(0)?.max(0) as u64, spend_at(r, 1)?)),
            )
            .map_err(q("sum the trials of a split"))
    }

    /// The number of trial rows in the store (all candidates).
    pub fn trial_count(&self) -> Result<usize, StoreError> {
        self.conn
            .query_row("SELECT COUNT(*) FROM trials", [], |r| r.get::<_, i64>(0))
            .map(|n| n as usize)
            .map_err(q("count trials"))
    }
}

/// The spend of a `trials` row selected with its five spend columns in the order
/// `input_tokens, cached_tokens, output_tokens, cost_usd, model_calls` from column `first`:
/// the one reader of them, for the store and for views that select trials themselves.
pub fn spend_at(r: &Row<'_>, first: usize) -> rusqlite::Result<Spend> {
    let count = |i: usize| r.get::<_, i64>(first + i).map(|n| n.max(0) as u64);
    Ok(Spend {
        input_tokens: count(0)?,
        cached_tokens: count(1)?,
        output_tokens: count(2)?,
        cost_usd: r.get(first + 3)?,
        calls: count(4)?,
    })
}

/// A token count as SQLite's signed integer (saturating; no real count comes close).
fn sql_count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
