//! Where a run directory may be: a folder of its own, outside everything hevo reads as a
//! task's content or the scorer's files, and not holding any of them.
//!
//! A run directory holds the store (every answer and outcome), the traces and the archive.
//! Inside a task's `files` folder it is copied into every trial's working directory, so a
//! harness reads the answers; inside the scorer's `tests` folder it is read by scorers; and
//! one that is or holds the suite, a harness or hevo.toml's folder writes the run among
//! their files (and the sandbox, which hides the run directory, would hide them too). One
//! inside a harness's folder is allowed: the sandbox hides it from the harness
//! (`containment.rs::a_suite_and_run_dir_inside_the_harness_directory_stay_hidden`). `hevo run` and
//! `hevo eval` both ask [`problem`] before they write anything.

use std::path::{Component, Path, PathBuf};

use crate::suite::Suite;

/// Why `run_dir` cannot hold a run of `harnesses` (named, with their folders) on `suite`,
/// if it cannot; `config_dir` is the folder of the hevo.toml, when there is one. The
/// message follows the key or flag that named the directory (`--run-dir `x` is ...`).
pub fn problem(
    run_dir: &Path,
    suite: &Suite,
    harnesses: &[(&str, &Path)],
    config_dir: Option<&Path>,
) -> Option<String> {
    if run_dir.exists() && !run_dir.is_dir() {
        return Some(
            "is a file, not a folder: give the folder the run is kept in (it is made when \
             missing), e.g. runs/<name>"
                .into(),
        );
    }
    let run = resolved(run_dir)?;
    let mut held: Vec<(String, PathBuf)> = Vec::new();
    if let Some(dir) = config_dir {
        held.push(("the folder of hevo.toml".into(), dir.to_path_buf()));
    }
    held.push(("the suite".into(), suite.dir.clone()));
    for (name, dir) in harnesses {
        held.push((format!("the harness `{name}`"), dir.to_path_buf()));
    }
    let fix = "give the run a folder of its own, such as the default (runs/<name> beside \
               hevo.toml for hevo run, runs/eval-<harness>-<hash> for hevo eval)";
    for (what, dir) in &held {
        if resolved(dir).is_some_and(|d| d.starts_with(&run)) {
            return Some(format!(
                "is or holds {what} (`{}`): a run writes hevo.db, archive/ and traces into its \
                 directory, which would put them among those files; {fix}",
                dir.display()
            ));
        }
    }
    let suite_dir = resolved(&suite.dir)?;
    for path in suite.content_paths() {
        let Some(p) = resolved(&path).filter(|p| *p != suite_dir && p.is_dir()) else {
            continue;
        };
        if run.starts_with(&p) {
            return Some(format!(
                "is inside `{}`, which the suite's tasks or scorer read (task files are copied \
                 into every trial's working directory): the run's store, with every answer and \
                 outcome, would reach the harness; {fix}",
                path.display()
            ));
        }
    }
    None
}

/// `path` made absolute with its symbolic links resolved: its deepest existing ancestor
/// canonicalized, the rest (which does not exist, so holds no link) appended with `.` and
/// `..` applied. `None` when not even the root can be resolved.
fn resolved(path: &Path) -> Option<PathBuf> {
    let mut existing = path;
    let mut rest: Vec<Component> = Vec::new();
    let mut base = loop {
        match existing.canonicalize() {
            Ok(p) => break p,
            Err(_) => {
                let mut parts = existing.components();
                rest.push(parts.next_back()?);
                existing = parts.as_path();
                if existing.as_os_str().is_empty() {
                    break std::env::current_dir().ok()?;
                }
            }
        }
    };
    for part in rest.into_iter().rev() {
        match part {
            Component::ParentDir => {
                base.pop();
            }
            Component::Normal(name) => base.push(name),
            _ => {}
        }
    }
    Some(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path that does not exist yet resolves through its existing ancestor's links.
    #[test]
    fn a_missing_path_resolves_through_its_existing_ancestor() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, d.path().join("link")).unwrap();
        let got = resolved(&d.path().join("link/new/../runs/x")).unwrap();
        assert_eq!(got, real.canonicalize().unwrap().join("runs/x"));
    }
}
