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

/// What is wrong with `n` trials per task (`[search] trials`, `--trials`), if anything:
/// every place that takes a count of trials checks it here, so all say the same range.
pub fn trials_problem(n: u32) -> Option<String> {
    (n == 0 || n > MAX_TRIALS)
        .then(|| format!("is {n}: give between 1 and {MAX_TRIALS} trials per task"))
}

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
         give a positive number of seconds up to {MAX_SECONDS}"
    )
}

/// `secs` as a time limit: a number of seconds above 0 and at most [`MAX_SECONDS`], else
/// the message naming `what` (a flag or key) and the fix. A limit of 0 would stop every
/// process at once, so it is refused as such.
pub fn time_limit(what: &str, secs: f64) -> Result<Duration, String> {
    match seconds(secs) {
        Some(d) if !d.is_zero() => Ok(d),
        _ if secs == 0.0 => Err(format!("{what} is 0: use a positive number of seconds")),
        _ => Err(seconds_problem(what, secs)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_and_odd_durations_are_refused() {
        assert_eq!(seconds(1.5), Some(Duration::from_millis(1500)));
        for bad in [1e300, -1.0, f64::NAN, f64::INFINITY, MAX_SECONDS * 2.0] {
            assert_eq!(seconds(bad), None, "{bad}");
            assert!(time_limit("`--timeout`", bad).is_err(), "{bad}");
        }
        assert_eq!(
            time_limit("`--timeout`", 0.0).unwrap_err(),
            "`--timeout` is 0: use a positive number of seconds"
        );
        assert_eq!(time_limit("x", 2.0), Ok(Duration::from_secs(2)));
    }

    #[test]
    fn trial_counts_outside_1_to_max_are_refused() {
        assert_eq!(trials_problem(1), None);
        assert_eq!(trials_problem(MAX_TRIALS), None);
        for bad in [0, MAX_TRIALS + 1, u32::MAX] {
            let p = trials_problem(bad).unwrap();
            assert!(p.contains("between 1 and 10000"), "{p}");
        }
    }
}
