//! `hevo replay` at the ends of its ranges: `--seeds` past its cap and the last seeds of a
//! `u64`, and costs too large to sum, each refused with exit 2 naming what to change (never
//! a panic, an abort or a `NaN` in the report).

use std::process::{Command, Output};

mod support;

fn replay(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hevo"))
        .arg("replay")
        .args(args)
        .arg("--no-progress")
        .output()
        .unwrap()
}

/// Exit 2, nothing on stdout, and every needle on stderr; returns stderr.
fn refused(args: &[&str], needles: &[&str]) -> String {
    let out = replay(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
    for needle in needles {
        assert!(err.contains(needle), "{args:?}: `{needle}` not in {err}");
    }
    err
}

/// `--seeds` takes 1 to 100000: a larger count is refused at once, naming the flag and the
/// range (before, 18446744073709551615 panicked with a capacity overflow and 4294967296
/// aborted allocating 34 GB), and `--help` states the range.
#[test]
fn seeds_past_the_cap_exit_2_naming_the_range() {
    for n in ["18446744073709551615", "4294967296", "100001", "0"] {
        refused(
            &["--synth", "20x40", "--seeds", n],
            &[&format!("--seeds {n}"), "1 to 100000"],
        );
    }
    let help = Command::new(env!("CARGO_BIN_EXE_hevo"))
        .args(["replay", "--help"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&help.stdout).contains("1 to 100000"));
}

/// The last seed may be `u64::MAX` itself: `--first-seed 18446744073709551615 --seeds 1`
/// and `--first-seed 18446744073709551613 --seeds 3` replay (before, both were refused as
/// running past the largest seed); one seed more is still refused.
#[test]
fn the_last_seeds_of_a_u64_replay() {
    for (first, seeds) in [("18446744073709551615", "1"), ("18446744073709551613", "3")] {
        let out = replay(&[
            "--synth",
            "20x40",
            "--first-seed",
            first,
            "--seeds",
            seeds,
            "--strategy",
            "full,fixed",
            "--json",
        ]);
        let doc = support::json_of(&out);
        assert_eq!(doc["first_seed"].to_string(), first, "{doc}");
        assert_eq!(doc["seeds"].to_string(), seeds, "{doc}");
    }
    refused(
        &[
            "--synth",
            "20x40",
            "--first-seed",
            "18446744073709551613",
            "--seeds",
            "4",
        ],
        &[
            "--first-seed 18446744073709551613",
            "runs past the largest seed",
        ],
    );
}

/// Costs that overflow (cells of infinity, or a total past what a replay sums) exit 2 naming
/// the option or the file and the fix. Before, each printed cost `NaN`, JSON `null` and a
/// frontier at spend `NaN`, and with several seeds left the overflowed ones out of the means.
#[test]
fn costs_that_overflow_exit_2_naming_their_source() {
    for (flags, named) in [
        (&["--synth-cost", "1e6"][..], "--synth-cost 1000000.0"),
        (
            &["--synth-cost", "1", "--synth-cost-fail", "1e308"][..],
            "--synth-cost-fail 1e308",
        ),
        (
            &["--synth-cost", "1", "--synth-cost-candidate", "400"][..],
            "--synth-cost-candidate 400.0",
        ),
    ] {
        let mut args = vec!["--synth", "20x60", "--seeds", "3", "--rho", "0.2,0.1"];
        args.extend_from_slice(flags);
        let err = refused(&args, &[named, "give smaller values"]);
        assert!(!err.contains("NaN"), "{err}");
    }
    let dir = tempfile::tempdir().unwrap();
    let (mut matrix, mut costs) = (
        String::from("candidate,task,outcome\n"),
        String::from("candidate,task,cost_usd\n"),
    );
    for c in 0..8 {
        for t in 0..30 {
            matrix.push_str(&format!("c{c},t{t},{}\n", (c * 7 + t * 3) % 5 / 3));
            costs.push_str(&format!("c{c},t{t},1.7e308\n"));
        }
    }
    let m = dir.path().join("m.csv");
    let k = dir.path().join("k.csv");
    support::write(&m, &matrix);
    support::write(&k, &costs);
    let (m, k) = (m.to_string_lossy(), k.to_string_lossy());
    refused(
        &[&m, "--cost", &k, "--seeds", "3"],
        &["k.csv: ", "smaller unit"],
    );
    // The same costs in the matrix's own cost_usd column name the matrix.
    let own = dir.path().join("own.csv");
    let with_costs = matrix
        .replace("outcome\n", "outcome,cost_usd\n")
        .lines()
        .map(
            |l| match l.starts_with('c') && !l.starts_with("candidate") {
                true => format!("{l},1.7e308\n"),
                false => format!("{l}\n"),
            },
        )
        .collect::<String>();
    support::write(&own, &with_costs);
    refused(
        &[&own.to_string_lossy(), "--seeds", "3"],
        &["own.csv: ", "1e100"],
    );
}

/// A `--cost` file missing one cell was reported as the matrix file's gap ("good.csv:
/// cost_usd is given for some cells but not for ..."): it names the cost file now.
#[test]
fn a_cost_file_missing_a_cell_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut matrix, mut costs) = (
        String::from("candidate,task,outcome\n"),
        String::from("candidate,task,cost_usd\n"),
    );
    for c in 0..4 {
        for t in 0..6 {
            matrix += &format!("c{c},t{t},{}\n", (c + t) % 2);
            if (c, t) != (0, 0) {
                costs += &format!("c{c},t{t},0.5\n");
            }
        }
    }
    let (m, k) = (
        tmp.path().join("matrix.csv"),
        tmp.path().join("partial.csv"),
    );
    std::fs::write(&m, matrix).unwrap();
    std::fs::write(&k, costs).unwrap();
    let err = refused(
        &[
            m.to_str().unwrap(),
            "--cost",
            k.to_str().unwrap(),
            "--seeds",
            "1",
        ],
        &["partial.csv: cost_usd is given for some cells but not for candidate `c0`, task `t0`"],
    );
    assert!(!err.contains("matrix.csv"), "{err}");
}
