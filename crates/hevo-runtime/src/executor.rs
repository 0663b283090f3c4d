//! The local executor: a pool of `jobs` workers that run units (one trial each), longest
//! expected first, and the typed progress events they emit.
//!
//! ```text
//!             units sorted by expected wall time (longest first)
//!                    │
//!   worker 1..jobs ◄─┘  pop ─► run (retries inside) ─► result ─► writer (store, once)
//!                                         │
//!                                         └─► ProgressEvent ─► CLI reporter (bar / lines)
//! ```
//!
//! Lifecycle of a unit as events: `TrialStarted` → (`TrialRetry`)* → `TrialFinished`.
//! Cancellation: when the cancel flag turns `true` workers stop taking units; running
//! trials see the same flag and kill their process groups. The executor knows nothing of
//! harnesses or scoring: it schedules futures.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex};

use crate::cancel::Cancel;

use crate::trial::TrialStatus;

/// What a reporter is told while an evaluation runs.
#[derive(Clone, Debug, PartialEq)]
pub enum ProgressEvent {
    /// The run starts: `total` units to run now, `already_done` found in the store.
    RunStarted {
        /// Units to run now.
        total: usize,
        /// Units finished by an earlier invocation (resume).
        already_done: usize,
        /// Workers.
        jobs: usize,
    },
    /// A unit started.
    TrialStarted {
        /// Task id.
        task_id: String,
        /// Trial index.
        trial_index: u32,
    },
    /// An attempt failed with an infrastructure fault and will be retried.
    TrialRetry {
        /// Task id.
        task_id: String,
        /// Trial index.
        trial_index: u32,
        /// The attempt that failed (1-based).
        attempt: u32,
        /// Why.
        error: String,
    },
    /// A unit finished (and was handed to the store writer).
    TrialFinished {
        /// Task id.
        task_id: String,
        /// Trial index.
        trial_index: u32,
        /// How it ended.
        status: TrialStatus,
        /// Its outcome.
        outcome: f64,
        /// Harness wall time.
        wall_ms: u64,
        /// Units finished so far in this invocation.
        done: usize,
        /// Units to run in this invocation.
        total: usize,
        /// Running mean outcome of the scored units finished in this invocation.
        mean_outcome: f64,
        /// The cause of a status other than `pass` and `fail`.
        error: Option<String>,
        /// The trace prefix (`<trace>.stdout`, `<trace>.stderr`).
        trace: Option<String>,
    },
    /// The run was asked to stop; running trials are being killed.
    Cancelling,
}

/// One piece of work with the wall time it is expected to take.
#[derive(Clone, Debug, PartialEq)]
pub struct Unit<T> {
    /// The payload handed to the worker function.
    pub item: T,
    /// Expected wall time in ms, from past trials of the same task (`None` if unknown).
    pub expected_ms: Option<f64>,
}

/// Orders units longest expected first; unknown ones are given the mean of the known ones
/// (so a new task neither starts last nor pushes a known slow task back). Stable otherwise.
pub fn order_longest_first<T>(units: &mut [Unit<T>]) {
    let known: Vec<f64> = units.iter().filter_map(|u| u.expected_ms).collect();
    let fill = if known.is_empty() {
        0.0
    } else {
        known.iter().sum::<f64>() / known.len() as f64
    };
    units.sort_by(|a, b| {
        let x = a.expected_ms.unwrap_or(fill);
        let y = b.expected_ms.unwrap_or(fill);
        y.partial_cmp(&x).unwrap_or(std::cmp::Ordering::Equal)
    });
}

/// Runs every unit with `work` on at most `jobs` concurrent workers, in the given order,
/// stopping early (without starting new units) once `cancel` is cancelled.
pub async fn run_pool<T, F, Fut>(units: Vec<Unit<T>>, jobs: usize, cancel: Cancel, work: F)
where
    T: Send + 'static,
    F: Fn(T) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let queue: Arc<Mutex<VecDeque<T>>> =
        Arc::new(Mutex::new(units.into_iter().map(|u| u.item).collect()));
    let work = Arc::new(work);
    let mut handles = Vec::new();
    for _ in 0..jobs.max(1) {
        let queue = queue.clone();
        let work = work.clone();
        let cancel = cancel.clone();
        handles.push(tokio::spawn(async move {
            loop {
                if cancel.is_cancelled() {
                    break;
                }
                let next = queue.lock().map(|mut q| q.pop_front()).unwrap_or(None);
                let Some(item) = next else { break };
                work(item).await;
            }
        }));
    }
    for h in handles {
        let _ = h.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_first_with_unknowns_in_the_middle() {
        let mut u = vec![
            Unit {
                item: "a",
                expected_ms: Some(10.0),
            },
            Unit {
                item: "b",
                expected_ms: None,
            },
            Unit {
                item: "c",
                expected_ms: Some(100.0),
            },
        ];
        order_longest_first(&mut u);
        let order: Vec<_> = u.iter().map(|u| u.item).collect();
        assert_eq!(order, vec!["c", "b", "a"]);
    }

    #[test]
    fn pool_runs_every_unit_once() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s2 = seen.clone();
        rt.block_on(run_pool(
            (0..50)
                .map(|i| Unit {
                    item: i,
                    expected_ms: None,
                })
                .collect(),
            4,
            Cancel::new(),
            move |i| {
                let s = s2.clone();
                async move { s.lock().unwrap().push(i) }
            },
        ));
        let mut v = seen.lock().unwrap().clone();
        v.sort();
        assert_eq!(v, (0..50).collect::<Vec<_>>());
    }
}
