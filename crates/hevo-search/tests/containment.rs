//! Agents and proposers as attackers, through the real search: what they leave in their
//! workspace or in `pending/` must never make hevo run their commands on the host, copy a
//! file a link of theirs names, or hang it.
//!
//! Each test runs `run_search` with a scripted agent (bash, through the real agent launch
//! path) on `examples/threshold`, in a thread with a generous watchdog: a hang fails the
//! test instead of blocking it. The agents run unsandboxed here (`LocalLauncher`), so they
//! could write anything themselves; the tests check only what *hevo* did with their files.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hevo_runtime::cancel::Cancel;
use hevo_runtime::launch::LocalLauncher;
use hevo_runtime::model_access::ModelEnv;
use hevo_search::config::RunConfig;
use hevo_search::harnesspro::EpochRecord;
use hevo_search::proposer::AgentProposer;
use hevo_search::run::{run_search, SearchError, SearchReport};
use hevo_search::runner::{LiveRunner, RunnerSettings};

mod support;
use support::{copy, repo_root};

/// Long enough for any machine; only a hang reaches it.
const WATCHDOG: Duration = Duration::from_secs(900);

/// `examples/threshold` (a bash seed, 20 train, 40 val, test tasks) with `config`.
fn setup(config: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("search");
    copy(&repo_root().join("examples/threshold"), &dir);
    std::fs::write(
        dir.join("hevo.toml"),
        format!("suite = \".\"\nseeds = [\"seed\"]\nseed = 11\n[model]\n{config}"),
    )
    .unwrap();
    (tmp, dir)
}

/// The run directory of [`search`].
fn run_dir(dir: &Path) -> PathBuf {
    dir.join("runs/attack")
}

/// Runs the search in `dir` with the agent `script` (bash; `env` added to its environment)
/// on another thread; its result and log, or a panic when it outlives [`WATCHDOG`].
fn search(
    dir: &Path,
    script: &str,
    env: Vec<(String, String)>,
) -> (Result<SearchReport, SearchError>, String) {
    let script_path = dir.join("agent.sh");
    std::fs::write(&script_path, script).unwrap();
    let dir = dir.to_path_buf();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (config, file) = RunConfig::load(&dir).unwrap();
        let run_dir = run_dir(&dir);
        let launcher: Arc<dyn hevo_runtime::launch::Launcher> = Arc::new(LocalLauncher::default());
        let mut runner = LiveRunner::open(RunnerSettings {
            run_dir: run_dir.clone(),
            suite_dir: dir.clone(),
            trials: 1,
            jobs: 2,
            model_env: ModelEnv::offline(),
            model_access: None,
            launcher: launcher.clone(),
            cancel: Cancel::new(),
            progress: None,
        })
        .unwrap();
        let mut agent = AgentProposer {
            command: vec![
                "bash".into(),
                script_path.to_string_lossy().into_owned(),
                "{prompt}".into(),
            ],
            timeout: Duration::from_secs(120),
            transcripts: run_dir.join("proposer"),
            home: run_dir.join("proposer/home"),
            env,
            model_env: ModelEnv::offline(),
            launcher,
            cancel: Cancel::new(),
            hidden: Vec::new(),
        };
        let mut log = Vec::new();
        let result = run_search(
            &config,
            &file,
            &run_dir,
            &mut runner,
            &mut agent,
            &mut |l| log.push(l.to_string()),
        );
        let _ = tx.send((result, log.join("\n")));
    });
    rx.recv_timeout(WATCHDOG)
        .unwrap_or_else(|_| panic!("hevo hung: no result within {WATCHDOG:?}"))
}

/// Every file under `root` as bytes, links not followed (a link is listed by its target).
fn all_bytes(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(root) else {
        return out;
    };
    for e in entries {
        let e = e.unwrap();
        let p = e.path();
        let t = e.file_type().unwrap();
        if t.is_dir() {
            out.extend(all_bytes(&p));
        } else if t.is_symlink() {
            let target = std::fs::read_link(&p).unwrap();
            out.push((p, target.to_string_lossy().as_bytes().to_vec()));
        } else if t.is_file() {
            out.push((p.clone(), std::fs::read(&p).unwrap()));
        }
    }
    out
}

/// Whether `needle` occurs in any file under `root`: the paths where it does.
fn found(root: &Path, needle: &[u8]) -> Vec<PathBuf> {
    all_bytes(root)
        .into_iter()
        .filter(|(_, b)| b.windows(needle.len()).any(|w| w == needle))
        .map(|(p, _)| p)
        .collect()
}

/// The HarnessPro agent of the audit: in its edit workspace it replaces what hevo gave it
/// with a repository of its own whose configuration runs commands (fsmonitor, hooks, a
/// clean filter and a textconv driver named by its `.gitattributes`, a nested repository
/// with its own fsmonitor) and edits the harness, hoping hevo runs git there on the host.
/// I1 stops there (a legitimate edit besides); I2 also leaves a FIFO, a link to
/// `/dev/zero` and a link to the suite; I3 makes its plan a link to a secret file. As the
/// diagnosing agent, its `out/diagnosis.json` is a link to `/dev/zero`.
const GIT_ATTACK_AGENT: &str = r##"
exec 1>&2
m=$HEVO_MARKER
case "$1" in
  *HEVO-HARNESSPRO-DIAGNOSE*) mkdir -p out; ln -s /dev/zero out/diagnosis.json; exit 0 ;;
esac
ins=$(grep -o 'HEVO-HARNESSPRO-EDIT I[123]' <<<"$1" | cut -d' ' -f2)
echo "editing for $ins in $(pwd)"
rm -rf harness/.git
git init -q harness
git -C harness config core.fsmonitor "echo fsmonitor >> $m; false"
mkdir -p harness/.git/evil-hooks
for h in pre-commit post-commit pre-auto-gc post-checkout post-index-change reference-transaction; do
  printf '#!/bin/sh\necho hook-%s >> %s\n' "$h" "$m" > harness/.git/evil-hooks/$h
  chmod +x harness/.git/evil-hooks/$h
done
git -C harness config core.hooksPath "$PWD/harness/.git/evil-hooks"
git -C harness config filter.evil.clean "sh -c 'echo filter >> $m; cat'"
git -C harness config filter.evil.smudge "sh -c 'echo smudge >> $m; cat'"
git -C harness config diff.evil.textconv "sh -c 'echo textconv >> $m; cat' --"
printf '* filter=evil diff=evil\n' > harness/.gitattributes
mkdir -p harness/vendored
git init -q harness/vendored
git -C harness/vendored config core.fsmonitor "echo nested-fsmonitor >> $m; false"
echo 'x = 1' > harness/vendored/lib.txt
echo "# $ins: tweak" >> harness/harness.sh
mkdir -p plan
case "$ins" in
  I1) echo "$ins: keep the threshold, note the tweak" > plan/PLAN.md ;;
  I2) echo "$ins: add data" > plan/PLAN.md
      mkfifo harness/a-fifo
      ln -s /dev/zero harness/b-zero
      ln -s "$HEVO_SUITE_FILE" harness/c-suite.jsonl ;;
  I3) ln -s "$HEVO_SECRET_FILE" plan/PLAN.md ;;
esac
exit 0
"##;

#[test]
fn an_edit_agent_planting_a_git_repository_never_runs_a_command_on_the_host() {
    let (tmp, dir) = setup(
        "[search]\njobs = 2\n[evaluation]\nstrategy = \"full\"\n[objective]\nkind = \"pareto\"\n\
         [harnesspro]\nepochs = 1\ncore_size = 2\ncore_runs = 1\n",
    );
    let marker = tmp.path().join("PWNED_ON_HOST");
    let secret = tmp.path().join("secret.txt");
    std::fs::write(&secret, "sk-HOST-SECRET-4242\n").unwrap();
    let env = vec![
        ("HEVO_MARKER".into(), marker.to_string_lossy().into_owned()),
        (
            "HEVO_SECRET_FILE".into(),
            secret.to_string_lossy().into_owned(),
        ),
        (
            "HEVO_SUITE_FILE".into(),
            dir.join("tasks.jsonl").to_string_lossy().into_owned(),
        ),
    ];
    let (result, log) = search(&dir, GIT_ATTACK_AGENT, env);

    // No command of the agent's ran: not through the fsmonitor, a hook, a filter, a
    // textconv driver or the nested repository.
    assert!(
        !marker.exists(),
        "hevo ran the agent's commands on the host: {}\n{log}",
        std::fs::read_to_string(&marker).unwrap_or_default()
    );
    let report = result.unwrap_or_else(|e| panic!("{e}\n{log}"));

    let run = run_dir(&dir);
    let archive = run.join("archive");
    // The diagnosis that is a link to /dev/zero is rejected unread.
    let rejected = std::fs::read_to_string(
        archive.join("candidates/000-seed/diagnosis/epoch-001.agent.rejected.txt"),
    )
    .unwrap();
    assert!(
        rejected.contains("`out/diagnosis.json` is a symbolic link (to `/dev/zero`)"),
        "{rejected}"
    );
    let record: EpochRecord =
        serde_json::from_slice(&std::fs::read(archive.join("harnesspro/epoch-001.json")).unwrap())
            .unwrap();
    let outcome = |ins: &str| {
        record
            .plans
            .iter()
            .find(|p| p.instruction == ins)
            .map(|p| p.outcome.clone())
            .unwrap_or_else(|| panic!("no {ins} plan: {record:?}\n{log}"))
    };
    // I1's edit is taken as the agent meant it, without the agent's repository.
    assert_eq!(outcome("I1"), "committed", "{log}");
    let i1 = record.plans.iter().find(|p| p.instruction == "I1").unwrap();
    assert!(
        report.candidates.iter().any(|c| c.name == i1.child),
        "{report:?}"
    );
    let child = std::fs::read_dir(archive.join("candidates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(&i1.child))
        .unwrap();
    assert!(!child.join("code/.git").exists());
    assert!(!child.join("code/vendored/.git").exists());
    assert!(std::fs::read_to_string(child.join("code/harness.sh"))
        .unwrap()
        .ends_with("# I1: tweak\n"));
    let patch = std::fs::read_to_string(child.join("diff.patch")).unwrap();
    assert!(patch.contains("+# I1: tweak"), "{patch}");
    // I2 left a FIFO and links: rejected with the cause, unread and unfollowed.
    let i2 = outcome("I2");
    assert!(
        i2.starts_with("rejected: harness/: `a-fifo` is a FIFO"),
        "{i2}\n{log}"
    );
    // I3's plan is a link to a secret: rejected unread.
    let i3 = outcome("I3");
    assert!(
        i3.contains("`plan/PLAN.md` is a symbolic link"),
        "{i3}\n{log}"
    );
    // Nothing the links named reached the archive, the store or the repository.
    for root in [&archive, &run.join("harnesspro/repo")] {
        let leaked = found(root, b"sk-HOST-SECRET-4242");
        assert!(leaked.is_empty(), "the secret leaked into {leaked:?}");
        let leaked = found(root, b"\"split\": \"test\"");
        assert!(leaked.is_empty(), "the suite leaked into {leaked:?}");
    }
    let db = std::fs::read(run.join("hevo.db")).unwrap();
    assert!(!db.windows(19).any(|w| w == b"sk-HOST-SECRET-4242"));
}

/// Kills and reaps a process on drop.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The audit's proposer: candidates whose files are links to the suite, the store, hevo's
/// `/proc/self/stat` and the environment of a process holding a provider key (the user's
/// shell that started hevo); a FIFO; a link to `/dev/zero`; a pending entry that is itself
/// a link to the suite's folder; one with more files than a candidate may hold; and hevo's
/// own `.proposed` marker planted as a link to a file of the user's. One honest candidate
/// besides.
const LINK_ATTACK_PROPOSER: &str = r##"
exec 1>&2
seed=$(ls -d candidates/000-*/code)
new() {  # new NAME: a copy of the seed named NAME
  mkdir -p pending/$1
  cp -r $seed/. pending/$1/
  sed -i "s/^name = .*/name = \"$1\"/" pending/$1/harness.toml
  printf 'name = "%s"\nhypothesis = "%s"\n' "$1" "$1" > pending/$1/candidate.toml
}
new good
new evil-links
d=pending/evil-links
ln -s ../../../../../tasks.jsonl $d/suite_tasks.jsonl
ln -s ../../../hevo.db $d/hevo.db
ln -s /proc/self/stat $d/hevo_stat
ln -s /proc/$HEVO_VICTIM_PID/environ $d/parent_environ
for f in suite_tasks.jsonl hevo.db parent_environ; do [ -r $d/$f ] && echo "RESOLVES $f"; done
new evil-fifo
mkfifo pending/evil-fifo/notes.txt
new evil-zero
ln -s /dev/zero pending/evil-zero/data.bin
ln -s ../../../.. pending/x
[ -r pending/x/tasks.jsonl ] && echo "RESOLVES x"
new evil-many
mkdir pending/evil-many/many
(cd pending/evil-many/many && touch f{1..10001})
ln -sfn "$HEVO_VICTIM_FILE" pending/.proposed
exit 0
"##;

#[test]
fn a_proposers_links_fifos_and_devices_are_rejected_unfollowed_with_their_cause() {
    let (tmp, dir) = setup(
        // asked for as many candidates as it writes, so that every entry is read
        "[search]\niterations = 1\ncandidates_per_iteration = 6\njobs = 2\n\
         [evaluation]\nstrategy = \"full\"\n",
    );
    // A process of the user's holding a provider key, as the shell that started hevo.
    let victim = KillOnDrop(
        std::process::Command::new("sleep")
            .arg("600")
            .env("OPENAI_API_KEY", "sk-PROVIDER-SECRET-123")
            .spawn()
            .unwrap(),
    );
    let victim_file = tmp.path().join("users-file.txt");
    std::fs::write(&victim_file, "the user's own text\n").unwrap();
    let env = vec![
        ("HEVO_VICTIM_PID".into(), victim.0.id().to_string()),
        (
            "HEVO_VICTIM_FILE".into(),
            victim_file.to_string_lossy().into_owned(),
        ),
    ];
    let (result, log) = search(&dir, LINK_ATTACK_PROPOSER, env);
    let report = result.unwrap_or_else(|e| panic!("{e}\n{log}"));
    let run = run_dir(&dir);
    let transcript =
        std::fs::read_to_string(run.join("proposer/iter-001/stderr.txt")).unwrap_or_default();
    // The links did name what the attacker wanted: the test is not vacuous.
    for f in ["suite_tasks.jsonl", "hevo.db", "parent_environ", "x"] {
        assert!(
            transcript.contains(&format!("RESOLVES {f}")),
            "{f}: {transcript}"
        );
    }

    // The honest candidate is taken; every other is rejected with its cause.
    let names: Vec<&str> = report.candidates.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["seed", "good"], "{log}");
    assert_eq!(report.rejected, 5, "{log}");
    let summary = std::fs::read_to_string(run.join("archive/summary.jsonl")).unwrap();
    let outcome = |name: &str| -> String {
        summary
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|v| v["name"] == name)
            .map(|v| v["outcome"].as_str().unwrap().to_string())
            .unwrap_or_else(|| panic!("{name} is not in the summary:\n{summary}"))
    };
    let cases = [
        (
            "evil-links",
            "rejected: `hevo.db` is a symbolic link (to `../../../hevo.db`)",
        ),
        ("evil-fifo", "rejected: `notes.txt` is a FIFO"),
        (
            "evil-zero",
            "rejected: `data.bin` is a symbolic link (to `/dev/zero`)",
        ),
        (
            "x",
            "rejected: it is a symbolic link (to `../../../..`), not a folder",
        ),
        (
            "evil-many",
            "rejected: it holds more than 10000 files and folders",
        ),
    ];
    for (name, cause) in cases {
        let got = outcome(name);
        assert!(got.starts_with(cause), "{name}: {got}");
    }

    // Nothing any link named reached the archive (where the next proposer and every
    // harness read), and nothing is left in staging.
    let archive = run.join("archive");
    for (needle, what) in [
        (&b"\"split\": \"test\""[..], "the suite's test split"),
        (b"SQLite format 3", "the store"),
        (b"sk-PROVIDER-SECRET-123", "the provider key"),
    ] {
        let leaked = found(&archive, needle);
        assert!(leaked.is_empty(), "{what} leaked into {leaked:?}");
    }
    assert!(!run.join("staging").exists());
    // The marker planted as a link was replaced, not written through.
    assert_eq!(
        std::fs::read_to_string(&victim_file).unwrap(),
        "the user's own text\n"
    );
    drop(victim);
}
