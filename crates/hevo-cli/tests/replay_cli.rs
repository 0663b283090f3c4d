//! `hevo replay` end to end: malformed matrices exit 2 with file:line, `--json` shape.

use std::io::Write;
use std::process::Command;

mod support;

fn hevo() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hevo"))
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.path().join(name);
    let mut f = std::fs::File::create(&p).unwrap();
    f.write_all(text.as_bytes()).unwrap();
    p
}

fn complete(nc: usize, nt: usize) -> String {
    let mut s = String::from("candidate,task,outcome\n");
    for c in 0..nc {
        for t in 0..nt {
            let y = ((c * 7 + t * 3) % 5 < 2 + c % 3) as u8;
            s.push_str(&format!("c{c},t{t},{y}\n"));
        }
    }
    s
}

/// A `candidate,task,pass_at_1` file (an `.extra.csv`) of `nm` models on `nt` tasks.
fn pass_at_1(nm: usize, nt: usize) -> String {
    let mut s = String::from("candidate,task,pass_at_1\n");
    for c in 0..nm {
        for t in 0..nt {
            s.push_str(&format!("m{c},t{t},{}\n", 0.1 * ((c + t) % 10) as f64));
        }
    }
    s
}

fn expect_user_error(text: &str, needle: &str) {
    let dir = tempfile::tempdir().unwrap();
    let p = write(&dir, "m.csv", text);
    let out = hevo().arg("replay").arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("m.csv"), "{err}");
    assert!(err.contains(needle), "expected `{needle}` in: {err}");
}

#[test]
fn rejects_malformed_matrices_with_file_and_line() {
    let good = complete(4, 6);
    let lines: Vec<&str> = good.lines().collect();
    // Non-numeric outcome on line 3.
    let mut v: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
    v[2] = "c0,t1,yes".into();
    expect_user_error(&(v.join("\n") + "\n"), "m.csv:3");
    // The same with Windows line ends: still line 3 (the csv crate alone would say 2).
    expect_user_error(&(v.join("\r\n") + "\r\n"), "m.csv:3:");
    // Outcome outside [0, 1].
    let mut v: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
    v[4] = "c0,t3,1.5".into();
    expect_user_error(&(v.join("\n") + "\n"), "m.csv:5");
    // Duplicate cell.
    let mut v: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
    v[5] = "c0,t0,1".into();
    expect_user_error(&(v.join("\n") + "\n"), "duplicate");
    // Missing cell.
    let mut v: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
    v.remove(7);
    expect_user_error(&(v.join("\n") + "\n"), "incomplete");
    // Bad header.
    expect_user_error("a,b,c\n1,2,3\n", "m.csv:1");
}

/// A `--cost` file with the wrong header is named, with the header a cost file takes (not
/// the matrix's).
#[test]
fn a_cost_file_with_a_wrong_header_is_named_with_its_own_header() {
    let dir = tempfile::tempdir().unwrap();
    let m = write(&dir, "m.csv", &complete(3, 4));
    for header in ["foo,bar\n1,2\n", "candidate,task,usd\nc0,t0,1\n"] {
        let c = write(&dir, "costs.csv", header);
        let out = hevo()
            .args(["replay", "--seeds", "1", "--cost"])
            .arg(&c)
            .arg(&m)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("costs.csv:1:"), "{err}");
        assert!(err.contains("`candidate,task,cost_usd`"), "{err}");
        assert!(!err.contains("outcome"), "the matrix's header named: {err}");
    }
}

/// A log of a free model (every `cost_usd` 0) has no dollars to weigh: the replay says so
/// on stderr and counts the spend in evaluations, with no `NaN` share in the table or JSON.
#[test]
fn a_cost_column_of_zeros_replays_without_costs_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = String::from("candidate,task,outcome,cost_usd\n");
    for line in complete(6, 20).lines().skip(1) {
        s.push_str(&format!("{line},0\n"));
    }
    let p = write(&dir, "free.csv", &s);
    let run = |json: bool| {
        let mut cmd = hevo();
        cmd.args(["replay", "--seeds", "2", "--strategy", "default,coevolve"]);
        if json {
            cmd.arg("--json");
        }
        cmd.arg(&p).output().unwrap()
    };
    let out = run(false);
    assert!(out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("free.csv: cost_usd is 0 on every cell") && err.contains("without costs"),
        "{err}"
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(!table.contains("NaN"), "{table}");
    let doc = support::json_of(&run(true));
    for r in doc["strategies"].as_array().unwrap() {
        assert!(r["cost_share"].is_null() && r["cost_usd"].is_null(), "{r}");
        assert!(r["evals_share"].as_f64().unwrap() > 0.0, "{r}");
    }
}

/// Where every candidate scores the same, rank correlation is undefined: `-` in the table,
/// `null` in the JSON, and never `NaN`.
#[test]
fn a_field_of_equal_scores_prints_no_nan() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = String::from("candidate,task,outcome\n");
    for c in 0..5 {
        for t in 0..10 {
            s.push_str(&format!("c{c},t{t},0\n"));
        }
    }
    let p = write(&dir, "zeros.csv", &s);
    let out = hevo()
        .args(["replay", "--seeds", "2", "--strategy", "default,fixed"])
        .arg(&p)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(!table.contains("NaN"), "{table}");
    let row = table.lines().find(|l| l.starts_with("default")).unwrap();
    // strategy, rank, ±, se, top1, val, test, spearman
    assert_eq!(row.split_whitespace().nth(7), Some("-"), "{table}");
    let out = hevo()
        .args(["replay", "--seeds", "2", "--strategy", "default", "--json"])
        .arg(&p)
        .output()
        .unwrap();
    let doc = support::json_of(&out);
    assert!(doc["strategies"][0]["spearman"].is_null(), "{doc}");
    assert_eq!(doc["strategies"][0]["rank"], 1.0);
}

#[test]
fn json_has_strategies_and_oracle_test() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(&dir, "m.csv", &complete(9, 30));
    let out = hevo()
        .args(["replay", "--seeds", "3", "--json"])
        .arg(&p)
        .output()
        .unwrap();
    let doc = support::json_of(&out);
    let rows = doc["strategies"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    for want in ["full", "fixed", "resample", "screen", "race", "default"] {
        assert!(names.contains(&want), "{names:?}");
    }
    assert!(names.iter().any(|n| n.starts_with("coevolve/hajek")));
    assert!(names.iter().any(|n| n.starts_with("coevolve/residual")));
    assert!(names.iter().any(|n| n.starts_with("coevolve/auto")));
    for r in rows {
        for k in [
            "rank",
            "val",
            "test",
            "spearman",
            "evals_share",
            "pick_coverage",
            "field_coverage",
            "field_rmse",
            "pick_width",
        ] {
            assert!(r[k].is_number(), "{k} in {r}");
        }
        assert!(r.get("cost_share").is_some());
        assert!(r["cost_usd"].is_null(), "no costs given: {r}");
        assert!(r["honest"].is_boolean());
    }
    assert!(doc["oracle_test"].is_number());
    let co: Vec<&serde_json::Value> = rows
        .iter()
        .filter(|r| r["strategy"] == "coevolve")
        .collect();
    assert_eq!(co.len(), 3);
    assert!(co.iter().any(|r| r["estimator"] == "auto"));
}

#[test]
fn table_prints_the_caveat_and_costs() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = String::from("candidate,task,outcome,cost_usd\n");
    for c in 0..6 {
        for t in 0..20 {
            s.push_str(&format!(
                "c{c},t{t},{},{}\n",
                (c + t) % 2,
                0.01 * (1 + t % 4) as f64
            ));
        }
    }
    let p = write(&dir, "m.csv", &s);
    let out = hevo()
        .args([
            "replay",
            "--seeds",
            "2",
            "--strategy",
            "coevolve",
            "--estimator",
            "residual",
        ])
        .arg(&p)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("cannot show overfitting"), "{text}");
    assert!(text.contains("coevolve/residual"), "{text}");
}

#[test]
fn synthetic_costs_and_attempts_reach_the_json() {
    let out = hevo()
        .args([
            "replay",
            "--synth",
            "12x40",
            "--synth-cost",
            "1.0",
            "--seeds",
            "2",
            "--json",
            "--strategy",
            "default",
        ])
        .output()
        .unwrap();
    let doc = support::json_of(&out);
    let row = &doc["strategies"][0];
    assert!(row["cost_share"].as_f64().unwrap() > 0.0, "{row}");
    assert!(row["cost_usd"].as_f64().unwrap() > 0.0, "{row}");

    let dir = tempfile::tempdir().unwrap();
    let p = write(&dir, "m.extra.csv", &pass_at_1(3, 20));
    let out = hevo()
        .args(["replay", "--attempts", "4", "--seeds", "2", "--json"])
        .arg(&p)
        .output()
        .unwrap();
    let doc = support::json_of(&out);
    assert_eq!(doc["candidates"], 12);
    // --attempts 0 and a file without pass_at_1 are user errors.
    let out = hevo()
        .args(["replay", "--attempts", "0"])
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let q = write(&dir, "plain.csv", &complete(4, 6));
    let out = hevo()
        .args(["replay", "--attempts", "2"])
        .arg(&q)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("pass_at_1"));
}

#[test]
fn the_table_flags_intervals_below_the_target() {
    // Near-identical candidates on few tasks: the paper's intervals miss the target.
    let out = hevo()
        .args([
            "replay",
            "--synth",
            "30x60",
            "--ability-spread",
            "0.1",
            "--seeds",
            "6",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("pick-cov") && text.contains("field-cov"),
        "{text}"
    );
    assert!(text.contains("below the 93% coverage target"), "{text}");
}

/// The `--synth-cost-*` options shape the cost model: a failure cost of 3 makes `full`'s
/// dollars (every val cell) grow, but less than threefold (passed cells keep their price);
/// a value out of range, an option without `--synth-cost`, a negative ability spread, a
/// count of 0 and a seed range past `u64::MAX` exit 2 naming the flag.
#[test]
fn synth_cost_options_shape_the_dollars_and_bad_values_exit_2() {
    let dollars = |extra: &[&str]| -> f64 {
        let out = hevo()
            .args([
                "replay",
                "--synth",
                "12x40",
                "--synth-cost",
                "1.0",
                "--seeds",
                "1",
            ])
            .args(["--strategy", "full", "--json"])
            .args(extra)
            .output()
            .unwrap();
        support::json_of(&out)["strategies"][0]["cost_usd"]
            .as_f64()
            .unwrap()
    };
    let base = dollars(&[]);
    let fail = dollars(&["--synth-cost-fail", "3"]);
    assert!(base < fail && fail < 3.0 * base, "{base} -> {fail}");
    assert_eq!(
        dollars(&["--synth-cost-fail", "1"]),
        base,
        "1 is the default"
    );
    assert_eq!(
        dollars(&["--synth-cost-corr", "0.5"]),
        base,
        "0.5 is the default"
    );
    assert_ne!(dollars(&["--synth-cost-corr", "-0.5"]), base);
    assert_eq!(
        dollars(&["--synth-cost-candidate", "0.5"]),
        base,
        "0.5 is the default"
    );
    assert_ne!(dollars(&["--synth-cost-candidate", "1.0"]), base);

    for (args, needle) in [
        (
            &["--synth-cost", "1", "--synth-cost-corr", "2"][..],
            "--synth-cost-corr 2",
        ),
        (
            &["--synth-cost", "1", "--synth-cost-corr", "-1.5"][..],
            "--synth-cost-corr -1.5",
        ),
        (
            &["--synth-cost", "1", "--synth-cost-fail", "0"][..],
            "--synth-cost-fail 0",
        ),
        (
            &["--synth-cost", "1", "--synth-cost-candidate=-1"][..],
            "--synth-cost-candidate -1",
        ),
        (&["--synth-cost-fail", "3"][..], "--synth-cost"),
        (&["--ability-spread=-1"][..], "--ability-spread -1"),
        (&["--mc-draws", "0"][..], "--mc-draws must be at least 1"),
        (&["--minibatch", "0"][..], "--minibatch must be at least 1"),
        (&["--threads", "0"][..], "--threads must be at least 1"),
        (
            &["--first-seed", "18446744073709551615", "--seeds", "2"][..],
            "--first-seed 18446744073709551615",
        ),
    ] {
        let out = hevo()
            .args(["replay", "--synth", "12x40", "--no-progress"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
    }
}

/// `--sample CxT` replays whole models (with `--attempts`) on a task sample, and
/// `--synth-cost` gives a logged matrix heavy-tailed dollars; misuse exits 2 naming the flag.
#[test]
fn samples_and_synthetic_costs_of_a_logged_matrix() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(&dir, "m.extra.csv", &pass_at_1(6, 30));
    let json = |args: &[&str], file: &std::path::Path| -> serde_json::Value {
        let out = hevo()
            .arg("replay")
            .args(args)
            .args(["--seeds", "2", "--strategy", "default", "--json"])
            .arg(file)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        serde_json::from_slice(&out.stdout).unwrap()
    };
    // 4 of 6 models with their 3 attempts each, on 20 of 30 tasks (10 val).
    let doc = json(&["--attempts", "3", "--sample", "4x20"], &p);
    assert_eq!(doc["candidates"], 12, "{doc}");
    assert_eq!(doc["val_tasks"], 10, "{doc}");
    assert!(
        doc["strategies"][0]["cost_share"].is_null(),
        "no costs asked"
    );

    let q = write(&dir, "plain.csv", &complete(8, 20));
    let doc = json(&["--synth-cost", "1.0"], &q);
    let row = &doc["strategies"][0];
    assert!(row["cost_share"].as_f64().unwrap() > 0.0, "{row}");
    assert!(row["cost_usd"].as_f64().unwrap() > 0.0, "{row}");
    assert_eq!(doc, json(&["--synth-cost", "1.0"], &q), "seeded");

    for (args, needle) in [
        (&["--sample", "1x20"][..], "--sample 1x20"),
        (&["--sample", "4by20"][..], "--sample `4by20`"),
        (&["--synth-cost=-1"][..], "--synth-cost -1"),
    ] {
        let out = hevo().arg("replay").args(args).arg(&q).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// `--rho 0.2,0.05` replays each budget on the same seeds: two tables, the frontier and
/// `default`'s matches, or with `--json` `{"runs": [...], "frontier": {...}, "matches":
/// {...}}`, each run exactly what a single `--rho` prints; a bad value anywhere in the list
/// exits 2 naming it.
#[test]
fn several_rhos_replay_each_budget_and_print_the_frontier() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(&dir, "m.csv", &complete(9, 40));
    let replay = |rho: &str, json: bool| {
        let mut cmd = hevo();
        cmd.args([
            "replay",
            "--seeds",
            "3",
            "--synth-cost",
            "1.0",
            "--rho",
            rho,
        ]);
        cmd.args(["--strategy", "default,fixed"]);
        if json {
            cmd.arg("--json");
        }
        let out = cmd.arg(&p).output().unwrap();
        assert!(out.status.success(), "{rho}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let both: serde_json::Value = serde_json::from_str(&replay("0.2,0.05", true)).unwrap();
    let runs = both["runs"].as_array().expect("runs for several rhos");
    assert_eq!(runs.len(), 2);
    for (doc, rho) in runs.iter().zip(["0.2", "0.05"]) {
        assert_eq!(doc["rho"], rho.parse::<f64>().unwrap());
        let one: serde_json::Value = serde_json::from_str(&replay(rho, true)).unwrap();
        assert_eq!(doc, &one, "--rho {rho} alone prints the same document");
    }
    // Every (strategy, rho) setting of the two runs: name, rho, rank, dollar share.
    let settings: Vec<(String, f64, f64, f64)> = runs
        .iter()
        .flat_map(|r| {
            let rho = r["rho"].as_f64().unwrap();
            r["strategies"].as_array().unwrap().iter().map(move |s| {
                let name = s["name"].as_str().unwrap().to_string();
                let cost = s["cost_share"].as_f64().unwrap();
                (name, rho, s["rank"].as_f64().unwrap(), cost)
            })
        })
        .collect();
    // The frontier starts at the cheapest setting (nothing spends less to beat it).
    let frontier = &both["frontier"];
    assert_eq!(frontier["spend"], "dollars", "{frontier}");
    let points = frontier["points"].as_array().unwrap();
    assert!(!points.is_empty() && points.len() <= 4, "{frontier}");
    let cheapest = settings.iter().map(|s| s.3).fold(f64::INFINITY, f64::min);
    assert_eq!(points[0]["spend"].as_f64().unwrap(), cheapest, "{frontier}");
    // `default`'s matches: for `fixed` at each rho, the cheapest `default` ranking no worse.
    let matches = &both["matches"];
    assert_eq!(matches["strategy"], "default", "{matches}");
    let rows = matches["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "one row per `fixed` setting: {matches}");
    for row in rows {
        let (peer_rank, peer_spend) = (
            row["peer"]["rank"].as_f64().unwrap(),
            row["peer"]["spend"].as_f64().unwrap(),
        );
        assert_eq!(row["peer"]["name"], "fixed", "{row}");
        let want = settings
            .iter()
            .filter(|s| s.0 == "default" && s.2 <= peer_rank)
            .map(|s| s.3)
            .fold(f64::INFINITY, f64::min);
        if want.is_finite() {
            assert_eq!(row["cheapest"]["spend"].as_f64().unwrap(), want, "{row}");
            let ratio = row["spend_ratio"].as_f64().unwrap();
            assert!((ratio - want / peer_spend).abs() < 1e-12, "{row}");
        } else {
            assert!(
                row["cheapest"].is_null() && row["spend_ratio"].is_null(),
                "{row}"
            );
        }
    }

    let text = replay("0.2,0.05", false);
    assert_eq!(text.matches("replay: ").count(), 2, "{text}");
    assert!(
        text.contains("rho 0.2,") && text.contains("rho 0.05,"),
        "{text}"
    );
    assert!(
        text.contains("frontier: ") && text.contains("dollar share"),
        "{text}"
    );
    assert!(text.contains("default against each peer: "), "{text}");

    let out = hevo()
        .args(["replay", "--rho", "0.2,0"])
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--rho 0 must be in (0, 1]"));
}

/// `--strategy` and `--estimator` take comma-separated lists, replay each name once in the
/// order given, and reject an unknown name or `all` inside a list with exit 2.
#[test]
fn strategy_takes_a_list() {
    let run = |flags: &[&str]| {
        hevo()
            .args(["replay", "--synth", "12x40", "--seeds", "2", "--json"])
            .arg("--no-progress")
            .args(flags)
            .output()
            .unwrap()
    };
    // One field of every row of the JSON document of `flags`.
    let column = |flags: &[&str], key: &str| -> Vec<String> {
        let doc = support::json_of(&run(flags));
        let rows = doc["strategies"].as_array().unwrap().iter();
        rows.map(|r| r[key].as_str().unwrap().to_string()).collect()
    };
    let names = column(&["--strategy", "screen, default,screen"], "strategy");
    assert_eq!(names, ["screen", "default"]);
    // Each estimator of the list is one `coevolve` row.
    let list = [
        "--strategy",
        "coevolve",
        "--estimator",
        "residual,hajek,residual",
    ];
    assert_eq!(column(&list, "estimator"), ["residual", "hajek"]);

    for (list, needle) in [("default,nope", "nope"), ("default,all", "give it alone")] {
        let out = run(&["--strategy", list]);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "expected `{needle}` in: {err}");
    }
}

/// A replay long enough to print progress (`coevolve`'s Monte Carlo inclusion probabilities
/// make each seed take a fraction of a second): stdout stays one JSON document, every stderr
/// line is a progress line, and with `--no-progress` stderr stays empty. No timing is
/// asserted: a line is required only when the run took clearly longer than the 2 s before the
/// first one.
#[test]
fn progress_goes_to_stderr_and_no_progress_silences_it() {
    let run = |quiet: bool| {
        let mut cmd = hevo();
        cmd.args(["replay", "--synth", "60x200", "--seeds", "24", "--json"])
            .args(["--strategy", "coevolve"]);
        if quiet {
            cmd.arg("--no-progress");
        }
        let started = std::time::Instant::now();
        let out = cmd.output().unwrap();
        (out, started.elapsed())
    };

    let (out, took) = run(false);
    let doc = support::json_of(&out);
    assert_eq!(doc["seeds"], 24, "{doc}");
    let err = String::from_utf8_lossy(&out.stderr);
    for line in err.lines() {
        let (head, tail) = line.split_once(" seeds (rho 0.2), ").expect(line);
        let done = head.strip_prefix("hevo replay: ").expect(line);
        let (done, total) = done.split_once('/').expect(line);
        assert!(done.parse::<u32>().unwrap() < 24 && total == "24", "{line}");
        assert!(tail.contains(" elapsed, ETA "), "{line}");
    }
    if took.as_secs_f64() > 4.0 {
        assert!(!err.is_empty(), "a {took:?} replay printed no progress");
    }

    let (out, took) = run(true);
    support::json_of(&out);
    assert!(
        out.stderr.is_empty(),
        "--no-progress, {took:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
