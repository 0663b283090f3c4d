//! The `sbatch` options hevo sets itself, on sbatch's command line (`batch.rs`), where they
//! win over the script's `#SBATCH` lines: an `[executor] sbatch` entry setting one would be
//! ignored without a word, so the configuration refuses it and names what controls the
//! option instead ([`hevo_sets`]).

/// One option hevo sets: its long name, its short letter, and what sets it instead.
struct Owned {
    long: &'static str,
    short: Option<char>,
    instead: &'static str,
}

/// Every option `batch.rs` passes to sbatch (and `--partition`, `--account`, `--mem`,
/// passed when their keys are set).
const OWNED: [Owned; 11] = [
    Owned {
        long: "time",
        short: Some('t'),
        instead: "the harness's `timeout_s` (harness.toml): the job's limit is the launch's \
                  time limit rounded up to whole minutes, plus one",
    },
    Owned {
        long: "cpus-per-task",
        short: Some('c'),
        instead: "`[executor] cpus`",
    },
    Owned {
        long: "mem",
        short: None,
        instead: "`[executor] mem_mb`",
    },
    Owned {
        long: "partition",
        short: Some('p'),
        instead: "`[executor] partition`",
    },
    Owned {
        long: "account",
        short: Some('A'),
        instead: "`[executor] account`",
    },
    Owned {
        long: "array",
        short: Some('a'),
        instead: "`[executor] array_max` and `array_throttle`",
    },
    Owned {
        long: "output",
        short: Some('o'),
        instead: "nothing: hevo sends the command's output to the trial's trace files",
    },
    Owned {
        long: "chdir",
        short: Some('D'),
        instead: "nothing: hevo runs the command in the trial's working directory",
    },
    Owned {
        long: "job-name",
        short: Some('J'),
        instead: "nothing: hevo finds a job again by the name it gives it",
    },
    Owned {
        long: "export",
        short: None,
        instead: "nothing: a job gets exactly the trial's environment",
    },
    Owned {
        long: "parsable",
        short: None,
        instead: "nothing: hevo reads the job id with it",
    },
];

/// If the `#SBATCH` entry `entry` (e.g. `--time=5`, `-t 5`, or an abbreviation sbatch
/// accepts, `--job=x`) sets an option hevo sets itself: that option (`--time`) and what
/// controls it instead.
pub fn hevo_sets(entry: &str) -> Option<(String, &'static str)> {
    let entry = entry.trim_start();
    let found = if let Some(long) = entry.strip_prefix("--") {
        let name = long.split(['=', ' ', '\t']).next().unwrap_or_default();
        OWNED
            .iter()
            .find(|o| o.long == name || (name.len() >= 2 && o.long.starts_with(name)))
    } else {
        let letter = entry.strip_prefix('-')?.chars().next()?;
        OWNED.iter().find(|o| o.short == Some(letter))
    }?;
    Some((format!("--{}", found.long), found.instead))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_options_hevo_sets_however_written() {
        for entry in [
            "--time=1",
            "--time 1",
            "-t 5",
            "-t5",
            "  --tim=3",
            "--cpus-per-task=2",
            "-c 2",
            "--job=x",
            "-J x",
            "--export=ALL",
            "--mem=4G",
            "-p gpu",
            "--array=0-3",
        ] {
            assert!(hevo_sets(entry).is_some(), "{entry}");
        }
        assert_eq!(hevo_sets("-t 5").unwrap().0, "--time");
        assert!(hevo_sets("--time=1").unwrap().1.contains("timeout_s"));
        assert_eq!(hevo_sets("-c2").unwrap().1, "`[executor] cpus`");
        for entry in [
            "--qos=short",
            "--time-min=5",
            "--mem-per-cpu=1G",
            "--export-file=x",
            "--gres=gpu:1",
            "-q short",
            "--constraint=avx",
            "qos=short",
        ] {
            assert_eq!(hevo_sets(entry), None, "{entry}");
        }
    }
}
