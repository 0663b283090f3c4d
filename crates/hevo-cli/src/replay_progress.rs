//! Progress of `hevo replay` on stderr (stdout stays data only): while seeds run, a line at
//! most every [`EVERY`] with the seeds done of all, the rho being replayed, the elapsed time
//! and an ETA from the rate so far. A replay that ends within [`EVERY`] prints nothing.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hevo_search::run::clock;

/// The least time between two progress lines (and before the first).
pub const EVERY: Duration = Duration::from_secs(2);

/// Counts finished seeds over every rho of one replay and prints throttled lines.
pub struct SeedProgress {
    total: u64,
    done: AtomicU64,
    started: Instant,
    every: Duration,
    /// When the last line was printed (or the start), and where lines go; `None`: quiet.
    sink: Option<Mutex<(Instant, Box<dyn Write + Send>)>>,
}

impl SeedProgress {
    /// Progress over `total` seeds (seeds times rhos) on stderr, or nothing when `quiet`.
    pub fn new(total: u64, quiet: bool) -> Self {
        let sink: Box<dyn Write + Send> = Box::new(std::io::stderr());
        Self::to(total, EVERY, (!quiet).then_some(sink))
    }

    /// [`SeedProgress::new`] with its interval and sink given (tests).
    fn to(total: u64, every: Duration, sink: Option<Box<dyn Write + Send>>) -> Self {
        let started = Instant::now();
        SeedProgress {
            total,
            done: AtomicU64::new(0),
            started,
            every,
            sink: sink.map(|s| Mutex::new((started, s))),
        }
    }

    /// Counts one finished seed of the replay at `rho`; prints a line if [`EVERY`] has passed
    /// since the last one. Called from the replay's worker threads.
    pub fn seed_done(&self, rho: f64) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        let Some(sink) = &self.sink else { return };
        let Ok(mut guard) = sink.lock() else { return };
        let (last, out) = &mut *guard;
        if last.elapsed() < self.every || done >= self.total {
            return;
        }
        *last = Instant::now();
        let text = line(done, self.total, rho, self.started.elapsed().as_secs_f64());
        // A closed stderr must not stop the replay.
        let _ = writeln!(out, "{text}");
    }
}

/// One progress line: `done` of `total` seeds, at `rho`, `elapsed_s` seconds in.
fn line(done: u64, total: u64, rho: f64, elapsed_s: f64) -> String {
    let eta = elapsed_s / done.max(1) as f64 * total.saturating_sub(done) as f64;
    format!(
        "hevo replay: {done}/{total} seeds (rho {rho}), {} elapsed, ETA {}",
        clock(elapsed_s),
        clock(eta)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A sink the test can read back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_line_per_seed_but_the_last_when_nothing_throttles() {
        let sink = Shared::default();
        let p = SeedProgress::to(4, Duration::ZERO, Some(Box::new(sink.clone())));
        for rho in [0.2, 0.2, 0.1, 0.1] {
            p.seed_done(rho);
        }
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].starts_with("hevo replay: 1/4 seeds (rho 0.2), 0:00 elapsed, ETA"));
        assert!(
            lines[2].starts_with("hevo replay: 3/4 seeds (rho 0.1)"),
            "{text}"
        );
    }

    #[test]
    fn a_replay_shorter_than_the_interval_prints_nothing() {
        let sink = Shared::default();
        let p = SeedProgress::to(3, Duration::from_secs(3600), Some(Box::new(sink.clone())));
        for _ in 0..3 {
            p.seed_done(0.2);
        }
        assert!(sink.0.lock().unwrap().is_empty());
    }

    #[test]
    fn the_eta_is_the_rate_so_far_times_what_is_left() {
        assert_eq!(
            line(10, 40, 0.07, 20.0),
            "hevo replay: 10/40 seeds (rho 0.07), 0:20 elapsed, ETA 1:00"
        );
        assert_eq!(
            line(0, 5, 0.2, 0.0),
            "hevo replay: 0/5 seeds (rho 0.2), 0:00 elapsed, ETA 0:00"
        );
    }
}
