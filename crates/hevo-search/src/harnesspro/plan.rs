//! Planning and editing (SPEC.md section 3, step 3): the three instructions, the workspace
//! of one child's plan-and-edit call, and the checks of what the agent left.
//!
//! One agent call per child: it reads its instruction, the parent's diagnoses and metrics
//! and the other candidates' diffs and diagnoses (`context/`, read-only), writes its plan
//! to `plan/PLAN.md` and implements it in `harness/`, a copy of the parent's code. It sees
//! no validation or test task, no expected answer and no score.

use std::path::{Path, PathBuf};

/// One of the three planning instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Instruction {
    /// `I1`, `I2` or `I3`.
    pub id: &'static str,
    /// What the plan puts first.
    pub text: &'static str,
}

/// I1 cost first, I2 balanced, I3 pass rate first (in this order, children 1, 2, 3).
pub const INSTRUCTIONS: [Instruction; 3] = [
    Instruction {
        id: "I1",
        text: "Cost first: cut the tokens, calls and time per task as far as you can while \
               keeping the pass rate of the parent.",
    },
    Instruction {
        id: "I2",
        text: "Balanced: improve the pass rate and cut the cost per task together; take a \
               change only when what it costs is worth what it gains.",
    },
    Instruction {
        id: "I3",
        text: "Pass rate first: raise the pass rate, and still remove every avoidable \
               overhead the diagnoses show (waste that does not help any run pass).",
    },
];

/// The rules every plan is given.
pub const RULES: &str = "Rules: predicted savings do not count, only hevo's measurement \
    of the edited harness does. The plan must generalize: no rule, string or branch for a \
    specific task id or input. Validation and test tasks are not shown to you and must not \
    be guessed. Change only files under harness/. In harness.toml, run only a program on PATH, \
    one in harness/ or one the parent runs, name only files inside harness/, and do not raise \
    `timeout_s`: hevo rejects a child that does (docs/security.md).";

/// Where the plan goes, relative to the workspace.
pub const PLAN_FILE: &str = "plan/PLAN.md";

/// The paths of one child's edit workspace.
pub struct EditWorkspace {
    /// The workspace (the agent's working directory).
    pub dir: PathBuf,
    /// `harness/`: a copy of the parent's code (plain files, no repository), the only code
    /// the agent may change.
    pub harness: PathBuf,
    /// `plan/`: where `PLAN.md` is written.
    pub plan_dir: PathBuf,
    /// `context/`: the instruction, diagnoses, metrics and diffs.
    pub context: PathBuf,
}

impl EditWorkspace {
    /// The layout under `dir` (nothing is created).
    pub fn at(dir: &Path) -> EditWorkspace {
        EditWorkspace {
            dir: dir.to_path_buf(),
            harness: dir.join("harness"),
            plan_dir: dir.join("plan"),
            context: dir.join("context"),
        }
    }
}

/// The prompt of one child's call.
pub fn prompt(parent: &str, child: &str, ins: Instruction) -> String {
    format!(
        "HEVO-HARNESSPRO-EDIT {id}. You are improving the LLM harness `{parent}` into a new \
         harness `{child}`. Instruction {id}: {text} Read context/instruction.md, \
         context/parent/ (its diagnoses and the metrics of its core-set runs) and \
         context/others/ (the diffs and diagnoses of the other candidates of this epoch). \
         Write your plan to {PLAN_FILE} (first line: a one-line summary), then implement it \
         by editing the files in harness/ (the parent's code; harness.toml is its manifest). \
         {RULES}",
        id = ins.id,
        text = ins.text,
    )
}

/// The most of a plan hevo reads.
pub const MAX_PLAN_BYTES: u64 = 256 * 1024;

/// The plan the agent wrote: its text, trimmed, or why there is none. It must be a regular
/// file: a link (to a secret of this user, to `/dev/zero`) or a FIFO is refused unread.
pub fn read_plan(ws: &EditWorkspace) -> Result<String, String> {
    use hevo_runtime::untrusted::{read_text, Refused};
    let path = ws.dir.join(PLAN_FILE);
    let text = read_text(&path, MAX_PLAN_BYTES).map_err(|e| match e {
        Refused::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            format!("the agent wrote no `{PLAN_FILE}`")
        }
        Refused::Link { target, .. } => {
            format!("`{PLAN_FILE}` is a symbolic link (to `{target}`), not a file: it is not read")
        }
        Refused::Special { kind, .. } => {
            format!("`{PLAN_FILE}` is {kind}, not a regular file: it is not read")
        }
        Refused::TooLarge { .. } => {
            format!("`{PLAN_FILE}` is larger than {} KiB", MAX_PLAN_BYTES / 1024)
        }
        other => format!("cannot read `{PLAN_FILE}`: {other}"),
    })?;
    let text = text.trim();
    if text.is_empty() {
        return Err(format!("`{PLAN_FILE}` is empty"));
    }
    Ok(text.to_string())
}

/// The plan's first line (the child's hypothesis).
pub fn summary(plan: &str) -> String {
    plan.lines()
        .next()
        .unwrap_or_default()
        .trim_start_matches('#')
        .trim()
        .chars()
        .take(200)
        .collect()
}

/// A task id of `task_ids` that a line the diff adds names in quotes, if any: such an
/// edit targets a specific task.
pub fn names_a_task<'a>(diff: &str, task_ids: &'a [String]) -> Option<&'a str> {
    diff.lines()
        .filter(|l| l.starts_with('+') && !l.starts_with("+++"))
        .find_map(|l| {
            task_ids
                .iter()
                .find(|id| l.contains(&format!("\"{id}\"")) || l.contains(&format!("'{id}'")))
        })
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_instructions_are_cost_balance_and_pass_rate_first() {
        let ids: Vec<&str> = INSTRUCTIONS.iter().map(|i| i.id).collect();
        assert_eq!(ids, ["I1", "I2", "I3"]);
        let p = prompt("a", "b", INSTRUCTIONS[0]);
        assert!(p.contains("HEVO-HARNESSPRO-EDIT I1") && p.contains("Cost first"));
        assert!(p.contains("predicted savings do not count"));
        // The manifest rule of a proposed candidate, before the agent spends an edit on it.
        assert!(p.contains("do not raise `timeout_s`") && p.contains("one in harness/"));
    }

    #[test]
    fn task_specific_edits_are_found() {
        let ids = vec!["r01".to_string(), "r02".to_string()];
        let diff = "+++ b/h.py\n-x = 1\n+if task['id'] == \"r02\": answer = 'A'\n";
        assert_eq!(names_a_task(diff, &ids), Some("r02"));
        assert_eq!(names_a_task("+shots = 2\n-\"r01\"\n", &ids), None);
        assert_eq!(summary("# Fewer shots\nmore"), "Fewer shots");
    }
}
