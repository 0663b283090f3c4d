//! Key custody: provider keys stay in hevo's memory, not in anything another process can
//! read.
//!
//! `/proc/<pid>/environ` shows the environment a process was *started* with, whatever it
//! changes later. So at start-up, if hevo's environment holds provider keys, hevo writes
//! them into a pipe and re-executes itself without them; the new image reads them back into
//! memory ([`hevo_llm::provider_keys`], not its environment, which every process it starts
//! would inherit), where the model layer finds them, and marks itself not dumpable, so
//! same-user processes cannot read its memory or `/proc` files either.
//! Trial-side processes never get them (their environment is cleared, see
//! [`crate::launch::base_env`]), and in the sandbox they cannot see hevo at all.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::process::CommandExt;

/// The variable naming the pipe the keys arrive on after the re-exec.
const KEYS_FD: &str = "HEVO_KEYS_FD";

/// Whether a variable holds a secret hevo must keep to itself.
pub fn is_secret_name(name: &str) -> bool {
    const SUFFIXES: [&str; 6] = [
        "_API_KEY",
        "_AUTH_TOKEN",
        "_ACCESS_TOKEN",
        "_SECRET_KEY",
        "_SECRET_ACCESS_KEY",
        "_SESSION_TOKEN",
    ];
    SUFFIXES.iter().any(|s| name.ends_with(s))
}

/// Hides provider keys from `/proc/<hevo>/environ` (see the module documentation). Call it
/// first thing in `main`, before any thread starts. Returns only in the process that keeps
/// running (the re-executed one, or this one when there was nothing to hide or the re-exec
/// failed, which is reported on stderr).
pub fn protect_keys() {
    if let Ok(fd) = std::env::var(KEYS_FD) {
        std::env::remove_var(KEYS_FD);
        if let Ok(fd) = fd.parse::<i32>() {
            // SAFETY: the fd was created by our own pre-exec image for exactly this read and
            // is owned by nothing else in this process.
            let mut pipe = unsafe { std::fs::File::from_raw_fd(fd) };
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            hevo_llm::provider_keys::hold(
                text.split('\0')
                    .filter_map(|entry| entry.split_once('='))
                    .map(|(k, v)| (k.to_string(), v.to_string())),
            );
        }
        let _ = nix::sys::prctl::set_dumpable(false);
        return;
    }
    let secrets: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| is_secret_name(k))
        .collect();
    if secrets.is_empty() {
        let _ = nix::sys::prctl::set_dumpable(false);
        return;
    }
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let Ok((read, write)) = nix::unistd::pipe() else {
        return;
    };
    let mut payload = String::new();
    for (k, v) in &secrets {
        payload.push_str(&format!("{k}={v}\0"));
    }
    let mut write = std::fs::File::from(write);
    if payload.len() > 60_000 || write.write_all(payload.as_bytes()).is_err() {
        return;
    }
    drop(write);
    let mut cmd = std::process::Command::new(exe);
    cmd.args(std::env::args_os().skip(1));
    for (k, _) in &secrets {
        cmd.env_remove(k);
    }
    cmd.env(KEYS_FD, read.as_raw_fd().to_string());
    let err = cmd.exec();
    eprintln!("hevo: warning: cannot re-execute to hide provider keys from /proc: {err}");
}
