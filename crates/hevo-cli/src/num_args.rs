//! The numbers of hevo's flags: whole-number flags parsed with a message that says what to
//! give, and `--jobs`, whose 0 is refused in the words of hevo.toml's `[search] jobs`.
//!
//! Every subcommand with numeric flags sets clap's `allow_negative_numbers`, so `--seeds -1`
//! reaches these parsers (and the range checks of the commands) as a value instead of being
//! taken for a flag.

use crate::CliError;

/// The value of a whole-number flag (trials, seeds, tokens, threads ...): 0 or more, no
/// larger than `T` holds. clap's own parser only says "invalid digit found in string".
pub fn count<T: TryFrom<i128>>(s: &str) -> Result<T, String> {
    let n: i128 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a whole number: give one like 3"))?;
    if n < 0 {
        return Err(format!("{n} is negative: give a whole number such as 3"));
    }
    T::try_from(n).map_err(|_| format!("{n} is too large: give a smaller whole number"))
}

/// `--trials`: a whole number in hevo's range of trials per task, refused while the
/// arguments are parsed (before anything runs or prints) in the words of `[search] trials`.
pub fn trials(s: &str) -> Result<u32, String> {
    let n = count::<u32>(s)?;
    match hevo_runtime::limits::trials_problem(n) {
        Some(problem) => Err(problem),
        None => Ok(n),
    }
}

/// `--jobs`: its value, else the number of cores; 0 is a user error (exit 2).
pub fn jobs(flag: Option<usize>) -> Result<usize, CliError> {
    match flag {
        Some(0) => Err(CliError::user(
            "--jobs: is 0: use at least 1, or leave it out for the number of cores",
        )),
        Some(n) => Ok(n),
        None => Ok(hevo_runtime::eval::default_jobs()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_say_what_is_wrong() {
        assert_eq!(count::<u32>("7"), Ok(7));
        assert_eq!(
            count::<u64>("-1").unwrap_err(),
            "-1 is negative: give a whole number such as 3"
        );
        assert!(count::<u32>("4294967296")
            .unwrap_err()
            .contains("too large"));
        assert!(count::<usize>("x")
            .unwrap_err()
            .contains("not a whole number"));
        assert!(trials("0").unwrap_err().contains("between 1 and 10000"));
        assert!(trials("10001").is_err());
        assert_eq!(trials("3"), Ok(3));
        assert!(jobs(Some(0)).is_err());
        assert_eq!(jobs(Some(3)).unwrap(), 3);
    }
}
