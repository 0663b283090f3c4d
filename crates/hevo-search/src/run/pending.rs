//! The proposals of one iteration and their validation: asking the proposer to fill
//! `archive/pending/` (unless it already did), checking each pending candidate (metadata,
//! name, manifest, entry, smoke trial), keeping the rejected ones under `archive/rejected/`,
//! and clearing `pending/`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use hevo_runtime::harness::Harness;

use super::{io_err, SearchError};
use crate::archive::{valid_name, Archive, Candidate, CandidateMeta, SkillContext};
use crate::proposer::{ProposeContext, ProposeError, Proposer};
use crate::runner::CandidateRunner;

/// Asks the proposer for `ctx.iteration` unless its candidates are already waiting. Returns
/// why the proposer failed, if it did (its iteration is then not marked as proposed: a
/// rerun asks again).
pub(super) fn take_proposals(
    ctx: &ProposeContext<'_>,
    suite_name: &str,
    proposer: &mut dyn Proposer,
    log: &mut dyn FnMut(&str),
) -> Result<Option<String>, SearchError> {
    let (archive, it, k) = (ctx.archive, ctx.iteration, ctx.k);
    let pending = archive.pending_dir();
    let marker = pending.join(".proposed");
    let done_for = std::fs::read_to_string(&marker)
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok());
    let has_candidates = pending_dirs(&pending)?.next().is_some();
    if done_for == Some(it) || (has_candidates && !proposer.deterministic()) {
        log(&format!(
            "iteration {it}: using the candidates already in pending/"
        ));
        return Ok(None);
    }
    if has_candidates {
        // A deterministic proposer was interrupted: redo its proposal from scratch.
        clear_pending(archive)?;
    }
    archive
        .write_skill(&SkillContext {
            run: archive
                .root()
                .parent()
                .and_then(|p| p.file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            suite: suite_name.to_string(),
            k,
            iteration: it,
            manifest_example: "name = \"my-candidate\"\nentry = [\"python3\", \"harness.py\"]"
                .into(),
        })
        .map_err(io_err("cannot write SKILL.md in", archive.root()))?;
    log(&format!(
        "iteration {it}: asking the proposer for {k} candidate(s)"
    ));
    match proposer.propose(ctx) {
        Ok(()) => {}
        // Not marked as taken: the same command asks the proposer again.
        Err(ProposeError::Cancelled(reason)) => return Err(SearchError::Interrupted(reason)),
        Err(ProposeError::Failed(why)) => {
            log(&format!("iteration {it}: the proposer failed: {why}"));
            return Ok(Some(why));
        }
    }
    std::fs::write(&marker, it.to_string()).map_err(io_err("cannot write", &marker))?;
    Ok(None)
}

fn pending_dirs(pending: &Path) -> Result<impl Iterator<Item = PathBuf>, SearchError> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(pending)
        .map_err(io_err("cannot read", pending))?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir() && !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .collect();
    dirs.sort();
    Ok(dirs.into_iter())
}

pub(super) fn clear_pending(archive: &Archive) -> Result<(), SearchError> {
    let pending = archive.pending_dir();
    std::fs::remove_dir_all(&pending).map_err(io_err("cannot clear", &pending))?;
    std::fs::create_dir_all(&pending).map_err(io_err("cannot create", &pending))
}

pub(super) type Accepted = Vec<(CandidateMeta, PathBuf)>;
pub(super) type Rejected = Vec<(String, String, String)>;

/// Checks each pending candidate; rejected ones are kept under `archive/rejected/`.
pub(super) fn validate_pending(
    archive: &Archive,
    known: &[Candidate],
    it: u32,
    runner: &mut dyn CandidateRunner,
    smoke_task: Option<&str>,
    log: &mut dyn FnMut(&str),
) -> Result<(Accepted, Rejected), SearchError> {
    let mut names: HashSet<String> = known.iter().map(|c| c.meta.name.clone()).collect();
    let mut accepted = Vec::new();
    let mut rejected = Vec::new();
    let rejected_root = archive.root().join("rejected");
    // Candidates stay in pending/ until the whole iteration is archived (then pending/ is
    // cleared): a run killed half-way validates the same directories again on resume, with
    // the same results (smoke trials are memoized), and archiving is idempotent.
    for dir in pending_dirs(&archive.pending_dir())? {
        let dir_name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (meta, problem) = check_candidate(&dir, &dir_name, it, &names);
        let problem = match problem {
            Some(p) => Some(p),
            None => match smoke_task {
                Some(task) => runner.smoke(&meta.name, &dir, task).err(),
                None => None,
            },
        };
        match problem {
            Some(reason) => {
                log(&format!("  rejected `{}`: {reason}", meta.name));
                // Kept for inspection, outside candidates/.
                let dest = rejected_root.join(format!("{it:03}-{dir_name}"));
                if !dest.exists() {
                    let _ = crate::archive::copy_dir(&dir, &dest);
                }
                rejected.push((meta.name, meta.hypothesis, reason));
            }
            None => {
                names.insert(meta.name.clone());
                accepted.push((meta, dir));
            }
        }
    }
    Ok((accepted, rejected))
}

/// Static checks of one pending candidate: metadata, name, manifest, entry.
fn check_candidate(
    dir: &Path,
    dir_name: &str,
    it: u32,
    names: &HashSet<String>,
) -> (CandidateMeta, Option<String>) {
    let mut meta = CandidateMeta {
        name: dir_name.to_string(),
        parent: None,
        iteration: it,
        hypothesis: String::new(),
        axis: String::new(),
        components: vec![],
    };
    let meta_path = dir.join("candidate.toml");
    match std::fs::read_to_string(&meta_path) {
        Ok(text) => match toml::from_str::<CandidateMeta>(&text) {
            Ok(m) => {
                meta = CandidateMeta { iteration: it, ..m };
            }
            Err(e) => {
                return (
                    meta,
                    Some(format!("candidate.toml is invalid: {}", e.message())),
                )
            }
        },
        Err(_) => return (meta, Some("candidate.toml is missing".into())),
    }
    if !valid_name(&meta.name) {
        return (
            meta,
            Some("its name is not valid (letters, digits, `-`, `_`, `.`; at most 64)".into()),
        );
    }
    if names.contains(&meta.name) {
        let why = format!("the name `{}` is already taken", meta.name);
        return (meta, Some(why));
    }
    let harness = match Harness::load(dir) {
        Ok(h) => h,
        Err(e) => return (meta, Some(format!("its harness does not load: {e}"))),
    };
    if let Some(problem) = entry_problem(&harness) {
        return (meta, Some(problem));
    }
    (meta, None)
}

/// Whether the entry's program (and a script it names in the directory) exists.
fn entry_problem(h: &Harness) -> Option<String> {
    let argv = h.entry_argv();
    let program = argv.first()?;
    let on_path = |p: &str| {
        std::env::var_os("PATH")
            .map(|paths| std::env::split_paths(&paths).any(|d| d.join(p).is_file()))
            .unwrap_or(false)
    };
    if program.contains('/') {
        if !Path::new(program).exists() {
            return Some(format!("its entry program `{program}` does not exist"));
        }
    } else if !on_path(program) {
        return Some(format!("its entry program `{program}` is not on PATH"));
    }
    for arg in &h.manifest.entry[1..] {
        let looks_like_script = [".py", ".sh", ".js", ".rb", ".pl"]
            .iter()
            .any(|ext| arg.ends_with(ext));
        if looks_like_script && !arg.starts_with('-') && !h.dir.join(arg).exists() {
            return Some(format!(
                "its entry names `{arg}`, which is not in the candidate's directory"
            ));
        }
    }
    None
}
