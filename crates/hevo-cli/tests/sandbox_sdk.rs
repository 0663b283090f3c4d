//! The official `openai` Python SDK inside the sandbox reaches hevo's real gateway and the
//! embedded local model through `OPENAI_BASE_URL` (the per-trial Unix socket and relay),
//! and its call is counted on the trial. Needs bwrap, the local model (`hevo model pull`)
//! and `pip install openai` for `python3`; skips loudly without them.

use std::path::Path;
use std::process::Command;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

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
        eprintln!("SKIPPED: bubblewrap is not installed (apt-get install bubblewrap)");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    write(
        &d.path().join("h/harness.toml"),
        "entry = [\"python3\", \"h.py\"]\n",
    );
    write(&d.path().join("h/h.py"), SDK_HARNESS);
    write(
        &d.path().join("suite/suite.toml"),
        "name = \"s\"\n[scorer]\nkind = \"exact\"\n",
    );
    write(
        &d.path().join("suite/tasks.jsonl"),
        "{\"id\":\"a\",\"split\":\"val\",\"input\":1,\"expected\":\"called\"}\n",
    );
    let out = Command::new(env!("CARGO_BIN_EXE_hevo"))
        .arg("eval")
        .arg(d.path().join("h"))
        .arg("--suite")
        .arg(d.path().join("suite"))
        .arg("--run-dir")
        .arg(d.path().join("run"))
        .args(["--json", "--no-progress"])
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
