use super::*;

/// Two empty code directories `a` and `b` in a temporary directory.
fn dirs() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (d.path().join("a"), d.path().join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    (d, a, b)
}

/// `lines` numbered lines of text, each with `tag` in it.
fn numbered(lines: usize, tag: &str) -> String {
    (0..lines).map(|i| format!("line {i} {tag}\n")).collect()
}

#[test]
fn changed_added_and_removed_files_each_get_a_hunk() {
    let (_d, a, b) = dirs();
    std::fs::create_dir_all(a.join("lib")).unwrap();
    std::fs::write(a.join("same.txt"), "x\n").unwrap();
    std::fs::write(b.join("same.txt"), "x\n").unwrap();
    std::fs::write(a.join("h.toml"), "threshold = 2\nstyle = \"a\"\n").unwrap();
    std::fs::write(b.join("h.toml"), "threshold = 6\nstyle = \"a\"\n").unwrap();
    std::fs::write(a.join("lib/old.py"), "pass\n").unwrap();
    std::fs::write(b.join("new.sh"), "echo hi\n").unwrap();
    std::fs::write(b.join("blob.bin"), [0xff, 0xfe, 0x00]).unwrap();
    std::fs::write(b.join("candidate.toml"), "name = \"b\"\n").unwrap();
    let text = diff_dirs(&a, &b);
    assert!(text.contains("Binary file blob.bin differs"), "{text}");
    assert!(text.contains("--- a/h.toml\n+++ b/h.toml\n"), "{text}");
    assert!(text.contains("-threshold = 2\n+threshold = 6\n"), "{text}");
    assert!(text.contains("--- /dev/null\n+++ b/new.sh\n"), "{text}");
    assert!(
        text.contains("--- a/lib/old.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-pass\n"),
        "{text}"
    );
    assert!(!text.contains("same.txt"), "{text}");
    assert!(!text.contains("candidate.toml"), "{text}");
    assert_eq!(diff_dirs(&a, &a), "");
}

/// A changed file over the per-file limit is one line with both sizes, however little
/// changed (the audit's 80,000-line files took 47 s to diff); an unchanged one is not
/// mentioned.
#[test]
fn a_file_over_the_size_limit_is_named_with_its_sizes_not_diffed() {
    let (_d, a, b) = dirs();
    let old = numbered(80_000, "x");
    let new = old.replace("line 40000 x\n", "line 40000 y\n");
    assert!(old.len() as u64 > MAX_FILE_BYTES);
    std::fs::write(a.join("big.txt"), &old).unwrap();
    std::fs::write(b.join("big.txt"), &new).unwrap();
    std::fs::write(a.join("same.txt"), &old).unwrap();
    std::fs::write(b.join("same.txt"), &old).unwrap();
    std::fs::write(b.join("added.txt"), &new).unwrap();
    let text = diff_dirs(&a, &b);
    assert_eq!(
        text,
        format!(
            "File added.txt changed (old: none, new: {n} bytes): too large to show (the limit \
             is 256 KiB per file)\n\
             File big.txt changed (old: {o} bytes, new: {n} bytes): too large to show (the \
             limit is 256 KiB per file)\n",
            o = old.len(),
            n = new.len()
        )
    );
}

/// Files within the per-file limit whose diffs add up to more than the per-candidate limit:
/// the diff stops at a line's end within it and names the rest.
#[test]
fn a_diff_over_the_candidate_limit_stops_and_names_what_it_left_out() {
    let (_d, a, b) = dirs();
    for i in 0..12 {
        std::fs::write(b.join(format!("f{i:02}.txt")), numbered(3_000, "x")).unwrap();
    }
    let text = diff_dirs(&a, &b);
    let (diff, last) = text.trim_end().rsplit_once('\n').unwrap();
    assert!(diff.len() < MAX_DIFF_BYTES, "{}", diff.len());
    assert!(
        diff.ends_with(" x"),
        "cut inside a line: {:?}",
        &diff[diff.len() - 40..]
    );
    assert!(diff.contains("+++ b/f00.txt\n") && diff.contains("+++ b/f01.txt\n"));
    assert!(!diff.contains("f11.txt"));
    assert!(
        last.starts_with("Diff cut at the 128 KiB limit per candidate; left out: the rest of f0"),
        "{last}"
    );
    assert!(last.ends_with(", f10.txt, f11.txt"), "{last}");
}

/// Past the deadline the diff is still correct (coarser) and says so.
#[test]
fn a_diff_past_its_deadline_is_still_correct_and_says_it_is_coarser() {
    let (_d, a, b) = dirs();
    std::fs::write(a.join("h.txt"), numbered(200, "a")).unwrap();
    let mut changed = numbered(200, "a");
    changed = changed.replace("line 50 a\n", "line 50 b\n");
    std::fs::write(b.join("h.txt"), &changed).unwrap();
    let text = diff_dirs_by(&a, &b, Instant::now());
    assert!(text.contains("-line 50 a\n+line 50 b\n"), "{text}");
    assert!(
        text.ends_with("Diff of h.txt is coarser than needed: the diffs took over the 2 s limit\n"),
        "{text}"
    );
}

/// docs/report.md states the limits users meet; it cannot drift from the constants.
#[test]
fn docs_report_md_states_these_limits() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/report.md"))
            .unwrap();
    for limit in [
        format!("**{} KiB per file**", MAX_FILE_BYTES / 1024),
        format!("**{} KiB per candidate**", MAX_DIFF_BYTES / 1024),
        format!("**{} s per candidate**", TIME_LIMIT.as_secs()),
    ] {
        assert!(doc.contains(&limit), "docs/report.md lacks {limit}");
    }
}

/// A file name with a line break (a proposer chooses its file names) split one diff line
/// into two, the second a line of the attacker's choosing.
#[test]
fn a_line_break_in_a_file_name_stays_in_its_line() {
    let (_d, a, b) = dirs();
    std::fs::write(b.join("x\n+++ forged"), "hi\n").unwrap();
    let text = diff_dirs(&a, &b);
    assert!(text.contains("+++ b/x\\u{a}+++ forged\n"), "{text}");
    assert!(!text.lines().any(|l| l == "+++ forged"), "{text}");
}
