use std::collections::HashMap;
use std::time::Duration;

use super::*;

/// The time limit the tests' rows are judged under.
const LIMIT: Duration = Duration::from_secs(1);

fn row(task: &str, idx: u32, status: &str) -> TrialRow {
    TrialRow {
        run_id: "r".into(),
        candidate_id: 1,
        task_id: task.into(),
        trial_index: idx,
        outcome: 1.0,
        status: status.into(),
        spend: Default::default(),
        wall_ms: 10,
        attempts: 1,
        trace_path: None,
        error: None,
        answer: None,
        task_key: "k".into(),
    }
}

#[test]
fn a_finished_trial_is_written_once_and_infra_errors_are_replaced() {
    let d = tempfile::tempdir().unwrap();
    let mut s = Store::open(&d.path().join("hevo.db")).unwrap();
    s.ensure_run("r", "eval", "{}").unwrap();
    let c = s.ensure_candidate("r", "h", "abc", "{}", None).unwrap();
    assert_eq!(c, s.ensure_candidate("r", "h", "abc", "{}", None).unwrap());
    s.insert_trials(&[row("a", 0, "pass"), row("b", 0, "infra_error")])
        .unwrap();
    s.insert_trials(&[row("a", 0, "fail"), row("b", 0, "pass")])
        .unwrap();
    let rows = s.trials_of(c).unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].status, "pass");
    assert_eq!(rows[1].status, "pass");
    let keys: HashMap<String, String> = [("a".into(), "k".into()), ("b".into(), "k".into())].into();
    assert_eq!(s.finished_units(c, &keys, LIMIT).unwrap().len(), 2);
    // A changed task is not finished, and its new row replaces the stale one.
    let changed: HashMap<String, String> =
        [("a".into(), "k2".into()), ("b".into(), "k".into())].into();
    assert_eq!(s.finished_units(c, &changed, LIMIT).unwrap().len(), 1);
    let mut fresh = row("a", 0, "fail");
    fresh.task_key = "k2".into();
    s.insert_trials(&[fresh]).unwrap();
    assert_eq!(s.trials_of(c).unwrap()[0].status, "fail");
    assert_eq!(s.finished_units(c, &changed, LIMIT).unwrap().len(), 2);
    assert_eq!(s.mean_wall_ms_by_task().unwrap()["a"], 10.0);
    // Reopening keeps everything.
    drop(s);
    let s = Store::open(&d.path().join("hevo.db")).unwrap();
    assert_eq!(s.trial_count().unwrap(), 2);
}

/// A trial stopped by a shorter time limit than the one in force is not finished and its
/// new row replaces it; one that ran the whole current limit is finished.
#[test]
fn a_timeout_under_a_shorter_limit_runs_again() {
    let d = tempfile::tempdir().unwrap();
    let mut s = Store::open(&d.path().join("hevo.db")).unwrap();
    s.ensure_run("r", "eval", "{}").unwrap();
    let c = s.ensure_candidate("r", "h", "abc", "{}", None).unwrap();
    let mut timed_out = row("a", 0, "timeout");
    timed_out.wall_ms = 1_000;
    s.insert_trials(&[timed_out, row("b", 0, "pass")]).unwrap();
    let keys: HashMap<String, String> = [("a".into(), "k".into()), ("b".into(), "k".into())].into();
    let finished = |s: &Store, secs| {
        s.finished_units(c, &keys, Duration::from_secs(secs))
            .unwrap()
    };
    assert_eq!(
        finished(&s, 1).len(),
        2,
        "it ran the whole limit: it would time out again"
    );
    assert_eq!(finished(&s, 5), [("b".to_string(), 0)].into());
    s.insert_trials(&[row("a", 0, "pass")]).unwrap();
    assert_eq!(s.trials_of(c).unwrap()[0].status, "pass");
    assert_eq!(finished(&s, 5).len(), 2);
}

/// Every field of a trial row comes back as written: each spend column, the wall time and
/// the texts land in their own field (distinct values, so a swapped column shows).
#[test]
fn a_trial_row_reads_back_field_for_field() {
    let d = tempfile::tempdir().unwrap();
    let mut s = Store::open(&d.path().join("hevo.db")).unwrap();
    s.ensure_run("r", "eval", "{}").unwrap();
    let c = s.ensure_candidate("r", "h", "abc", "{}", None).unwrap();
    let mut written = row("a", 2, "fail");
    written.candidate_id = c;
    written.outcome = 0.25;
    written.spend = crate::spend::Spend {
        calls: 3,
        input_tokens: 1_001,
        cached_tokens: 202,
        output_tokens: 33,
        cost_usd: 0.0125,
    };
    written.wall_ms = 4_567;
    written.attempts = 2;
    written.trace_path = Some("traces/a/2".into());
    written.error = Some("wrong answer".into());
    written.answer = Some("\"42\"".into());
    s.insert_trials(std::slice::from_ref(&written)).unwrap();
    assert_eq!(s.trials_of(c).unwrap(), vec![written.clone()]);
    let spend = s
        .connection()
        .query_row(
            "SELECT input_tokens, cached_tokens, output_tokens, cost_usd, model_calls FROM trials",
            [],
            |r| spend_at(r, 0),
        )
        .unwrap();
    assert_eq!(spend, written.spend);
}

/// A store file that is empty, truncated or not a database is named as such, with the fix,
/// as the user's error (exit 2), SQLite's message once; a good store opens as before.
#[test]
fn an_empty_or_damaged_store_is_named_with_the_fix() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("hevo.db");
    let mut store = Store::open(&path).unwrap();
    store.ensure_run("r", "eval", "{}").unwrap();
    store.ensure_candidate("r", "h", "abc", "{}", None).unwrap();
    store.insert_trials(&[row("a", 0, "pass")]).unwrap();
    drop(store);
    assert!(Store::open_read_only(&path).is_ok());
    let good = std::fs::read(&path).unwrap();

    std::fs::write(&path, b"").unwrap();
    let e = Store::open_read_only(&path).unwrap_err();
    assert!(e.is_user_error(), "{e}");
    assert!(e.to_string().contains("not a readable hevo store"), "{e}");
    assert!(e.to_string().contains("--run-dir"), "{e}");

    for bytes in [
        &good[..good.len().min(3000)],
        b"not sqlite at all, just text".as_slice(),
    ] {
        std::fs::write(&path, bytes).unwrap();
        for e in [
            Store::open_read_only(&path).unwrap_err(),
            Store::open(&path).unwrap_err(),
        ] {
            let msg = e.to_string();
            assert!(e.is_user_error(), "{msg}");
            assert!(msg.contains("not a readable hevo store"), "{msg}");
            assert!(!msg.contains("Error code"), "SQLite's message twice: {msg}");
        }
    }
}

/// A run's id is the one its store was created with: its folder's name for a new run, kept
/// when the folder is moved; a nested store's is `<run>/<name>`, or whatever its store says
/// (`test` for one written before that rule).
#[test]
fn a_run_keeps_the_id_its_store_was_created_with() {
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("test");
    assert_eq!(run_id(&run), "test");
    assert_eq!(nested_run_id(&run, "test"), "test/test");
    assert_eq!(nested_run_id(&run, "smoke"), "test/smoke");
    let created = |dir: &Path, id: &str| {
        std::fs::create_dir_all(dir).unwrap();
        let s = Store::open(&dir.join("hevo.db")).unwrap();
        s.ensure_run(id, "search", "{}").unwrap();
    };
    created(&run, "test");
    created(&run.join("test"), "test");
    created(&run.join("smoke"), "test/smoke");
    let moved = d.path().join("moved");
    std::fs::rename(&run, &moved).unwrap();
    assert_eq!(run_id(&moved), "test");
    assert_eq!(nested_run_id(&moved, "test"), "test");
    assert_eq!(nested_run_id(&moved, "smoke"), "test/smoke");
    // A store an older hevo resumed after a move holds two runs; the latest has every
    // candidate.
    let again = Store::open(&moved.join("hevo.db")).unwrap();
    again.ensure_run("moved", "search", "{}").unwrap();
    drop(again);
    assert_eq!(run_id(&moved), "moved");
    // A store with no run recorded yet (the ledger creates the schema first).
    let fresh = d.path().join("fresh");
    std::fs::create_dir_all(&fresh).unwrap();
    drop(Store::open(&fresh.join("hevo.db")).unwrap());
    assert_eq!(run_id(&fresh), "fresh");
    assert_eq!(nested_run_id(&fresh, "smoke"), "fresh/smoke");
}

/// A candidate is found by where its code lives in the run directory, wherever the run
/// directory was when it was stored; a name's `_` or `%` is not a pattern.
#[test]
fn a_candidate_is_found_by_its_code_path_inside_a_moved_run() {
    let d = tempfile::tempdir().unwrap();
    let s = Store::open(&d.path().join("hevo.db")).unwrap();
    let stored = "/old/place/r/archive/candidates/001-a_b/code";
    let id = s
        .ensure_candidate("r", "a_b", "h", "{}", Some(stored))
        .unwrap();
    let at = |p: &str| s.candidate_at(p).unwrap();
    assert_eq!(at("archive/candidates/001-a_b/code"), Some(id));
    assert_eq!(at("archive/candidates/001-aXb/code"), None);
    assert_eq!(at("rchive/candidates/001-a_b/code"), None);
    assert_eq!(at("archive/candidates/001-a%/code"), None);
}
