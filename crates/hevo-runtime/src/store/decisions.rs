//! What a run decided: the estimates per candidate and HarnessPro's per-epoch decisions.

use rusqlite::params;

use super::{q, EstimateRow, Store, StoreError};

impl Store {
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
