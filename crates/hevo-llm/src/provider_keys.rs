//! The provider keys hevo holds in memory, outside its process environment.
//!
//! At start-up hevo takes its provider keys out of its environment (`hevo_runtime::custody`)
//! and hands them to [`hold`]. Kept here rather than put back with `set_var`, they are
//! inherited by no process hevo starts: not by trials (whose environment is cleared anyway),
//! and not by the helpers that are not (`rm`, `chmod`, `git`, `pip`, Slurm's commands, a
//! suite's `setup`), whose `/proc/<pid>/environ` any process of the same user can read.
//! Every reader of a key variable asks [`var`], which falls back to the environment for keys
//! not held (a library user's own process, a test that sets one).

use std::collections::HashMap;
use std::sync::OnceLock;

static HELD: OnceLock<HashMap<String, String>> = OnceLock::new();

/// Holds `keys` (variable name, value) for the life of the process. Only the first call
/// counts; hevo makes it once, before any thread starts.
pub fn hold(keys: impl IntoIterator<Item = (String, String)>) {
    let _ = HELD.set(keys.into_iter().collect());
}

/// The value of the key variable `name`: the held one, else the environment's.
pub fn var(name: &str) -> Option<String> {
    HELD.get()
        .and_then(|held| held.get(name).cloned())
        .or_else(|| std::env::var(name).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A held key is found by name, and is not in the environment children inherit.
    #[test]
    fn a_held_key_is_read_without_being_in_the_environment() {
        hold([(
            "HEVO_TEST_HELD_API_KEY".to_string(),
            "sk-held-1234".to_string(),
        )]);
        assert_eq!(
            var("HEVO_TEST_HELD_API_KEY").as_deref(),
            Some("sk-held-1234")
        );
        assert!(std::env::var_os("HEVO_TEST_HELD_API_KEY").is_none());
        let child = std::process::Command::new("env").output().unwrap();
        assert!(!String::from_utf8_lossy(&child.stdout).contains("sk-held-1234"));
        assert_eq!(var("HEVO_TEST_NOT_HELD_API_KEY"), None);
    }
}
