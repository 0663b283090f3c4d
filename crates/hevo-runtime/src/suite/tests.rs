use serde_json::Value;

use super::*;

fn write_suite(dir: &Path, toml: &str, tasks: &str) {
    std::fs::write(dir.join("suite.toml"), toml).unwrap();
    std::fs::write(dir.join("tasks.jsonl"), tasks).unwrap();
}

const TOML: &str = "name = \"t\"\n[scorer]\nkind = \"exact\"\n";

#[test]
fn loads_a_valid_suite() {
    let d = tempfile::tempdir().unwrap();
    write_suite(
        d.path(),
        TOML,
        "{\"id\":\"a\",\"split\":\"val\",\"input\":1,\"expected\":2}\n\n\
         {\"id\":\"b\",\"split\":\"train\",\"group\":\"g\",\"input\":{},\"expected\":null}\n",
    );
    let s = Suite::load(d.path()).unwrap();
    assert_eq!(s.tasks.len(), 2);
    assert_eq!(s.split(Split::Val).len(), 1);
    assert_eq!(s.tasks[1].line, 3);
    assert_eq!(s.tasks[1].expected, Value::Null);
}

#[test]
fn reports_every_bad_line_at_once() {
    let d = tempfile::tempdir().unwrap();
    write_suite(
        d.path(),
        TOML,
        "{\"id\":\"a\",\"split\":\"val\",\"input\":1,\"expected\":2}\n\
         {\"id\":\"a\",\"split\":\"val\",\"input\":1,\"expected\":2}\n\
         {\"id\":\"c\",\"split\":\"dev\",\"input\":1,\"expected\":2}\n\
         {not json\n\
         {\"id\":\"e\",\"split\":\"val\",\"expected\":2}\n\
         {\"id\":\"f\",\"split\":\"val\",\"input\":1,\"expected\":2,\"files\":\"nope\"}\n",
    );
    let err = Suite::load(d.path()).unwrap_err();
    let SuiteError::Invalid { problems, .. } = &err else {
        panic!("{err}")
    };
    let lines: Vec<_> = problems.iter().map(|p| p.line.unwrap()).collect();
    assert_eq!(lines, vec![2, 3, 4, 5, 6], "{err}");
    let text = err.to_string();
    assert!(text.contains("tasks.jsonl:2: duplicate id `a`"), "{text}");
    assert!(text.contains("unknown split `dev`"), "{text}");
    assert!(text.contains("invalid JSON"), "{text}");
    assert!(text.contains("missing field `input`"), "{text}");
    assert!(
        text.contains("`files` folder `nope` does not exist"),
        "{text}"
    );
}

#[test]
fn strata_constrain_groups() {
    let d = tempfile::tempdir().unwrap();
    write_suite(
        d.path(),
        "name = \"t\"\nstrata = [\"x\"]\n[scorer]\nkind = \"label\"\n",
        "{\"id\":\"a\",\"split\":\"val\",\"group\":\"y\",\"input\":1,\"expected\":2}\n",
    );
    let err = Suite::load(d.path()).unwrap_err().to_string();
    assert!(
        err.contains("group `y` is not in the suite's `strata`"),
        "{err}"
    );
}

#[test]
fn bad_toml_is_reported_with_the_file() {
    let d = tempfile::tempdir().unwrap();
    write_suite(d.path(), "name = \"t\"\n[scorer]\nkind = \"fuzzy\"\n", "");
    let err = Suite::load(d.path()).unwrap_err().to_string();
    assert!(err.contains("suite.toml"), "{err}");
}

#[test]
fn a_tasks_file_without_tasks_is_named_with_the_format() {
    let d = tempfile::tempdir().unwrap();
    for empty in ["", "\n  \n"] {
        write_suite(d.path(), TOML, empty);
        let err = Suite::load(d.path()).unwrap_err().to_string();
        assert!(
            err.contains("tasks.jsonl: has no tasks: write one JSON object per line"),
            "{err}"
        );
    }
    // A file whose lines are all bad says so, line by line, not that it has no tasks.
    write_suite(d.path(), TOML, "{not json\n");
    let err = Suite::load(d.path()).unwrap_err().to_string();
    assert!(!err.contains("has no tasks"), "{err}");
}

#[test]
fn ids_sharing_a_trace_directory_are_refused_naming_the_rule() {
    let d = tempfile::tempdir().unwrap();
    write_suite(
        d.path(),
        TOML,
        "{\"id\":\"问题1\",\"split\":\"val\",\"input\":1,\"expected\":2}\n\
         {\"id\":\"答案1\",\"split\":\"val\",\"input\":1,\"expected\":2}\n",
    );
    let err = Suite::load(d.path()).unwrap_err().to_string();
    // 问 is a letter, but not an ASCII one: the message must not say "letters" alone.
    assert!(
        err.contains(
            "tasks.jsonl:2: id `答案1` and id `问题1` (line 1) share the trace directory name \
             `__1` (characters other than ASCII letters and digits, `-`, `_` and `.` become `_`)"
        ),
        "{err}"
    );
}

/// An id longer than a file name can be used to pass the suite check, and every trial of
/// it then failed as `infra_error` ("cannot create trace directory: File name too long").
#[test]
fn an_id_too_long_for_a_trace_directory_is_refused_at_load() {
    let d = tempfile::tempdir().unwrap();
    let long = "x".repeat(300);
    let most = "y".repeat(crate::task::MAX_ID_CHARS);
    write_suite(
        d.path(),
        TOML,
        &format!(
            "{{\"id\":\"{most}\",\"split\":\"val\",\"input\":1,\"expected\":2}}\n\
             {{\"id\":\"{long}\",\"split\":\"val\",\"input\":1,\"expected\":2}}\n"
        ),
    );
    let err = Suite::load(d.path()).unwrap_err().to_string();
    assert!(
        err.contains("tasks.jsonl:2: id `xxxxxxxxxxxxxxxxxxxxxxxx...` is 300 characters long")
            && err.contains("use at most 200 characters"),
        "{err}"
    );
    assert!(
        !err.contains("tasks.jsonl:1"),
        "an id of the most characters is fine: {err}"
    );
}

#[test]
fn files_naming_a_file_says_it_is_not_a_folder() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("files")).unwrap();
    std::fs::write(d.path().join("files/plain.txt"), "x").unwrap();
    write_suite(
        d.path(),
        TOML,
        "{\"id\":\"c\",\"split\":\"val\",\"input\":1,\"expected\":1,\"files\":\"files/plain.txt\"}\n",
    );
    let err = Suite::load(d.path()).unwrap_err().to_string();
    assert!(
        err.contains("tasks.jsonl:1: `files` = `files/plain.txt` is not a folder"),
        "{err}"
    );
    assert!(!err.contains("does not exist"), "{err}");
}
