//! The bash scripts hevo submits: one per launch (an element), and one per job array that
//! runs the element of its `SLURM_ARRAY_TASK_ID`.
//!
//! An element runs the command with exactly the [`LaunchSpec`]'s environment (`env -i`,
//! after `sbatch --export=NONE`), its stdin from the spool, stdout and stderr into the trace
//! files, and then writes the exit marker (`<code> <start ms> <end ms>`, atomically with a
//! rename) that lets a restarted hevo read back a job that finished while it was down. A
//! job killed by Slurm (cancelled, timed out, its node lost) writes none.

use std::path::{Path, PathBuf};

use super::spool::Spool;
use super::SlurmOptions;
use crate::launch::LaunchSpec;

/// Quotes `s` for bash (single quotes, `'` written as `'\''`).
pub(crate) fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn path(p: &Path) -> String {
    quote(&p.to_string_lossy())
}

fn header(options: &SlurmOptions) -> String {
    let mut s = String::from("#!/bin/bash\n");
    for line in &options.extra {
        s += &format!("#SBATCH {line}\n");
    }
    s
}

/// The script of one launch (submitted alone, or run by an array's script).
pub(crate) fn element(options: &SlurmOptions, spec: &LaunchSpec, spool: &Spool) -> String {
    let null = PathBuf::from("/dev/null");
    let mut s = header(options);
    s += &format!("cd {} || exit 1\n", path(&spec.cwd));
    s += "start=$(date +%s%3N)\n";
    s += "env -i";
    for (k, v) in &spec.env {
        s += &format!(" {}", quote(&format!("{k}={v}")));
    }
    for a in options.wrapper.iter().chain(&spec.argv) {
        s += &format!(" {}", quote(a));
    }
    s += &format!(
        " < {} > {} 2> {}\n",
        path(&spool.stdin()),
        path(spec.stdout_path.as_ref().unwrap_or(&null)),
        path(spec.stderr_path.as_ref().unwrap_or(&null)),
    );
    let exit = spool.exit();
    let tmp = spool.dir.join("exit.tmp");
    s += "code=$?\n";
    s += &format!(
        "printf '%s %s %s\\n' \"$code\" \"$start\" \"$(date +%s%3N)\" > {} && mv -f {} {}\n",
        path(&tmp),
        path(&tmp),
        path(&exit)
    );
    s += "exit \"$code\"\n";
    s
}

/// The script of a job array whose element `i` runs `elements[i]`.
pub(crate) fn array(options: &SlurmOptions, elements: &[PathBuf]) -> String {
    let mut s = header(options);
    s += "scripts=(";
    for e in elements {
        s += &format!(" {}", path(e));
    }
    s += " )\n";
    s += "exec bash \"${scripts[$SLURM_ARRAY_TASK_ID]}\"\n";
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cancel::Cancel;
    use std::time::Duration;

    #[test]
    fn the_element_passes_exactly_the_environment_and_quotes_everything() {
        let spec = LaunchSpec {
            argv: vec!["python3".into(), "it's.py".into()],
            cwd: "/w".into(),
            env: vec![("A".into(), "x y'z".into())],
            stdin: vec![],
            timeout: Duration::from_secs(5),
            grace: Duration::from_secs(1),
            stdout_path: Some("/t/0.stdout".into()),
            stderr_path: None,
            output_cap: 10,
            tail_bytes: 0,
            cancel: Cancel::new(),
            access: Default::default(),
        };
        let opts = SlurmOptions {
            extra: vec!["--qos=short".into()],
            ..Default::default()
        };
        let spool = Spool::new(Path::new("/s"), "hevo-1");
        let s = element(&opts, &spec, &spool);
        assert!(s.contains("#SBATCH --qos=short\n"), "{s}");
        assert!(s.contains("cd '/w' || exit 1\n"), "{s}");
        assert!(
            s.contains(
                r"env -i 'A=x y'\''z' 'python3' 'it'\''s.py' < '/s/hevo-1/stdin' > '/t/0.stdout' 2> '/dev/null'"
            ),
            "{s}"
        );
        assert!(
            s.contains("mv -f '/s/hevo-1/exit.tmp' '/s/hevo-1/exit'"),
            "{s}"
        );
        let a = array(&opts, &[spool.script(), "/s/it's/job.sh".into()]);
        assert!(
            a.contains(r"scripts=( '/s/hevo-1/job.sh' '/s/it'\''s/job.sh' )"),
            "{a}"
        );
        assert!(a.contains("${scripts[$SLURM_ARRAY_TASK_ID]}"), "{a}");
    }
}
