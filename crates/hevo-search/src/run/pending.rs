//! The proposals of one iteration and their validation: asking the proposer to fill
//! `archive/pending/` (unless it already did), copying each pending candidate into
//! `<run>/staging/` (regular files and folders only, bounded: a link, FIFO, socket or
//! device rejects it, unfollowed and unopened), checking the copy (metadata, name,
//! manifest, entry, smoke trial), keeping the rejected ones under `archive/rejected/`, and
//! clearing `pending/`.
//!
//! `pending/` is the proposer's: hevo reads nothing in it but through that copy, and writes
//! there only its `.proposed` marker, replacing whatever entry the proposer left there.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use hevo_runtime::harness::Harness;
use hevo_runtime::printable::{one_line, printable};

use super::manifest_rule::{manifest_problem, Seeds};
use super::{io_err, SearchError};
use hevo_runtime::untrusted::{self, Unsafe};

use crate::archive::{
    copy_candidate, read_marker, valid_name, write_new, Archive, Candidate, CandidateMeta,
    SkillContext, CANDIDATE_LIMITS, SKIPPED_DIRS,
};
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
    let done_for = read_marker(&marker).and_then(|s| s.trim().parse::<u32>().ok());
    let has_candidates = pending_entries(&pending)?.next().is_some();
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
            max_timeout_s: Seeds::of(ctx.history.iter().map(|(c, _)| c))
                .timeout()
                .as_secs_f64()
                .to_string(),
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
    write_new(&marker, it.to_string().as_bytes()).map_err(io_err("cannot write", &marker))?;
    Ok(None)
}

/// The entries of `pending/` (folders, and whatever else the proposer left: links, files,
/// FIFOs), names starting with `.` left out, sorted.
fn pending_entries(pending: &Path) -> Result<impl Iterator<Item = PathBuf>, SearchError> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(pending)
        .map_err(io_err("cannot read", pending))?
        .filter_map(|e| e.ok())
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .collect();
    entries.sort();
    Ok(entries.into_iter())
}

/// Empties `pending/` (and `staging/`) whatever the proposer left there: a tree of any
/// depth (a plain `remove_dir_all` ran out of descriptors on 22,500 nested folders, and
/// the run stopped at every iteration), folders it took its own permissions from.
pub(super) fn clear_pending(archive: &Archive) -> Result<(), SearchError> {
    let pending = archive.pending_dir();
    hevo_runtime::remove::remove_tree(&pending).map_err(io_err("cannot clear", &pending))?;
    clear_staging(archive)?;
    std::fs::create_dir_all(&pending).map_err(io_err("cannot create", &pending))
}

fn clear_staging(archive: &Archive) -> Result<(), SearchError> {
    let staging = archive.staging_dir();
    hevo_runtime::remove::remove_tree(&staging).map_err(io_err("cannot clear", &staging))
}

/// Copies the pending entry `entry` into `staged`: `Err` is why it is rejected (it is not
/// a folder, or holds a link, a special file, or too much).
fn stage(entry: &Path, staged: &Path) -> Result<(), String> {
    let meta = std::fs::symlink_metadata(entry).map_err(|e| format!("cannot read it: {e}"))?;
    let kind = meta.file_type();
    if kind.is_symlink() {
        let target = std::fs::read_link(entry)
            .map(|t| t.to_string_lossy().into_owned())
            .unwrap_or_default();
        return Err(format!(
            "it is a symbolic link (to `{target}`), not a folder: links are never followed; a \
             candidate is a folder of regular files and folders"
        ));
    }
    if !kind.is_dir() {
        return Err(
            "it is not a folder: a candidate is a folder of regular files and folders".into(),
        );
    }
    copy_candidate(entry, staged)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Keeps a rejected entry under `dest` for inspection: its staged copy when it was made,
/// else what of it is regular files and folders (links and special files left out,
/// within the candidate limits; a link itself keeps nothing).
fn keep_rejected(entry: &Path, staged: Option<&Path>, dest: &Path) {
    if dest.exists() {
        return;
    }
    let _ = match staged {
        Some(s) => copy_candidate(s, dest),
        None => untrusted::copy_tree(entry, dest, &SKIPPED_DIRS, CANDIDATE_LIMITS, Unsafe::Skip),
    };
}

pub(super) type Accepted = Vec<(CandidateMeta, PathBuf)>;
pub(super) type Rejected = Vec<(String, String, String)>;

/// Checks each pending candidate; rejected ones are kept under `archive/rejected/`. With
/// `most`, only the first `most` entries (by name) are checked: a proposer asked for k
/// candidates that writes more is not given more evaluations (or copies) for it; the rest
/// are rejected unread.
pub(super) fn validate_pending(
    archive: &Archive,
    known: &[Candidate],
    it: u32,
    most: Option<usize>,
    runner: &mut dyn CandidateRunner,
    smoke_task: Option<&str>,
    log: &mut dyn FnMut(&str),
) -> Result<(Accepted, Rejected), SearchError> {
    let mut names: HashSet<String> = known.iter().map(|c| c.meta.name.clone()).collect();
    let seeds = Seeds::of(known);
    let mut accepted = Vec::new();
    let mut rejected = Vec::new();
    let rejected_root = archive.root().join("rejected");
    // Candidates stay in pending/ until the whole iteration is archived (then pending/ is
    // cleared): a run killed half-way validates the same directories again on resume, with
    // the same results (smoke trials are memoized), and archiving is idempotent.
    clear_staging(archive)?;
    let staging = archive.staging_dir();
    let entries: Vec<PathBuf> = pending_entries(&archive.pending_dir())?.collect();
    let asked = entries.len();
    for (i, entry) in entries.into_iter().enumerate() {
        let raw_name = entry.file_name().unwrap_or_default();
        let dir_name = raw_name.to_string_lossy().into_owned();
        if let Some(most) = most.filter(|&most| i >= most) {
            let why = format!(
                "the proposer was asked for {most} candidate(s) and wrote {asked}: the first \
                 {most} by folder name are taken, this one is not read"
            );
            log(&format!("  rejected `{}`: {why}", one_line(&dir_name)));
            rejected.push((dir_name, String::new(), why));
            continue;
        }
        // Everything below reads hevo's copy, never the proposer's files.
        let dir = staging.join(&dir_name);
        let staged_copy = if raw_name.to_str().is_none() {
            // Two such names can read alike (`a\xfe`, `a\xff`: both `a\u{fffd}`), and the
            // second copy would replace the first after it was checked.
            Err(
                "its folder name is not UTF-8: name a candidate's folder as the candidate \
                 (letters, digits, `-`, `_`, `.`)"
                    .to_string(),
            )
        } else {
            stage(&entry, &dir)
        };
        let (meta, problem, staged) = match staged_copy {
            Err(why) => (unnamed(&dir_name, it), Some(why), false),
            Ok(()) => {
                let (meta, problem) = check_candidate(&dir, &dir_name, it, &names, &seeds);
                (meta, problem, true)
            }
        };
        let problem = match problem {
            Some(p) => Some(p),
            None => match smoke_task {
                Some(task) => runner.smoke(&meta.name, &dir, task).map_err(|source| {
                    SearchError::Evaluation {
                        candidate: meta.name.clone(),
                        source,
                    }
                })?,
                None => None,
            },
        };
        match problem {
            Some(reason) => {
                log(&format!(
                    "  rejected `{}`: {}",
                    one_line(&meta.name),
                    printable(&reason)
                ));
                // Kept for inspection, outside candidates/.
                let dest = rejected_root.join(format!("{it:03}-{dir_name}"));
                keep_rejected(&entry, staged.then_some(dir.as_path()), &dest);
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

/// The metadata of a pending entry that has none (yet): its directory's name.
fn unnamed(dir_name: &str, it: u32) -> CandidateMeta {
    CandidateMeta {
        name: dir_name.to_string(),
        parent: None,
        iteration: it,
        hypothesis: String::new(),
        axis: String::new(),
        components: vec![],
    }
}

/// Static checks of one staged candidate: metadata, name, manifest, and what its manifest
/// asks for ([`manifest_problem`]).
fn check_candidate(
    dir: &Path,
    dir_name: &str,
    it: u32,
    names: &HashSet<String>,
    seeds: &Seeds,
) -> (CandidateMeta, Option<String>) {
    let mut meta = unnamed(dir_name, it);
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
            Some(format!(
                "its name is not valid (letters, digits, `-`, `_`, `.`; at most {})",
                hevo_runtime::harness::MAX_NAME_CHARS
            )),
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
    if let Some(problem) = manifest_problem(&harness, seeds) {
        return (meta, Some(problem));
    }
    (meta, None)
}
