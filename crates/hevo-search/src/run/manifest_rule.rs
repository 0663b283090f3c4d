//! What a proposed candidate's `harness.toml` may ask for: the programs it runs and its
//! time limit.
//!
//! **Its time limit** (`timeout_s`, else 120 s) is at most the seeds' longest. The limit is
//! the run's measuring rule, which the user set in the seeds: a candidate that gave itself
//! more time would pass tasks a seed times out on by being slow, and one asking for 7 days
//! while it hangs would hold a job slot, and the search, as long.
//!
//! **Its programs.** A proposed harness runs a program found on `PATH` (`python3`), one in
//! its own folder, or one a seed's manifest names as written (the user's choice, such as
//! `/opt/venv/bin/python`); its script arguments lie in its own folder, and no path argument
//! climbs out of it with `..`. Anything else is refused by how it is written, never by
//! looking at the host, for two reasons:
//!
//! - a reason that depended on whether a host path exists would tell the proposer so (it
//!   reads its rejections in `summary.jsonl`), and `resolve_argv` makes an argument absolute
//!   when the path it names exists, which a harness would see in its own command line;
//! - the sandbox shows the entry program's install prefix (`sandbox::program_prefixes`):
//!   a program the proposer could place anywhere would choose which host folder its harness
//!   reads.

use std::collections::BTreeSet;
use std::path::{Component, Path};
use std::time::Duration;

use hevo_runtime::eval::DEFAULT_TIMEOUT;
use hevo_runtime::harness::{Harness, Manifest};
use hevo_runtime::launch::{base_env, resolve_program};

use crate::archive::Candidate;

/// What the seeds allow a proposed candidate: the words (programs and arguments, as
/// written) of their `entry` and `prepare`, which it may name outside its own folder, and
/// their longest time limit.
#[derive(Clone, Debug)]
pub(super) struct Seeds {
    words: BTreeSet<String>,
    timeout: Duration,
}

impl Seeds {
    /// What the seeds (iteration 0) among `known` allow; a seed whose manifest cannot be
    /// read adds no word and the default time limit.
    pub(super) fn of<'a>(known: impl IntoIterator<Item = &'a Candidate>) -> Self {
        let mut seeds = Seeds {
            words: BTreeSet::new(),
            timeout: Duration::ZERO,
        };
        for c in known.into_iter().filter(|c| c.meta.iteration == 0) {
            let path = c.code().join("harness.toml");
            let manifest = std::fs::read_to_string(&path)
                .ok()
                .and_then(|text| Manifest::parse(&text, &path).ok());
            let timeout = manifest
                .as_ref()
                .map_or(DEFAULT_TIMEOUT, Manifest::time_limit);
            seeds.timeout = seeds.timeout.max(timeout);
            if let Some(m) = manifest {
                let words = m.entry.iter().chain(m.prepare.iter().flatten()).cloned();
                seeds.words.extend(words);
            }
        }
        if seeds.timeout.is_zero() {
            seeds.timeout = DEFAULT_TIMEOUT;
        }
        seeds
    }

    /// The longest time limit a proposed candidate may set.
    pub(super) fn timeout(&self) -> Duration {
        self.timeout
    }

    fn contains(&self, word: &str) -> bool {
        self.words.contains(word)
    }

    /// The seeds' programs with a `/` in them, for a rejection's advice.
    fn programs(&self) -> Vec<&str> {
        self.words
            .iter()
            .map(String::as_str)
            .filter(|w| w.contains('/'))
            .collect()
    }
}

/// Why the proposed harness `h` may not run as its manifest says (the module's rules), or a
/// program or script it names in its own folder or on `PATH` is missing.
pub(super) fn manifest_problem(h: &Harness, seeds: &Seeds) -> Option<String> {
    entry_problem(h, seeds).or_else(|| timeout_problem(&h.manifest, seeds))
}

fn timeout_problem(m: &Manifest, seeds: &Seeds) -> Option<String> {
    let asked = m.time_limit();
    if asked <= seeds.timeout {
        return None;
    }
    let most = seeds.timeout.as_secs_f64();
    let what = match m.timeout_s {
        Some(t) => format!("`timeout_s = {t}`"),
        None => format!(
            "time limit ({} s, the default, as it sets no `timeout_s`)",
            asked.as_secs_f64()
        ),
    };
    Some(format!(
        "its {what} is longer than the seeds' {most} s: a proposed harness may not give \
         itself more time than the run's seeds; set `timeout_s` to at most {most}"
    ))
}

fn entry_problem(h: &Harness, seeds: &Seeds) -> Option<String> {
    let commands = std::iter::once(("entry", &h.manifest.entry))
        .chain(h.manifest.prepare.as_ref().map(|p| ("prepare", p)));
    for (key, argv) in commands {
        let Some(program) = argv.first() else {
            continue;
        };
        if let Some(problem) = program_problem(key, program, h, seeds) {
            return Some(problem);
        }
        for arg in &argv[1..] {
            if let Some(problem) = argument_problem(key, arg, h, seeds) {
                return Some(problem);
            }
        }
    }
    None
}

fn program_problem(key: &str, program: &str, h: &Harness, seeds: &Seeds) -> Option<String> {
    if seeds.contains(program) {
        // The user's own program: whether it exists tells the proposer nothing new.
        let resolved = hevo_runtime::harness::resolve_argv(&[program.to_owned()], &h.dir);
        return (program.contains('/') && !Path::new(&resolved[0]).is_file())
            .then(|| format!("its `{key}` program `{program}` does not exist"));
    }
    if !program.contains('/') {
        // A bare name runs the file of that name in the folder if there is one (as
        // `resolve_argv` makes it), else the executable on the launch's PATH, found as the
        // launch finds it (an unfound name comes back as written).
        let on_path = resolve_program(program, &base_env(&h.dir)).as_os_str() != program;
        let found = h.dir.join(program).is_file() || on_path;
        return (!found).then(|| {
            format!(
                "its `{key}` program `{program}` is neither in the candidate's folder nor on PATH"
            )
        });
    }
    if !stays_inside(program) || Path::new(program).is_absolute() {
        let mut advice = String::from(
            "a proposed harness runs a program on PATH (such as `python3`), one in its own \
             folder",
        );
        match seeds.programs().as_slice() {
            [] => advice.push_str(", or one a seed runs"),
            programs => {
                let named: Vec<String> = programs.iter().map(|p| format!("`{p}`")).collect();
                advice.push_str(&format!(", or one a seed runs ({})", named.join(", ")));
            }
        }
        return Some(format!(
            "its `{key}` program `{program}` is outside the candidate's folder: {advice}"
        ));
    }
    (!h.dir.join(program).is_file())
        .then(|| format!("its `{key}` program `{program}` is not in the candidate's folder"))
}

fn argument_problem(key: &str, arg: &str, h: &Harness, seeds: &Seeds) -> Option<String> {
    if arg.is_empty() || arg.starts_with('-') || seeds.contains(arg) {
        return None;
    }
    let path = Path::new(arg);
    if path.is_relative() && !stays_inside(arg) {
        return Some(format!(
            "its `{key}` argument `{arg}` climbs out of the candidate's folder (`..`): name \
             files inside it"
        ));
    }
    let looks_like_script = [".py", ".sh", ".js", ".rb", ".pl"]
        .iter()
        .any(|ext| arg.ends_with(ext));
    if !looks_like_script {
        return None;
    }
    if path.is_absolute() {
        return Some(format!(
            "its `{key}` names the script `{arg}` outside the candidate's folder: name it \
             relative to the folder (`harness.py`)"
        ));
    }
    (!h.dir.join(path).exists())
        .then(|| format!("its `{key}` names `{arg}`, which is not in the candidate's folder"))
}

/// Whether the relative path `p`, read lexically, never leaves the folder it is relative
/// to (`a/../b` stays, `../b` and `a/../../b` leave). An absolute path counts as staying:
/// callers decide about those.
fn stays_inside(p: &str) -> bool {
    let mut depth: usize = 0;
    for c in Path::new(p).components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::ParentDir => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => return false,
            },
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A staged harness in `dir` whose manifest is `toml`, with `harness.py` and an
    /// executable `bin/run` beside it.
    fn harness(dir: &Path, toml: &str) -> Harness {
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::fs::write(dir.join("harness.py"), "print('x')\n").unwrap();
        std::fs::write(dir.join("bin/run"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(dir.join("bin/run"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        std::fs::write(dir.join("harness.toml"), toml).unwrap();
        Harness::load(dir).unwrap()
    }

    fn seeds(words: &[&str]) -> Seeds {
        Seeds {
            words: words.iter().map(|w| w.to_string()).collect(),
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// A host folder outside the candidate with an executable and a script in it.
    fn host(tmp: &Path) -> std::path::PathBuf {
        let host = tmp.join("host-tools");
        std::fs::create_dir_all(host.join("bin")).unwrap();
        std::fs::write(host.join("bin/tool"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(
            host.join("bin/tool"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::fs::write(host.join("secret.py"), "KEY = 1\n").unwrap();
        host
    }

    #[test]
    fn a_path_outside_the_folder_is_refused_alike_whether_it_exists_or_not() {
        let tmp = tempfile::tempdir().unwrap();
        let host = host(tmp.path());
        let dir = tmp.path().join("cand");
        let nothing = tmp.path().join("nothing");
        let (there, missing) = (host.display(), nothing.display());
        let depth = dir.components().count();
        let up = "../".repeat(depth);
        let pairs = [
            (
                format!("entry = [\"{there}/bin/tool\"]"),
                format!("entry = [\"{missing}/bin/tool\"]"),
            ),
            (
                format!("entry = [\"python3\", \"{there}/secret.py\"]"),
                format!("entry = [\"python3\", \"{missing}/secret.py\"]"),
            ),
            (
                format!("entry = [\"python3\", \"{up}{there}/secret.py\"]"),
                format!("entry = [\"python3\", \"{up}{missing}/secret.py\"]"),
            ),
            (
                format!("entry = [\"python3\", \"harness.py\", \"{up}{there}\"]"),
                format!("entry = [\"python3\", \"harness.py\", \"{up}{missing}\"]"),
            ),
            (
                format!("entry = [\"python3\", \"harness.py\"]\nprepare = [\"{there}/bin/tool\"]"),
                format!(
                    "entry = [\"python3\", \"harness.py\"]\nprepare = [\"{missing}/bin/tool\"]"
                ),
            ),
            (
                "entry = [\"../host-tools/bin/tool\"]".to_string(),
                "entry = [\"../nothing/bin/tool\"]".to_string(),
            ),
        ];
        for (exists, absent) in pairs {
            let a = manifest_problem(&harness(&dir, &exists), &seeds(&[]));
            let b = manifest_problem(&harness(&dir, &absent), &seeds(&[]));
            let (Some(a), Some(b)) = (a, b) else {
                panic!("both must be refused: {exists} / {absent}");
            };
            // The reasons differ only in the path the proposer wrote.
            let normalize = |s: &str| {
                s.replace(&host.display().to_string(), "P")
                    .replace(&nothing.display().to_string(), "P")
                    .replace("host-tools", "P")
                    .replace("nothing", "P")
            };
            assert_eq!(normalize(&a), normalize(&b), "{exists}");
            assert!(a.contains("outside") || a.contains("climbs out"), "{a}");
        }
    }

    #[test]
    fn programs_on_path_in_the_folder_or_a_seeds_pass() {
        let tmp = tempfile::tempdir().unwrap();
        let host = host(tmp.path());
        let dir = tmp.path().join("cand");
        let tool = format!("{}/bin/tool", host.display());
        for toml in [
            "entry = [\"python3\", \"harness.py\"]".to_string(),
            "entry = [\"bin/run\", \"./harness.py\", \"-c\", \"print('a/../b')\"]".to_string(),
            "entry = [\"./bin/run\", \"bin/../harness.py\"]".to_string(),
            "entry = [\"harness.py\"]".to_string(),
            format!("entry = [\"{tool}\", \"harness.py\"]"),
            format!("entry = [\"python3\", \"harness.py\"]\nprepare = [\"{tool}\", \"--x\"]"),
        ] {
            let got = manifest_problem(&harness(&dir, &toml), &seeds(&[&tool, "python3"]));
            assert_eq!(got, None, "{toml}");
        }
        // The same program, which no seed runs, is refused, naming what may run.
        let toml = format!("entry = [\"{tool}\", \"harness.py\"]");
        let got = manifest_problem(&harness(&dir, &toml), &seeds(&["/opt/venv/bin/python"]));
        let got = got.expect("refused");
        assert!(
            got.contains("outside the candidate's folder")
                && got.contains("one a seed runs (`/opt/venv/bin/python`)"),
            "{got}"
        );
    }

    #[test]
    fn what_is_missing_in_the_folder_or_on_path_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cand");
        let cases = [
            (
                "entry = [\"no-such-program-hevo\"]",
                "its `entry` program `no-such-program-hevo` is neither in the candidate's folder \
                 nor on PATH",
            ),
            (
                "entry = [\"bin/nope\"]",
                "its `entry` program `bin/nope` is not in the candidate's folder",
            ),
            (
                "entry = [\"python3\", \"nope.py\"]",
                "its `entry` names `nope.py`, which is not in the candidate's folder",
            ),
        ];
        for (toml, want) in cases {
            let got = manifest_problem(&harness(&dir, toml), &seeds(&[]));
            assert_eq!(got.as_deref(), Some(want), "{toml}");
        }
    }

    #[test]
    fn a_path_stays_inside_unless_it_climbs_above_its_start() {
        for p in ["a", "a/../b", "./a", "a/b/../../c", "print('a/../b')"] {
            assert!(stays_inside(p), "{p}");
        }
        for p in ["..", "../a", "a/../../b", "./../a"] {
            assert!(!stays_inside(p), "{p}");
        }
    }

    #[test]
    fn a_time_limit_longer_than_the_seeds_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cand");
        let mut five = seeds(&[]);
        five.timeout = Duration::from_secs(5);
        let entry = "entry = [\"python3\", \"harness.py\"]\n";
        for (toml, want) in [
            (format!("{entry}timeout_s = 5"), None),
            (format!("{entry}timeout_s = 0.5"), None),
            (
                format!("{entry}timeout_s = 3600"),
                Some(
                    "its `timeout_s = 3600` is longer than the seeds' 5 s: a proposed harness \
                     may not give itself more time than the run's seeds; set `timeout_s` to at \
                     most 5",
                ),
            ),
            (
                entry.to_string(),
                Some(
                    "its time limit (120 s, the default, as it sets no `timeout_s`) is longer \
                     than the seeds' 5 s: a proposed harness may not give itself more time \
                     than the run's seeds; set `timeout_s` to at most 5",
                ),
            ),
        ] {
            let got = manifest_problem(&harness(&dir, &toml), &five);
            assert_eq!(got.as_deref(), want, "{toml}");
        }
        // Seeds that set none allow the default, not more.
        let got = manifest_problem(
            &harness(&dir, &format!("{entry}timeout_s = 121")),
            &seeds(&[]),
        );
        assert!(got.is_some_and(|g| g.contains("longer than the seeds' 120 s")));
    }

    #[test]
    fn the_seeds_allow_their_longest_time_limit_and_their_words() {
        let tmp = tempfile::tempdir().unwrap();
        let seed = |name: &str, toml: &str, iteration: u32| {
            let dir = tmp.path().join(name);
            std::fs::create_dir_all(dir.join("code")).unwrap();
            std::fs::write(dir.join("code/harness.toml"), toml).unwrap();
            Candidate {
                seq: 0,
                meta: crate::archive::CandidateMeta {
                    name: name.into(),
                    parent: None,
                    iteration,
                    hypothesis: String::new(),
                    axis: String::new(),
                    components: Vec::new(),
                },
                dir,
            }
        };
        let known = [
            seed(
                "a",
                "entry = [\"/opt/venv/bin/python\", \"a.py\"]\ntimeout_s = 30\n",
                0,
            ),
            seed("b", "entry = [\"sh\", \"b.sh\"]\ntimeout_s = 300\n", 0),
            // A proposed candidate's manifest allows nothing.
            seed("c", "entry = [\"/srv/x/bin/y\"]\ntimeout_s = 9000\n", 1),
        ];
        let s = Seeds::of(&known);
        assert_eq!(s.timeout, Duration::from_secs(300));
        assert_eq!(s.programs(), ["/opt/venv/bin/python"]);
        assert!(s.contains("b.sh") && !s.contains("/srv/x/bin/y"));
    }
}
