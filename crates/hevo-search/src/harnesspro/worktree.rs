//! The git side of HarnessPro's editing: one repository per run, one branch per candidate
//! (`cand/<name>`), one `git worktree` per child.
//!
//! A candidate without a branch (a seed, or a child another proposer wrote) gets one from
//! its archived code with git's plumbing (`add` into a private index, `write-tree`,
//! `commit-tree`), so every branch holds exactly the code the store evaluated. A child's
//! worktree starts from its parent's branch; the agent edits it, hevo commits it with the
//! plan as the message, and the child's diff against its parent is `git diff` of the two
//! branches. `candidate.toml` (hevo's metadata) is never committed.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The run's repository (`<run>/harnesspro/repo`).
pub struct Repo {
    dir: PathBuf,
}

/// Files hevo writes beside a candidate's code that are not the harness.
const NOT_CODE: [&str; 1] = ["candidate.toml"];

impl Repo {
    /// Opens the repository at `dir`, making it if needed.
    pub fn open(dir: &Path) -> Result<Repo, String> {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create `{}`: {e}", dir.display()))?;
        let repo = Repo {
            dir: dir.to_path_buf(),
        };
        if !dir.join(".git").exists() {
            repo.git(&["init", "-q", "-b", "main"])?;
        }
        Ok(repo)
    }

    /// Runs git in the repository; its stdout, or why it failed.
    fn git(&self, args: &[&str]) -> Result<String, String> {
        git_in(&self.dir, args, &[])
    }

    /// The branch of candidate `name`.
    pub fn branch(name: &str) -> String {
        format!("cand/{name}")
    }

    /// Whether candidate `name` has a branch.
    pub fn has_branch(&self, name: &str) -> bool {
        self.git(&[
            "rev-parse",
            "--verify",
            "-q",
            &format!("refs/heads/{}", Self::branch(name)),
        ])
        .is_ok()
    }

    /// Gives candidate `name` a branch holding `code` (one root commit), unless it has one.
    pub fn ensure_branch(&self, name: &str, code: &Path) -> Result<(), String> {
        if self.has_branch(name) {
            return Ok(());
        }
        let index = self.dir.join(".git").join(format!("index-{name}"));
        let index_s = index.to_string_lossy().into_owned();
        let code_s = code.to_string_lossy().into_owned();
        let env = [("GIT_INDEX_FILE", index_s.as_str())];
        let _ = std::fs::remove_file(&index);
        let mut add = vec!["--work-tree", code_s.as_str(), "add", "-A", "--", "."];
        let excludes: Vec<String> = NOT_CODE.iter().map(|f| format!(":!{f}")).collect();
        add.extend(excludes.iter().map(String::as_str));
        git_in(&self.dir, &add, &env)?;
        let tree = git_in(&self.dir, &["write-tree"], &env)?;
        let _ = std::fs::remove_file(&index);
        let message = format!("{name}: archived code");
        let commit = git_in(
            &self.dir,
            &["commit-tree", tree.trim(), "-m", &message],
            &[],
        )?;
        self.git(&["branch", &Self::branch(name), commit.trim()])?;
        Ok(())
    }

    /// A worktree for child `child` at `at`, on a new branch from `parent`'s. An existing
    /// worktree of a resumed epoch is removed first (the child is made afresh).
    pub fn add_worktree(&self, parent: &str, child: &str, at: &Path) -> Result<(), String> {
        let at_s = at.to_string_lossy().into_owned();
        if at.exists() {
            let _ = self.git(&["worktree", "remove", "--force", &at_s]);
            let _ = std::fs::remove_dir_all(at);
        }
        let _ = self.git(&["worktree", "prune"]);
        if self.has_branch(child) {
            self.git(&["branch", "-D", &Self::branch(child)])?;
        }
        self.git(&[
            "worktree",
            "add",
            "-q",
            "-b",
            &Self::branch(child),
            &at_s,
            &Self::branch(parent),
        ])?;
        Ok(())
    }

    /// Commits everything in the worktree `at` with `message`. `Ok(false)` when the agent
    /// changed nothing (no commit is made).
    pub fn commit(&self, at: &Path, message: &str) -> Result<bool, String> {
        let mut add = vec!["add", "-A", "--", "."];
        let excludes: Vec<String> = NOT_CODE.iter().map(|f| format!(":!{f}")).collect();
        add.extend(excludes.iter().map(String::as_str));
        git_in(at, &add, &[])?;
        if git_in(at, &["diff", "--cached", "--quiet"], &[]).is_ok() {
            return Ok(false);
        }
        git_in(at, &["commit", "-q", "-m", message], &[])?;
        Ok(true)
    }

    /// The diff of `child`'s branch against `parent`'s.
    pub fn diff(&self, parent: &str, child: &str) -> Result<String, String> {
        self.git(&["diff", &Self::branch(parent), &Self::branch(child)])
    }
}

/// Runs git in `dir` with hevo's identity and no user or system configuration.
fn git_in(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<String, String> {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .args(["-c", "user.name=hevo", "-c", "user.email=hevo@localhost"])
        .args([
            "-c",
            "commit.gpgsign=false",
            "-c",
            "core.hooksPath=/dev/null",
        ])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run git (is it installed?): {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "`git {}` in `{}` failed: {}",
            args.join(" "),
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_branch_holds_the_parent_plus_the_edit() {
        let tmp = tempfile::tempdir().unwrap();
        let code = tmp.path().join("code");
        std::fs::create_dir_all(&code).unwrap();
        std::fs::write(code.join("h.py"), "print(1)\n").unwrap();
        std::fs::write(code.join("candidate.toml"), "name = \"p\"\n").unwrap();
        let repo = Repo::open(&tmp.path().join("repo")).unwrap();
        repo.ensure_branch("p", &code).unwrap();
        let wt = tmp.path().join("wt");
        repo.add_worktree("p", "c", &wt).unwrap();
        assert!(!wt.join("candidate.toml").exists());
        assert!(!repo.commit(&wt, "nothing").unwrap());
        std::fs::write(wt.join("h.py"), "print(2)\n").unwrap();
        assert!(repo.commit(&wt, "print two").unwrap());
        let diff = repo.diff("p", "c").unwrap();
        assert!(
            diff.contains("-print(1)") && diff.contains("+print(2)"),
            "{diff}"
        );
        let log = git_in(&wt, &["log", "--format=%s"], &[]).unwrap();
        assert_eq!(
            log.lines().collect::<Vec<_>>(),
            ["print two", "p: archived code"]
        );
    }
}
