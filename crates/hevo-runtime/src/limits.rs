//! The bounds on numbers users give hevo: durations and repetition counts.
//!
//! Every duration a user writes (`--timeout`, `timeout_s` in `harness.toml` and in
//! `[scorer]`) is checked against [`MAX_SECONDS`] before it becomes a [`Duration`] (whose
//! float conversion panics on huge values), and trial counts against [`MAX_TRIALS`].

use std::time::Duration;

/// The longest time limit hevo accepts: 7 days.
pub const MAX_SECONDS: f64 = 7.0 * 24.0 * 3600.0;

/// The most repetitions per task hevo accepts.
pub const MAX_TRIALS: u32 = 10_000;

/// `secs` as a duration, if it is a number of seconds in `[0, MAX_SECONDS]`.
pub fn seconds(secs: f64) -> Option<Duration> {
    (secs.is_finite() && (0.0..=MAX_SECONDS).contains(&secs))
        .then(|| Duration::try_from_secs_f64(secs).ok())
        .flatten()
}

/// The message for a duration out of range: what was given, the range, how to fix it.
pub fn seconds_problem(what: &str, secs: f64) -> String {
    format!(
        "{what} = {secs} is not a number of seconds between 0 and {MAX_SECONDS} (7 days); \
         give a smaller positive value"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_and_odd_durations_are_refused() {
        assert_eq!(seconds(1.5), Some(Duration::from_millis(1500)));
        for bad in [1e300, -1.0, f64::NAN, f64::INFINITY, MAX_SECONDS * 2.0] {
            assert_eq!(seconds(bad), None, "{bad}");
        }
    }
}
