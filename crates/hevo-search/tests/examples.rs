//! Every example's configuration and seed harnesses load, and so does every whole
//! `hevo.toml` the docs show and docs/suites.md's example suite, so a user's first command
//! does not fail on a typo in what we ship or a key the docs got wrong.

use std::path::Path;

use hevo_runtime::harness::Harness;
use hevo_runtime::suite::Suite;
use hevo_search::config::RunConfig;

#[test]
fn every_example_config_and_seed_loads() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut seen = 0;
    for entry in std::fs::read_dir(&examples).unwrap() {
        let dir = entry.unwrap().path();
        // `hevo.toml` and any other search configuration beside it (`pareto.toml`).
        let Ok(files) = std::fs::read_dir(&dir) else {
            continue;
        };
        for file in files {
            let file = file.unwrap().path();
            let config_like = file.extension().is_some_and(|x| x == "toml")
                && std::fs::read_to_string(&file).is_ok_and(|t| t.contains("\nseeds = "));
            if !config_like {
                continue;
            }
            let (config, file) = RunConfig::load(&file).unwrap_or_else(|e| panic!("{e}"));
            for seed in &config.seeds {
                let seed_dir = config.resolve(&file, seed);
                Harness::load(&seed_dir).unwrap_or_else(|e| panic!("{}: {e}", seed_dir.display()));
            }
            seen += 1;
        }
    }
    assert!(
        seen >= 4,
        "expected the classify (and its pareto), sentiment and threshold searches, saw {seen}"
    );
}

/// Every ```toml block of docs/*.md that is a whole `hevo.toml` (it has `seeds =`) parses
/// and validates with the real parser: docs/config.md's full example once combined
/// `[harnesspro]` with `kind = "pass_rate"`, which hevo refuses.
#[test]
fn every_whole_config_in_the_docs_loads() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
    let mut seen = Vec::new();
    for entry in std::fs::read_dir(&docs).unwrap() {
        let file = entry.unwrap().path();
        if file.extension() != Some("md".as_ref()) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for (line, block) in fenced_blocks(&text, "toml") {
            if !block.contains("\nseeds = ") {
                continue;
            }
            let name = format!("{} (the block from line {line})", file.display());
            RunConfig::parse(&block, Path::new(&name))
                .unwrap_or_else(|e| panic!("the example at {name} does not load: {e}"));
            seen.push(name);
        }
    }
    assert!(
        seen.iter().any(|n| n.contains("config.md")),
        "docs/config.md's full example was not found: {seen:?}"
    );
}

/// docs/suites.md's `suite.toml` example (the block with `strata`) and its `tasks.jsonl`
/// example load as one suite, with the `files` folders the tasks name: the task lines once
/// lacked the `group` that the example's `strata` requires, so the example did not load.
#[test]
fn the_suite_example_in_the_docs_loads() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/suites.md");
    let text = std::fs::read_to_string(&docs).unwrap();
    let (toml_line, toml) = fenced_blocks(&text, "toml")
        .into_iter()
        .find(|(_, b)| b.contains("\nstrata = "))
        .expect("docs/suites.md has no suite.toml example with `strata`");
    let (json_line, tasks) = fenced_blocks(&text, "json")
        .into_iter()
        .find(|(_, b)| b.lines().all(|l| l.starts_with("{\"id\"")))
        .expect("docs/suites.md has no tasks.jsonl example");
    let dir = tempfile::tempdir().unwrap();
    for line in tasks.lines() {
        let task: serde_json::Value = serde_json::from_str(line).unwrap();
        if let Some(files) = task["files"].as_str() {
            std::fs::create_dir_all(dir.path().join(files)).unwrap();
        }
    }
    let suite = Suite::parse(dir.path(), &toml, tasks.as_bytes()).unwrap_or_else(|e| {
        panic!("docs/suites.md's example (lines {toml_line} and {json_line}) does not load: {e}")
    });
    assert_eq!(suite.tasks.len(), tasks.lines().count());
}

/// The fenced blocks of a Markdown text in one language (```` ```toml ````), each with the
/// line of its first line.
fn fenced_blocks(text: &str, lang: &str) -> Vec<(usize, String)> {
    let fence = format!("```{lang}");
    let mut blocks = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        match &mut open {
            None if line.trim() == fence => open = Some((i + 2, String::new())),
            Some(_) if line.trim() == "```" => blocks.extend(open.take()),
            Some((_, block)) => {
                block.push_str(line);
                block.push('\n');
            }
            None => {}
        }
    }
    blocks
}

#[test]
fn the_classify_harnesses_pass_their_protocol_self_test() {
    // examples/classify/test_harnesses.py runs both seed harnesses against a real local
    // OpenAI-compatible HTTP server (Python, loopback) and checks the protocol, params,
    // retrieval and calibration.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = std::process::Command::new("python3")
        .args(["-m", "unittest", "examples/classify/test_harnesses.py"])
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
