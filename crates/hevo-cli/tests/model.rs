//! `hevo model list | run | pull` as a user runs them. `run` needs the default model: run
//! `hevo model pull` first (the test fails, not skips, without it).

use std::process::Command;

mod support;

fn hevo() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hevo"))
}

fn default_home() -> std::path::PathBuf {
    let home = std::env::var_os("HEVO_HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/hevo")
        });
    assert!(
        home.join("models/SmolLM2-135M-Instruct.Q4_1.gguf")
            .is_file(),
        "the default model is missing under {}: run `hevo model pull`",
        home.display()
    );
    home
}

#[test]
fn list_shows_the_verified_default_model() {
    let home = default_home();
    let out = hevo()
        .args(["model", "list", "--json"])
        .env("HEVO_HOME", &home)
        .output()
        .unwrap();
    let v = support::json_of(&out);
    let models = v["models"].as_array().unwrap();
    assert!(models.iter().any(|m| m["verified_default"] == true), "{v}");
}

#[test]
fn pull_with_a_verified_copy_fetches_nothing() {
    let home = default_home();
    let out = hevo()
        .args(["model", "pull", "--json"])
        .env("HEVO_HOME", &home)
        .output()
        .unwrap();
    let v = support::json_of(&out);
    assert_eq!(v["fetched"], false);
    assert_eq!(
        v["sha256"],
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    );
}

/// A pull killed with SIGKILL left its work folder (`models/.pull-<pid>`, about 94 MB)
/// for good; the next pull removes those of processes that are gone, and no other.
#[test]
fn pull_removes_the_work_folders_of_killed_pulls() {
    let d = tempfile::tempdir().unwrap();
    let models = d.path().join("models");
    std::fs::create_dir_all(&models).unwrap();
    let file = "SmolLM2-135M-Instruct.Q4_1.gguf";
    std::os::unix::fs::symlink(default_home().join("models").join(file), models.join(file))
        .unwrap();
    // No process has a pid this large (the kernel's limit is 2^22); pid 1 is alive.
    let dead = models.join(".pull-999999999");
    let alive = models.join(".pull-1");
    for dir in [&dead, &alive] {
        std::fs::create_dir_all(dir.join("site")).unwrap();
        std::fs::write(dir.join("site/part.gguf"), "x").unwrap();
    }
    let out = hevo()
        .args(["model", "pull", "--json"])
        .env("HEVO_HOME", d.path())
        .output()
        .unwrap();
    assert_eq!(support::json_of(&out)["fetched"], false);
    assert!(!dead.exists(), "a dead pull's folder stayed");
    assert!(alive.exists(), "a live pull's folder was removed");
}

#[test]
fn run_answers_a_prompt_greedily() {
    let home = default_home();
    let run = || {
        hevo()
            .args([
                "model",
                "run",
                "What is 2+2?",
                "--max-tokens",
                "5",
                "--json",
            ])
            .env("HEVO_HOME", &home)
            .output()
            .unwrap()
    };
    let out = run();
    let v = support::json_of(&out);
    assert!(!v["text"].as_str().unwrap().is_empty(), "{v}");
    assert!(v["usage"]["output_tokens"].as_u64().unwrap() <= 5);
    let again: serde_json::Value = serde_json::from_slice(&run().stdout).unwrap();
    assert_eq!(v["text"], again["text"], "greedy decoding is deterministic");
}

#[test]
fn missing_model_is_a_user_error_that_says_what_to_do() {
    let empty = tempfile::tempdir().unwrap();
    let out = hevo()
        .args(["model", "run", "hi"])
        .env("HEVO_HOME", empty.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("hevo model pull"), "{stderr}");
    let out = hevo()
        .args(["model", "list"])
        .env("HEVO_HOME", empty.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("hevo model pull"));
}
