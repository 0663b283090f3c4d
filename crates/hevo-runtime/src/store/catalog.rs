//! What a run evaluates: the run itself, its candidates, its tasks and what a strategy drew.

use rusqlite::{params, OptionalExtension};

use super::{q, Store, StoreError, TaskRow};

impl Store {
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

    /// The ids of every candidate stored under `name`.
    pub fn ids_of(&self, name: &str) -> Result<Vec<i64>, StoreError> {
        let mut st = self
            .conn
            .prepare_cached("SELECT id FROM candidates WHERE name = ?1 ORDER BY id")
            .map_err(q("candidate ids"))?;
        let rows = st
            .query_map([name], |r| r.get(0))
            .map_err(q("candidate ids"))?;
        rows.collect::<Result<_, _>>().map_err(q("candidate ids"))
    }

    /// The `(code hash, parameters)` of every candidate stored under `name`.
    pub fn versions_of(&self, name: &str) -> Result<Vec<(String, String)>, StoreError> {
        let mut st = self
            .conn
            .prepare_cached("SELECT code_hash, params FROM candidates WHERE name = ?1")
            .map_err(q("candidate versions"))?;
        let rows = st
            .query_map([name], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(q("candidate versions"))?;
        rows.collect::<Result<_, _>>()
            .map_err(q("candidate versions"))
    }

    /// The id of the first candidate whose code lives at `code`, a path relative to the run
    /// directory (`archive/candidates/003-x/code`), if any. The stored path is absolute,
    /// from where the run directory was when the candidate was first loaded, so only its
    /// end is compared: a run directory that was moved still finds its candidates.
    pub fn candidate_at(&self, code: &str) -> Result<Option<i64>, StoreError> {
        self.conn
            .query_row(
                "SELECT id FROM candidates
                 WHERE substr(code_path, length(code_path) - length(?1)) = '/' || ?1
                 ORDER BY id LIMIT 1",
                [code],
                |r| r.get(0),
            )
            .optional()
            .map_err(q("find candidate by path"))
    }
}
