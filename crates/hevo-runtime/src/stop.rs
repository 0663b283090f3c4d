//! Asking a launch to stop (SIGTERM) before its grace period ends in SIGKILL.
//!
//! A plain launch is its own process group, so SIGTERM to the group reaches the harness and
//! its children. A sandboxed launch is not: the group holds bubblewrap, which dies on
//! SIGTERM and takes the whole namespace down with SIGKILL at once, and the command inside
//! runs in a session of its own (`--new-session`), which the group's signal never reached.
//! So a sandboxed harness never saw SIGTERM and `--kill-grace` did nothing. Inside the
//! sandbox the signal goes to every process of the launch but bubblewrap's own, found by
//! their parent links in `/proc`; the sandbox's init ignores it (its handler does nothing,
//! and a handler does not survive `exec`, so its command gets the default) and stays until
//! its command exits.

use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;

/// How a launch is asked to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// SIGTERM to its process group.
    Group,
    /// SIGTERM to every process below the launched bubblewrap but bubblewrap's own.
    InsideSandbox,
}

/// Processes one walk visits at most (a fork bomb is bounded by its own limits first).
const MAX_PROCESSES: usize = 100_000;

/// Sends SIGTERM to the launch whose first process is `pid` (also its process group).
pub(crate) fn ask(pid: u32, how: Stop) {
    match how {
        Stop::Group => {
            let _ = killpg(Pid::from_raw(pid as i32), Signal::SIGTERM);
        }
        Stop::InsideSandbox => {
            for p in descendants(pid) {
                if comm(p).as_deref() != Some("bwrap") {
                    let _ = kill(Pid::from_raw(p as i32), Signal::SIGTERM);
                }
            }
        }
    }
}

/// Every process below `pid` (not `pid` itself), parents before children, from the
/// `children` lists of its threads in `/proc`.
fn descendants(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut next = vec![pid];
    while let Some(p) = next.pop() {
        for child in children(p) {
            if out.len() >= MAX_PROCESSES {
                return out;
            }
            out.push(child);
            next.push(child);
        }
    }
    out
}

/// The children of every thread of `pid`.
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// The command name of `pid` (`/proc/<pid>/comm`).
fn comm(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|c| c.trim_end().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descendants_are_found_through_every_generation() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & sleep 30 & wait"])
            .spawn()
            .unwrap();
        let pid = child.id();
        // Until both children have forked and exec'd `sleep` (a shared machine can be slow).
        let sleeping = |found: &[u32]| {
            found.len() == 2 && found.iter().all(|p| comm(*p).as_deref() == Some("sleep"))
        };
        let mut found = Vec::new();
        for _ in 0..1500 {
            found = descendants(pid);
            if sleeping(&found) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(sleeping(&found), "{found:?}");
        for p in found {
            let _ = kill(Pid::from_raw(p as i32), Signal::SIGKILL);
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}
