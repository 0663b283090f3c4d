//! `hevo report`, `status`, `show` and `ls` on a real small run: `hevo run
//! examples/threshold --finalize` (a bash harness, no model) into a temporary directory,
//! once per test binary. The report is opened in real headless Chromium (Debian's
//! `chromium`); without it that test says SKIPPED on stderr, or fails when
//! `HEVO_REQUIRE_CHROMIUM=1` (CI sets it).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn hevo() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hevo"))
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// The finished threshold run, shared by every test here (its temp dir lives as long as
/// the test process).
fn run_dir() -> &'static Path {
    static RUN: OnceLock<tempfile::TempDir> = OnceLock::new();
    let tmp = RUN.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let out = hevo()
            .args([
                "run",
                "--no-progress",
                "--jobs",
                "2",
                "--finalize",
                "--run-dir",
            ])
            .arg(tmp.path().join("runs/threshold"))
            .arg(examples().join("threshold"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        tmp
    });
    Box::leak(tmp.path().join("runs/threshold").into_boxed_path())
}

/// A copy of the shared run at `<tmp>/<rel>` (`cp -a`), for a test that changes it.
fn copy_of_run(tmp: &Path, rel: &str) -> PathBuf {
    let copy = tmp.join(rel);
    std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
    let st = Command::new("cp")
        .arg("-a")
        .arg(run_dir())
        .arg(&copy)
        .status()
        .unwrap();
    assert!(st.success());
    copy
}

/// The candidates' names in archive order (`NNN-name` folders, sorted).
fn archive_names(run: &Path) -> Vec<String> {
    let mut dirs: Vec<String> = std::fs::read_dir(run.join("archive/candidates"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    dirs.sort();
    dirs.iter()
        .map(|d| d.split_once('-').unwrap().1.to_string())
        .collect()
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .map(|c| {
            if "\\.+*?()|[]{}^$".contains(c) {
                format!("\\{c}")
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Snapshot settings with the run's temporary directory filtered.
fn settings(run: &Path) -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    let tmp = run.parent().unwrap().parent().unwrap();
    s.add_filter(&regex_escape(&tmp.to_string_lossy()), "[TMP]");
    s
}

fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|d| ["chromium", "chromium-browser"].map(|n| d.join(n)))
        .find(|p| p.is_file())
}

/// Runs headless Chromium on `page` with `extra` arguments; returns (stdout, console lines
/// from its log on stderr).
fn open_in_chromium(bin: &Path, page: &Path, extra: &[&str]) -> (String, Vec<String>) {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1200,2000",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let console = stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect();
    (String::from_utf8_lossy(&out.stdout).into_owned(), console)
}

#[test]
fn the_report_opens_in_headless_chromium_with_every_chart_and_no_console_error() {
    let run = run_dir();
    let stdout = ok(&hevo().arg("report").arg(run).output().unwrap());
    let page = run.join("report.html");
    assert_eq!(stdout, format!("report: {}\n", page.display()));
    let html = std::fs::read_to_string(&page).unwrap();
    // Self-contained: the only URL is SVG's namespace.
    assert_eq!(
        html.matches("http").count(),
        html.matches("http://www.w3.org/2000/svg").count(),
        "the report refers to the network"
    );
    // The key numbers are text, not drawn by a script: the pick and its interval from
    // search.json, the trials from the store.
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("search.json")).unwrap()).unwrap();
    let pick = record["pick"].as_str().unwrap();
    // The pick is shown with its selection-adjusted interval.
    let e = &record["pick_estimate"];
    let pick_est = format!(
        "{:.3} [{:.3}, {:.3}]",
        e["value"].as_f64().unwrap(),
        e["ci_low"].as_f64().unwrap(),
        e["ci_high"].as_f64().unwrap()
    );
    let db = rusqlite::Connection::open(run.join("hevo.db")).unwrap();
    let trials: i64 = db
        .query_row("SELECT COUNT(*) FROM trials", [], |r| r.get(0))
        .unwrap();
    let id: i64 = db
        .query_row("SELECT id FROM candidates WHERE name = ?1", [pick], |r| {
            r.get(0)
        })
        .unwrap();
    for needle in [
        format!(
            "{pick}</a> (iteration {}): <b class=\"num\">{pick_est}</b>",
            record["pick_iteration"]
        ),
        format!("{trials} of 280 for full evaluation"),
        "diff against seed.i1c0".into(),
        // only the changed parameter, as the parent's manifest writes it
        "+threshold = { values = [2, 4, 6, 8, 10], default = 6 }".into(),
        "Test split (finalize)".into(),
        format!("href=\"traces/c{id}\""),
    ] {
        assert!(html.contains(&needle), "the report lacks {needle:?}");
    }

    let Some(bin) = chromium() else {
        assert!(
            std::env::var_os("HEVO_REQUIRE_CHROMIUM").is_none(),
            "HEVO_REQUIRE_CHROMIUM is set but chromium is not on PATH (apt-get install -y chromium)"
        );
        eprintln!(
            "SKIPPED: chromium is not installed (apt-get install -y chromium); the report was \
             checked as text only"
        );
        return;
    };
    // The scanner finds console errors (so a clean report means something).
    let control = run.parent().unwrap().join("control.html");
    std::fs::write(
        &control,
        "<html><body><script>console.error('boom'); missing();</script></body></html>",
    )
    .unwrap();
    let (_, console) = open_in_chromium(&bin, &control, &["--dump-dom"]);
    assert!(
        console.iter().any(|l| l.contains("boom")) && console.iter().any(|l| l.contains("missing")),
        "chromium's console log was not captured: {console:?}"
    );

    let (dom, console) = open_in_chromium(&bin, &page, &["--dump-dom"]);
    assert!(console.is_empty(), "console messages: {console:#?}");
    for id in hevo_search::view::html::CHART_IDS {
        let start = dom
            .find(&format!("<svg id=\"{id}\""))
            .unwrap_or_else(|| panic!("chart {id} is not in the DOM"));
        let body = &dom[start..start + dom[start..].find("</svg>").unwrap()];
        assert!(
            ["<circle", "<rect"]
                .iter()
                .any(|m| body.matches(m).count() >= 4),
            "chart {id} draws nothing"
        );
    }
    assert!(dom.contains("id=\"cand-table\""));

    // The table sorts in a real browser: click the estimate header, read the row order.
    let clicked = run.parent().unwrap().join("sorted.html");
    std::fs::write(
        &clicked,
        html.replace(
            "</body>",
            "<script>document.querySelectorAll('#cand-table th')[6].click();</script></body>",
        ),
    )
    .unwrap();
    let (dom, console) = open_in_chromium(&bin, &clicked, &["--dump-dom"]);
    assert!(console.is_empty(), "console messages: {console:#?}");
    let table = &dom[dom.find("id=\"cand-table\"").unwrap()..];
    let body = &table[table.find("<tbody>").unwrap()..table.find("</tbody>").unwrap()];
    let order: Vec<&str> = body
        .split("</tr>")
        .filter_map(|row| {
            let a = &row[row.find("<a href=\"#cand-")?..];
            Some(&a[a.find('>')? + 1..a.find("</a>")?])
        })
        .collect();
    // Ascending by estimate, ties in archive order (the sort is stable).
    let mut expected: Vec<(f64, usize, String)> = archive_names(run)
        .into_iter()
        .enumerate()
        .map(|(i, name)| {
            (
                record["estimates"][&name]["value"].as_f64().unwrap(),
                i,
                name,
            )
        })
        .collect();
    expected.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let expected: Vec<&str> = expected.iter().map(|e| e.2.as_str()).collect();
    assert_eq!(order, expected, "sorted by estimate, ascending");

    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report");
    std::fs::create_dir_all(&shots).unwrap();
    let shot = shots.join("threshold-report.png");
    let _ = std::fs::remove_file(&shot);
    let (_, console) =
        open_in_chromium(&bin, &page, &[&format!("--screenshot={}", shot.display())]);
    assert!(console.is_empty(), "console messages: {console:#?}");
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 20_000,
        "screenshot {}",
        shot.display()
    );
    eprintln!("screenshot: {}", shot.display());
}

/// Markup, and the control and bidirectional characters that would act on the page or
/// reorder a cell, in a proposer's hypothesis and code are shown as text.
#[test]
fn strings_from_the_proposer_are_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let copy = copy_of_run(tmp.path(), "runs/evil");
    let meta = copy.join("archive/candidates/001-seed.i1c0/candidate.toml");
    let text = std::fs::read_to_string(&meta).unwrap();
    let evil: String = text
        .lines()
        .map(|l| {
            if l.starts_with("hypothesis = ") {
                "hypothesis = \"<script>alert('x')</script> & <b>bold</b> \\u202Etxt.exe\\u001B[2J\""
                    .to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert_ne!(text, evil, "{text}");
    std::fs::write(&meta, evil).unwrap();
    // A line of its code that a bidi override would show reversed, in its diff.
    let code = meta.with_file_name("code/evil.txt");
    std::fs::write(code, "name = \"\u{202e}gnp.exe\u{2069}\"\n").unwrap();
    ok(&hevo().arg("report").arg(&copy).output().unwrap());
    let html = std::fs::read_to_string(copy.join("report.html")).unwrap();
    assert!(!html.contains("<script>alert"), "unescaped hypothesis");
    assert!(!html.contains("<b>bold"), "unescaped hypothesis");
    assert!(html.contains(
        "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt; \
         \\u{202e}txt.exe\\u{1b}[2J"
    ));
    assert!(html.contains("+name = &quot;\\u{202e}gnp.exe\\u{2069}&quot;"));
    // No bidi control or ESC is left to act on the page.
    assert!(
        !html.contains(['\u{202e}', '\u{2069}', '\x1b']),
        "a raw control character in the page"
    );
}

/// A candidate whose parent has a large file and which changes one line of it (the audit's
/// 80,000 lines, which took 47 s to diff), and adds twelve files that together hold twelve
/// times the per-candidate limit: `hevo show` and report.html stay within the limits and say
/// what they left out.
#[test]
fn large_changes_leave_the_diff_and_the_report_bounded() {
    use hevo_search::view::diff::MAX_DIFF_BYTES;
    let tmp = tempfile::tempdir().unwrap();
    let copy = copy_of_run(tmp.path(), "large");
    ok(&hevo().arg("report").arg(&copy).output().unwrap());
    let before = std::fs::metadata(copy.join("report.html")).unwrap().len() as usize;
    // The last candidate archived: nothing was derived from it.
    let names = archive_names(&copy);
    let leaf = names.last().unwrap();
    let show = |c: &str| -> serde_json::Value {
        let out = hevo().args(["show", "--json"]).arg(&copy).arg(c).output();
        serde_json::from_str(&ok(&out.unwrap())).unwrap()
    };
    let parent = show(leaf)["parent"].as_str().unwrap().to_string();
    let code = |name: &str| {
        let at = names.iter().position(|n| n == name).unwrap();
        copy.join(format!("archive/candidates/{at:03}-{name}/code"))
    };
    let lines: String = (0..80_000)
        .map(|i| format!("line {i} of a large generated file\n"))
        .collect();
    std::fs::write(code(&parent).join("big.txt"), &lines).unwrap();
    let changed = lines.replace("line 40000 of", "line 40000, changed, of");
    std::fs::write(code(leaf).join("big.txt"), &changed).unwrap();
    for i in 0..12 {
        let file = code(leaf).join(format!("new{i:02}.txt"));
        std::fs::write(file, &lines[..MAX_DIFF_BYTES]).unwrap();
    }

    let diff = show(leaf)["diff"].as_str().unwrap().to_string();
    let too_large = format!(
        "File big.txt changed (old: {} bytes, new: {} bytes): too large to show",
        lines.len(),
        changed.len()
    );
    assert!(diff.contains(&too_large), "{}", &diff[..300]);
    let (shown, last) = diff.trim_end().rsplit_once('\n').unwrap();
    assert!(shown.len() <= MAX_DIFF_BYTES, "{}", shown.len());
    assert!(
        last.starts_with("Diff cut at the 128 KiB limit per candidate; left out: the rest of new00.txt, new01.txt"),
        "{last}"
    );

    ok(&hevo().arg("report").arg(&copy).output().unwrap());
    let html = std::fs::read_to_string(copy.join("report.html")).unwrap();
    assert!(html.contains(&too_large) && html.contains("Diff cut at the 128 KiB limit"));
    // The lines' markup (a span each) at most doubles the diff's text.
    assert!(
        html.len() < before + 2 * MAX_DIFF_BYTES,
        "report.html grew from {before} to {} bytes",
        html.len()
    );
}

#[test]
fn status_summarizes_the_run() {
    let run = run_dir();
    let text = ok(&hevo().arg("status").arg(run).output().unwrap());
    settings(run).bind(|| insta::assert_snapshot!(text));
}

#[test]
fn status_of_a_search_that_has_not_finished_shows_the_best_so_far() {
    let tmp = tempfile::tempdir().unwrap();
    let copy = copy_of_run(tmp.path(), "partial");
    // What a search looks like before its end: no search.json, no finalize, the last
    // iteration's candidate archived but not scored yet.
    std::fs::remove_file(copy.join("search.json")).unwrap();
    std::fs::remove_dir_all(copy.join("test")).unwrap();
    std::fs::remove_file(copy.join("archive/candidates/006-seed.i3c1/scores.json")).unwrap();
    let text = ok(&hevo().arg("status").arg(&copy).output().unwrap());
    assert!(text.contains("in progress"), "{text}");
    assert!(
        text.contains("best so far: seed.i2c0 (iteration 2)"),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.contains("seed.i3c1")
            && l.contains("evaluating")
            && l.contains("raw mean 1.000")),
        "{text}"
    );
    assert!(!text.contains("test split"), "{text}");
    // The report works on it too, and says the search is not over.
    ok(&hevo().arg("report").arg(&copy).output().unwrap());
    let html = std::fs::read_to_string(copy.join("report.html")).unwrap();
    assert!(html.contains("in progress") && html.contains("best so far"));
    assert!(!html.contains("Test split"));
}

#[test]
fn show_gives_scores_outcomes_and_the_diff() {
    let run = run_dir();
    let text = ok(&hevo()
        .arg("show")
        .arg(run)
        .arg("seed.i3c1")
        .output()
        .unwrap());
    settings(run).bind(|| insta::assert_snapshot!(text));
}

/// The store keeps the traces' absolute paths; after the run directory was moved (here:
/// copied, so the old path still exists and would be shown) `hevo show` names the traces
/// where the run directory is now, in text and JSON.
#[test]
fn show_finds_the_traces_of_a_moved_run() {
    let tmp = tempfile::tempdir().unwrap();
    let moved = copy_of_run(tmp.path(), "moved").canonicalize().unwrap();
    let show = |json: bool| {
        let mut c = hevo();
        c.arg("show").arg(&moved).arg("seed.i3c1");
        if json {
            c.arg("--json");
        }
        ok(&c.output().unwrap())
    };
    let id: i64 = rusqlite::Connection::open(moved.join("hevo.db"))
        .unwrap()
        .query_row(
            "SELECT id FROM candidates WHERE name = 'seed.i3c1'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let traces = moved.join("traces").join(format!("c{id}"));
    assert!(traces.is_dir(), "{}", traces.display());
    let text = show(false);
    assert!(
        text.contains(&format!("traces: {}\n", traces.display())),
        "{text}"
    );
    let doc: serde_json::Value = serde_json::from_str(&show(true)).unwrap();
    assert_eq!(doc["trace_dir"], traces.to_string_lossy().as_ref(), "{doc}");
}

#[test]
fn json_views_agree_with_the_store() {
    let run = run_dir();
    let status: serde_json::Value = serde_json::from_str(&ok(&hevo()
        .arg("status")
        .arg(run)
        .arg("--json")
        .output()
        .unwrap()))
    .unwrap();
    let db = rusqlite::Connection::open(run.join("hevo.db")).unwrap();
    let trials: i64 = db
        .query_row("SELECT COUNT(*) FROM trials", [], |r| r.get(0))
        .unwrap();
    assert_eq!(status["trials"], trials);
    let candidates: i64 = db
        .query_row("SELECT COUNT(*) FROM candidates", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        status["candidates"].as_array().unwrap().len() as i64,
        candidates
    );
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("search.json")).unwrap()).unwrap();
    assert_eq!(status["best"]["name"], record["pick"]);
    assert_eq!(status["full_trials"], 7 * 40);

    let pick = record["pick"].as_str().unwrap();
    let show: serde_json::Value = serde_json::from_str(&ok(&hevo()
        .arg("show")
        .arg(run)
        .arg(pick)
        .arg("--json")
        .output()
        .unwrap()))
    .unwrap();
    let id: i64 = db
        .query_row("SELECT id FROM candidates WHERE name = ?1", [pick], |r| {
            r.get(0)
        })
        .unwrap();
    let mine: i64 = db
        .query_row(
            "SELECT COUNT(*) FROM trials WHERE candidate_id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(show["trials"], mine);
    assert_eq!(
        show["estimate"]["value"],
        record["estimates"][pick]["value"]
    );
    assert!(show["diff"]
        .as_str()
        .unwrap()
        .contains(&format!("+name = \"{pick}\"")));
    assert_eq!(show["test"]["role"], "pick");

    let ls: serde_json::Value = serde_json::from_str(&ok(&hevo()
        .arg("ls")
        .arg(run.parent().unwrap())
        .arg("--json")
        .output()
        .unwrap()))
    .unwrap();
    assert_eq!(ls.as_array().unwrap().len(), 1);
    assert_eq!(ls[0]["run"], "threshold");
    assert_eq!(ls[0]["trials"], trials);
}

#[test]
fn ls_lists_the_runs_of_a_directory() {
    let run = run_dir();
    let text = ok(&hevo()
        .arg("ls")
        .arg(run.parent().unwrap())
        .output()
        .unwrap());
    settings(run).bind(|| insta::assert_snapshot!(text));
}

/// `hevo ls RUN` (a run directory, not the folder of runs) said `no search runs` and
/// listed the run's own `smoke` and `test` stores as evaluations; it lists the run.
#[test]
fn ls_of_a_run_directory_lists_that_run() {
    let run = run_dir();
    let text = ok(&hevo().arg("ls").arg(run).output().unwrap());
    assert!(!text.contains("no search runs"), "{text}");
    assert!(!text.contains("evaluations"), "{text}");
    let line = text.lines().nth(1).unwrap_or_default();
    assert!(line.starts_with(&run.display().to_string()), "{text}");
    assert!(line.contains("finished"), "{text}");
    let doc: serde_json::Value = serde_json::from_str(&ok(&hevo()
        .args(["ls", "--json"])
        .arg(run)
        .output()
        .unwrap()))
    .unwrap();
    assert_eq!(doc.as_array().unwrap().len(), 1, "{doc}");
    assert_eq!(doc[0]["run"], "threshold", "{doc}");
}

/// `hevo ls` where there is no `runs/` (the README's first search keeps its runs beside
/// its hevo.toml) says where runs are kept.
#[test]
fn ls_without_a_runs_folder_says_where_runs_are_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let out = hevo().arg("ls").current_dir(tmp.path()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("`hevo run DIR` keeps its runs in DIR/runs/"),
        "{stderr}"
    );
}

/// `hevo ls` on a directory holding only a `hevo eval` run: no search, and the evaluation
/// named, so the user is not told the directory is empty.
#[test]
fn ls_names_the_evaluations_beside_the_searches() {
    let tmp = tempfile::tempdir().unwrap();
    let threshold = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/threshold");
    let runs = tmp.path().join("runs");
    ok(&hevo()
        .arg("eval")
        .arg(threshold.join("seed"))
        .arg("--suite")
        .arg(&threshold)
        .arg("--run-dir")
        .arg(runs.join("ev"))
        .args(["--no-model", "--no-progress"])
        .output()
        .unwrap());
    let text = ok(&hevo().arg("ls").arg(&runs).output().unwrap());
    assert!(text.starts_with("no search runs under"), "{text}");
    // The views of a search name what the directory is instead of "not a run directory".
    for cmd in ["status", "report"] {
        let out = hevo().arg(cmd).arg(runs.join("ev")).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{cmd}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("is a `hevo eval` run") && err.contains("hevo ls"),
            "{cmd}: {err}"
        );
    }
    assert!(
        text.contains("evaluations (`hevo eval`; the same command again prints its report from the store): ev\n"),
        "{text}"
    );
    // `--json` lists it too (it printed `[]`).
    let doc: serde_json::Value = serde_json::from_str(&ok(&hevo()
        .args(["ls", "--json"])
        .arg(&runs)
        .output()
        .unwrap()))
    .unwrap();
    assert_eq!(doc[0]["kind"], "eval", "{doc}");
    assert!(
        doc[0]["run_dir"].as_str().unwrap().ends_with("/ev"),
        "{doc}"
    );
}

#[test]
fn unknown_runs_and_candidates_exit_2_and_say_what_exists() {
    let run = run_dir();
    let out = hevo().arg("show").arg(run).arg("no-such").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no candidate `no-such`") && err.contains("seed.i3c1"),
        "{err}"
    );

    let missing = run.parent().unwrap().join("no-such-run");
    for cmd in ["status", "report"] {
        let out = hevo().arg(cmd).arg(&missing).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{cmd}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("no-such-run") && err.contains("is not a run directory"),
            "{err}"
        );
        assert!(
            err.contains(&run.display().to_string()),
            "{cmd} does not list the runs: {err}"
        );
    }
    let out = hevo().arg("ls").arg(&missing).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-run"));
}

/// The commands of docs/report.md, run as written (in a copy of the examples), and its
/// sample `status` output found in the real one: the page cannot rot.
#[test]
fn the_commands_in_docs_report_md_work_as_written() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/report.md"))
            .unwrap();
    let block = |lang: &str| -> Vec<String> {
        let start = doc.find(&format!("```{lang}\n")).unwrap() + lang.len() + 4;
        let end = start + doc[start..].find("```").unwrap();
        doc[start..end].lines().map(str::to_string).collect()
    };
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("examples")).unwrap();
    let st = Command::new("cp")
        .arg("-a")
        .arg(examples().join("threshold"))
        .arg(tmp.path().join("examples"))
        .status()
        .unwrap();
    assert!(st.success());
    let mut status_out = String::new();
    for line in block("sh") {
        let line = line.split('#').next().unwrap().trim();
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(words[0], "hevo", "{line}");
        let mut cmd = hevo();
        cmd.args(&words[1..]).current_dir(tmp.path());
        if words[1] == "run" {
            cmd.arg("--no-progress");
        }
        let out = ok(&cmd.output().unwrap());
        if words[1] == "status" {
            status_out = out;
        }
    }
    assert!(tmp
        .path()
        .join("examples/threshold/runs/threshold/report.html")
        .is_file());
    for line in block("text") {
        if line.trim() == "..." {
            continue;
        }
        // the sample's absolute path is the reader's; the run's own is under a temp dir
        let line = line.replace(
            "directory: /home/you/hevo/examples/threshold/runs/threshold",
            "directory: ",
        );
        assert!(
            status_out.lines().any(|l| l.contains(line.trim())),
            "docs/report.md shows {line:?}, which `hevo status` does not print:\n{status_out}"
        );
    }
}

/// A run its evaluation budget stopped half-way through an iteration reads back: `status`
/// says why it finished early and shows the pick with its interval, `report` writes its
/// page, and once the pick's directory is deleted it is named as missing, not replaced by
/// another candidate.
#[test]
fn a_budget_stopped_run_and_a_lost_pick_are_shown_as_they_are() {
    let tmp = tempfile::tempdir().unwrap();
    let example = examples().join("threshold").canonicalize().unwrap();
    let config = tmp.path().join("hevo.toml");
    std::fs::write(
        &config,
        format!(
            "suite = \"{0}\"\nseeds = [\"{0}/seed\"]\nseed = 11\n[model]\n[search]\n\
             iterations = 3\ncandidates_per_iteration = 2\n[evaluation]\n\
             strategy = \"recommended\"\nrho = 0.3\n[budget]\nmax_evaluations = 50\n",
            example.display()
        ),
    )
    .unwrap();
    let run = tmp.path().join("run");
    let out = hevo()
        .args(["run", "--no-progress", "--jobs", "2", "--run-dir"])
        .arg(&run)
        .arg(&config)
        .output()
        .unwrap();
    let text = ok(&out);
    assert!(text.contains("left out of the pick"), "{text}");

    let out = hevo()
        .args(["status", "--json"])
        .arg(&run)
        .output()
        .unwrap();
    let status: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
    let why = status["stopped_early"].as_str().unwrap_or_default();
    assert!(why.contains("evaluation budget of 50"), "{status}");
    let pick = status["best"]["name"].as_str().unwrap().to_string();
    assert!(status["best"]["estimate"]["value"].is_number(), "{status}");
    // The views count iterations as `hevo run` did, and label the candidates the budget
    // left out as such (they said 1 against the run's 0, and `evaluating`).
    let done = status["iterations_done"].as_u64().unwrap();
    let said = if done == 1 {
        "1 iteration".to_string()
    } else {
        format!("{done} iterations")
    };
    assert!(
        text.contains(&format!(", {said} (stopped early")),
        "{text}\n{status}"
    );
    let statuses: Vec<&str> = status["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["status"].as_str().unwrap())
        .collect();
    assert!(statuses.contains(&"left out"), "{status}");
    assert!(!statuses.contains(&"evaluating"), "{status}");
    let out = hevo().arg("status").arg(&run).output().unwrap();
    assert!(ok(&out).starts_with("run run: finished early: the evaluation budget"));
    let out = hevo().arg("report").arg(&run).output().unwrap();
    ok(&out);
    assert!(run.join("report.html").is_file());

    let names = archive_names(&run);
    let at = names.iter().position(|n| *n == pick).unwrap();
    std::fs::remove_dir_all(run.join(format!("archive/candidates/{at:03}-{pick}"))).unwrap();
    let out = hevo().arg("status").arg(&run).output().unwrap();
    let text = ok(&out);
    assert!(
        text.contains(&format!("pick: {pick} (its directory is missing")),
        "{text}"
    );
    assert_eq!(
        text.matches("pick:").count(),
        1,
        "another pick shown: {text}"
    );
}

/// A sampled candidate's `show` gives each task's weight in its estimate (1 / its inclusion
/// probability, the store's `draws`), in the text and as `inclusion` in `--json`, so that a
/// surprising estimate can be traced to the rarely drawn tasks that moved it. An exactly
/// known candidate's tasks all have inclusion 1, and its text has no weight column.
#[test]
fn show_gives_a_sampled_candidates_weights_from_its_draws() {
    let run = run_dir();
    let db = rusqlite::Connection::open(run.join("hevo.db")).unwrap();
    let draws = |name: &str| -> std::collections::BTreeMap<String, f64> {
        let mut st = db
            .prepare(
                "SELECT d.task_id, d.inclusion_prob FROM draws d \
                 JOIN candidates c ON c.id = d.candidate_id \
                 WHERE c.name = ?1 AND d.label = 'val'",
            )
            .unwrap();
        let rows = st
            .query_map([name], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap();
        rows.map(Result::unwrap).collect()
    };
    let show = |name: &str, json: bool| {
        let mut c = hevo();
        c.arg("show").arg(run).arg(name);
        if json {
            c.arg("--json");
        }
        ok(&c.output().unwrap())
    };
    let sampled = draws("seed.i2c0");
    assert!(sampled.values().any(|&p| p < 1.0), "{sampled:?}");
    let doc: serde_json::Value = serde_json::from_str(&show("seed.i2c0", true)).unwrap();
    let tasks = doc["tasks"].as_array().unwrap();
    assert!(!tasks.is_empty());
    let text = show("seed.i2c0", false);
    assert!(text.contains("sampled: mean outcome"), "{text}");
    assert!(text.contains("  weight "), "{text}");
    for t in tasks {
        let id = t["task"].as_str().unwrap();
        let p = sampled[id];
        assert_eq!(t["inclusion"], p, "{t}");
        let row = text
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{id} ")))
            .unwrap_or_else(|| panic!("no row for {id}: {text}"));
        assert!(row.contains(&format!(" {:>7.1} ", 1.0 / p)), "{row}");
    }
    // The report's table of the candidate's tasks gives the same weights.
    let tmp = tempfile::tempdir().unwrap();
    let copy = copy_of_run(tmp.path(), "runs/threshold");
    ok(&hevo().arg("report").arg(&copy).output().unwrap());
    let html = std::fs::read_to_string(copy.join("report.html")).unwrap();
    assert!(
        html.contains(">weight</th>"),
        "no weight column in the report"
    );
    for t in tasks {
        let id = t["task"].as_str().unwrap();
        let row = format!(
            "<tr><td>{id}</td><td class=\"num\">{:.2}</td><td class=\"num\">{}</td><td class=\"num\">{:.1}</td>",
            t["outcome"].as_f64().unwrap(),
            t["trials"],
            1.0 / sampled[id]
        );
        assert!(html.contains(&row), "{row} is not in the report");
    }
    let exact = draws("seed.i3c1");
    assert!(exact.values().all(|&p| p == 1.0), "{exact:?}");
    let doc: serde_json::Value = serde_json::from_str(&show("seed.i3c1", true)).unwrap();
    assert!(doc["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["inclusion"] == 1.0));
    let text = show("seed.i3c1", false);
    assert!(
        !text.contains("weight") && !text.contains("sampled:"),
        "{text}"
    );
}

/// `--out` naming a symbolic link, a FIFO or a device used to replace it with the report
/// (written beside it and renamed into place; as root, `--out /dev/full` deleted the device
/// node) and print `report: ...`. Each is refused, and left as it was; a folder is refused
/// naming the file to give instead.
#[test]
fn report_out_refuses_what_is_not_a_regular_file() {
    use std::os::unix::fs::FileTypeExt;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("target.html"), "old").unwrap();
    let link = tmp.path().join("link.html");
    std::os::unix::fs::symlink("target.html", &link).unwrap();
    let fifo = tmp.path().join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    for (out, needle) in [
        (&link, "it is a symbolic link (to `target.html`)"),
        (&fifo, "it is not a regular file (a FIFO, socket or device)"),
        (
            &tmp.path().to_path_buf(),
            "it is a folder; give a file, e.g. --out",
        ),
    ] {
        let o = hevo()
            .arg("report")
            .arg(run_dir())
            .arg("--out")
            .arg(out)
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{}: {e}", out.display());
        assert!(e.contains(needle), "{e}");
    }
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("target.html")).unwrap(),
        "old"
    );
}

/// A run whose `search.json` or a `candidate.toml` was edited into something unparsable
/// made `status`, `show` and `report` exit 1 (an internal failure) with the parser's words
/// only. They are the user's to mend: exit 2, naming the file and how to get it back.
#[test]
fn a_damaged_run_file_is_named_with_how_to_get_it_back() {
    let tmp = tempfile::tempdir().unwrap();
    let record = copy_of_run(tmp.path(), "record");
    std::fs::write(record.join("search.json"), "{x").unwrap();
    let meta = copy_of_run(tmp.path(), "meta");
    let first = std::fs::read_dir(meta.join("archive/candidates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .min()
        .unwrap();
    std::fs::write(first.join("candidate.toml"), "name = [").unwrap();
    for (run, needle) in [
        (
            &record,
            "run the same `hevo run` command again, which writes it anew",
        ),
        (&meta, "restore it from a copy of the run"),
    ] {
        for cmd in ["status", "report"] {
            let o = hevo().arg(cmd).arg(run).output().unwrap();
            let e = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{cmd}: {e}");
            assert!(
                e.contains("is not as hevo wrote it") && e.contains(needle),
                "{e}"
            );
        }
    }
}

/// `hevo finalize` reads the hevo.toml the search recorded; moved away, the error said
/// "pass a directory holding hevo.toml, or the file itself", which finalize cannot take.
/// It names the recorded path and where it is recorded.
#[test]
fn finalize_names_the_config_the_search_recorded_when_it_is_gone() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("threshold");
    let o = Command::new("cp")
        .arg("-a")
        .arg(examples().join("threshold"))
        .arg(&config)
        .status()
        .unwrap();
    assert!(o.success());
    let run = config.join("runs/t");
    let done = hevo()
        .args(["run", "--no-progress", "--iterations", "1", "--run-dir"])
        .arg(&run)
        .arg(&config)
        .output()
        .unwrap();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    std::fs::rename(config.join("hevo.toml"), config.join("moved.toml")).unwrap();
    let o = hevo().arg("finalize").arg(&run).output().unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("the hevo.toml this search ran with")
            && e.contains("as `config_file`")
            && e.contains("put the file back there"),
        "{e}"
    );
    assert!(!e.contains("pass a directory holding hevo.toml"), "{e}");
}
