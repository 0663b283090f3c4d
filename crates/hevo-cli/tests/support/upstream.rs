//! The scripted provider of the CLI tests (`tests/agents/scripted_upstream.py`) on loopback:
//! it plays one agent turn, holds the requests marked `MODE:hold` without ever answering,
//! and logs each request's path as it arrives.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A running scripted upstream; dropping it kills it.
pub struct Upstream {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Its log: each request's path, one per line.
    pub log: PathBuf,
}

impl Upstream {
    /// Requests received so far.
    pub fn requests(&self) -> usize {
        std::fs::read_to_string(&self.log)
            .map(|log| log.lines().count())
            .unwrap_or(0)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the upstream with its log in `dir`; the agent turn's tool call runs `command`.
pub fn upstream(dir: &Path, command: &str) -> Upstream {
    let log = dir.join("upstream.log");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/scripted_upstream.py");
    let mut child = Command::new("python3")
        .arg(script)
        .arg(command)
        .arg(&log)
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    Upstream {
        child,
        port: line.trim().parse().expect("the upstream prints its port"),
        log,
    }
}

/// A Python HTTP server on loopback: `python3 -c CODE ARGS...`, where `code` prints the
/// server's port as its first line; killed when dropped.
pub struct PythonServer {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

impl PythonServer {
    /// Starts `code` with `args` and reads its port.
    pub fn start(code: &str, args: &[&std::ffi::OsStr]) -> PythonServer {
        let mut child = Command::new("python3")
            .arg("-c")
            .arg(code)
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        PythonServer {
            child,
            port: line.trim().parse().expect("the server prints its port"),
        }
    }
}

impl Drop for PythonServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
