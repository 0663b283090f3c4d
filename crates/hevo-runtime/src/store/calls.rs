//! The ledger's model calls as the search needs them back: which models a candidate's
//! calls failed upstream at (to tell a provider outage from a candidate's own doing).

use std::collections::BTreeSet;

use rusqlite::params;

use super::{q, Store, StoreError};

impl Store {
    /// The models at which calls of the trials whose ledger ids start with `trial_prefix`
    /// (`<run>/c<candidate>/`, see [`crate::model_access::TrialRef`]) ended `backend_error`
    /// (the upstream failed after the gateway's retries), on any of `tasks`.
    pub fn failed_upstream_models(
        &self,
        trial_prefix: &str,
        tasks: &BTreeSet<String>,
    ) -> Result<BTreeSet<String>, StoreError> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT trial_key, model FROM model_calls
                 WHERE status = 'backend_error' AND substr(trial_key, 1, length(?1)) = ?1",
            )
            .map_err(q("failed model calls"))?;
        let rows = st
            .query_map(params![trial_prefix], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })
            .map_err(q("failed model calls"))?;
        let mut models = BTreeSet::new();
        for row in rows {
            let (key, model) = row.map_err(q("failed model calls"))?;
            // `<trial index>/<task id>` after the prefix; the task id may hold `/`.
            let task = key[trial_prefix.len()..].split_once('/').map(|(_, t)| t);
            if task.is_some_and(|t| tasks.contains(t)) {
                models.insert(model);
            }
        }
        Ok(models)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_upstream_models_are_those_of_the_candidates_failed_calls_on_the_tasks() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&d.path().join("hevo.db")).unwrap();
        let calls = [
            ("run/c1/0/a", "m1", "backend_error"),
            ("run/c1/1/x/y", "m2", "backend_error"), // a task id with `/`
            ("run/c1/0/b", "m3", "backend_error"),   // another task
            ("run/c1/0/a", "m4", "ok"),              // answered
            ("run/c12/0/a", "m5", "backend_error"),  // another candidate, same digits
            ("smoke/c1/0/a", "m6", "backend_error"), // another run
            ("run/c1/prepare", "m7", "backend_error"),
            ("probe", "m8", "backend_error"),
        ];
        for (key, model, status) in calls {
            s.connection()
                .execute(
                    "INSERT INTO model_calls (trial_key, model, status) VALUES (?1, ?2, ?3)",
                    params![key, model, status],
                )
                .unwrap();
        }
        let tasks = BTreeSet::from(["a".to_string(), "x/y".to_string()]);
        let models = s.failed_upstream_models("run/c1/", &tasks).unwrap();
        assert_eq!(models, BTreeSet::from(["m1".into(), "m2".into()]));
        assert!(s
            .failed_upstream_models("run/c1/", &BTreeSet::new())
            .unwrap()
            .is_empty());
    }
}
