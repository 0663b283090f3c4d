//! The queue between callers and the model's workers.
//!
//! Each worker keeps the tokens of its last request in its own KV cache, so which worker
//! answers which request decides how much of a prompt is evaluated again. Affinity works both
//! ways. A request that arrives while workers are idle goes to the idle worker holding its
//! conversation so far (an agent's next turn), else to the worker idle the longest. A worker that becomes free while requests wait takes the
//! one sharing the longest prefix with its last prompt, the oldest on ties; a request passed
//! over [`MAX_PASSED_OVER`] times is taken next whatever its prefix, so affinity never starves
//! anyone.
//!
//! Callers (the gateway's trials) are served in turn: a free worker takes a request of the
//! waiting caller whose last request was started longest ago (a caller with nothing started
//! since it last had nothing waiting comes first), and prefix affinity chooses only among
//! that caller's requests (or, on a tie, those callers'). A trial that floods the model with
//! requests therefore delays another trial's next request by at most one request per worker,
//! not by its whole backlog. With one caller the order is the affinity order above.

use std::collections::{HashMap, VecDeque};
use std::sync::{Condvar, Mutex};

/// How many requests at the head of the queue a free worker compares with its last prompt.
const WINDOW: usize = 16;

/// How often the oldest request may be passed over before it is taken regardless.
pub(super) const MAX_PASSED_OVER: u32 = 4;

/// A request waiting for a worker, with the text its affinity is judged on.
struct Waiting<J> {
    job: J,
    key: String,
    caller: String,
    passed_over: u32,
}

struct State<J> {
    /// Requests no worker has taken yet, oldest first (empty while a worker is idle).
    waiting: VecDeque<Waiting<J>>,
    /// Workers waiting for a request, each with its last prompt, longest idle first.
    idle: Vec<(usize, String)>,
    /// A request handed to an idle worker, per worker.
    handed: Vec<Option<(J, String)>>,
    /// When each caller with requests waiting last had one started (a count of starts);
    /// a waiting caller without an entry has had none started since it last had nothing
    /// waiting, and goes first.
    started: HashMap<String, u64>,
    /// Requests started so far.
    starts: u64,
    closed: bool,
}

/// A blocking multi-consumer queue with prefix affinity, for a fixed number of workers.
pub(super) struct Queue<J> {
    state: Mutex<State<J>>,
    wake: Condvar,
}

impl<J> Queue<J> {
    /// A queue for workers `0..workers`.
    pub(super) fn new(workers: usize) -> Self {
        Self {
            state: Mutex::new(State {
                waiting: VecDeque::new(),
                idle: Vec::new(),
                handed: (0..workers).map(|_| None).collect(),
                started: HashMap::new(),
                starts: 0,
                closed: false,
            }),
            wake: Condvar::new(),
        }
    }

    /// Queues `job` of `caller`, whose prompt text is `key`; gives it back when the queue is
    /// closed.
    pub(super) fn push(&self, job: J, key: String, caller: String) -> Result<(), J> {
        let mut state = self.state.lock().expect("model queue lock");
        if state.closed {
            return Err(job);
        }
        if state.idle.is_empty() {
            state.waiting.push_back(Waiting {
                job,
                key,
                caller,
                passed_over: 0,
            });
            return Ok(());
        }
        let chosen = choose_idle(state.idle.iter().map(|(_, last)| last.as_str()), &key);
        let (worker, _) = state.idle.remove(chosen);
        state.handed[worker] = Some((job, key));
        drop(state);
        self.wake.notify_all();
        Ok(())
    }

    /// Blocks until worker `worker`, whose last prompt was `last`, has a request: one handed
    /// to it, or the waiting one that suits it best. Returns the request with its key; `None`
    /// once the queue is closed.
    pub(super) fn take(&self, worker: usize, last: &str) -> Option<(J, String)> {
        let mut state = self.state.lock().expect("model queue lock");
        loop {
            if state.closed {
                return None;
            }
            if let Some(handed) = state.handed[worker].take() {
                return Some(handed);
            }
            if !state.waiting.is_empty() {
                state.idle.retain(|(w, _)| *w != worker);
                return Some(take_waiting(&mut state, last));
            }
            register_idle(&mut state, worker, last);
            state = self.wake.wait(state).expect("model queue lock");
        }
    }

    /// Marks worker `worker` free with `last` as its last prompt, before it replies: a
    /// caller's next request, sent after the reply, then finds it idle even if the worker has
    /// not yet come back to [`Queue::take`].
    pub(super) fn finished(&self, worker: usize, last: &str) {
        let mut state = self.state.lock().expect("model queue lock");
        register_idle(&mut state, worker, last);
    }

    /// Stops the workers: [`Queue::take`] returns `None` and requests not yet taken are
    /// dropped (their callers see the reply channel close).
    pub(super) fn close(&self) {
        let mut state = self.state.lock().expect("model queue lock");
        state.closed = true;
        state.waiting.clear();
        state.handed.iter_mut().for_each(|h| *h = None);
        drop(state);
        self.wake.notify_all();
    }

    #[cfg(test)]
    fn idle_workers(&self) -> usize {
        self.state.lock().expect("model queue lock").idle.len()
    }
}

/// Lists `worker` as idle unless requests are waiting (it will take one) or it is listed.
fn register_idle<J>(state: &mut State<J>, worker: usize, last: &str) {
    if state.waiting.is_empty()
        && state.handed[worker].is_none()
        && !state.idle.iter().any(|(w, _)| *w == worker)
    {
        state.idle.push((worker, last.to_owned()));
    }
}

/// Takes the waiting request that suits a worker whose last prompt was `last`, among those
/// of the callers whose turn it is (the module's documentation).
fn take_waiting<J>(state: &mut State<J>, last: &str) -> (J, String) {
    let turn = |c: &str| state.started.get(c).copied().unwrap_or(0);
    let first = state
        .waiting
        .iter()
        .map(|w| turn(&w.caller))
        .min()
        .expect("a request is waiting");
    let eligible: Vec<usize> = (0..state.waiting.len())
        .filter(|&i| turn(&state.waiting[i].caller) == first)
        .take(WINDOW)
        .collect();
    let chosen = pick(
        eligible.iter().map(|&i| {
            let w = &state.waiting[i];
            (w.key.as_str(), w.passed_over)
        }),
        last,
    );
    for &i in &eligible[..chosen] {
        state.waiting[i].passed_over += 1;
    }
    let taken = state
        .waiting
        .remove(eligible[chosen])
        .expect("chosen index is in range");
    state.starts += 1;
    if state.waiting.iter().any(|w| w.caller == taken.caller) {
        state.started.insert(taken.caller, state.starts);
    } else {
        state.started.remove(&taken.caller);
    }
    (taken.job, taken.key)
}

/// Index of the idle worker (longest idle first, with their last prompts) for a request
/// whose prompt is `key`: among the workers whose last prompt is at least half a prefix of
/// `key` (the same conversation, or the same long system prompt), the one sharing the longest
/// prefix; else the longest idle, so a new conversation does not evict another one's cache
/// for a few shared characters.
fn choose_idle<'a>(idle: impl Iterator<Item = &'a str>, key: &str) -> usize {
    let mut best: Option<(usize, usize)> = None;
    for (i, last) in idle.enumerate() {
        let shared = common_prefix(last, key);
        if shared > 0 && 2 * shared >= last.len() && best.is_none_or(|(_, s)| shared > s) {
            best = Some((i, shared));
        }
    }
    best.map_or(0, |(i, _)| i)
}

/// Index of the request to take among `waiting` (oldest first, as `(key, passed_over)`) for a
/// worker whose last prompt was `last`.
fn pick<'a>(waiting: impl Iterator<Item = (&'a str, u32)>, last: &str) -> usize {
    let mut best = (0, 0);
    for (i, (key, passed_over)) in waiting.enumerate() {
        if i == 0 && passed_over >= MAX_PASSED_OVER {
            return 0;
        }
        let shared = common_prefix(key, last);
        if i == 0 || shared > best.1 {
            best = (i, shared);
        }
    }
    best.0
}

/// Length in bytes of the longest common prefix of `a` and `b`.
fn common_prefix(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use std::sync::{mpsc, Arc};
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_free_worker_takes_the_waiting_request_that_continues_its_last_prompt() {
        let q = Queue::new(1);
        q.push(1, "system A|user x".into(), String::new()).unwrap();
        q.push(
            2,
            "system B|user y|assistant z|user w".into(),
            String::new(),
        )
        .unwrap();
        q.push(3, "system B|user y|assistant".into(), String::new())
            .unwrap();
        let (job, key) = q.take(0, "system B|user y|assistant z").unwrap();
        assert_eq!(job, 2);
        assert_eq!(key, "system B|user y|assistant z|user w");
        // Nothing in common: the oldest.
        assert_eq!(q.take(0, "other").unwrap().0, 1);
        assert_eq!(q.take(0, "").unwrap().0, 3);
    }

    /// A caller that floods the model (trial A: one request being answered, five waiting)
    /// delays another caller's request by one request, not by its backlog; then the two
    /// take turns while both wait, and each keeps its own order.
    #[test]
    fn callers_are_served_in_turn_whatever_their_backlog() {
        let q = Queue::new(1);
        let caller = |j: u32| if j < 10 { "A" } else { "B" }.to_string();
        q.push(0, "a".into(), caller(0)).unwrap();
        assert_eq!(q.take(0, "").unwrap().0, 0);
        for job in [1, 2, 3, 4, 5, 10, 11] {
            q.push(job, "a".into(), caller(job)).unwrap();
        }
        let order: Vec<u32> = (0..7).map(|_| q.take(0, "a").unwrap().0).collect();
        assert_eq!(order, [1, 10, 2, 11, 3, 4, 5]);
        // A new backlog of A's, then one request of B's behind it: B's goes second.
        for job in [6, 7, 8, 12] {
            q.push(job, "a".into(), caller(job)).unwrap();
        }
        let order: Vec<u32> = (0..4).map(|_| q.take(0, "a").unwrap().0).collect();
        assert_eq!(order, [6, 12, 7, 8]);
    }

    /// Affinity still chooses within the callers whose turn it is: among two callers who have
    /// had nothing started, the request continuing the worker's last prompt.
    #[test]
    fn affinity_chooses_among_the_callers_whose_turn_it_is() {
        let q = Queue::new(1);
        q.push(1, "cold".into(), "A".into()).unwrap();
        q.push(2, "warm, next".into(), "B".into()).unwrap();
        assert_eq!(q.take(0, "warm").unwrap().0, 2);
        assert_eq!(q.take(0, "warm, next").unwrap().0, 1);
    }

    #[test]
    fn ties_go_to_the_oldest_request() {
        let q = Queue::new(1);
        for job in 0..3 {
            q.push(job, "same prefix".into(), String::new()).unwrap();
        }
        assert_eq!(q.take(0, "same prefix").unwrap().0, 0);
        assert_eq!(q.take(0, "same").unwrap().0, 1);
    }

    #[test]
    fn the_oldest_request_is_not_passed_over_forever() {
        let q = Queue::new(1);
        q.push(0, "cold".into(), String::new()).unwrap();
        let mut order = Vec::new();
        // A stream of requests that all suit this worker better than the oldest one.
        for round in 1..=10 {
            q.push(round, "warm".into(), String::new()).unwrap();
            order.push(q.take(0, "warm").unwrap().0);
        }
        let served_at = order.iter().position(|&j| j == 0).expect("served");
        assert_eq!(served_at, MAX_PASSED_OVER as usize);
    }

    /// Starts `n` workers whose last prompts are `conversation <w>`; each reports
    /// `(worker, job)` for every request it takes.
    fn workers(
        q: &Arc<Queue<u32>>,
        n: usize,
    ) -> (
        Vec<std::thread::JoinHandle<()>>,
        mpsc::Receiver<(usize, u32)>,
    ) {
        let (tx, rx) = mpsc::channel();
        let handles = (0..n)
            .map(|w| {
                let (q, tx) = (Arc::clone(q), tx.clone());
                std::thread::spawn(move || {
                    let mut last = format!("conversation {w}");
                    while let Some((job, key)) = q.take(w, &last) {
                        tx.send((w, job)).unwrap();
                        last = key;
                    }
                })
            })
            .collect();
        while q.idle_workers() < n {
            std::thread::sleep(Duration::from_millis(1));
        }
        (handles, rx)
    }

    #[test]
    fn a_request_goes_to_the_idle_worker_holding_its_prefix() {
        let q = Arc::new(Queue::new(3));
        let (handles, rx) = workers(&q, 3);
        for (job, target) in [(10, 2), (11, 0), (12, 1), (13, 2)] {
            q.push(
                job,
                format!("conversation {target}, next turn"),
                String::new(),
            )
            .unwrap();
            assert_eq!(rx.recv().unwrap(), (target, job));
            while q.idle_workers() < 3 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        q.close();
        for h in handles {
            h.join().unwrap();
        }
    }

    #[test]
    fn a_worker_that_has_finished_is_idle_before_it_asks_again() {
        let q = Queue::new(2);
        q.finished(0, "conversation A");
        q.finished(1, "conversation B");
        q.push(5, "conversation B, next turn".into(), String::new())
            .unwrap();
        q.push(6, "conversation A, next turn".into(), String::new())
            .unwrap();
        assert_eq!(q.take(1, "conversation B").unwrap().0, 5);
        assert_eq!(q.take(0, "conversation A").unwrap().0, 6);
    }

    #[test]
    fn a_new_conversation_takes_the_longest_idle_worker_not_a_near_match() {
        // Worker 0 holds a conversation sharing only the role marker with the new one.
        let idle = [
            "",
            "system\u{1f}You are a poet.\u{1e}user\u{1f}Waves.\u{1e}",
        ];
        assert_eq!(choose_idle(idle.into_iter(), "system\u{1f}Count to 3."), 0);
        // Its own next turn goes back to it.
        let next = format!("{}assistant\u{1f}Blue.\u{1e}", idle[1]);
        assert_eq!(choose_idle(idle.into_iter(), &next), 1);
        // Empty caches: the longest idle.
        assert_eq!(choose_idle(["", ""].into_iter(), "anything"), 0);
    }

    #[test]
    fn closing_wakes_waiting_workers_and_refuses_new_requests() {
        let q = Arc::new(Queue::new(2));
        let (handles, rx) = workers(&q, 2);
        q.close();
        for h in handles {
            h.join().unwrap();
        }
        assert!(rx.try_recv().is_err());
        assert_eq!(q.push(7, String::new(), String::new()), Err(7));
    }

    #[test]
    fn every_request_is_served_once_by_concurrent_workers() {
        let q = Arc::new(Queue::new(3));
        let (handles, rx) = workers(&q, 3);
        for job in 0..500 {
            q.push(
                job,
                format!("conversation {}", job % 7),
                format!("trial {}", job % 5),
            )
            .unwrap();
        }
        let mut got: Vec<u32> = (0..500).map(|_| rx.recv().unwrap().1).collect();
        q.close();
        for h in handles {
            h.join().unwrap();
        }
        got.sort_unstable();
        assert_eq!(got, (0..500).collect::<Vec<_>>());
    }
}
