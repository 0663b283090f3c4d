//! HarnessPro's pareto objective on the embedded local model, through the binary: the
//! demo's few-shot harness with 0, 2 and 4 shots (more shots, more prompt tokens) on a
//! small sentiment suite. The model is free, so cost is tokens per task, counted by the
//! gateway from the real model's calls; the test checks that the costs are real and ordered
//! by shots, that selection follows its rule on them, and that finalize reports every tier
//! on the test split. Skips when the model is not pulled (`hevo model pull`; CI pulls it).

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

mod support;

fn model_pulled() -> bool {
    let home = std::env::var_os("HEVO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/hevo"));
    let found = std::fs::read_dir(home.join("models"))
        .map(|d| {
            d.flatten()
                .any(|e| e.path().extension().is_some_and(|x| x == "gguf"))
        })
        .unwrap_or(false);
    if !found {
        eprintln!("SKIPPED: the local model is not pulled (hevo model pull)");
    }
    found
}

/// The demo's few-shot harness with `shots` as its default.
fn harness(root: &Path, dir: &Path, shots: u32) {
    let src = root.join("examples/classify/few-shot");
    std::fs::create_dir_all(dir).unwrap();
    std::fs::copy(src.join("harness.py"), dir.join("harness.py")).unwrap();
    let manifest = std::fs::read_to_string(src.join("harness.toml"))
        .unwrap()
        .replace("name = \"few_shot\"", &format!("name = \"shots{shots}\""))
        .replace(
            "shots = { values = [0, 2, 4, 8], default = 2 }",
            &format!("shots = {{ values = [0, 2, 4, 8], default = {shots} }}"),
        );
    assert!(
        manifest.contains(&format!("default = {shots} }}")),
        "{manifest}"
    );
    std::fs::write(dir.join("harness.toml"), manifest).unwrap();
}

const REVIEWS: [(&str, &str); 20] = [
    ("a moving, funny and beautifully acted film", "fresh"),
    ("dull, overlong and badly written", "rotten"),
    ("one of the best pictures of the year", "fresh"),
    ("a tedious mess with no redeeming qualities", "rotten"),
    ("charming from start to finish", "fresh"),
    ("the plot makes no sense and the jokes fall flat", "rotten"),
    ("a smart, thrilling ride", "fresh"),
    ("boring and predictable", "rotten"),
    ("warm, clever and deeply felt", "fresh"),
    ("an ugly, lazy sequel", "rotten"),
    ("a delight for the whole family", "fresh"),
    ("painfully slow and pointless", "rotten"),
    ("gorgeous to look at and full of heart", "fresh"),
    ("a waste of a talented cast", "rotten"),
    ("wonderfully strange and original", "fresh"),
    ("loud, stupid and forgettable", "rotten"),
    ("a triumph of acting and direction", "fresh"),
    ("I wanted my two hours back", "rotten"),
    ("sharp writing and great performances", "fresh"),
    ("clumsy, confused and dreary", "rotten"),
];

fn suite(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("suite.toml"),
        "name = \"reviews\"\n[scorer]\nkind = \"label\"\n",
    )
    .unwrap();
    let lines: Vec<String> = REVIEWS
        .iter()
        .enumerate()
        .map(|(i, (text, label))| {
            let split = match i {
                0..=7 => "train",
                8..=13 => "val",
                _ => "test",
            };
            json!({"id": format!("r{i}"), "split": split, "group": "rt",
                   "input": {"text": text, "group": "rt"}, "expected": label})
            .to_string()
        })
        .collect();
    std::fs::write(dir.join("tasks.jsonl"), lines.join("\n") + "\n").unwrap();
}

#[test]
fn pareto_on_the_local_model_prices_shots_in_real_tokens() {
    if !model_pulled() {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    for shots in [0, 2, 4] {
        harness(&root, &dir.join(format!("shots{shots}")), shots);
    }
    suite(&dir.join("suite"));
    std::fs::write(
        dir.join("hevo.toml"),
        "name = \"pareto-local\"\nsuite = \"suite\"\nseeds = [\"shots0\", \"shots2\", \"shots4\"]\n\
         [search]\niterations = 0\n[evaluation]\nstrategy = \"full\"\n[objective]\nkind = \"pareto\"\n",
    )
    .unwrap();
    let doc = support::run_json(dir, &["--finalize"]);
    let pareto = &doc["pareto"];
    assert_eq!(pareto["unit"], "tokens", "{pareto}");
    assert_eq!(pareto["baseline"], "shots0", "{pareto}");
    let point = |name: &str| -> Value {
        pareto["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} missing: {pareto}"))
    };
    let cost = |name: &str| point(name)["cost"]["per_task"]["value"].as_f64().unwrap();
    let pass = |name: &str| point(name)["pass_rate"]["value"].as_f64().unwrap();
    // Real tokens from the real model's calls, growing with the prompt's shots.
    let (c0, c2, c4) = (cost("shots0"), cost("shots2"), cost("shots4"));
    assert!(
        0.0 < c0 && c0 < c2 && c2 < c4,
        "tokens per task {c0} {c2} {c4}"
    );
    // Selection follows its rule: survivors clear the floor and are not dominated.
    let floor = pareto["baseline_pass_rate"].as_f64().unwrap();
    let survivors: Vec<&str> = pareto["survivors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert!(!survivors.is_empty(), "{pareto}");
    for s in &survivors {
        assert!(pass(s) >= floor, "{s} below the floor: {pareto}");
        for other in ["shots0", "shots2", "shots4"] {
            let dominates = pass(other) >= pass(s)
                && cost(other) <= cost(s)
                && (pass(other) > pass(s) || cost(other) < cost(s));
            assert!(!dominates, "{s} is dominated by {other}: {pareto}");
        }
    }
    // Every tier is a survivor and was tested, with its token cost per test task.
    let tiers = pareto["tiers"].as_array().unwrap();
    assert_eq!(tiers.len(), 3, "{pareto}");
    for t in tiers {
        let name = t["candidate"]["name"].as_str().unwrap();
        assert!(survivors.contains(&name), "{name}: {pareto}");
        let test = &doc["test"][name];
        assert_eq!(test["cost_unit"], "tokens", "{test}");
        assert!(test["cost_per_task"].as_f64().unwrap() > 0.0, "{test}");
        assert_eq!(test["trials"], 6, "{test}");
    }
    // `hevo finalize` again reuses every test trial: its totals are still those of the
    // test store's trials (the same as `evaluations` counts), not this invocation's zero.
    let run = dir.join("runs/pareto-local");
    let fin = support::json_of(
        &std::process::Command::new(env!("CARGO_BIN_EXE_hevo"))
            .args(["finalize", "--json", "--no-progress"])
            .arg(&run)
            .output()
            .unwrap(),
    );
    let (trials, input, output): (i64, i64, i64) =
        rusqlite::Connection::open(run.join("test/hevo.db"))
            .unwrap()
            .query_row(
                "SELECT COUNT(*), SUM(input_tokens), SUM(output_tokens) FROM trials",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
    assert_eq!(fin["evaluations"], trials, "{fin}");
    assert!(input > 0, "{fin}");
    assert_eq!(
        (&fin["tokens"]["input"], &fin["tokens"]["output"]),
        (&Value::from(input), &Value::from(output)),
        "{fin}"
    );
    assert_eq!(fin["session_model_usage"]["input"], 0, "{fin}");
}
