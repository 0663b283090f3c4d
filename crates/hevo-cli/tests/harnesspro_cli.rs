//! `hevo run --finalize` under `[objective] kind = "pareto"` as a user runs it: the `pareto`
//! object and the tier roles in `--json`, and one line per tier in the text output.
//!
//! The harness calls no model, so every cost is 0 tokens: the best pass rate dominates, and
//! all three tiers are the pick (the real trade-off is tested in
//! `crates/hevo-search/tests/harnesspro.rs`, through the gateway).

use std::path::{Path, PathBuf};
use std::process::Command;

mod support;

fn hevo() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hevo"))
}

fn pareto_dir(tmp: &Path) -> PathBuf {
    let dir = tmp.join("threshold");
    support::threshold_copy(
        &dir,
        &[("strategy = \"recommended\"", "strategy = \"full\"")],
    );
    let config = std::fs::read_to_string(dir.join("hevo.toml")).unwrap()
        + "\n[objective]\nkind = \"pareto\"\n";
    std::fs::write(dir.join("hevo.toml"), config).unwrap();
    dir
}

#[test]
fn pareto_run_reports_tiers_in_json_and_text_and_finalize_tests_them() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = pareto_dir(tmp.path());
    let doc = support::run_json(&dir, &["--finalize"]);
    let pick = doc["pick"]["name"].as_str().unwrap();
    let pareto = &doc["pareto"];
    assert_eq!(pareto["baseline"], "seed", "{pareto}");
    assert_eq!(pareto["unit"], "tokens", "{pareto}");
    let tiers: Vec<(&str, &str)> = pareto["tiers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["tier"].as_str().unwrap(),
                t["candidate"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        tiers,
        [("lite", pick), ("medium", pick), ("heavy", pick)],
        "{pareto}"
    );
    assert_eq!(
        pareto["candidates"].as_array().unwrap().len(),
        doc["candidates"].as_array().unwrap().len()
    );
    let t = &doc["test"][pick];
    assert_eq!(
        t["tiers"],
        serde_json::json!(["lite", "medium", "heavy"]),
        "{t}"
    );
    assert_eq!(t["cost_unit"], "tokens");
    assert_eq!(t["cost_per_task"], 0.0);
    assert!(t["time_per_task_ms"].as_f64().unwrap() > 0.0, "{t}");
    assert!(t["successes"].as_f64().unwrap() > 0.0, "{t}");
    assert_eq!(t["cost_of_pass"], 0.0, "{t}");
    // Every candidate has the analyzer's diagnosis beside it in the archive.
    let archive = dir.join("runs/threshold/archive/candidates");
    for e in std::fs::read_dir(&archive).unwrap() {
        let d = e.unwrap().path().join("diagnosis.json");
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&d).unwrap()).unwrap();
        assert_eq!(v["producer"], "builtin", "{}", d.display());
    }

    // The text output of the same (resumed) run: one line per tier, and the test tiers.
    let out = hevo()
        .args(["run", "--no-progress", "--jobs", "2", "--finalize"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("pareto tiers (floor: seed at"), "{text}");
    for tier in ["lite", "medium", "heavy"] {
        assert!(text.contains(&format!("  {tier:<6} {pick}")), "{text}");
        assert!(
            text.contains(&format!("tier {tier:<6} {pick}: pass")),
            "{text}"
        );
    }

    // status names the tiers too, and its test rows the roles finalize gave them.
    let status = support::json_of(
        &hevo()
            .args(["status", "--json"])
            .arg(dir.join("runs/threshold"))
            .output()
            .unwrap(),
    );
    assert_eq!(
        status["tiers"],
        serde_json::json!({"lite": pick, "medium": pick, "heavy": pick}),
        "{status}"
    );
    let roles: Vec<(&str, &str)> = status["test"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].as_str().unwrap(), t["role"].as_str().unwrap()))
        .collect();
    assert!(roles.contains(&(pick, "pick")), "{status}");
    assert!(roles.contains(&("seed", "seed")), "{status}");

    // The report of a pareto run: every chart once, the pass rate against cost chart too
    // (it used to reuse the spend chart's id, so the page had two `chart-spend`).
    let out = hevo()
        .arg("report")
        .arg(dir.join("runs/threshold"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let page = std::fs::read_to_string(dir.join("runs/threshold/report.html")).unwrap();
    let ids = hevo_search::view::html::CHART_IDS;
    for id in ids
        .iter()
        .chain([&hevo_search::view::html::PARETO_CHART_ID])
    {
        let n = page.matches(&format!("<svg id=\"{id}\"")).count();
        assert_eq!(n, 1, "chart {id} is in the page {n} times");
    }
}

/// Whether bubblewrap can make a sandbox here (else the confinement checks are skipped
/// loudly; `HEVO_TEST_SANDBOX=1` makes that a failure).
fn sandbox_works() -> bool {
    let ok = Command::new("bwrap")
        .args(["--ro-bind", "/", "/", "--unshare-user", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok && std::env::var("HEVO_TEST_SANDBOX").is_ok_and(|v| v == "1") {
        panic!("HEVO_TEST_SANDBOX=1 but bwrap cannot make a sandbox");
    }
    ok
}

#[test]
fn harnesspro_epochs_run_the_agent_in_the_sandbox_seeing_no_val_or_test() {
    let sandboxed = sandbox_works();
    let tmp = tempfile::tempdir().unwrap();
    let dir = pareto_dir(tmp.path());
    let script = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../hevo-search/tests/agents/harnesspro_agent.py"),
    )
    .unwrap();
    assert!(!script.contains("'''"));
    let run_dir = dir.join("runs/threshold");
    let probe = [
        dir.join("tasks.jsonl"),
        run_dir.join("hevo.db"),
        run_dir.join("archive"),
        run_dir.join("harnesspro/repo"),
    ];
    let probe: Vec<String> = probe
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let config = std::fs::read_to_string(dir.join("hevo.toml")).unwrap().replace(
        "[search]\niterations = 3",
        "[harnesspro]\nepochs = 1\ncore_size = 3\ncore_runs = 2\n\n[search]\niterations = 3",
    ) + &format!(
        "\n[proposer]\nkind = \"agent\"\ncommand = [\"python3\", \"-c\", '''{script}''', \"{{prompt}}\"]\n\
         env = {{ HEVO_PROBE = \"{}\" }}\n",
        probe.join(":")
    );
    std::fs::write(dir.join("hevo.toml"), config).unwrap();
    let mut cmd = hevo();
    cmd.args(["run", "--json", "--no-progress", "--jobs", "2"])
        .arg(&dir);
    if sandboxed {
        cmd.env("HEVO_SANDBOX", "require");
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["iterations_done"], 1, "{stderr}");
    // The core sets ran on the train split: their trials have a spend line of their own
    // (they are in no validation total), in `run --json`, `status --json` and `status`.
    let train: i64 = rusqlite::Connection::open(run_dir.join("hevo.db"))
        .unwrap()
        .query_row(
            "SELECT COUNT(*) FROM trials t JOIN tasks k ON k.id = t.task_id \
             WHERE k.split = 'train'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(train >= 6, "3 core tasks run twice: {train}");
    assert_eq!(doc["train"]["trials"], train, "{doc}");
    assert_eq!(doc["train"]["spend"]["calls"], 0, "{doc}");
    let status = hevo()
        .args(["status", "--json"])
        .arg(&run_dir)
        .output()
        .unwrap();
    assert_eq!(support::json_of(&status)["train"], doc["train"]);
    let status = hevo().arg("status").arg(&run_dir).output().unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains(&format!(
            "core-set trials (train split): {train} trials, 0 model calls"
        )),
        "{text}"
    );
    let record: serde_json::Value = serde_json::from_slice(
        &std::fs::read(run_dir.join("archive/harnesspro/epoch-001.json")).unwrap(),
    )
    .unwrap();
    // One survivor (the only seed) and its three children, I1 / I2 / I3.
    assert_eq!(record["survivors"], serde_json::json!(["seed"]), "{record}");
    let outcomes: Vec<(&str, &str)> = record["plans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["instruction"].as_str().unwrap(),
                p["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    // The seed's threshold is the lowest value: I1 has nothing to lower.
    assert_eq!(
        outcomes,
        [
            ("I1", "rejected: the agent changed no file in harness/"),
            ("I2", "committed"),
            ("I3", "committed")
        ],
        "{stderr}"
    );
    let names: Vec<&str> = doc["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"e01-c000-i3"), "{names:?}");

    let seen = std::fs::read_to_string(run_dir.join("proposer/home/seen.jsonl")).unwrap();
    let calls: Vec<serde_json::Value> = seen
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(calls.len(), 4, "one diagnosis and three edits");
    for c in &calls {
        for (path, text) in c["files"].as_object().unwrap() {
            assert!(!text.as_str().unwrap().contains("\"expected\""), "{path}");
        }
        if !sandboxed {
            eprintln!("SKIPPED: no sandbox here, the agent's confinement is not checked");
            continue;
        }
        // Inside the sandbox: neither the suite, the store, the archive nor the repository.
        for (path, readable) in c["probes"].as_object().unwrap() {
            assert_eq!(
                readable,
                &serde_json::json!(false),
                "{} could read {path}",
                c["role"]
            );
        }
    }
}
