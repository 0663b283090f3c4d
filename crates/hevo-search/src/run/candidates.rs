//! The candidates in `archive/candidates/`: the seeds archived in Phase 0, an iteration's
//! valid proposals archived after validation, and on resume those archived by an earlier
//! invocation, read back and taken again.

use std::collections::HashSet;
use std::path::Path;

use hevo_runtime::harness::Harness;

use super::pending::Accepted;
use super::{io_err, SearchError};
use crate::archive::{Archive, Candidate, CandidateMeta};
use crate::config::RunConfig;
use crate::harnesspro::Epochs;

/// Phase 0's archiving: each seed harness under its manifest name, in the configured order.
pub(super) fn archive_seeds(
    config: &RunConfig,
    config_file: &Path,
    archive: &Archive,
) -> Result<Vec<Candidate>, SearchError> {
    let mut candidates: Vec<Candidate> = Vec::new();
    for seed_dir in &config.seeds {
        let dir = config.resolve(config_file, seed_dir);
        let harness = Harness::load(&dir).map_err(|e| SearchError::User(e.to_string()))?;
        let name = hevo_runtime::eval::sanitize(&harness.name);
        if candidates.iter().any(|c| c.meta.name == name) {
            return Err(SearchError::User(
                crate::config::ConfigError::invalid_at_line(
                    config_file,
                    "seeds",
                    format!(
                        "names two harnesses named `{name}` (the second: `{}`): give each \
                         seed a distinct `name` in its harness.toml",
                        dir.display()
                    ),
                )
                .to_string(),
            ));
        }
        let meta = CandidateMeta {
            name: name.clone(),
            parent: None,
            iteration: 0,
            hypothesis: "seed harness".into(),
            axis: "seed".into(),
            components: vec![],
        };
        let seq = candidates.len();
        let cdir = archive
            .add_seed(seq as u32, &meta, &harness.dir)
            .map_err(io_err("cannot archive seed", &harness.dir))?;
        candidates.push(Candidate {
            seq,
            meta,
            dir: cdir,
        });
    }
    Ok(candidates)
}

/// Archives an iteration's valid candidates under `archive/candidates/`, after the ones in
/// `candidates` (and tells HarnessPro's epochs about each); `new_ids` gets their sequence
/// numbers.
pub(super) fn archive_accepted(
    archive: &Archive,
    epochs: Option<&Epochs>,
    accepted: Accepted,
    candidates: &mut Vec<Candidate>,
    new_ids: &mut Vec<usize>,
) -> Result<(), SearchError> {
    for (meta, code) in accepted {
        let seq = candidates.len();
        let dir = archive
            .add_candidate(seq as u32, &meta, &code)
            .map_err(io_err("cannot archive candidate", &code))?;
        let cand = Candidate { seq, meta, dir };
        if let Some(ep) = epochs {
            ep.archived(&cand)?;
        }
        candidates.push(cand);
        new_ids.push(seq);
    }
    Ok(())
}

/// Candidates already in the archive, in sequence order.
pub(super) fn list_archived(archive: &Archive) -> Result<Vec<Candidate>, SearchError> {
    let root = archive.root().join("candidates");
    let mut out = Vec::new();
    let dirs = archive
        .candidate_dirs()
        .map_err(io_err("cannot read", &root))?;
    for (seq, _, dir) in dirs {
        let meta_path = dir.join("candidate.toml");
        let text =
            std::fs::read_to_string(&meta_path).map_err(io_err("cannot read", &meta_path))?;
        let meta: CandidateMeta = toml::from_str(&text)
            .map_err(|e| SearchError::User(format!("{}: {e}", meta_path.display())))?;
        out.push(Candidate { seq, meta, dir });
    }
    out.sort_by_key(|c| c.seq);
    Ok(out)
}

/// Takes iteration `it`'s candidates, accepted by an earlier invocation, from `archived`
/// back into `candidates` (their sequence numbers must follow on); `new_ids` gets their
/// sequence numbers.
pub(super) fn take_archived(
    archived: &[Candidate],
    it: u32,
    archive_root: &Path,
    candidates: &mut Vec<Candidate>,
    new_ids: &mut Vec<usize>,
) -> Result<(), SearchError> {
    for c in archived.iter().filter(|c| c.meta.iteration == it) {
        let seq = candidates.len();
        if c.seq != seq {
            return Err(SearchError::User(format!(
                "the archive at `{}` is inconsistent: candidate `{}` has sequence {} where {seq} was expected; \
                 restore it or start a new run directory",
                archive_root.display(),
                c.meta.name,
                c.seq
            )));
        }
        candidates.push(c.clone());
        new_ids.push(seq);
    }
    Ok(())
}

/// Checks that every candidate an earlier invocation recorded in `archive/summary.jsonl`
/// (`recorded`) is still archived (`seeds` or `archived`): a resumed run missing one would
/// take the iteration as done without it and could pick another candidate without a word.
pub(super) fn check_nothing_missing(
    recorded: &HashSet<String>,
    seeds: &[Candidate],
    archived: &[Candidate],
    archive_root: &Path,
) -> Result<(), SearchError> {
    let present: HashSet<&str> = seeds
        .iter()
        .chain(archived)
        .map(|c| c.meta.name.as_str())
        .collect();
    let mut missing: Vec<&str> = recorded
        .iter()
        .map(String::as_str)
        .filter(|name| !present.contains(name))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    missing.sort_unstable();
    Err(SearchError::User(format!(
        "the archive at `{}` is missing candidate(s) {} that summary.jsonl records as \
         evaluated: was the archive edited? Restore their folders in candidates/, or start a \
         new run directory (--run-dir)",
        archive_root.display(),
        missing
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    )))
}
