//! Ctrl-C while a model call is running, as a user presses it: a `hevo eval` whose harness
//! (the official `anthropic` SDK) makes a call that the scripted upstream holds for ever.
//! The first SIGINT says how many calls are running, how long hevo waits for them and that
//! a second Ctrl-C stops them now; the second stops them, and hevo exits 130 with the call
//! in the run's store as cancelled. Skips loudly when `python3` has no `anthropic` SDK.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

mod support;
use support::upstream::upstream;
use support::{eval_command, one_task, write};

/// Makes one call that the upstream holds; it is never answered.
const HELD_CALL: &str = r#"
import sys
import anthropic
sys.stdin.read()
anthropic.Anthropic(max_retries=0).messages.create(
    model="claude-test", max_tokens=50,
    messages=[{"role": "user", "content": "MODE:hold"}])
print("answered")
"#;

/// Only guards against a hang: nothing here is timed.
const GUARD: Duration = Duration::from_secs(180);

fn sigint(child: &Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
}

/// Reads stderr lines into `seen` until one contains `wanted`; panics with what was seen
/// when hevo's stderr ends first.
fn wait_for_line(lines: &Receiver<String>, seen: &mut Vec<String>, wanted: &str) {
    let start = Instant::now();
    while start.elapsed() < GUARD {
        match lines.recv_timeout(Duration::from_secs(1)) {
            Ok(line) => {
                let found = line.contains(wanted);
                seen.push(line);
                if found {
                    return;
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    panic!("hevo never printed `{wanted}`:\n{}", seen.join("\n"));
}

#[test]
fn a_second_ctrl_c_stops_the_model_calls_still_running_and_records_them() {
    let sdk = Command::new("python3")
        .args(["-c", "import anthropic"])
        .status();
    if !sdk.is_ok_and(|s| s.success()) {
        eprintln!(
            "\n\n*** SKIPPED: python3 has no `anthropic` SDK (pip install anthropic==2.15.0) ***\n\n"
        );
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let up = upstream(d.path(), "true");
    one_task(d.path(), ("python3", "h.py", HELD_CALL), "answered");
    let config = d.path().join("hevo.toml");
    write(
        &config,
        &format!(
            r#"suite = "suite"
seeds = ["h"]

[model]
no_cache = true
[[model.backends]]
name = "scripted"
kind = "anthropic"
base_url = "http://127.0.0.1:{}"
api_key_env = "HEVO_TEST_SCRIPTED_API_KEY"
[[model.models]]
name = "claude-test"
backend = "scripted"
upstream_model = "claude-up"
[model.prices."claude-up"]
input = 1.0
output = 4.0
"#,
            up.port
        ),
    );
    let mut child = eval_command(d.path())
        .arg("--model-config")
        .arg(&config)
        .env("HEVO_TEST_SCRIPTED_API_KEY", "upstream-secret")
        // this test is about the gateway and signals; the sandbox's relay to the gateway is
        // tested in sandbox_sdk.rs
        .env("HEVO_SANDBOX", "off")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, lines) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    // the call has reached the upstream, which holds it
    let start = Instant::now();
    while up.requests() == 0 && start.elapsed() < GUARD && child.try_wait().unwrap().is_none() {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        up.requests(),
        1,
        "the harness's call never reached the upstream"
    );

    let mut seen = Vec::new();
    sigint(&child);
    wait_for_line(&lines, &mut seen, "1 model call still running");
    let told = seen.last().unwrap().clone();
    assert!(
        told.contains("waiting up to 60 s") && told.contains("Ctrl-C again"),
        "{told}"
    );
    // A person presses again after reading that line; a SIGINT within `INT_ECHO` of the
    // first is the same request echoed (`timeout -s INT`), not a second one.
    std::thread::sleep(hevo_runtime::cancel::INT_ECHO * 3);
    sigint(&child);
    wait_for_line(&lines, &mut seen, "stopping 1 model call now");
    wait_for_line(&lines, &mut seen, "stopped by a second signal");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > GUARD {
            let _ = child.kill();
            panic!("hevo did not exit:\n{}", seen.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(130), "{}", seen.join("\n"));

    // the call that reached the gateway is in the run's store, cancelled, its input priced
    let db = rusqlite::Connection::open(d.path().join("run/hevo.db")).unwrap();
    let rows: Vec<(String, String, i64, i64, f64)> = db
        .prepare(
            "SELECT status, error, input_tokens, output_tokens, cost_usd FROM model_calls \
             WHERE endpoint = 'anthropic.messages'",
        )
        .unwrap()
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len(), up.requests(), "{rows:?}");
    let (status, error, input, output, cost) = &rows[0];
    assert_eq!(status, "backend_error");
    assert!(error.starts_with("cancelled, input estimated"), "{error}");
    assert!(*input > 0 && *output == 0, "{rows:?}");
    assert!((cost - *input as f64 * 1e-6).abs() < 1e-12, "{rows:?}");
}

/// `timeout` (like other supervisors) sends its signal to hevo and then to its process
/// group, so hevo gets it twice at once; it took the echo for a second signal and killed
/// its trials without their grace period ("stopped by a second signal", 130): first for
/// SIGTERM, and, after that was mended, still for `timeout -s INT`. Two signals 20 ms apart
/// (the echo, without the chance that the kernel merges them) are one request.
#[test]
fn a_signal_echoed_at_once_is_one_signal_not_two() {
    use nix::sys::signal::Signal;
    for (signal, name, code) in [
        (Signal::SIGTERM, "SIGTERM", 143),
        (Signal::SIGINT, "SIGINT", 130),
    ] {
        let d = tempfile::tempdir().unwrap();
        let started = d.path().join("started");
        // Ignores SIGTERM (as its sleep does), so hevo's grace period runs its course and a
        // second signal inside it would be seen.
        let script = format!("trap '' TERM\ntouch '{}'\nsleep 60\n", started.display());
        one_task(d.path(), ("sh", "h.sh", &script), "x");
        let mut child = eval_command(d.path())
            .env("HEVO_SANDBOX", "off")
            .env("HEVO_HOME", d.path().join("home"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while !started.exists() && start.elapsed() < GUARD && child.try_wait().unwrap().is_none() {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(started.exists(), "{name}: the trial never started");
        let send = || {
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap()
        };
        send();
        std::thread::sleep(Duration::from_millis(20));
        send();
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(&format!("stopped by {name}")), "{stderr}");
        assert!(!stderr.contains("second signal"), "{name}: {stderr}");
        assert_eq!(out.status.code(), Some(code), "{name}: {stderr}");
    }
}
