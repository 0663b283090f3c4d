//! Scripted providers of the CLI tests on loopback: Python HTTP servers ([`PythonServer`]),
//! among them `tests/agents/scripted_upstream.py` ([`upstream`]), which plays one agent
//! turn, holds the requests marked `MODE:hold` without ever answering, and logs each
//! request's path as it arrives.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A running `scripted_upstream.py`; dropping it kills it.
pub struct Upstream {
    /// Kept for its lifetime: dropping it stops the server.
    _server: PythonServer,
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

/// Starts the upstream with its log in `dir`; the agent turn's tool call runs `command`.
pub fn upstream(dir: &Path, command: &str) -> Upstream {
    let log = dir.join("upstream.log");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/scripted_upstream.py");
    let server = PythonServer::spawn(&[script.as_os_str(), OsStr::new(command), log.as_os_str()]);
    Upstream {
        port: server.port,
        _server: server,
        log,
    }
}

/// A Python HTTP server on loopback that prints its port as its first line; killed when
/// dropped.
pub struct PythonServer {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

impl PythonServer {
    /// `python3 -c CODE ARGS...`.
    pub fn start(code: &str, args: &[&OsStr]) -> PythonServer {
        let mut argv: Vec<&OsStr> = vec![OsStr::new("-c"), OsStr::new(code)];
        argv.extend_from_slice(args);
        PythonServer::spawn(&argv)
    }

    /// `python3 ARGV...`, reading its port.
    pub fn spawn(argv: &[&OsStr]) -> PythonServer {
        let mut child = Command::new("python3")
            .args(argv)
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
