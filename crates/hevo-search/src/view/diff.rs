//! A candidate's code against its parent's: a plain unified diff over the files of both
//! `code/` directories (text files; a binary file is named, not shown). A top-level
//! `candidate.toml` is metadata the proposer wrote (shown on its own), not code: it is left
//! out.
//!
//! A candidate may hold up to 100 MiB and a line diff takes time quadratic in the lines
//! that changed (two 80,000-line files took 47 s), so `hevo show` and `hevo report` bound
//! it, with one set of limits (docs/report.md lists them for users):
//!
//! - a file over [`MAX_FILE_BYTES`] on either side is not diffed: one line says it
//!   changed, its old and new sizes, and that it is too large to show;
//! - a candidate's diff stops at [`MAX_DIFF_BYTES`] of text, at a line's end; a last line
//!   names what was left out (the rest of the file it stopped in, the files after it);
//! - the line diffs of one candidate get [`TIME_LIMIT`] in all; past it the remaining
//!   differences are shown as whole-block replacements (still a correct diff, only
//!   coarser), and a line after each such file says so.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hevo_runtime::printable::one_line;
use similar::TextDiff;

/// A file larger than this (bytes, on either side) is named with its sizes, not diffed.
pub const MAX_FILE_BYTES: u64 = 256 * 1024;

/// A candidate's whole diff stops at this much text (bytes); what is left out is named.
pub const MAX_DIFF_BYTES: usize = 128 * 1024;

/// Time for all the line diffs of one candidate; later differences are shown coarser.
pub const TIME_LIMIT: Duration = Duration::from_secs(2);

/// Files named at most in the line that lists what the size limit left out.
const MAX_LEFT_OUT_NAMES: usize = 10;

/// Lines of context around each change.
const CONTEXT: usize = 3;

/// The metadata file a proposer leaves in a candidate's code directory.
const META_FILE: &str = "candidate.toml";

/// The unified diff from `old` to `new` (two code directories), files in path order,
/// within the limits above; an empty string when they hold the same files with the same
/// bytes.
pub fn diff_dirs(old: &Path, new: &Path) -> String {
    diff_dirs_by(old, new, Instant::now() + TIME_LIMIT)
}

/// [`diff_dirs`] with the line diffs' deadline given.
fn diff_dirs_by(old: &Path, new: &Path, deadline: Instant) -> String {
    let mut paths = BTreeSet::new();
    collect(old, old, &mut paths);
    collect(new, new, &mut paths);
    let mut out = String::new();
    let mut left_out = Vec::new();
    for rel in paths {
        if rel == Path::new(META_FILE) {
            continue;
        }
        // A file name is part of one line of the diff: a line break in it must not start
        // another (`hevo show` prints the diff through `printable`, which keeps them).
        let name = one_line(&rel.to_string_lossy()).into_owned();
        let (a, b) = (old.join(&rel), new.join(&rel));
        let (sa, sb) = (Side::read(&a), Side::read(&b));
        if same(&sa, &sb, &a, &b) {
            continue;
        }
        if !left_out.is_empty() {
            left_out.push(name);
            continue;
        }
        let text = file_diff(&name, &sa, &sb, deadline);
        let room = MAX_DIFF_BYTES - out.len();
        if text.len() <= room {
            out += &text;
        } else {
            // Cut at the end of a line; `\n` is one byte, so the cut is a char boundary.
            let cut = text.as_bytes()[..room]
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |i| i + 1);
            out += &text[..cut];
            left_out.push(match cut {
                0 => name,
                _ => format!("the rest of {name}"),
            });
        }
    }
    if !left_out.is_empty() {
        out += &left_out_line(&left_out);
    }
    out
}

/// One side of a changed path: missing, too large to diff (its size), or its bytes.
#[derive(PartialEq)]
enum Side {
    Missing,
    Large(u64),
    Bytes(Vec<u8>),
}

impl Side {
    /// The file at `path`, read only when it is within [`MAX_FILE_BYTES`].
    fn read(path: &Path) -> Side {
        match std::fs::metadata(path) {
            Err(_) => Side::Missing,
            Ok(m) if m.len() > MAX_FILE_BYTES => Side::Large(m.len()),
            Ok(_) => std::fs::read(path).map_or(Side::Missing, Side::Bytes),
        }
    }

    /// The size, as the "too large" line shows it.
    fn size(&self) -> String {
        match self {
            Side::Missing => "none".into(),
            Side::Large(n) => format!("{n} bytes"),
            Side::Bytes(b) => format!("{} bytes", b.len()),
        }
    }

    /// The text, or None for a binary file (missing reads as empty).
    fn text(&self) -> Option<&str> {
        match self {
            Side::Missing => Some(""),
            Side::Large(_) => None,
            Side::Bytes(b) => std::str::from_utf8(b).ok(),
        }
    }
}

/// Whether the two sides hold the same bytes (two large files of one size are compared
/// a block at a time, never read whole).
fn same(sa: &Side, sb: &Side, a: &Path, b: &Path) -> bool {
    match (sa, sb) {
        (Side::Large(x), Side::Large(y)) => x == y && same_content(a, b),
        _ => sa == sb,
    }
}

/// Whether files `a` and `b` hold the same bytes, read 64 KiB at a time.
fn same_content(a: &Path, b: &Path) -> bool {
    const BLOCK: u64 = 64 * 1024;
    let (Ok(mut fa), Ok(mut fb)) = (std::fs::File::open(a), std::fs::File::open(b)) else {
        return false;
    };
    let (mut ba, mut bb) = (Vec::new(), Vec::new());
    loop {
        ba.clear();
        bb.clear();
        let na = (&mut fa).take(BLOCK).read_to_end(&mut ba);
        let nb = (&mut fb).take(BLOCK).read_to_end(&mut bb);
        match (na, nb) {
            (Ok(0), Ok(0)) => return true,
            (Ok(_), Ok(_)) if ba == bb => {}
            _ => return false,
        }
    }
}

/// The diff of one changed file: a unified diff, or one line for a binary file or one
/// over [`MAX_FILE_BYTES`].
fn file_diff(name: &str, a: &Side, b: &Side, deadline: Instant) -> String {
    if matches!(a, Side::Large(_)) || matches!(b, Side::Large(_)) {
        return format!(
            "File {name} changed (old: {}, new: {}): too large to show (the limit is {} KiB \
             per file)\n",
            a.size(),
            b.size(),
            MAX_FILE_BYTES / 1024
        );
    }
    let (Some(ta), Some(tb)) = (a.text(), b.text()) else {
        return format!("Binary file {name} differs\n");
    };
    let label = |side: &Side, prefix: &str| match side {
        Side::Missing => "/dev/null".to_string(),
        _ => format!("{prefix}/{name}"),
    };
    let diff = TextDiff::configure().deadline(deadline).diff_lines(ta, tb);
    let mut unified = diff.unified_diff();
    unified
        .context_radius(CONTEXT)
        .header(&label(a, "a"), &label(b, "b"));
    let mut text = unified.to_string();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    if Instant::now() >= deadline {
        text += &format!(
            "Diff of {name} is coarser than needed: the diffs took over the {} s limit\n",
            TIME_LIMIT.as_secs()
        );
    }
    text
}

/// The last line of a diff cut at [`MAX_DIFF_BYTES`]: what it leaves out.
fn left_out_line(left_out: &[String]) -> String {
    let mut names = left_out[..left_out.len().min(MAX_LEFT_OUT_NAMES)].join(", ");
    if left_out.len() > MAX_LEFT_OUT_NAMES {
        names += &format!(
            " and {} more changed files",
            left_out.len() - MAX_LEFT_OUT_NAMES
        );
    }
    format!(
        "Diff cut at the {} KiB limit per candidate; left out: {names}\n",
        MAX_DIFF_BYTES / 1024
    )
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
mod tests;
