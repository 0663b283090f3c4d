//! The official `openai` Python SDK inside the sandbox reaches hevo's real gateway and the
//! embedded local model through `OPENAI_BASE_URL` (the per-trial Unix socket and relay),
//! and its call is counted on the trial. Needs bwrap, the local model (`hevo model pull`)
//! and `pip install openai` for `python3`; skips loudly without them.

mod support;

use std::path::Path;
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
    if !Path::new("/usr/bin/bwrap").exists() {
        assert!(
            std::env::var("HEVO_TEST_SANDBOX").map_or(true, |v| v != "1"),
            "HEVO_TEST_SANDBOX=1 but bubblewrap is not installed"
        );
        eprintln!("SKIPPED: bubblewrap is not installed (apt-get install bubblewrap)");
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
