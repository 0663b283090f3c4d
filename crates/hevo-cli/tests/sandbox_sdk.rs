//! The official `openai` Python SDK inside the sandbox reaches hevo's real gateway and the
//! embedded local model through `OPENAI_BASE_URL` (the per-trial Unix socket and relay),
//! and its call is counted on the trial. Needs bwrap, the local model (`hevo model pull`)
//! and `pip install openai` for `python3`; skips loudly without them.

mod support;

use std::process::Command;

use support::{eval_command, one_task};

const SDK_HARNESS: &str = r#"
import json, sys
from openai import OpenAI
sys.stdin.read()
client = OpenAI()  # OPENAI_BASE_URL and OPENAI_API_KEY come from hevo
reply = client.chat.completions.create(
    model="smollm2", max_tokens=4, temperature=0,
    messages=[{"role": "user", "content": "Say yes."}])
print(json.dumps({"answer": "called", "text": reply.choices[0].message.content}))
"#;

#[test]
fn the_openai_sdk_reaches_the_gateway_from_inside_the_sandbox() {
    let sdk = Command::new("python3")
        .args(["-c", "import openai"])
        .status();
    if !sdk.is_ok_and(|s| s.success()) {
        eprintln!("SKIPPED: python3 has no `openai` package (pip install openai)");
        return;
    }
    if !support::has_bwrap() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    one_task(d.path(), ("python3", "h.py", SDK_HARNESS), "called");
    let out = eval_command(d.path())
        .env("HEVO_SANDBOX", "require")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("no model configured") {
        eprintln!("SKIPPED: the local model is not pulled (hevo model pull)");
        return;
    }
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{stderr}"));
    assert_eq!(v["sandbox"], "bwrap");
    assert_eq!(v["status_counts"]["pass"], 1, "{v}\n{stderr}");
    assert_eq!(v["tokens"]["calls"], 1, "{v}");
}

/// Calls the gateway 30 times with a key hevo never issued, from inside the sandbox.
const FORGED_KEY_LOOP: &str = r#"
import json, os, sys, urllib.request, urllib.error
sys.stdin.read()
url = os.environ["ANTHROPIC_BASE_URL"].rstrip("/") + "/v1/messages"
body = json.dumps({"model": "claude-test", "max_tokens": 4,
                   "messages": [{"role": "user", "content": "hi"}]}).encode()
refused, said = 0, ""
for _ in range(30):
    req = urllib.request.Request(url, data=body, headers={
        "x-api-key": "sk-forged-0000", "anthropic-version": "2023-06-01",
        "content-type": "application/json"})
    try:
        urllib.request.urlopen(req, timeout=10)
    except urllib.error.HTTPError as e:
        refused += e.code == 401
        said = e.read().decode()
print(said, file=sys.stderr)
print(json.dumps(f"refused {refused}"))
"#;

/// A sandboxed harness looping on a key that is not its own gets 401 every time, told that
/// it is not this sandbox's key, and hevo logs the refusals once, not once per call (a
/// harness could otherwise flood hevo's stderr).
#[test]
fn refused_keys_are_logged_once_per_trial() {
    if !support::has_bwrap() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    one_task(d.path(), ("python3", "h.py", FORGED_KEY_LOOP), "refused 30");
    // The backend is never reached: every call is refused before it is read.
    let config = d.path().join("hevo.toml");
    std::fs::write(
        &config,
        r#"suite = "suite"
seeds = ["h"]
[model]
[[model.backends]]
name = "closed"
kind = "anthropic"
base_url = "http://127.0.0.1:9"
api_key_env = "HEVO_TEST_UNUSED_API_KEY"
[[model.models]]
name = "claude-test"
backend = "closed"
[model.prices."claude-test"]
input = 1.0
output = 4.0
"#,
    )
    .unwrap();
    let out = eval_command(d.path())
        .arg("--model-config")
        .arg(&config)
        .env("HEVO_TEST_UNUSED_API_KEY", "unused")
        .env("HEVO_SANDBOX", "require")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{stderr}"));
    assert_eq!(v["sandbox"], "bwrap");
    assert_eq!(v["status_counts"]["pass"], 1, "{v}\n{stderr}");
    assert_eq!(v["tokens"]["calls"], 0, "nothing billed: {v}");
    assert_eq!(
        stderr.matches("refused a trial key").count(),
        1,
        "one line for 30 refusals:\n{stderr}"
    );
    let trace = v["tasks"][0]["details"][0]["trace"].as_str().unwrap();
    let told = std::fs::read_to_string(format!("{trace}.stderr")).unwrap();
    assert!(told.contains("not this sandbox's trial key"), "{told}");
}
