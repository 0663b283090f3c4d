//! The chaos test of issue 12: a real search (`hevo run --finalize` on a copy of
//! `examples/threshold`: a bash harness in the sandbox, the built-in `params` proposer, no
//! model) is killed with SIGKILL at seeded random moments, resumed each time until it
//! completes, and then compared with an uninterrupted run of the same configuration: no
//! trial lost or duplicated in either store (search and test), the same trials with the same
//! outcomes, the same picks, estimates, scores and test results, and no process or
//! `hevo-trial-*` directory left behind.
//!
//! Short mode (4 kills) runs with the workspace's tests. The long mode sets the number of
//! kills and the seed: `HEVO_CHAOS_KILLS=50 HEVO_CHAOS_SEED=12 cargo test -p hevo-cli --test
//! chaos -- --nocapture` (its last result is in bench/chaos.md).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod support;

/// One search: its directory (a copy of `examples/threshold` with 5 iterations) and its
/// own temporary directory, where trial working directories go.
struct Search {
    dir: PathBuf,
    tmp: PathBuf,
}

impl Search {
    fn new(root: &Path) -> Search {
        let dir = root.join("threshold");
        support::threshold_copy(&dir, &[("iterations = 3", "iterations = 5")]);
        let tmp = root.join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        Search { dir, tmp }
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hevo"));
        cmd.args([
            "run",
            "--finalize",
            "--json",
            "--no-progress",
            "--jobs",
            "2",
        ])
        .arg(&self.dir)
        .env("TMPDIR", &self.tmp)
        .stdin(Stdio::null());
        cmd
    }

    /// Runs to completion and returns the `--json` document.
    fn complete(&self) -> serde_json::Value {
        let out = self.command().output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn run_dir(&self) -> PathBuf {
        self.dir.join("runs/threshold")
    }

    /// Where a run killed now was: the last thing it had started, read from the run
    /// directory (test trials, a proposal being validated, or search trials).
    fn phase(&self) -> &'static str {
        let run = self.run_dir();
        if run.join("test").exists() {
            "finalize"
        } else if std::fs::read_dir(run.join("archive/pending"))
            .map(|d| {
                d.flatten()
                    .any(|e| !e.file_name().to_string_lossy().starts_with('.'))
            })
            .unwrap_or(false)
        {
            "proposing/validation"
        } else if run.join("hevo.db").exists() {
            "trials"
        } else {
            "start-up"
        }
    }
}

/// One trial row, as comparable across runs: candidate name and params, task, index; then
/// outcome and status.
type Units = BTreeMap<(String, String, String, i64), (f64, String)>;

/// Every trial of a store, asserting that no unit appears twice.
fn units(db: &Path) -> Units {
    let c = rusqlite::Connection::open(db).unwrap();
    let duplicated: i64 = c
        .query_row(
            "SELECT COUNT(*) FROM (SELECT 1 FROM trials GROUP BY run_id, candidate_id, task_id, \
             trial_index HAVING COUNT(*) > 1)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(duplicated, 0, "{}: duplicated trials", db.display());
    let mut stmt = c
        .prepare(
            "SELECT c.name, c.params, t.task_id, t.trial_index, t.outcome, t.status \
             FROM trials t JOIN candidates c ON c.id = t.candidate_id",
        )
        .unwrap();
    let rows = stmt
        .query_map([], |r| {
            Ok((
                (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?),
                (r.get(4)?, r.get(5)?),
            ))
        })
        .unwrap();
    let mut out = Units::new();
    for row in rows {
        let (key, value) = row.unwrap();
        assert!(
            out.insert(key, value).is_none(),
            "{}: duplicated trial",
            db.display()
        );
    }
    out
}

/// One estimate row: candidate, label, value, lower bound, estimator, tasks used.
type EstimateRow = (String, String, Option<f64>, Option<f64>, String, i64);

/// The estimates table, by candidate name and label.
fn estimates(db: &Path) -> Vec<EstimateRow> {
    let c = rusqlite::Connection::open(db).unwrap();
    let mut stmt = c
        .prepare(
            "SELECT c.name, e.label, e.value, e.ci_low, e.estimator, e.tasks_used FROM estimates e \
             JOIN candidates c ON c.id = e.candidate_id ORDER BY c.name, e.label",
        )
        .unwrap();
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        })
        .unwrap();
    rows.map(Result::unwrap).collect()
}

/// Processes whose command line or working directory lies under `root`.
fn processes_under(root: &Path) -> Vec<String> {
    let root = root.to_string_lossy().into_owned();
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.parse::<u32>().is_err() {
            continue;
        }
        let cmdline = std::fs::read(e.path().join("cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        let cwd = std::fs::read_link(e.path().join("cwd"))
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        if cmdline.contains(&root) || cwd.starts_with(&root) {
            found.push(format!("{name}: {cmdline} (in {cwd})"));
        }
    }
    found
}

/// Leftover trial working directories and socket directories.
fn leftovers(tmp: &Path) -> Vec<String> {
    std::fs::read_dir(tmp)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("hevo-trial-") || n.starts_with("hevo-sock-"))
        .collect()
}

/// A seeded generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}={v} is not a number"))
        })
        .unwrap_or(default)
}

#[test]
fn a_search_killed_at_random_moments_resumes_to_the_same_result() {
    let kills = env_number("HEVO_CHAOS_KILLS", 4);
    let mut rng = Rng(env_number("HEVO_CHAOS_SEED", 12) | 1);
    let root = tempfile::tempdir().unwrap();

    let reference = Search::new(&root.path().join("reference"));
    let started = Instant::now();
    let reference_doc = reference.complete();
    let reference_wall = started.elapsed();

    // Kill at a uniform moment of a window sized so that the kills spread over the whole
    // run (2/kills of the uninterrupted run's wall time); a resumed run skips what is done,
    // so the kills move on through trials, proposals, validation and finalize.
    let window_ms = (reference_wall.as_millis() as u64 * 2 / kills.max(1)).max(200);
    let chaos = Search::new(&root.path().join("chaos"));
    let mut landed: BTreeMap<&str, u64> = BTreeMap::new();
    let mut attempts = 0;
    let mut completed_early = 0;
    while landed.values().sum::<u64>() < kills {
        attempts += 1;
        assert!(
            attempts <= 4 * kills + 20,
            "{attempts} attempts for {kills} kills"
        );
        let delay = Duration::from_millis(rng.next() % window_ms);
        let log = root.path().join("chaos-stderr.log");
        let mut child = chaos
            .command()
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        if let Some(status) = child.try_wait().unwrap() {
            // It finished before the kill: complete, or a failure to report.
            assert!(
                status.success(),
                "a resumed run failed by itself ({status}):\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            completed_early += 1;
            break;
        }
        let phase = chaos.phase();
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        *landed.entry(phase).or_default() += 1;
    }
    let chaos_doc = chaos.complete();
    eprintln!(
        "chaos: {} kills landed {landed:?}, {completed_early} runs completed before their kill, \
         {attempts} starts; the uninterrupted run took {reference_wall:?}",
        landed.values().sum::<u64>()
    );

    // Every unit present, none twice, with the same outcomes: search and test stores alike.
    for db in ["hevo.db", "test/hevo.db"] {
        let want = units(&reference.run_dir().join(db));
        let got = units(&chaos.run_dir().join(db));
        assert!(!want.is_empty(), "{db}: the reference ran no trial");
        let lost: Vec<_> = want.keys().filter(|k| !got.contains_key(*k)).collect();
        let extra: Vec<_> = got.keys().filter(|k| !want.contains_key(*k)).collect();
        assert!(lost.is_empty(), "{db}: lost trials {lost:?}");
        assert!(
            extra.is_empty(),
            "{db}: trials the reference has not {extra:?}"
        );
        assert_eq!(got, want, "{db}: outcomes differ");
        assert_eq!(
            estimates(&chaos.run_dir().join(db)),
            estimates(&reference.run_dir().join(db)),
            "{db}: estimates differ"
        );
    }
    // The same picks, candidate estimates and test results.
    for key in [
        "pick",
        "runner_up",
        "candidates",
        "rejected",
        "iterations_done",
    ] {
        assert_eq!(chaos_doc[key], reference_doc[key], "`{key}` differs");
    }
    // Test results, without the timings (wall time differs between any two runs).
    let test = |doc: &serde_json::Value| -> BTreeMap<String, Vec<serde_json::Value>> {
        let keys = [
            "pass_rate",
            "ci_low",
            "ci_high",
            "role",
            "val_estimate",
            "trials",
        ];
        doc["test"]
            .as_object()
            .unwrap_or_else(|| panic!("no test results: {doc}"))
            .iter()
            .map(|(name, r)| (name.clone(), keys.iter().map(|k| r[*k].clone()).collect()))
            .collect()
    };
    assert_eq!(
        test(&chaos_doc),
        test(&reference_doc),
        "test results differ"
    );
    // Every candidate's `scores.json`, by its archive directory.
    let scores = |s: &Search| -> BTreeMap<String, String> {
        let dir = s.run_dir().join("archive/candidates");
        std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| {
                let text = std::fs::read_to_string(e.path().join("scores.json"))
                    .unwrap_or_else(|err| panic!("{}: {err}", e.path().display()));
                (e.file_name().to_string_lossy().into_owned(), text)
            })
            .collect()
    };
    let want = scores(&reference);
    assert!(want.len() > 1, "{want:?}");
    assert_eq!(scores(&chaos), want, "scores.json differs");

    // Nothing left behind.
    for search in [&reference, &chaos] {
        assert_eq!(
            leftovers(&search.tmp),
            Vec::<String>::new(),
            "leftover directories"
        );
    }
    assert_eq!(
        processes_under(root.path()),
        Vec::<String>::new(),
        "leftover processes"
    );
}
