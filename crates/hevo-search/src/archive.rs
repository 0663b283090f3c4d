//! The archive: what the proposer sees of a run, as plain files it can grep.
//!
//! ```text
//! archive/SKILL.md                        rendered skill doc for the proposer
//! archive/summary.jsonl                   one line per evaluated (or rejected) candidate
//! archive/frontier.json                   the best candidates so far, with intervals
//! archive/candidates/<NNN>-<name>/        code/, candidate.toml, scores.json, traces/
//! archive/pending/<name>/                 where the proposer writes new candidates
//! ```
//!
//! Only validation-split information ever enters the archive: test outcomes live in
//! `runs/<run>/test/`, outside it, and no function here accepts them.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use hevo_runtime::spend::Spend;
use hevo_runtime::untrusted::{self, Copied, Limits, Refused, Unsafe};
use hevo_stats::estimate::Estimate;
use serde::{Deserialize, Serialize};

/// `candidate.toml`: who a candidate is and why it exists.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CandidateMeta {
    /// Unique name (letters, digits, `-`, `_`, `.`).
    pub name: String,
    /// The candidate it was derived from, if any.
    #[serde(default)]
    pub parent: Option<String>,
    /// The iteration that proposed it (0 = seed).
    #[serde(default)]
    pub iteration: u32,
    /// What it changes and why it should help.
    #[serde(default)]
    pub hypothesis: String,
    /// `exploitation` (a local edit of a good candidate) or `exploration` (something new).
    #[serde(default)]
    pub axis: String,
    /// Which components it touches (e.g. `prompt`, `retrieval`, `memory`).
    #[serde(default)]
    pub components: Vec<String>,
}

/// `scores.json`: a candidate's validation result.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct CandidateScores {
    /// The estimated full-validation-set score with its interval.
    pub estimate: Estimate,
    /// The estimator that produced it.
    pub estimator: String,
    /// How many distinct validation tasks were evaluated.
    pub tasks_used: usize,
    /// Mean outcome per evaluated task id.
    pub outcomes: BTreeMap<String, f64>,
    /// Trials run on validation tasks.
    pub trials: u64,
    /// What those trials' model calls cost: calls, tokens, dollars.
    pub spend: Spend,
}

/// One line of `summary.jsonl`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct SummaryLine {
    /// The iteration (0 = seeds).
    pub iteration: u32,
    /// The candidate's name.
    pub name: String,
    /// Its estimate, when it was evaluated.
    pub estimate: Option<f64>,
    /// Lower end of the 95% interval.
    pub ci_low: Option<f64>,
    /// Upper end of the 95% interval.
    pub ci_high: Option<f64>,
    /// Estimate minus the best estimate before it (positive = a new best).
    pub delta_vs_best: Option<f64>,
    /// The candidate's hypothesis.
    pub hypothesis: String,
    /// `evaluated`, or `rejected: <reason>`.
    pub outcome: String,
}

/// How many of the best candidates form the frontier (`frontier.json`, and what
/// `finalize` evaluates on the test split besides the pick and the seeds).
pub const FRONTIER_SIZE: usize = 3;

/// One entry of `frontier.json`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct FrontierEntry {
    /// The candidate's name.
    pub name: String,
    /// Its archive directory, relative to the archive root.
    pub dir: String,
    /// Its estimate with interval.
    pub estimate: Estimate,
    /// Mean dollars per task (the second objective).
    pub cost_per_task_usd: f64,
}

/// What the skill document tells the proposer.
#[derive(Clone, Debug, Serialize)]
pub struct SkillContext {
    /// The run's name.
    pub run: String,
    /// The suite's name.
    pub suite: String,
    /// Candidates per iteration the proposer should write.
    pub k: u32,
    /// The current iteration.
    pub iteration: u32,
    /// The harness manifest format, for reference.
    pub manifest_example: String,
    /// The longest time limit a candidate may set (`timeout_s`, in seconds as written, `20`
    /// or `0.5`): the seeds' longest.
    pub max_timeout_s: String,
}

/// The archive of one run.
#[derive(Clone, Debug)]
pub struct Archive {
    root: PathBuf,
}

const SKILL_TEMPLATE: &str = include_str!("skill.md.j2");

impl Archive {
    /// Opens (creating if needed) the archive at `root` (`runs/<run>/archive`).
    pub fn open(root: &Path) -> io::Result<Archive> {
        fs::create_dir_all(root.join("candidates"))?;
        fs::create_dir_all(root.join("pending"))?;
        Ok(Archive {
            root: root.to_path_buf(),
        })
    }

    /// An existing archive at `root`, for reading (creates nothing; reads fail if it is
    /// not there).
    pub fn existing(root: &Path) -> Archive {
        Archive {
            root: root.to_path_buf(),
        }
    }

    /// The archive's root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where the proposer writes new candidates.
    pub fn pending_dir(&self) -> PathBuf {
        self.root.join("pending")
    }

    /// The directory of the candidate with sequence number `seq`: `candidates/NNN-name`
    /// (read back by [`parse_dir_name`]).
    pub fn candidate_dir(&self, seq: u32, name: &str) -> PathBuf {
        self.root
            .join("candidates")
            .join(format!("{seq:03}-{name}"))
    }

    /// Names of the candidates already archived, in sequence order.
    pub fn candidate_names(&self) -> io::Result<Vec<String>> {
        Ok(self
            .candidate_dirs()?
            .into_iter()
            .map(|(_, name, _)| name)
            .collect())
    }

    /// Every archived candidate directory as `(sequence number, name, directory)`, in
    /// sequence order. Entries not named `NNN-name` are ignored.
    pub fn candidate_dirs(&self) -> io::Result<Vec<(usize, String, PathBuf)>> {
        let mut out = Vec::new();
        for entry in fs::read_dir(self.root.join("candidates"))? {
            let entry = entry?;
            let file_name = entry.file_name().to_string_lossy().into_owned();
            if let Some((seq, name)) = parse_dir_name(&file_name) {
                out.push((seq, name.to_string(), entry.path()));
            }
        }
        out.sort();
        Ok(out)
    }

    /// Where pending candidates are copied to be checked: `<run>/staging/`, beside the
    /// archive (hevo's alone: no proposer writes or reads it).
    pub fn staging_dir(&self) -> PathBuf {
        self.root.parent().unwrap_or(&self.root).join("staging")
    }

    /// Copies a candidate's code into the archive with [`copy_dir`] (regular files and
    /// folders only: a link, FIFO or device is an error, never followed or opened) and
    /// writes its `candidate.toml`.
    ///
    /// Writes into a temporary directory first and renames it into place, so a crash never
    /// leaves a half-copied candidate behind. Returns the candidate's directory.
    pub fn add_candidate(
        &self,
        seq: u32,
        meta: &CandidateMeta,
        code: &Path,
    ) -> io::Result<PathBuf> {
        self.add(seq, meta, code, copy_dir)
    }

    /// [`Archive::add_candidate`] for a seed: the user's own folder, copied as it is, with
    /// its links followed (a seed's link to a shared file becomes a copy of that file).
    pub fn add_seed(&self, seq: u32, meta: &CandidateMeta, code: &Path) -> io::Result<PathBuf> {
        self.add(seq, meta, code, |from, to| {
            hevo_runtime::trial::copy_tree(from, to, &SKIPPED_DIRS)
        })
    }

    fn add(
        &self,
        seq: u32,
        meta: &CandidateMeta,
        code: &Path,
        copy: impl FnOnce(&Path, &Path) -> io::Result<()>,
    ) -> io::Result<PathBuf> {
        let dir = self.candidate_dir(seq, &meta.name);
        if dir.exists() {
            return Ok(dir);
        }
        let tmp = self
            .root
            .join("candidates")
            .join(format!(".tmp-{seq:03}-{}", meta.name));
        if tmp.exists() {
            fs::remove_dir_all(&tmp)?;
        }
        fs::create_dir_all(tmp.join("traces"))?;
        copy(code, &tmp.join("code"))?;
        let toml = toml::to_string(meta).map_err(io::Error::other)?;
        fs::write(tmp.join("candidate.toml"), toml)?;
        fs::rename(&tmp, &dir)?;
        Ok(dir)
    }

    /// Writes `scores.json` of a candidate (atomically).
    pub fn write_scores(&self, candidate_dir: &Path, scores: &CandidateScores) -> io::Result<()> {
        write_atomic(
            &candidate_dir.join("scores.json"),
            &serde_json::to_vec_pretty(scores)?,
        )
    }

    /// Appends one line to `summary.jsonl`.
    pub fn append_summary(&self, line: &SummaryLine) -> io::Result<()> {
        let mut f = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.root.join("summary.jsonl"))?;
        let mut text = serde_json::to_string(line)?;
        text.push('\n');
        f.write_all(text.as_bytes())?;
        f.sync_data()
    }

    /// Reads `summary.jsonl` (an absent file is an empty summary).
    pub fn read_summary(&self) -> io::Result<Vec<SummaryLine>> {
        let path = self.root.join("summary.jsonl");
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        // A crash can cut the last line short; every complete line is kept.
        Ok(text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect())
    }

    /// Writes `frontier.json` (atomically).
    pub fn write_frontier(&self, frontier: &[FrontierEntry]) -> io::Result<()> {
        write_atomic(
            &self.root.join("frontier.json"),
            &serde_json::to_vec_pretty(frontier)?,
        )
    }

    /// Renders `SKILL.md` for the proposer.
    pub fn write_skill(&self, ctx: &SkillContext) -> io::Result<()> {
        let text = render_skill(ctx).map_err(io::Error::other)?;
        write_atomic(&self.root.join("SKILL.md"), text.as_bytes())
    }
}

/// Renders the skill document from its template.
pub fn render_skill(ctx: &SkillContext) -> Result<String, minijinja::Error> {
    let mut env = minijinja::Environment::new();
    env.add_template("skill", SKILL_TEMPLATE)?;
    env.get_template("skill")?.render(ctx)
}

/// Writes a file through a temporary sibling and a rename, so readers never see half of it.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, bytes)?;
    fs::rename(tmp, path)
}

/// Directory names never copied with a harness: caches, version control, and run
/// directories (a seed that is its config's own directory would otherwise copy its runs,
/// and the archive, into itself).
pub const SKIPPED_DIRS: [&str; 3] = ["__pycache__", ".git", "runs"];

/// Copies a harness directory with [`copy_candidate`]: regular files and folders only,
/// leaving out [`SKIPPED_DIRS`]; a link or special file is an error naming it.
pub fn copy_dir(from: &Path, to: &Path) -> io::Result<()> {
    copy_candidate(from, to)
        .map(|_| ())
        .map_err(io::Error::from)
}

/// Writes `bytes` to `path` in a folder a proposer can write (`pending/`): whatever entry
/// is at `path` (a link, a FIFO, a folder) is removed first and the file is created anew,
/// never opened through a link or blocking on a FIFO.
pub fn write_new(path: &Path, bytes: &[u8]) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(path)?,
        Ok(_) => fs::remove_file(path)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    f.write_all(bytes)
}

/// Reads the small text file at `path` in a folder a proposer can write (a marker): `None`
/// when it is missing, not a regular file (a link, a FIFO) or larger than 4 KiB.
pub fn read_marker(path: &Path) -> Option<String> {
    untrusted::read_text(path, 4096).ok()
}

/// The most a candidate's code may hold: files and folders, and bytes of all its files.
pub const CANDIDATE_LIMITS: Limits = Limits {
    max_entries: 10_000,
    max_bytes: 100 * 1024 * 1024,
};

/// Copies code an untrusted process wrote (a proposer's candidate, an agent's edit):
/// regular files and folders only, leaving out [`SKIPPED_DIRS`], within
/// [`CANDIDATE_LIMITS`]. A link is never followed and a FIFO, socket or device never
/// opened: either is refused, naming the entry ([`Refused`]'s message is the cause a
/// rejection records).
pub fn copy_candidate(from: &Path, to: &Path) -> Result<Copied, Refused> {
    untrusted::copy_tree(from, to, &SKIPPED_DIRS, CANDIDATE_LIMITS, Unsafe::Refuse)
}

/// Whether `name` is a valid candidate name (letters, digits, `-`, `_`, `.`; not empty;
/// not starting with `.`; at most [`MAX_NAME_CHARS`] characters).
///
/// [`MAX_NAME_CHARS`]: hevo_runtime::harness::MAX_NAME_CHARS
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= hevo_runtime::harness::MAX_NAME_CHARS
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(name: &str) -> CandidateMeta {
        CandidateMeta {
            name: name.into(),
            parent: Some("seed".into()),
            iteration: 2,
            hypothesis: "more shots".into(),
            axis: "exploitation".into(),
            components: vec!["prompt".into()],
        }
    }

    #[test]
    fn candidate_round_trip_keeps_code_and_metadata() {
        let tmp = tempfile::tempdir().unwrap();
        let code = tmp.path().join("src");
        fs::create_dir_all(code.join("lib")).unwrap();
        fs::write(code.join("harness.toml"), "entry = [\"true\"]\n").unwrap();
        fs::write(code.join("lib/util.py"), "x = 1\n").unwrap();
        let archive = Archive::open(&tmp.path().join("archive")).unwrap();
        let dir = archive
            .add_candidate(3, &meta("few-shot.v2"), &code)
            .unwrap();
        assert!(dir.ends_with("candidates/003-few-shot.v2"));
        assert_eq!(
            fs::read_to_string(dir.join("code/lib/util.py")).unwrap(),
            "x = 1\n"
        );
        let back: CandidateMeta =
            toml::from_str(&fs::read_to_string(dir.join("candidate.toml")).unwrap()).unwrap();
        assert_eq!(back, meta("few-shot.v2"));
        assert_eq!(
            archive.candidate_names().unwrap(),
            vec!["few-shot.v2".to_string()]
        );
    }

    #[test]
    fn summary_survives_a_torn_last_line() {
        let tmp = tempfile::tempdir().unwrap();
        let archive = Archive::open(tmp.path()).unwrap();
        let line = SummaryLine {
            iteration: 1,
            name: "a".into(),
            estimate: Some(0.5),
            ci_low: Some(0.4),
            ci_high: Some(0.6),
            delta_vs_best: Some(0.1),
            hypothesis: "h".into(),
            outcome: "evaluated".into(),
        };
        archive.append_summary(&line).unwrap();
        let mut f = fs::OpenOptions::new()
            .append(true)
            .open(tmp.path().join("summary.jsonl"))
            .unwrap();
        f.write_all(b"{\"iteration\": 2, \"na").unwrap();
        assert_eq!(archive.read_summary().unwrap(), vec![line]);
    }

    #[test]
    fn skill_doc_states_the_rules() {
        let text = render_skill(&SkillContext {
            run: "demo".into(),
            suite: "classify".into(),
            k: 3,
            iteration: 4,
            manifest_example: "entry = [\"python3\", \"harness.py\"]".into(),
            max_timeout_s: "20".into(),
        })
        .unwrap();
        for needle in [
            "pending/",
            "candidate.toml",
            "3 new candidates",
            "dataset names",
            "summary.jsonl",
            "no symbolic link",
            "must be at most 20 s",
            "test",
        ] {
            assert!(text.contains(needle), "SKILL.md lacks {needle:?}:\n{text}");
        }
    }

    #[test]
    fn names_are_checked() {
        assert!(valid_name("few-shot_v2.1"));
        for bad in ["", ".hidden", "a/b", "a b", &"x".repeat(65)] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }
}

/// Parses a candidate directory's name `NNN-name` into its sequence number and name.
pub fn parse_dir_name(file_name: &str) -> Option<(usize, &str)> {
    let (seq, name) = file_name.split_once('-')?;
    if seq.is_empty() || !seq.bytes().all(|b| b.is_ascii_digit()) || name.is_empty() {
        return None;
    }
    Some((seq.parse().ok()?, name))
}

/// A candidate the loop knows about (a seed or an accepted proposal).
#[derive(Clone, Debug)]
pub struct Candidate {
    /// Arrival index: the strategy's candidate id and the archive's sequence number.
    pub seq: usize,
    /// Its metadata.
    pub meta: CandidateMeta,
    /// Its archive directory (`candidates/NNN-name`).
    pub dir: PathBuf,
}

impl Candidate {
    /// The harness code directory inside the archive.
    pub fn code(&self) -> PathBuf {
        self.dir.join("code")
    }
}
