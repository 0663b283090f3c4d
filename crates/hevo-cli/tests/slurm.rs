//! `[executor] kind = "slurm"` against a real single-node Slurm cluster (started by
//! `.ci/slurm-up.sh`): jobs really pass through the scheduler, launches that arrive together
//! run as one job array, a job (or array element) cancelled from outside is an infra fault
//! and is retried, a hevo killed mid-run re-attaches to its running jobs and reads back the
//! ones that finished while it was down instead of submitting them again (command scorers
//! then see what those jobs left), and a harness calls a scripted model through the gateway
//! bound to this machine's non-loopback address; what sbatch refuses is reported with its
//! cause, named once, and what the cluster cannot run (a partition it lacks, an array
//! larger than its `MaxArraySize`, a missing Slurm command) is refused before any work;
//! jobs waiting in the queue are reported while they wait; a controller outage fails no
//! trial, is told, and a run stopped during one re-attaches to its jobs when resumed;
//! nothing is left in the spool.
//!
//! Without a cluster these tests say so and pass, unless `HEVO_TEST_SLURM=1` (set by
//! `.ci/run`), which makes a missing cluster a failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

mod support;

use support::upstream::PythonServer;

/// The built hevo, given the scripted upstream's key ([`scripted_model`]) as a user's
/// provider key would be.
fn hevo() -> Command {
    let mut hevo = Command::new(env!("CARGO_BIN_EXE_hevo"));
    hevo.env("HEVO_TEST_SCRIPTED_API_KEY", "upstream-secret");
    hevo
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
    setup_with(tmp, body, tasks, &Setup::default())
}

/// What a test changes in [`setup`]'s search.
struct Setup {
    /// `[search] jobs`.
    jobs: u32,
    /// More `[executor]` lines.
    executor: String,
    /// The `command` scorer checking `out.txt` in the working directory instead of `exact`.
    command_scorer: bool,
    /// The whole `[model]` table and anything after it (default: an empty `[model]`).
    model: String,
    /// The harness entry (default bash `h.sh`).
    entry: String,
    /// More `harness.toml` lines (e.g. `timeout_s`).
    harness: String,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            jobs: 2,
            executor: String::new(),
            command_scorer: false,
            model: "[model]\n".into(),
            entry: "[\"bash\", \"h.sh\"]".into(),
            harness: String::new(),
        }
    }
}

fn setup_with(tmp: &Path, body: &str, tasks: usize, s: &Setup) -> PathBuf {
    let dir = tmp.join("search");
    std::fs::create_dir_all(dir.join("seed")).unwrap();
    std::fs::write(
        dir.join("seed/harness.toml"),
        format!(
            "name = \"seed\"\nentry = {}\n{}\n[params]\nk = {{ values = [1, 2], default = 1 }}\n",
            s.entry, s.harness
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("seed/h.sh"),
        format!("input=$(cat)\n{body}\necho \"$input\"\n"),
    )
    .unwrap();
    let scorer = if s.command_scorer {
        // Passes when the job left its input in `out.txt` in the trial's working directory.
        std::fs::write(
            dir.join("check.py"),
            "import json, sys\nd = json.load(sys.stdin)\n\
             sys.exit(0 if open('out.txt').read().strip() == json.dumps(d['input']) else 1)\n",
        )
        .unwrap();
        "kind = \"command\"\ncommand = [\"python3\", \"{suite}/check.py\"]\n"
    } else {
        "kind = \"exact\"\n"
    };
    std::fs::write(
        dir.join("suite.toml"),
        format!("name = \"echo\"\n[scorer]\n{scorer}"),
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
        format!(
            "suite = \".\"\nseeds = [\"seed\"]\nseed = 3\n\
             [search]\niterations = 1\ncandidates_per_iteration = 1\njobs = {}\n\
             [evaluation]\nstrategy = \"full\"\n\
             [executor]\nkind = \"slurm\"\n{}\n{}",
            s.jobs, s.executor, s.model
        ),
    )
    .unwrap();
    dir
}

/// `(job id, spooled stdin)` of every launch in the run's spool.
fn spooled(dir: &Path) -> Vec<(String, String)> {
    let spool = dir.join("runs/search/slurm");
    std::fs::read_dir(&spool)
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let id = std::fs::read_to_string(e.path().join("job_id")).ok()?;
                    let stdin = std::fs::read_to_string(e.path().join("stdin")).ok()?;
                    Some((id.trim().to_string(), stdin.trim().to_string()))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `scontrol show job -o` of every job this test's hevo submitted (each starts in the run's
/// spool, under `tmp`), ended ones included while Slurm keeps them (`MinJobAge`).
fn our_job_records(tmp: &Path) -> Vec<String> {
    let out = Command::new("scontrol")
        .args(["show", "job", "-o"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| field(l, "WorkDir=").is_some_and(|w| w.starts_with(&*tmp.to_string_lossy())))
        .map(str::to_string)
        .collect()
}

/// What is left in the run's spool: its entries, and those of `arrays/`, which stays.
fn spool_left(dir: &Path) -> Vec<PathBuf> {
    let spool = dir.join("runs/search/slurm");
    let entries = |d: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(d)
            .map(|e| e.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    };
    let arrays = spool.join("arrays");
    let mut left: Vec<PathBuf> = entries(&spool)
        .into_iter()
        .filter(|p| *p != arrays)
        .collect();
    left.extend(entries(&arrays));
    left
}

fn scontrol(id: &str) -> String {
    let out = Command::new("scontrol")
        .args(["show", "job", "-o", id])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.split_whitespace().find_map(|w| w.strip_prefix(key))
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

/// `(candidate id, status, attempts)` of every trial in the run's store.
fn trial_rows(dir: &Path) -> Vec<(String, String, i64)> {
    let conn = db(dir);
    let mut st = conn
        .prepare("SELECT CAST(candidate_id AS TEXT), status, attempts FROM trials")
        .unwrap();
    let rows = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    rows
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
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // --no-progress: no line about the queue either.
    assert!(!stderr.contains("slurm:"), "{stderr}");
    let trials: i64 = db(&dir)
        .query_row("SELECT COUNT(*) FROM trials", [], |r| r.get(0))
        .unwrap();
    // Every trial (and the smoke trial) was its own job, and the scheduler ran each one.
    let jobs = our_job_records(tmp.path());
    assert!(trials >= 8, "{trials}");
    assert!(
        jobs.len() as i64 > trials,
        "{} jobs for {trials} trials",
        jobs.len()
    );
    for text in &jobs {
        assert!(text.contains("JobState=COMPLETED"), "{text}");
        assert!(text.contains("JobName=hevo-"), "{text}");
        // The harness's default limit (120 s), in whole minutes, plus one.
        assert!(text.contains("TimeLimit=00:03:00"), "{text}");
    }
    // Every outcome is read and recorded: no spool directory is left.
    assert_eq!(spool_left(&dir), Vec::<PathBuf>::new());
}

/// Once `marker` exists (the first attempt of task v0 left it and sleeps), cancels that
/// attempt's job from outside with `scancel`: the launch whose spooled stdin is v0's input,
/// running (a plain job or an array element `A_i`; other trials may run beside it). False
/// if it never showed up within a minute.
fn scancel_sleeping_v0(dir: &Path, marker: &Path) -> bool {
    for _ in 0..600 {
        if marker.exists() {
            let sleeping = spooled(dir).into_iter().find(|(id, stdin)| {
                stdin == "\"x0\"" && field(&scontrol(id), "JobState=") == Some("RUNNING")
            });
            if let Some((id, _)) = sleeping {
                std::thread::sleep(Duration::from_millis(500));
                assert!(Command::new("scancel").arg(&id).status().unwrap().success());
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
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
    assert!(
        scancel_sleeping_v0(&dir, &marker),
        "the sleeping job never showed up in squeue"
    );
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
    // The command scorer checks out.txt, which a re-attached job wrote in the killed hevo's
    // working directory.
    let setup = Setup {
        command_scorer: true,
        ..Setup::default()
    };
    let dir = setup_with(
        tmp.path(),
        &format!(
            "echo \"$HEVO_TRIAL_ID\" >> '{}'; sleep 6; printf '%s' \"$input\" > out.txt",
            log.display()
        ),
        3,
        &setup,
    );
    kill_hevo_mid_run(&dir, tmp.path(), &log, 2);
    // The jobs outlive hevo; the same command re-attaches to them.
    assert!(!our_jobs(tmp.path()).is_empty());
    let out = run(&dir, tmp.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_no_trial_ran_twice(&log);
    let statuses: Vec<String> = {
        let conn = db(&dir);
        let mut st = conn.prepare("SELECT status FROM trials").unwrap();
        let v = st
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        v
    };
    assert!(statuses.len() >= 6, "{statuses:?}");
    assert!(statuses.iter().all(|s| s == "pass"), "{statuses:?}");
    // The re-attached jobs' spool directories went once their outcomes were read.
    assert_eq!(spool_left(&dir), Vec::<PathBuf>::new());
}

#[test]
fn launches_that_arrive_together_run_as_one_job_array() {
    if !cluster() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let setup = Setup {
        jobs: 4,
        executor: "array_max = 3\narray_throttle = 2".into(),
        ..Setup::default()
    };
    let dir = setup_with(tmp.path(), "sleep 1", 8, &setup);
    let out = run(&dir, tmp.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let passed: i64 = db(&dir)
        .query_row(
            "SELECT COUNT(*) FROM trials WHERE status = 'pass'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(passed >= 16, "{passed}");
    // Array elements: element i of array A, each COMPLETED in scontrol, which Slurm ran
    // with the throttle asked for; no array is larger than array_max.
    let mut arrays: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for info in our_job_records(tmp.path()) {
        let (Some(array), Some(index)) =
            (field(&info, "ArrayJobId="), field(&info, "ArrayTaskId="))
        else {
            continue;
        };
        assert_eq!(field(&info, "JobState="), Some("COMPLETED"), "{info}");
        assert_eq!(field(&info, "ArrayTaskThrottle="), Some("2"), "{info}");
        assert!(
            field(&info, "JobName=").is_some_and(|n| n.starts_with("hevo-array-")),
            "{info}"
        );
        arrays
            .entry(array.to_string())
            .or_default()
            .push(index.to_string());
    }
    assert!(!arrays.is_empty(), "no launch ran as an array element");
    assert!(arrays.values().all(|e| e.len() <= 3), "{arrays:?}");
    assert!(arrays.values().any(|e| e.len() >= 2), "{arrays:?}");
    // The array's script, as the controller keeps it, runs the element of its index.
    let array = arrays.keys().next().unwrap();
    let script = Command::new("scontrol")
        .args(["write", "batch_script", array, "-"])
        .output()
        .unwrap();
    let script = String::from_utf8_lossy(&script.stdout);
    assert!(script.contains("SLURM_ARRAY_TASK_ID"), "{script}");
    // Nothing of the arrays is left in the spool either.
    assert_eq!(spool_left(&dir), Vec::<PathBuf>::new());
}

/// Waits until none of the test's jobs is queued or running.
fn wait_for_our_jobs_to_end(tmp: &Path) {
    for _ in 0..1200 {
        if our_jobs(tmp).is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the jobs never ended: {:?}", our_jobs(tmp));
}

/// Starts `hevo run` and SIGKILLs it once `started` trials have begun and at least two of
/// its jobs are queued or running.
fn kill_hevo_mid_run(dir: &Path, tmp: &Path, log: &Path, started: usize) {
    let mut child = hevo()
        .args(["run", "--json", "--no-progress"])
        .arg(dir)
        .env("TMPDIR", tmp)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut running = Vec::new();
    for _ in 0..600 {
        running = our_jobs(tmp);
        let n = std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .count();
        if running.len() >= 2 && n >= started {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(running.len() >= 2, "no jobs ran: {running:?}");
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Each trial id in the harness's start log appears once (no job was submitted twice).
fn assert_no_trial_ran_twice(log: &Path) -> usize {
    let starts = std::fs::read_to_string(log).unwrap();
    let mut ids: Vec<&str> = starts.lines().collect();
    let n = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n, "a trial ran twice:\n{starts}");
    n
}

#[test]
fn jobs_that_finished_while_hevo_was_down_are_read_back_not_resubmitted() {
    if !cluster() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("starts.log");
    // Each job logs its start, leaves its input in out.txt for the command scorer, then
    // answers after a while.
    let setup = Setup {
        jobs: 3,
        command_scorer: true,
        ..Setup::default()
    };
    let dir = setup_with(
        tmp.path(),
        &format!(
            "echo \"$HEVO_TRIAL_ID\" >> '{}'; printf '%s' \"$input\" > out.txt; sleep 4",
            log.display()
        ),
        3,
        &setup,
    );
    kill_hevo_mid_run(&dir, tmp.path(), &log, 2);
    let in_flight = our_jobs(tmp.path());
    // The jobs finish while no hevo runs; their results stay in the shared run directory.
    wait_for_our_jobs_to_end(tmp.path());
    let before = std::fs::read_to_string(&log).unwrap().lines().count();
    let out = run(&dir, tmp.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // No job ran twice: the ones that ended while hevo was down were not submitted again.
    let n = assert_no_trial_ran_twice(&log);
    assert!(
        before >= 2 && n > before,
        "{before} jobs before the kill, {n} in all"
    );
    // The trials of the jobs that ended while hevo was down are recorded with what those
    // jobs produced: their answer on stdout, and out.txt that the command scorer passed.
    let conn = db(&dir);
    let mut st = conn
        .prepare("SELECT task_id, status, answer FROM trials")
        .unwrap();
    let rows: Vec<(String, String, Option<String>)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(rows.len() >= 6, "{rows:?}");
    for (task, status, answer) in &rows {
        assert_eq!(status, "pass", "{rows:?}");
        let input = if task == "tr" {
            "a".to_string()
        } else {
            task.replace('v', "x")
        };
        assert_eq!(
            answer.as_deref(),
            Some(&*format!("\"{input}\"")),
            "{rows:?}"
        );
    }
    assert!(!in_flight.is_empty());
}

/// A scripted OpenAI chat-completions upstream on loopback: answers each request with the
/// last user message as the content. Prints its port first.
const ECHO_UPSTREAM: &str = r#"
import http.server, json
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = body["messages"][-1]["content"]
        out = json.dumps({"id": "c1", "object": "chat.completion", "created": 0,
            "model": body["model"], "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"#;

/// A harness calling the model with the real OpenAI SDK (base URL and key from the
/// environment hevo gives the job), logging the URL it was given, answering the reply.
const SDK_HARNESS: &str = r#"
import json, os, sys
from openai import OpenAI
task = json.loads(sys.stdin.readline())
with open(URL_LOG, "a") as f:
    f.write(os.environ["OPENAI_BASE_URL"] + "\n")
r = OpenAI().chat.completions.create(model="m", messages=[{"role": "user", "content": task}])
print(json.dumps(r.choices[0].message.content))
"#;

/// This machine's first non-loopback IPv4 address (`hostname -I`).
fn host_ip() -> Option<String> {
    let out = Command::new("hostname").arg("-I").output().ok()?;
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .find(|a| {
            a.parse::<std::net::Ipv4Addr>()
                .is_ok_and(|ip| !ip.is_loopback())
        })
        .map(str::to_string)
}

/// A `[model]` table routing model `m` to the scripted upstream on `port` (free of charge;
/// the upstream key from `HEVO_TEST_SCRIPTED_API_KEY`).
fn scripted_model(port: u16) -> String {
    format!(
        "[model]\ndefault_model = \"m\"\n\
         [[model.backends]]\nname = \"scripted\"\nkind = \"openai\"\n\
         base_url = \"http://127.0.0.1:{port}/v1\"\napi_key_env = \"HEVO_TEST_SCRIPTED_API_KEY\"\n\
         [[model.models]]\nname = \"m\"\nbackend = \"scripted\"\nupstream_model = \"up\"\n\
         [model.prices.\"up\"]\nfree = true\n"
    )
}

#[test]
fn slurm_jobs_call_the_model_through_the_gateway_on_the_advertised_address() {
    if !cluster() {
        return;
    }
    let ip = host_ip().expect("this machine has a non-loopback IPv4 address");
    let tmp = tempfile::tempdir().unwrap();
    let upstream = PythonServer::start(ECHO_UPSTREAM, &[]);
    let port = upstream.port;
    let urls = tmp.path().join("urls.log");
    let setup = Setup {
        entry: "[\"python3\", \"h.py\"]".into(),
        model: format!(
            "{}[gateway]\nbind = \"0.0.0.0:0\"\nadvertise = \"http://{ip}\"\n",
            scripted_model(port)
        ),
        ..Setup::default()
    };
    let dir = setup_with(tmp.path(), "", 3, &setup);
    // The job's environment is exactly what hevo gives it, so the log's path is in the code.
    std::fs::write(
        dir.join("seed/h.py"),
        SDK_HARNESS.replace("URL_LOG", &format!("{:?}", urls.display().to_string())),
    )
    .unwrap();
    let out = hevo()
        .args(["run", "--json", "--no-progress"])
        .arg(&dir)
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("notice: the model gateway listens on 0.0.0.0:"),
        "{stderr}"
    );
    // Every job was told the advertised address (with the bound port), never loopback.
    let told = std::fs::read_to_string(&urls).unwrap();
    assert!(told.lines().count() >= 7, "{told}");
    assert!(
        told.lines()
            .all(|u| u.starts_with(&format!("http://{ip}:")) && u.ends_with("/v1")),
        "{told}"
    );
    // Every trial passed on the model's answer and its call is in the ledger.
    let conn = db(&dir);
    let (trials, passed, calls): (i64, i64, i64) = conn
        .query_row(
            "SELECT (SELECT COUNT(*) FROM trials), \
                    (SELECT COUNT(*) FROM trials WHERE status = 'pass'), \
                    (SELECT COUNT(*) FROM model_calls WHERE task_id IS NOT NULL)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert!(trials >= 6, "{trials}");
    assert_eq!(passed, trials);
    assert!(calls >= trials, "{calls} calls for {trials} trials");
}

/// A harness that logs its trial id, sleeps (hevo is killed and restarted meanwhile), then
/// calls the model with the real OpenAI SDK and answers the reply.
const LATE_CALLER: &str = r#"
import json, os, sys, time
from openai import OpenAI
task = json.loads(sys.stdin.readline())
with open(START_LOG, "a") as f:
    f.write(os.environ["HEVO_TRIAL_ID"] + "\n")
time.sleep(8)
r = OpenAI().chat.completions.create(model="m", messages=[{"role": "user", "content": task}])
print(json.dumps(r.choices[0].message.content))
"#;

#[test]
fn a_job_reattached_after_a_restart_keeps_its_model_access() {
    if !cluster() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let upstream = PythonServer::start(ECHO_UPSTREAM, &[]);
    let port = upstream.port;
    let log = tmp.path().join("starts.log");
    // The gateway at its default, a free loopback port: the restarted hevo must take the
    // same port again, and the jobs' keys must be valid in the new gateway.
    let setup = Setup {
        entry: "[\"python3\", \"h.py\"]".into(),
        model: scripted_model(port),
        ..Setup::default()
    };
    let dir = setup_with(tmp.path(), "", 3, &setup);
    std::fs::write(
        dir.join("seed/h.py"),
        LATE_CALLER.replace("START_LOG", &format!("{:?}", log.display().to_string())),
    )
    .unwrap();
    kill_hevo_mid_run(&dir, tmp.path(), &log, 2);
    let port_before = std::fs::read_to_string(dir.join("runs/search/gateway.port")).unwrap();
    let waiting = our_jobs(tmp.path());
    assert!(!waiting.is_empty());
    let out = run(&dir, tmp.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("is taken"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(dir.join("runs/search/gateway.port")).unwrap(),
        port_before
    );
    assert_no_trial_ran_twice(&log);
    // Every trial passed on the model's answer, the re-attached ones included (their calls
    // came after the restart, with the keys the killed hevo gave them), and each trial's
    // call is in the ledger.
    let conn = db(&dir);
    let (trials, passed, calls): (i64, i64, i64) = conn
        .query_row(
            "SELECT (SELECT COUNT(*) FROM trials), \
                    (SELECT COUNT(*) FROM trials WHERE status = 'pass'), \
                    (SELECT COUNT(DISTINCT trial_key) FROM model_calls \
                     WHERE task_id IS NOT NULL AND status = 'ok')",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert!(trials >= 6, "{trials}");
    assert_eq!(passed, trials, "{stderr}");
    assert!(
        calls >= trials,
        "{calls} trials with calls of {trials} trials"
    );
}

#[test]
fn an_sbatch_refusal_stops_the_run_without_retries() {
    if !cluster() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // An option sbatch does not know: every submission is refused. The real sbatch is
    // called through a shim that counts the calls.
    let setup = Setup {
        executor: "sbatch = [\"--bogus\"]".into(),
        ..Setup::default()
    };
    let dir = setup_with(tmp.path(), "true", 3, &setup);
    let calls = tmp.path().join("sbatch-calls");
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let which = Command::new("which").arg("sbatch").output().unwrap();
    let sbatch = bin.join("sbatch");
    std::fs::write(
        &sbatch,
        format!(
            "#!/bin/sh\necho >> '{}'\nexec '{}' \"$@\"\n",
            calls.display(),
            String::from_utf8_lossy(&which.stdout).trim()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&sbatch, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let out = hevo()
        .args(["run", "--json"])
        .arg(&dir)
        .env("TMPDIR", tmp.path())
        .env("PATH", path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // A user error naming sbatch's cause once, not "run the same command again to retry".
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "the scheduler refused the job: sbatch failed: sbatch: unrecognized option '--bogus'"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("retrying cannot help"), "{stderr}");
    assert!(!stderr.contains("the scheduler :"), "{stderr}");
    assert!(!stderr.contains("to retry"), "{stderr}");
    // No retries, and no more submissions once refused: at most one call per job slot
    // (3 trials, 2 jobs; 9 calls with three attempts each). Nothing was recorded, so the
    // fixed configuration runs every trial.
    let n = std::fs::read_to_string(&calls).unwrap().lines().count();
    assert!((1..=2).contains(&n), "{n} sbatch calls: {stderr}");
    let trials: i64 = db(&dir)
        .query_row("SELECT COUNT(*) FROM trials", [], |r| r.get(0))
        .unwrap();
    assert_eq!(trials, 0);
    assert_eq!(spool_left(&dir), Vec::<PathBuf>::new());
}

/// `hevo run` on `dir`, quiet, with `path` as its PATH when given.
fn run_with_path(dir: &Path, tmp: &Path, path: Option<&Path>) -> std::process::Output {
    let mut hevo = hevo();
    hevo.args(["run", "--json", "--no-progress"])
        .arg(dir)
        .env("TMPDIR", tmp);
    if let Some(path) = path {
        hevo.env("PATH", path);
    }
    hevo.output().unwrap()
}

/// The line of `key = ` in `dir`'s hevo.toml (1-based).
fn line_of(dir: &Path, key: &str) -> usize {
    let text = std::fs::read_to_string(dir.join("hevo.toml")).unwrap();
    text.lines()
        .position(|l| l.starts_with(&format!("{key} = ")))
        .unwrap()
        + 1
}

/// An error of `hevo run` found before any work: exit code 2, naming `hevo.toml`, the line
/// of `key` in `[executor]` and `says`; no run directory was made, so no job was submitted.
fn assert_refused_at_start(dir: &Path, out: &std::process::Output, key: &str, says: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let at = format!("hevo.toml:{}: `executor.{key}`", line_of(dir, key));
    assert!(stderr.contains(&at), "wanted {at}: {stderr}");
    for s in says {
        assert!(stderr.contains(s), "wanted {s}: {stderr}");
    }
    assert!(!dir.join("runs").exists(), "{stderr}");
}

#[test]
fn a_partition_the_cluster_lacks_is_refused_before_any_work() {
    if !cluster() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let setup = Setup {
        executor: "partition = \"no-such-partition\"".into(),
        ..Setup::default()
    };
    let dir = setup_with(tmp.path(), "true", 1, &setup);
    let out = run(&dir, tmp.path());
    // The message lists the partitions sinfo lists here.
    let sinfo = Command::new("sinfo")
        .args(["-h", "-o", "%P"])
        .output()
        .unwrap();
    let first = String::from_utf8_lossy(&sinfo.stdout)
        .lines()
        .next()
        .unwrap()
        .trim_end_matches('*')
        .to_string();
    assert_refused_at_start(
        &dir,
        &out,
        "partition",
        &["no partition `no-such-partition`", &first],
    );
}

#[test]
fn a_missing_slurm_command_is_refused_before_any_work() {
    if !cluster() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // A PATH with every Slurm command hevo uses but sbatch.
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    for program in ["sinfo", "squeue", "scontrol", "scancel"] {
        let which = Command::new("which").arg(program).output().unwrap();
        let real = String::from_utf8_lossy(&which.stdout).trim().to_string();
        std::os::unix::fs::symlink(real, bin.join(program)).unwrap();
    }
    let dir = setup(tmp.path(), "true", 1);
    let out = run_with_path(&dir, tmp.path(), Some(&bin));
    assert_refused_at_start(&dir, &out, "kind", &["`sbatch` is not on PATH"]);
}

#[test]
fn an_array_max_above_the_clusters_max_array_size_is_refused() {
    if !cluster() {
        return;
    }
    let config = Command::new("scontrol")
        .args(["show", "config"])
        .output()
        .unwrap();
    let max: u32 = String::from_utf8_lossy(&config.stdout)
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == "MaxArraySize").then(|| v.trim().parse().unwrap())
        })
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let setup = Setup {
        executor: format!("array_max = {}", max + 1),
        ..Setup::default()
    };
    let dir = setup_with(tmp.path(), "true", 1, &setup);
    let out = run(&dir, tmp.path());
    assert_refused_at_start(
        &dir,
        &out,
        "array_max",
        &[&format!("MaxArraySize is {max}")],
    );
}

#[test]
fn an_sbatch_line_setting_an_option_hevo_sets_is_refused() {
    if !cluster() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // hevo passes --time on sbatch's command line, which wins over this `#SBATCH --time=1`:
    // the job would get hevo's limit without a word.
    let setup = Setup {
        executor: "sbatch = [\"--qos=normal\", \"--time=1\"]".into(),
        ..Setup::default()
    };
    let dir = setup_with(tmp.path(), "true", 1, &setup);
    let out = run(&dir, tmp.path());
    assert_refused_at_start(
        &dir,
        &out,
        "sbatch",
        &["has `--time=1`, which sets `--time`", "`timeout_s`"],
    );
}

#[test]
fn slurms_note_on_a_job_hevo_stopped_is_kept_in_the_stderr_trace() {
    if !cluster() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // Task v0's job outlives its 2 s limit: hevo's timer scancels it, and Slurm notes the
    // cancellation in the job's own output, which is in the spool only until hevo reads
    // the outcome.
    let setup = Setup {
        harness: "timeout_s = 2".into(),
        ..Setup::default()
    };
    let dir = setup_with(
        tmp.path(),
        "if [ \"$input\" = '\"x0\"' ]; then sleep 60; fi",
        2,
        &setup,
    );
    let out = run(&dir, tmp.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let (status, trace): (String, String) = db(&dir)
        .query_row(
            "SELECT t.status, t.trace_path FROM trials t JOIN candidates c ON c.id = t.candidate_id
             WHERE t.task_id = 'v0' AND c.name = 'seed'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(status, "timeout");
    let trace = std::fs::read_to_string(format!("{trace}.stderr")).unwrap();
    assert!(trace.contains("hevo: Slurm's output of job"), "{trace}");
    assert!(trace.contains("CANCELLED"), "{trace}");
    assert_eq!(spool_left(&dir), Vec::<PathBuf>::new());
}

#[test]
fn while_jobs_wait_in_the_queue_their_state_is_printed() {
    if !cluster() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // Held jobs wait in the queue (JobHeldUser) until the test releases them.
    let setup = Setup {
        executor: "sbatch = [\"--hold\"]".into(),
        ..Setup::default()
    };
    let dir = setup_with(tmp.path(), "true", 2, &setup);
    let mut hevo = Watched::start(&dir, tmp.path(), None);
    // Before any trial ends: the submission, then the jobs' state, all of them pending.
    if !hevo.wait_for("job(s) pending, 0 running", 120) {
        // Leave no hevo and no held job behind.
        hevo.child.kill().unwrap();
        hevo.child.wait().unwrap();
        for id in our_jobs(tmp.path()) {
            let _ = Command::new("scancel").arg(&id).output();
        }
    }
    let lines = || hevo.lines.lock().unwrap().clone();
    assert!(
        hevo.said("hevo:   slurm: ") && hevo.said("job(s) submitted (job "),
        "{:?}",
        lines()
    );
    assert!(hevo.said("job(s) pending, 0 running"), "{:?}", lines());
    assert!(!hevo.said("trials, mean outcome"), "{:?}", lines());
    // Release every job of the run (later batches are held too) until hevo ends.
    loop {
        for id in our_jobs(tmp.path()) {
            let _ = Command::new("scontrol").args(["release", &id]).output();
        }
        if hevo.child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let (status, lines) = hevo.end();
    assert!(status.success(), "{lines:?}");
}

#[test]
fn a_jobs_wait_in_the_queue_does_not_count_against_its_time_limit() {
    if !cluster() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // Held jobs wait in the queue three times as long as the harness's 2 s limit, then run
    // at once.
    let setup = Setup {
        executor: "sbatch = [\"--hold\"]".into(),
        harness: "timeout_s = 2".into(),
        ..Setup::default()
    };
    let dir = setup_with(tmp.path(), "true", 2, &setup);
    let mut child = hevo()
        .args(["run", "--json", "--no-progress"])
        .arg(&dir)
        .env("TMPDIR", tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    for _ in 0..600 {
        if !our_jobs(tmp.path()).is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(6));
    // Release every job of the run (later batches are held too) until hevo ends.
    let status = loop {
        for id in our_jobs(tmp.path()) {
            let _ = Command::new("scontrol").args(["release", &id]).output();
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "{stderr}");
    // Every trial passed on its first attempt: none was stopped as a timeout while queued.
    let rows = trial_rows(&dir);
    assert!(rows.len() >= 2, "{rows:?}");
    assert!(
        rows.iter().all(|(_, s, a)| s == "pass" && *a == 1),
        "{rows:?}"
    );
}

/// `hevo run --json` on `dir` (progress on), with `path` as its PATH when given, and its
/// stderr lines as they come.
struct Watched {
    child: std::process::Child,
    lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Watched {
    fn start(dir: &Path, tmp: &Path, path: Option<&str>) -> Watched {
        let mut hevo = hevo();
        hevo.args(["run", "--json"])
            .arg(dir)
            .env("TMPDIR", tmp)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(path) = path {
            hevo.env("PATH", path);
        }
        let mut child = hevo.spawn().unwrap();
        let lines: std::sync::Arc<std::sync::Mutex<Vec<String>>> = Default::default();
        let reader = {
            let lines = lines.clone();
            let stderr = child.stderr.take().unwrap();
            std::thread::spawn(move || {
                for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)) {
                    lines.lock().unwrap().push(line.unwrap());
                }
            })
        };
        Watched {
            child,
            lines,
            reader: Some(reader),
        }
    }

    /// Whether a line so far contains `what`.
    fn said(&self, what: &str) -> bool {
        self.lines.lock().unwrap().iter().any(|l| l.contains(what))
    }

    /// Waits up to `secs` for a line containing `what`; whether one came.
    fn wait_for(&self, what: &str, secs: u64) -> bool {
        for _ in 0..secs * 10 {
            if self.said(what) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    /// Waits for hevo to end; its status and every stderr line.
    fn end(mut self) -> (std::process::ExitStatus, Vec<String>) {
        let status = self.child.wait().unwrap();
        if let Some(r) = self.reader.take() {
            r.join().unwrap();
        }
        let lines = self.lines.lock().unwrap().clone();
        (status, lines)
    }
}

/// A `bin/` in `tmp` whose `squeue`, `scontrol`, `sbatch` and `scancel` say what the real
/// ones say when slurmctld is down (`Unable to contact slurm controller (connect
/// failure)`, exit 1; scancel 8) while `tmp/outage` exists, and whose `sbatch` also fails
/// so once when `tmp/sbatch-outage` exists (removing it); otherwise they run the real ones.
/// The jobs themselves run on the real cluster throughout, as they do in a real outage.
fn outage_shims(tmp: &Path) -> PathBuf {
    let bin = tmp.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let outage = tmp.join("outage");
    let once = tmp.join("sbatch-outage");
    for (name, said, code) in [
        (
            "squeue",
            "slurm_load_jobs error: Unable to contact slurm controller (connect failure)",
            1,
        ),
        (
            "scontrol",
            "slurm_load_jobs error: Unable to contact slurm controller (connect failure)",
            1,
        ),
        (
            "sbatch",
            "sbatch: error: Batch job submission failed: Unable to contact slurm controller \
             (connect failure)",
            1,
        ),
        (
            "scancel",
            "scancel: error: Kill job error on job id $1: Unable to contact slurm controller \
             (connect failure)",
            8,
        ),
    ] {
        let which = Command::new("which").arg(name).output().unwrap();
        let real = String::from_utf8_lossy(&which.stdout).trim().to_string();
        let sbatch_once = if name == "sbatch" {
            format!(
                "if [ -e '{o}' ]; then rm -f '{o}'; echo \"{said}\" >&2; exit {code}; fi\n",
                o = once.display()
            )
        } else {
            String::new()
        };
        let shim = bin.join(name);
        std::fs::write(
            &shim,
            format!(
                "#!/bin/sh\nif [ -e '{}' ]; then sleep 0.5; echo \"{said}\" >&2; exit {code}; fi\n\
                 {sbatch_once}exec '{real}' \"$@\"\n",
                outage.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&shim, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    }
    bin
}

#[test]
fn a_controller_outage_fails_no_trial_and_is_told_while_it_lasts() {
    if !cluster() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("starts.log");
    // Task v1's job runs through the whole outage; v0's ends during it; v2 and v3 are
    // launched during it.
    let dir = setup_with(
        tmp.path(),
        &format!(
            "echo \"$HEVO_TRIAL_ID\" >> '{}'; case \"$input\" in x1) sleep 14;; *) sleep 2;; esac",
            log.display()
        ),
        4,
        &Setup::default(),
    );
    let bin = outage_shims(tmp.path());
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let hevo = Watched::start(&dir, tmp.path(), Some(&path));
    assert!(hevo.wait_for("job(s) submitted (job ", 60));
    // The controller goes down for 8 s, then takes queries before it takes a submission.
    std::fs::write(tmp.path().join("outage"), "").unwrap();
    std::thread::sleep(Duration::from_secs(8));
    std::fs::write(tmp.path().join("sbatch-outage"), "").unwrap();
    std::fs::remove_file(tmp.path().join("outage")).unwrap();
    let (status, lines) = hevo.end();
    assert!(status.success(), "{lines:#?}");
    let told = |what: &str| lines.iter().filter(|l| l.contains(what)).count();
    assert_eq!(
        told("slurm: the controller cannot be reached ("),
        2,
        "the outage and the failed submission, each once: {lines:#?}"
    );
    assert!(
        told("Unable to contact slurm controller (connect failure)); hevo waits for it") == 2,
        "{lines:#?}"
    );
    assert_eq!(
        told("slurm: the controller answers again, after "),
        2,
        "{lines:#?}"
    );
    // The refused submission was sent again.
    assert!(!tmp.path().join("sbatch-outage").exists(), "{lines:#?}");
    // No trial failed, was retried or ran twice.
    let rows = trial_rows(&dir);
    assert!(rows.len() >= 8, "{rows:?}");
    assert!(
        rows.iter().all(|(_, s, a)| s == "pass" && *a == 1),
        "{rows:?}"
    );
    // Every trial's job started once (and the candidate's smoke test on the train task).
    assert!(assert_no_trial_ran_twice(&log) > rows.len());
    assert_eq!(spool_left(&dir), Vec::<PathBuf>::new());
}

#[test]
fn a_run_stopped_during_an_outage_ends_and_its_resume_reattaches_to_the_jobs() {
    if !cluster() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("starts.log");
    let dir = setup_with(
        tmp.path(),
        &format!("echo \"$HEVO_TRIAL_ID\" >> '{}'; sleep 12", log.display()),
        2,
        &Setup::default(),
    );
    let bin = outage_shims(tmp.path());
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let hevo = Watched::start(&dir, tmp.path(), Some(&path));
    let started = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .count()
    };
    for _ in 0..600 {
        if started() == 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(started(), 2, "the jobs never started");
    std::fs::write(tmp.path().join("outage"), "").unwrap();
    assert!(hevo.wait_for("the controller cannot be reached", 60));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(hevo.child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    // hevo does not wait for the controller to cancel the jobs: they run on, and their
    // spool directories are kept.
    let (status, lines) = hevo.end();
    assert_eq!(status.code(), Some(130), "{lines:#?}");
    let running = our_jobs(tmp.path());
    assert_eq!(running.len(), 2, "{running:?} {lines:#?}");
    assert_eq!(spooled(&dir).len(), 2, "{lines:#?}");
    // The controller is back: the same command re-attaches to the jobs.
    std::fs::remove_file(tmp.path().join("outage")).unwrap();
    let out = run(&dir, tmp.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_no_trial_ran_twice(&log);
    let seed: Vec<(String, String, i64)> = trial_rows(&dir)
        .into_iter()
        .filter(|(c, ..)| c == "1")
        .collect();
    assert_eq!(seed, vec![("1".to_string(), "pass".to_string(), 1); 2]);
    assert_eq!(spool_left(&dir), Vec::<PathBuf>::new());
}

/// A harness that calls the model once (the real OpenAI SDK), then, on the first attempt of
/// task v0 only, leaves MARKER and sleeps until it is cancelled; it answers its input.
const CALL_THEN_SLEEP: &str = r#"
import json, os, sys, time
from openai import OpenAI
task = json.loads(sys.stdin.readline())
OpenAI().chat.completions.create(model="m", messages=[{"role": "user", "content": task}])
if task == "x0" and not os.path.exists(MARKER):
    open(MARKER, "w").close()
    time.sleep(120)
print(json.dumps(task))
"#;

#[test]
fn the_calls_of_an_attempt_the_scheduler_lost_count_in_its_trial() {
    if !cluster() {
        return;
    }
    let ip = host_ip().expect("this machine has a non-loopback IPv4 address");
    let tmp = tempfile::tempdir().unwrap();
    let upstream = PythonServer::start(ECHO_UPSTREAM, &[]);
    let marker = tmp.path().join("first-attempt");
    let setup = Setup {
        entry: "[\"python3\", \"h.py\"]".into(),
        model: format!(
            "{}[gateway]\nbind = \"0.0.0.0:0\"\nadvertise = \"http://{ip}\"\n",
            scripted_model(upstream.port)
        ),
        ..Setup::default()
    };
    let dir = setup_with(tmp.path(), "", 2, &setup);
    std::fs::write(
        dir.join("seed/h.py"),
        CALL_THEN_SLEEP.replace("MARKER", &format!("{:?}", marker.display().to_string())),
    )
    .unwrap();
    let mut child = hevo()
        .args(["run", "--json", "--no-progress"])
        .arg(&dir)
        .env("TMPDIR", tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The first attempt of v0 made its call and sleeps: cancel its job from outside.
    let cancelled = scancel_sleeping_v0(&dir, &marker);
    if !cancelled {
        child.kill().unwrap();
    }
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(cancelled, "the sleeping job never showed up: {stderr}");
    assert!(status.success(), "{stderr}");
    // v0's row counts the calls of both attempts, as the ledger does.
    let (attempts, calls, input, ledger, ledger_input): (i64, i64, i64, i64, i64) = db(&dir)
        .query_row(
            "SELECT t.attempts, t.model_calls, t.input_tokens,
                    (SELECT COUNT(*) FROM model_calls m WHERE m.candidate_id = t.candidate_id
                       AND m.task_id = 'v0' AND m.trial_index = 0),
                    (SELECT SUM(input_tokens) FROM model_calls m
                       WHERE m.candidate_id = t.candidate_id AND m.task_id = 'v0'
                       AND m.trial_index = 0)
             FROM trials t JOIN candidates c ON c.id = t.candidate_id
             WHERE t.task_id = 'v0' AND c.name = 'seed'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )
        .unwrap();
    assert_eq!((attempts, ledger), (2, 2), "{stderr}");
    assert_eq!((calls, input), (ledger, ledger_input), "{stderr}");
}
