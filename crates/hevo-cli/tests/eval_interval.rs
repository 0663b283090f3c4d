//! `hevo eval --trials R`: the printed interval agrees with the printed standard error. The
//! real binary runs a real harness process whose answers are random, so every task's
//! outcome is the mean of its repeated trials.

use std::path::Path;

mod support;
use support::{eval_command, json_of, write};

/// The 95% Wilson interval for `p` on `n` observations (the one `hevo eval` printed for
/// every `--trials` before).
fn wilson(p: f64, n: f64) -> (f64, f64) {
    let z2 = 1.96f64 * 1.96;
    let d = 1.0 + z2 / n;
    let c = (p + z2 / (2.0 * n)) / d;
    let h = 1.96 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / d;
    (c - h, c + h)
}

/// 30 tasks, each passed with its own probability (0.3 to 0.7, given in its input), 6 trials
/// each. Before, the interval was Wilson's at one observation per task: about 2.7 standard
/// errors each side, wider than the `se` printed beside it says. Now it is about `t se`
/// (Student's 0.975 quantile at 29 degrees of freedom, 2.045), within 10% (Wilson's interval
/// is a little asymmetric), and narrower than before.
#[test]
fn repeated_trials_print_the_interval_their_standard_error_says() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write(
        &dir.join("h/harness.toml"),
        "entry = [\"python3\", \"h.py\"]\n",
    );
    write(
        &dir.join("h/h.py"),
        "import json, random, sys\n\
         p = float(json.load(sys.stdin))\n\
         print(json.dumps({\"answer\": \"ok\" if random.random() < p else \"no\"}))\n",
    );
    write(
        &dir.join("suite/suite.toml"),
        "name = \"s\"\n[scorer]\nkind = \"exact\"\n",
    );
    let tasks: String = (0..30)
        .map(|i| {
            let p = 0.3 + 0.4 * f64::from(i) / 29.0;
            format!("{{\"id\":\"t{i}\",\"split\":\"val\",\"input\":{p:.3},\"expected\":\"ok\"}}\n")
        })
        .collect();
    write(&dir.join("suite/tasks.jsonl"), &tasks);
    let out = eval_command(dir)
        .args(["--trials", "6", "--jobs", "2"])
        .output()
        .unwrap();
    let v = json_of(&out);
    assert_eq!(v["trials"], 180, "{v}");
    let (p, se) = (v["pass_rate"].as_f64().unwrap(), v["se"].as_f64().unwrap());
    let (lo, hi) = (
        v["ci_low"].as_f64().unwrap(),
        v["ci_high"].as_f64().unwrap(),
    );
    let half = (hi - lo) / 2.0;
    let ratio = half / (2.045 * se);
    assert!(
        (0.9..=1.1).contains(&ratio),
        "interval [{lo:.3}, {hi:.3}] is {ratio:.2} x t se ({se:.4}) each side"
    );
    let (wlo, whi) = wilson(p, 30.0);
    assert!(
        hi - lo < 0.9 * (whi - wlo),
        "[{lo:.3}, {hi:.3}] is not narrower than one observation per task's [{wlo:.3}, {whi:.3}]"
    );
    assert!(lo <= p && p <= hi);
    assert!(Path::new(&dir.join("run/hevo.db")).exists());
}
