//! `[executor] kind = "slurm"` against a real single-node Slurm cluster (started by
//! `.ci/slurm-up.sh`): jobs really pass through the scheduler, a job cancelled from outside
//! is an infra fault and is retried, and a hevo killed mid-run re-attaches to its running
//! jobs instead of submitting them again.
//!
//! Without a cluster these tests say so and pass, unless `HEVO_TEST_SLURM=1` (set by
//! `.ci/run`), which makes a missing cluster a failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn hevo() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hevo"))
}

fn cluster() -> bool {
    let up = Command::new("sinfo")
        .args(["-h", "-o", "%P"])
        .output()
        .map(|o| o.status.success() && !o.stdout.is_empty())
        .unwrap_or(false);
    if !up {
        assert!(
            std::env::var("HEVO_TEST_SLURM").as_deref() != Ok("1"),
            "HEVO_TEST_SLURM=1 but no Slurm cluster answers (run .ci/slurm-up.sh as root)"
        );
        eprintln!("SKIPPED: no Slurm cluster here (sinfo failed); run .ci/slurm-up.sh as root");
    }
    up
}

/// A search directory whose harness runs `body` (bash) and answers the task's input; a
/// small val split, so a run is a few dozen jobs.
fn setup(tmp: &Path, body: &str, tasks: usize) -> PathBuf {
    let dir = tmp.join("search");
    std::fs::create_dir_all(dir.join("seed")).unwrap();
    std::fs::write(
        dir.join("seed/harness.toml"),
        "name = \"seed\"\nentry = [\"bash\", \"h.sh\"]\n[params]\nk = { values = [1, 2], default = 1 }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("seed/h.sh"),
        format!("input=$(cat)\n{body}\necho \"$input\"\n"),
    )
    .unwrap();
    std::fs::write(
        dir.join("suite.toml"),
        "name = \"echo\"\n[scorer]\nkind = \"exact\"\n",
    )
    .unwrap();
    let mut lines =
        vec!["{\"id\":\"tr\",\"split\":\"train\",\"input\":\"a\",\"expected\":\"a\"}".to_string()];
    for i in 0..tasks {
        lines.push(format!(
            "{{\"id\":\"v{i}\",\"split\":\"val\",\"input\":\"x{i}\",\"expected\":\"x{i}\"}}"
        ));
    }
    std::fs::write(dir.join("tasks.jsonl"), lines.join("\n") + "\n").unwrap();
    std::fs::write(
        dir.join("hevo.toml"),
        "suite = \".\"\nseeds = [\"seed\"]\nseed = 3\n[model]\n\
         [search]\niterations = 1\ncandidates_per_iteration = 1\njobs = 2\n\
         [evaluation]\nstrategy = \"full\"\n\
         [executor]\nkind = \"slurm\"\n",
    )
    .unwrap();
    dir
}

fn run(dir: &Path, tmp: &Path) -> std::process::Output {
    hevo()
        .args(["run", "--json", "--no-progress"])
        .arg(dir)
        .env("TMPDIR", tmp)
        .output()
        .unwrap()
}

fn db(dir: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(dir.join("runs/search/hevo.db")).unwrap()
}

/// Job ids of the queued or running jobs hevo submitted from this test (by work dir).
fn our_jobs(tmp: &Path) -> Vec<String> {
    let out = Command::new("squeue")
        .args(["-h", "-o", "%i %j %Z"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(" hevo-") && l.contains(&*tmp.to_string_lossy()))
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect()
}

#[test]
fn a_search_runs_every_trial_as_a_slurm_job() {
    if !cluster() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = setup(tmp.path(), "true", 4);
    let out = run(&dir, tmp.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let trials: i64 = db(&dir)
        .query_row("SELECT COUNT(*) FROM trials", [], |r| r.get(0))
        .unwrap();
    // Every trial (and the smoke trial) was its own job, and the scheduler ran each one.
    let spool = dir.join("runs/search/slurm");
    let jobs: Vec<String> = std::fs::read_dir(&spool)
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.unwrap().path().join("job_id")).ok())
        .collect();
    assert!(trials >= 8, "{trials}");
    assert!(
        jobs.len() as i64 > trials,
        "{} jobs for {trials} trials",
        jobs.len()
    );
    for id in &jobs {
        let out = Command::new("scontrol")
            .args(["show", "job", "-o", id])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("JobState=COMPLETED"), "job {id}: {text}");
        assert!(text.contains("JobName=hevo-"), "job {id}: {text}");
    }
}

#[test]
fn a_job_cancelled_from_outside_is_an_infra_fault_and_is_retried() {
    if !cluster() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let marker = tmp.path().join("first-attempt");
    // The first attempt of task v0 waits to be cancelled; the retry answers at once.
    let dir = setup(
        tmp.path(),
        &format!(
            "if [ \"$input\" = '\"x0\"' ] && [ ! -e '{m}' ]; then touch '{m}'; sleep 120; fi",
            m = marker.display()
        ),
        2,
    );
    let child = hevo()
        .args(["run", "--json", "--no-progress"])
        .arg(&dir)
        .env("TMPDIR", tmp.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut cancelled = false;
    for _ in 0..600 {
        if marker.exists() {
            let out = Command::new("squeue")
                .args(["-h", "-t", "RUNNING", "-o", "%i %Z"])
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            // The one job still running is the sleeping first attempt.
            if let Some(id) = text
                .lines()
                .filter(|l| l.contains(&*tmp.path().to_string_lossy()))
                .map(|l| l.split_whitespace().next().unwrap().to_string())
                .next()
            {
                std::thread::sleep(Duration::from_millis(500));
                assert!(Command::new("scancel").arg(&id).status().unwrap().success());
                cancelled = true;
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(cancelled, "the sleeping job never showed up in squeue");
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (status, attempts): (String, i64) = db(&dir)
        .query_row(
            "SELECT t.status, t.attempts FROM trials t JOIN candidates c ON c.id = t.candidate_id
             WHERE t.task_id = 'v0' AND c.name = 'seed'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((status.as_str(), attempts), ("pass", 2));
}

#[test]
fn a_killed_hevo_reattaches_to_its_running_jobs_without_duplicates() {
    if !cluster() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("starts.log");
    let dir = setup(
        tmp.path(),
        &format!("echo \"$HEVO_TRIAL_ID\" >> '{}'; sleep 6", log.display()),
        3,
    );
    let mut child = hevo()
        .args(["run", "--json", "--no-progress"])
        .arg(&dir)
        .env("TMPDIR", tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kill hevo (SIGKILL) once Phase 0's jobs are running.
    let mut running = Vec::new();
    for _ in 0..600 {
        running = our_jobs(tmp.path());
        let started = std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .count();
        if running.len() >= 2 && started >= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(running.len() >= 2, "no jobs ran: {running:?}");
    child.kill().unwrap();
    child.wait().unwrap();
    // The jobs outlive hevo; the same command re-attaches to them.
    let out = run(&dir, tmp.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let starts = std::fs::read_to_string(&log).unwrap();
    let mut ids: Vec<&str> = starts.lines().collect();
    let n = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n, "a trial ran twice:\n{starts}");
    let trials: i64 = db(&dir)
        .query_row("SELECT COUNT(*) FROM trials", [], |r| r.get(0))
        .unwrap();
    assert!(trials >= 6, "{trials}");
}
