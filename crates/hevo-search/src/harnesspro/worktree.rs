//! The git side of HarnessPro's editing: one repository per run, one branch per candidate
//! (`cand/<name>`).
//!
//! A candidate without a branch (a seed, or a child another proposer wrote) gets one from
//! its archived code with git's plumbing (`add` into a private index, `write-tree`,
//! `commit-tree`), so every branch holds exactly the code the store evaluated. A child's
//! edit workspace starts as a plain copy of its parent's branch (no `.git`: the agent never
//! sees or touches a repository); hevo copies what the agent left, regular files and folders
//! only, into a folder of its own and commits that folder onto a new branch with the plan
//! as the message. The child's diff against its parent is `git diff` of the two branches.
//! `candidate.toml` (hevo's metadata) is never committed.
//!
//! **Containment.** Git reads configuration, hooks and attributes from the repository it
//! runs in, and runs commands named there (`core.fsmonitor`, hooks, `filter.*.clean`, diff
//! drivers): run in a folder an agent wrote, it runs the agent's commands on the host. So
//! every git command here names hevo's own repository (`--git-dir`) and, when it needs one,
//! a work tree hevo wrote (`--work-tree`); it runs in the repository's folder, with no
//! system or global configuration, no hooks, no fsmonitor, no exclude or attributes file of
//! the user's, and no `GIT_*` variable of the environment. The only attributes git can then
//! read are a `.gitattributes` among the harness's files, and they can name no filter or
//! driver: none is configured.

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
        if !repo.git_dir().join("HEAD").exists() {
            let at = dir.to_string_lossy().into_owned();
            run_git(dir, &["init", "-q", "--template=", "-b", "main", &at], &[])?;
        }
        Ok(repo)
    }

    /// The repository's `.git` (hevo's; no agent ever writes it).
    fn git_dir(&self) -> PathBuf {
        self.dir.join(".git")
    }

    /// Runs git on the repository (no work tree); its stdout, or why it failed.
    fn git(&self, args: &[&str]) -> Result<String, String> {
        self.git_with(None, args, &[])
    }

    /// Runs git on the repository with `work_tree` (a folder hevo wrote) as its work tree.
    fn git_with(
        &self,
        work_tree: Option<&Path>,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Result<String, String> {
        let git_dir = format!("--git-dir={}", self.git_dir().display());
        let mut all = vec![git_dir];
        if let Some(w) = work_tree {
            all.push(format!("--work-tree={}", w.display()));
        }
        all.extend(args.iter().map(|a| a.to_string()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        run_git(&self.dir, &all, env)
    }

    /// A private index file for work on candidate `name` (removed first).
    fn index(&self, name: &str) -> PathBuf {
        let index = self.git_dir().join(format!("index-{name}"));
        let _ = std::fs::remove_file(&index);
        index
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

    /// The tree of `code` (a folder hevo wrote: archived code or a staged copy) in the
    /// private index of `name`, every file but [`NOT_CODE`], ignore rules or not.
    fn write_tree(&self, name: &str, code: &Path) -> Result<String, String> {
        let index = self.index(name);
        let index_s = index.to_string_lossy().into_owned();
        let env = [("GIT_INDEX_FILE", index_s.as_str())];
        let mut add = vec!["add", "-A", "--force", "--", "."];
        let excludes: Vec<String> = NOT_CODE.iter().map(|f| format!(":!{f}")).collect();
        add.extend(excludes.iter().map(String::as_str));
        self.git_with(Some(code), &add, &env)?;
        let tree = self.git_with(None, &["write-tree"], &env)?;
        let _ = std::fs::remove_file(&index);
        Ok(tree.trim().to_string())
    }

    /// Gives candidate `name` a branch holding `code` (one root commit), unless it has one.
    pub fn ensure_branch(&self, name: &str, code: &Path) -> Result<(), String> {
        if self.has_branch(name) {
            return Ok(());
        }
        let tree = self.write_tree(name, code)?;
        let message = format!("{name}: archived code");
        let commit = self.git(&["commit-tree", &tree, "-m", &message])?;
        self.git(&["branch", &Self::branch(name), commit.trim()])?;
        Ok(())
    }

    /// Writes the files of `parent`'s branch into the new folder `at` (removed first if it
    /// exists): plain files, no repository, the start of a child's edit.
    pub fn checkout(&self, parent: &str, at: &Path) -> Result<(), String> {
        if at.exists() {
            hevo_runtime::remove::remove_tree(at)
                .map_err(|e| format!("cannot clear `{}`: {e}", at.display()))?;
        }
        std::fs::create_dir_all(at)
            .map_err(|e| format!("cannot create `{}`: {e}", at.display()))?;
        let index = self.index(&format!("checkout-{parent}"));
        let index_s = index.to_string_lossy().into_owned();
        let env = [("GIT_INDEX_FILE", index_s.as_str())];
        self.git_with(None, &["read-tree", &Self::branch(parent)], &env)?;
        self.git_with(Some(at), &["checkout-index", "-a", "-f"], &env)?;
        let _ = std::fs::remove_file(&index);
        Ok(())
    }

    /// Commits the files of `staged` (a folder hevo wrote, never the agent's) on a new
    /// branch of `child` from `parent`'s, with `message`. `Ok(false)` when they are the
    /// parent's files (no commit is made).
    pub fn commit(
        &self,
        parent: &str,
        child: &str,
        staged: &Path,
        message: &str,
    ) -> Result<bool, String> {
        let tree = self.write_tree(child, staged)?;
        let parent_ref = Self::branch(parent);
        let parent_tree = self.git(&["rev-parse", &format!("{parent_ref}^{{tree}}")])?;
        if parent_tree.trim() == tree {
            return Ok(false);
        }
        let parent_commit = self.git(&["rev-parse", &format!("{parent_ref}^{{commit}}")])?;
        let msg = self.git_dir().join(format!("message-{child}"));
        std::fs::write(&msg, message)
            .map_err(|e| format!("cannot write `{}`: {e}", msg.display()))?;
        let msg_s = msg.to_string_lossy().into_owned();
        let commit = self.git(&[
            "commit-tree",
            &tree,
            "-p",
            parent_commit.trim(),
            "-F",
            &msg_s,
        ]);
        let _ = std::fs::remove_file(&msg);
        let commit = commit?;
        self.git(&["branch", "-f", &Self::branch(child), commit.trim()])?;
        Ok(true)
    }

    /// The diff of `child`'s branch against `parent`'s.
    pub fn diff(&self, parent: &str, child: &str) -> Result<String, String> {
        self.git(&[
            "diff",
            "--no-ext-diff",
            "--no-textconv",
            &Self::branch(parent),
            &Self::branch(child),
        ])
    }
}

/// Runs git in `dir` (hevo's repository folder) with hevo's identity, no user or system
/// configuration, no hooks, no fsmonitor and no `GIT_*` variable but `env`.
fn run_git(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<String, String> {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .args(["-c", "user.name=hevo", "-c", "user.email=hevo@localhost"])
        .args([
            "-c",
            "commit.gpgsign=false",
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.excludesFile=/dev/null",
            "-c",
            "core.attributesFile=/dev/null",
            "-c",
            "core.symlinks=false",
            "-c",
            "core.untrackedCache=false",
            "-c",
            "submodule.recurse=false",
        ])
        .args(args);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("GIT_") {
            cmd.env_remove(k);
        }
    }
    cmd.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_ATTR_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0");
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
        // Ignore rules among the files do not leave files out of the branch.
        std::fs::write(code.join(".gitignore"), "*.txt\n").unwrap();
        std::fs::write(code.join("data.txt"), "kept\n").unwrap();
        let repo = Repo::open(&tmp.path().join("repo")).unwrap();
        repo.ensure_branch("p", &code).unwrap();
        let wt = tmp.path().join("wt");
        repo.checkout("p", &wt).unwrap();
        assert!(!wt.join("candidate.toml").exists());
        assert!(
            !wt.join(".git").exists(),
            "the workspace holds no repository"
        );
        assert_eq!(
            std::fs::read_to_string(wt.join("data.txt")).unwrap(),
            "kept\n"
        );
        assert!(!repo.commit("p", "c", &wt, "nothing").unwrap());
        assert!(!repo.has_branch("c"));
        std::fs::write(wt.join("h.py"), "print(2)\n").unwrap();
        assert!(repo.commit("p", "c", &wt, "print two\n\nwhy").unwrap());
        let diff = repo.diff("p", "c").unwrap();
        assert!(
            diff.contains("-print(1)") && diff.contains("+print(2)"),
            "{diff}"
        );
        let log = repo.git(&["log", "--format=%s", "cand/c"]).unwrap();
        assert_eq!(
            log.lines().collect::<Vec<_>>(),
            ["print two", "p: archived code"]
        );
    }
}
