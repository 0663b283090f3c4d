//! An epoch's core set: the training tasks every candidate of the epoch runs `G` times, for
//! its diagnosis (SPEC.md section 3, step 1).
//!
//! Greedy MAP of a DPP (`hevo_stats::dpp`) over the kernel `L_ij = q_i S_ij q_j`:
//!
//! - **quality** `q_i = 0.5 + 2 p_i (1 - p_i)`, with `p_i` the mean outcome of task `i` over
//!   every core trial of every candidate so far (0.5 before any): tasks that some runs pass
//!   and others fail (difficulty near the middle) count twice as much as ones everybody
//!   passes or fails;
//! - **similarity** `S` is the cosine similarity of each task's features: its outcome
//!   profile (per candidate with trials on it, that candidate's mean outcome minus `p_i`:
//!   tasks failed by different candidates differ, the failure-mode diversity) followed by
//!   [`TEXT_BUCKETS`] hashed word counts of its input (so tasks differ before any history).
//!
//! Tasks are taken in id order, so the same history gives the same core set.

use std::collections::BTreeMap;

use hevo_runtime::store::TrialRow;
use hevo_runtime::task::Task;
use hevo_stats::dpp::{cosine_similarity, greedy_map, quality_diversity_kernel};

/// Hashed word buckets of a task's input in its feature vector.
pub const TEXT_BUCKETS: usize = 16;

/// Up to `k` task ids of `tasks` by greedy DPP, given `history[c]`, candidate `c`'s core
/// trials so far. Fewer than `k` only when the tasks run out (or the rest duplicate what
/// is chosen); in the order the greedy step picked them.
pub fn choose(tasks: &[&Task], history: &[Vec<TrialRow>], k: usize) -> Vec<String> {
    let mut tasks: Vec<&Task> = tasks.to_vec();
    tasks.sort_by(|a, b| a.id.cmp(&b.id));
    // mean outcome per (candidate, task) and per task
    let per_cand: Vec<BTreeMap<&str, f64>> = history.iter().map(|rows| means(rows)).collect();
    let all: Vec<TrialRow> = history.iter().flatten().cloned().collect();
    let overall = means(&all);
    let p: Vec<f64> = tasks
        .iter()
        .map(|t| overall.get(t.id.as_str()).copied().unwrap_or(0.5))
        .collect();
    let quality: Vec<f64> = p.iter().map(|p| 0.5 + 2.0 * p * (1.0 - p)).collect();
    let features: Vec<Vec<f64>> = tasks
        .iter()
        .zip(&p)
        .map(|(t, p)| {
            let mut v: Vec<f64> = per_cand
                .iter()
                .filter(|m| !m.is_empty())
                .map(|m| m.get(t.id.as_str()).map_or(0.0, |y| y - p))
                .collect();
            v.extend(text_features(&t.input.to_string()));
            v
        })
        .collect();
    let kernel = quality_diversity_kernel(&quality, &cosine_similarity(&features));
    greedy_map(&kernel, k.min(tasks.len()))
        .into_iter()
        .map(|i| tasks[i].id.clone())
        .collect()
}

/// Mean outcome per task of scored rows (`pass`, `fail`).
fn means(rows: &[TrialRow]) -> BTreeMap<&str, f64> {
    let mut sums: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    for r in rows
        .iter()
        .filter(|r| r.status == "pass" || r.status == "fail")
    {
        let e = sums.entry(r.task_id.as_str()).or_default();
        e.0 += r.outcome;
        e.1 += 1.0;
    }
    sums.into_iter().map(|(t, (s, n))| (t, s / n)).collect()
}

/// Word counts of `text` hashed (FNV-1a) into [`TEXT_BUCKETS`] buckets.
fn text_features(text: &str) -> Vec<f64> {
    let mut v = vec![0.0; TEXT_BUCKETS];
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let mut h: u64 = 0xcbf29ce484222325;
        for b in word.to_lowercase().bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
        v[(h % TEXT_BUCKETS as u64) as usize] += 1.0;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use hevo_runtime::task::Split;

    fn task(id: &str, text: &str) -> Task {
        Task {
            id: id.into(),
            split: Split::Train,
            group: None,
            input: serde_json::json!({ "q": text }),
            expected: serde_json::json!("A"),
            files: None,
            line: 1,
        }
    }

    fn row(task: &str, outcome: f64) -> TrialRow {
        TrialRow {
            run_id: "r".into(),
            candidate_id: 1,
            task_id: task.into(),
            trial_index: 0,
            outcome,
            status: if outcome > 0.0 { "pass" } else { "fail" }.into(),
            spend: Default::default(),
            wall_ms: 1,
            attempts: 1,
            trace_path: None,
            error: None,
            answer: None,
            task_key: String::new(),
        }
    }

    #[test]
    fn duplicates_are_left_out_and_the_size_is_capped() {
        let ts = [
            task("a", "apples and pears"),
            task("b", "apples and pears"),
            task("c", "the moon tonight"),
        ];
        let refs: Vec<&Task> = ts.iter().collect();
        let core = choose(&refs, &[], 3);
        assert_eq!(core.len(), 2, "{core:?}");
        assert!(core.contains(&"c".to_string()));
        assert_eq!(choose(&refs, &[], 1).len(), 1);
    }

    #[test]
    fn tasks_split_by_candidates_are_preferred_over_ones_all_pass() {
        // Same text everywhere: only the outcome history tells the tasks apart.
        let ts: Vec<Task> = (0..4)
            .map(|i| task(&format!("t{i}"), "same words"))
            .collect();
        let refs: Vec<&Task> = ts.iter().collect();
        // Candidate 0 passes t0, t1; candidate 1 passes t0, t2; both pass t3.
        let history = vec![
            vec![
                row("t0", 1.0),
                row("t1", 1.0),
                row("t2", 0.0),
                row("t3", 1.0),
            ],
            vec![
                row("t0", 1.0),
                row("t1", 0.0),
                row("t2", 1.0),
                row("t3", 1.0),
            ],
        ];
        let core = choose(&refs, &history, 2);
        assert_eq!(core.len(), 2);
        assert!(
            core.contains(&"t1".to_string()) && core.contains(&"t2".to_string()),
            "{core:?}"
        );
    }
}
