//! [`Queue`]: what hevo's jobs are doing, told to the user while nothing else is (a job can
//! wait in the queue for minutes before any trial ends and prints a progress line).
//!
//! Every launch is tracked from its first poll until its job ends ([`Queue::track`], a
//! guard). A busy period starts with the first tracked launch and ends when none is left.
//! With a reporter (none with `--no-progress`):
//!
//! ```text
//! first sbatch of a busy period ─► QueueNews::Submitted { jobs, id }
//! every EVERY while any is tracked ─► QueueNews::Waiting { pending, running, elapsed }
//! a Slurm command cannot reach the controller ─► QueueNews::Unreachable { elapsed: 0, said }
//!     then every EVERY while none reaches it  ─► QueueNews::Unreachable { elapsed, said }
//! the first command that reaches it again     ─► QueueNews::Reachable { after }
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

/// How often the state of queued and running jobs is reported.
pub const EVERY: Duration = Duration::from_secs(30);

/// What is reported of the queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QueueNews {
    /// The first `sbatch` of a busy period: how many jobs it submitted, and its job id (an
    /// array's `A`, or a plain job's).
    Submitted {
        /// Jobs (array elements) submitted.
        jobs: usize,
        /// The job id sbatch printed.
        id: String,
    },
    /// Every [`EVERY`] while jobs are queued or running.
    Waiting {
        /// Jobs waiting in the queue (or being submitted).
        pending: usize,
        /// Jobs running.
        running: usize,
        /// Since the busy period began.
        elapsed: Duration,
    },
    /// A Slurm command could not reach the controller (it is down or restarting): hevo
    /// waits for it, polling, instead of failing its trials. Told when it begins, then
    /// every [`EVERY`] while it lasts (in place of [`QueueNews::Waiting`]).
    Unreachable {
        /// Since the first command that could not reach it.
        elapsed: Duration,
        /// What that command said.
        said: String,
    },
    /// The controller answers again after an outage.
    Reachable {
        /// How long it could not be reached.
        after: Duration,
    },
}

/// Where queue news go (the CLI prints them as progress lines).
pub type QueueReport = Arc<dyn Fn(&QueueNews) + Send + Sync>;

#[derive(Default)]
struct State {
    /// Running or not, by launch (job name).
    jobs: HashMap<String, bool>,
    /// When the busy period began.
    since: Option<Instant>,
    /// Whether its first submission was reported.
    announced: bool,
    /// Whether a reporting task runs.
    watching: bool,
    /// When the controller was first found unreachable, and what the command said, while
    /// it still is.
    outage: Option<(Instant, String)>,
    /// When a command that reached the controller was started, the latest such.
    reached: Option<Instant>,
}

/// The tracked launches of one launcher (see the module documentation).
#[derive(Default)]
pub(crate) struct Queue {
    report: Option<QueueReport>,
    state: Mutex<State>,
}

impl Queue {
    /// A queue telling `report`, if any.
    pub fn new(report: Option<QueueReport>) -> Queue {
        Queue {
            report,
            state: Mutex::default(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Tracks the launch `name` (pending) until the guard is dropped. Must be called on the
    /// runtime: the first launch of a busy period starts the reporting task.
    pub fn track(self: &Arc<Self>, name: &str) -> Tracked {
        let mut s = self.state();
        s.jobs.insert(name.to_string(), false);
        if s.since.is_none() {
            s.since = Some(Instant::now());
            s.announced = false;
        }
        if self.report.is_some() && !s.watching {
            s.watching = true;
            tokio::spawn(Arc::clone(self).watch());
        }
        Tracked {
            queue: Arc::clone(self),
            name: name.to_string(),
        }
    }

    /// `sbatch` submitted `jobs` jobs as `id`: reported if it is the busy period's first.
    pub fn submitted(&self, jobs: usize, id: &str) {
        let first = {
            let mut s = self.state();
            !std::mem::replace(&mut s.announced, true)
        };
        if let (true, Some(report)) = (first, &self.report) {
            report(&QueueNews::Submitted {
                jobs,
                id: id.to_string(),
            });
        }
    }

    /// A Slurm command started at `asked` could not reach the controller and said `said`:
    /// reported if no outage was already. A command started before one that reached the
    /// controller tells nothing new (it began during the outage that one ended).
    pub fn unreachable(&self, said: &str, asked: Instant) {
        let first = {
            let mut s = self.state();
            if s.reached.is_some_and(|r| r > asked) {
                return;
            }
            let first = s.outage.is_none();
            if first {
                s.outage = Some((Instant::now(), said.to_string()));
            }
            first
        };
        if let (true, Some(report)) = (first, &self.report) {
            report(&QueueNews::Unreachable {
                elapsed: Duration::ZERO,
                said: said.to_string(),
            });
        }
    }

    /// A Slurm command started at `asked` reached the controller: the end of an outage is
    /// reported.
    pub fn reached(&self, asked: Instant) {
        let ended = {
            let mut s = self.state();
            s.reached = Some(s.reached.map_or(asked, |r| r.max(asked)));
            s.outage.take()
        };
        if let (Some((since, _)), Some(report)) = (ended, &self.report) {
            report(&QueueNews::Reachable {
                after: since.elapsed(),
            });
        }
    }

    /// Reports the counts every [`EVERY`] (once the busy period is that old) until no
    /// launch is tracked.
    async fn watch(self: Arc<Self>) {
        loop {
            tokio::time::sleep(EVERY).await;
            let news = {
                let mut s = self.state();
                let Some(since) = s.since else {
                    s.watching = false;
                    return;
                };
                let running = s.jobs.values().filter(|r| **r).count();
                let elapsed = since.elapsed();
                if let Some((down, said)) = &s.outage {
                    let elapsed = down.elapsed();
                    (elapsed >= EVERY).then(|| QueueNews::Unreachable {
                        elapsed,
                        said: said.clone(),
                    })
                } else {
                    (elapsed >= EVERY).then(|| QueueNews::Waiting {
                        pending: s.jobs.len() - running,
                        running,
                        elapsed,
                    })
                }
            };
            if let (Some(news), Some(report)) = (news, &self.report) {
                report(&news);
            }
        }
    }
}

/// Whether a job in Slurm state `state` (not ended) still waits to start.
pub(crate) fn waiting(state: &str) -> bool {
    matches!(state, "PENDING" | "REQUEUED" | "CONFIGURING")
}

/// A tracked launch; dropping it (its job ended, or its launch gave up) forgets it.
pub(crate) struct Tracked {
    queue: Arc<Queue>,
    name: String,
}

impl Tracked {
    /// Records the job's Slurm state (`PENDING`, `RUNNING`, ...).
    pub fn set(&self, state: &str) {
        if let Some(r) = self.queue.state().jobs.get_mut(&self.name) {
            *r = !waiting(state);
        }
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        let mut s = self.queue.state();
        s.jobs.remove(&self.name);
        if s.jobs.is_empty() {
            s.since = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn reports_the_first_submission_then_the_counts_until_idle() {
        let news: Arc<Mutex<Vec<QueueNews>>> = Arc::default();
        let sink = Arc::clone(&news);
        let q = Arc::new(Queue::new(Some(Arc::new(move |n: &QueueNews| {
            sink.lock().unwrap().push(n.clone())
        }))));
        let a = q.track("a");
        let b = q.track("b");
        q.submitted(2, "7");
        q.submitted(1, "8");
        b.set("RUNNING");
        tokio::time::sleep(EVERY + Duration::from_secs(1)).await;
        drop((a, b));
        tokio::time::sleep(EVERY * 2).await;
        let news = news.lock().unwrap().clone();
        assert_eq!(news.len(), 2, "{news:?}");
        assert_eq!(
            news[0],
            QueueNews::Submitted {
                jobs: 2,
                id: "7".into()
            }
        );
        assert!(
            matches!(
                news[1],
                QueueNews::Waiting {
                    pending: 1,
                    running: 1,
                    ..
                }
            ),
            "{news:?}"
        );
        assert!(!q.state().watching);
    }

    #[tokio::test(start_paused = true)]
    async fn an_outage_is_told_when_it_begins_while_it_lasts_and_when_it_ends() {
        let news: Arc<Mutex<Vec<QueueNews>>> = Arc::default();
        let sink = Arc::clone(&news);
        let q = Arc::new(Queue::new(Some(Arc::new(move |n: &QueueNews| {
            sink.lock().unwrap().push(n.clone())
        }))));
        let a = q.track("a");
        let said = "slurm_load_jobs error: Unable to contact slurm controller (connect failure)";
        q.unreachable(said, Instant::now());
        // Every launch polling during the outage says so; it is told once.
        q.unreachable(said, Instant::now());
        tokio::time::sleep(EVERY * 2 + Duration::from_secs(1)).await;
        let during = Instant::now();
        tokio::time::sleep(Duration::from_secs(1)).await;
        q.reached(Instant::now());
        q.reached(Instant::now());
        // A command asked during the outage that fails after it ended starts none.
        q.unreachable(said, during);
        tokio::time::sleep(EVERY + Duration::from_secs(1)).await;
        drop(a);
        let news = news.lock().unwrap().clone();
        assert_eq!(
            news[0],
            QueueNews::Unreachable {
                elapsed: Duration::ZERO,
                said: said.into()
            }
        );
        // Two reports while it lasts, in place of the counts, then its end, then the counts.
        assert_eq!(news.len(), 5, "{news:?}");
        for (n, at) in news[1..3].iter().zip([EVERY, EVERY * 2]) {
            assert!(
                matches!(n, QueueNews::Unreachable { elapsed, said: s } if *elapsed >= at && s == said),
                "{news:?}"
            );
        }
        assert!(
            matches!(news[3], QueueNews::Reachable { after } if after > EVERY * 2),
            "{news:?}"
        );
        assert!(
            matches!(news[4], QueueNews::Waiting { pending: 1, .. }),
            "{news:?}"
        );
    }
}
