//! A candidate's code against its parent's: a plain unified diff over the files of both
//! `code/` directories (text files; a binary file is named, not shown). A top-level
//! `candidate.toml` is metadata the proposer wrote (shown on its own), not code: it is left
//! out.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use similar::TextDiff;

/// Lines of context around each change.
const CONTEXT: usize = 3;

/// The metadata file a proposer leaves in a candidate's code directory.
const META_FILE: &str = "candidate.toml";

/// The unified diff from `old` to `new` (two code directories), files in path order; an
/// empty string when they hold the same files with the same text.
pub fn diff_dirs(old: &Path, new: &Path) -> String {
    let mut paths = BTreeSet::new();
    collect(old, old, &mut paths);
    collect(new, new, &mut paths);
    let mut out = String::new();
    for rel in paths {
        if rel == Path::new(META_FILE) {
            continue;
        }
        let a = std::fs::read(old.join(&rel)).ok();
        let b = std::fs::read(new.join(&rel)).ok();
        if a == b {
            continue;
        }
        let name = rel.to_string_lossy();
        let text = |bytes: &Option<Vec<u8>>| match bytes {
            None => Some(String::new()),
            Some(b) => String::from_utf8(b.clone()).ok(),
        };
        let (Some(ta), Some(tb)) = (text(&a), text(&b)) else {
            out += &format!("Binary file {name} differs\n");
            continue;
        };
        let old_name = if a.is_some() {
            format!("a/{name}")
        } else {
            "/dev/null".into()
        };
        let new_name = if b.is_some() {
            format!("b/{name}")
        } else {
            "/dev/null".into()
        };
        let diff = TextDiff::from_lines(&ta, &tb);
        let mut unified = diff.unified_diff();
        unified.context_radius(CONTEXT).header(&old_name, &new_name);
        let mut text = unified.to_string();
        if !text.ends_with('\n') {
            text.push('\n');
        }
        out += &text;
    }
    out
}

/// Every file under `dir`, relative to `root`.
fn collect(root: &Path, dir: &Path, out: &mut BTreeSet<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(root, &p, out);
        } else if let Ok(rel) = p.strip_prefix(root) {
            out.insert(rel.to_path_buf());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_added_and_removed_files_each_get_a_hunk() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        std::fs::create_dir_all(a.join("lib")).unwrap();
        std::fs::create_dir_all(&b).unwrap();
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
}
