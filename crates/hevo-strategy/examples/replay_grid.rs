//! The replay grid behind docs/replay.md: every workload (4 real matrices, 4 per-attempt
//! matrices, small per-attempt fields of 13 models x 5 attempts on 80 tasks, synthetic sd
//! 0.1 / 0.2 / 1.0, heavy-tailed costs) at rho 0.2 and 0.07, in one
//! process, one line per strategy. Each setting is exactly what `hevo replay` runs with the
//! flags in the first column (the CLI builds the same matrix and calls the same
//! `replay::run`).
//!
//! `cargo run --release -p hevo-strategy --example replay_grid -- SEEDS FIRST_SEED
//! [all|cheap|coevolve|STRATEGY] [WORKLOAD ...]` (workloads: real, att, small, rcost, synth,
//! cost, or a single name as printed in the first column; default all of them; `heldout`
//! selects the held-out check, below, and `costmodels` the cost-model check). `RHO=0.2`
//! runs one rho; the matrices are read from `HEVO_REPLAY_DATA` (default
//! /work/shared/data/replay).
//!
//! `heldout` is the check on matrices no constant was chosen on: the per-attempt, small-field,
//! cost and synthetic workloads drawn again with matrix seeds 2 and 3 (the tuning used 1),
//! seeded 20 x 150 samples of the real matrices, and four shapes never replayed before
//! (13 x 80 separable, 30 x 500, 120 x 300, 40 x 400 with costs). `costmodels` selects the
//! check on cost models no constant was chosen on: the four real matrices and synthetic
//! 60 x 200 sd 0.2 with costs of matrix seed 4 from the tuning model and four others (wide,
//! flat, anti, fail x3; docs/replay.md), named `COSTMODEL:WORKLOAD`. With `all`, each
//! setting ends with a `# verdict` line: `default`'s rank and the best peer spending at
//! least as much (dollars with costs, else evaluations).

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;

use hevo_stats::design::DEFAULT_MC_DRAWS;
use hevo_stats::estimate::Estimator;
use hevo_stats::synth::SynthParams;
use hevo_strategy::replay::{run, Matrix, ReplayConfig, StrategyRow};
use hevo_strategy::strategy::{PiMethod, StrategyKind};
use hevo_strategy::vocab::{StrategyName, StrategyOptions};

/// Where the matrices are (`HEVO_REPLAY_DATA` overrides).
const DATA: &str = "/work/shared/data/replay";
const REAL: [&str; 4] = [
    "lcb_codegen_v20240417",
    "lcb_codegen_v2025",
    "lcb_execution_v20241004",
    "lcb_testoutput_v20241004",
];

/// A seeded synthetic matrix of `c` candidates and `t` tasks (the near-identical model with
/// this ability spread, and heavy-tailed costs of this log-sd when above 0).
fn synth(c: usize, t: usize, spread: f64, cost: f64, seed: u64) -> Matrix {
    let params = SynthParams {
        ability_spread: spread,
        ..SynthParams::near_identical()
    }
    .with_costs(cost);
    Matrix::synthetic(c, t, &params, seed)
}

/// A cost model of the `costmodels` check: what `hevo replay`'s cost options do to the
/// parameters (`--synth-cost`, then `--synth-cost-candidate`, `--synth-cost-corr` or
/// `--synth-cost-fail`).
type CostModel = (&'static str, fn(SynthParams) -> SynthParams);

/// The tuning cost model and the four held-out ones (docs/replay.md).
const COST_MODELS: [CostModel; 5] = [
    ("base", |p| p.with_costs(1.0)),
    ("wide", |p| SynthParams {
        candidate_cost_log_sd: 1.0,
        ..p.with_costs(2.0)
    }),
    ("flat", |p| SynthParams {
        cost_difficulty_corr: 0.0,
        ..p.with_costs(1.0)
    }),
    ("anti", |p| SynthParams {
        cost_difficulty_corr: -0.5,
        ..p.with_costs(1.0)
    }),
    ("fail3", |p| SynthParams {
        failure_cost: 3.0,
        ..p.with_costs(1.0)
    }),
];

/// The `costmodels` workloads (module docs), named `COSTMODEL:WORKLOAD`, costs (and the
/// synthetic field) drawn with seed 4.
fn costmodels(data: &str) -> Vec<(String, Matrix)> {
    let seed = 4;
    let mut out = Vec::new();
    for (model, costs) in COST_MODELS {
        for r in REAL {
            let m = real(data, r)().with_synthetic_costs(&costs(SynthParams::default()), seed);
            out.push((format!("{model}:{r}"), m));
        }
        let field = costs(SynthParams {
            ability_spread: 0.2,
            ..SynthParams::near_identical()
        });
        out.push((
            format!("{model}:synth:0.2"),
            Matrix::synthetic(60, 200, &field, seed),
        ));
    }
    out
}

/// A workload recipe: its group, its name, and how to draw its matrix.
type Recipe = (&'static str, String, Box<dyn Fn() -> Matrix>);

/// The workloads drawn with matrix seed `seed` (per-attempt, small-field and cost versions
/// of the real matrices; synthetic fields with and without costs): the tuning grid draws
/// them with seed 1, the held-out check with 2 and 3. Built only when selected.
fn drawn(data: &str, seed: u64) -> Vec<Recipe> {
    let mut out: Vec<Recipe> = Vec::new();
    let attempts = |r: &str| {
        let p = format!("{data}/{r}.extra.csv");
        move || {
            parsed(format!("{p} x5 s{seed}"), || {
                Matrix::from_attempts(Path::new(&p), 5, seed).expect("attempts")
            })
        }
    };
    for r in REAL {
        out.push(("att", format!("att:{r}"), Box::new(attempts(r))));
    }
    for r in REAL {
        let att = attempts(r);
        let small = move || att().sample(13, 5, 80, seed);
        out.push(("small", format!("small:{r}"), Box::new(small)));
    }
    for r in REAL {
        let real = real(data, r);
        let rcost =
            move || real().with_synthetic_costs(&SynthParams::default().with_costs(1.0), seed);
        out.push(("rcost", format!("rcost:{r}"), Box::new(rcost)));
    }
    for sd in [0.1, 0.2, 1.0] {
        let m = move || synth(60, 200, sd, 0.0, seed);
        out.push(("synth", format!("synth:{sd}"), Box::new(m)));
    }
    for cost in [1.0, 1.5] {
        let m = move || synth(60, 200, 0.2, cost, seed);
        out.push(("cost", format!("cost:{cost}"), Box::new(m)));
    }
    out
}

/// How to read the real matrix `r`.
fn real(data: &str, r: &str) -> impl Fn() -> Matrix {
    let p = format!("{data}/{r}.csv");
    move || {
        parsed(p.clone(), || {
            Matrix::from_csv(Path::new(&p), None).expect("matrix")
        })
    }
}

/// The matrix `parse` reads, parsed once per process under `key` (its file and how it is
/// read): several recipes draw from one file (`att` and `small` from a `.extra.csv`, `rcost`
/// and the held-out `rsample` from a real `.csv`), and a held-out run would otherwise parse
/// each of those files twice per matrix seed.
fn parsed(key: String, parse: impl FnOnce() -> Matrix) -> Matrix {
    thread_local! {
        static PARSED: RefCell<HashMap<String, Matrix>> = RefCell::new(HashMap::new());
    }
    if let Some(m) = PARSED.with(|c| c.borrow().get(&key).cloned()) {
        return m;
    }
    let m = parse();
    PARSED.with(|c| c.borrow_mut().insert(key, m.clone()));
    m
}

fn workloads(sel: &[String]) -> Vec<(String, Matrix)> {
    let want =
        |group: &str, name: &str| sel.is_empty() || sel.iter().any(|s| s == group || s == name);
    let data = std::env::var("HEVO_REPLAY_DATA").unwrap_or_else(|_| DATA.into());
    let mut out = Vec::new();
    for r in REAL {
        let name = format!("real:{r}");
        if want("real", &name) {
            out.push((name, real(&data, r)()));
        }
    }
    for (group, name, build) in drawn(&data, 1) {
        if want(group, &name) {
            out.push((name, build()));
        }
    }
    // Only when asked for: `all` workloads stay the tuning grid.
    if sel.iter().any(|s| s == "heldout") {
        out.extend(heldout(&data));
    }
    if sel.iter().any(|s| s == "costmodels") {
        out.extend(costmodels(&data));
    }
    out
}

/// The held-out workloads (module docs), named `GROUP:...:sSEED`.
fn heldout(data: &str) -> Vec<(String, Matrix)> {
    let mut out = Vec::new();
    for seed in [2, 3] {
        for (_, name, build) in drawn(data, seed) {
            out.push((format!("{name}:s{seed}"), build()));
        }
        for r in REAL {
            let m = real(data, r)().sample(20, 1, 150, seed);
            out.push((format!("rsample:{r}:s{seed}"), m));
        }
        let shapes = [
            (13, 80, 1.0, 0.0),
            (30, 500, 0.5, 0.0),
            (120, 300, 0.3, 0.0),
        ];
        for (c, t, sd, cost) in shapes {
            let m = synth(c, t, sd, cost, seed);
            out.push((format!("shape:{c}x{t}:sd{sd}:s{seed}"), m));
        }
        let m = synth(40, 400, 1.0, 1.0, seed);
        out.push((format!("shape:40x400:sd1:cost:s{seed}"), m));
    }
    out
}

/// `default`'s rank against the best peer spending at least as much (dollar share with
/// costs, else evaluation share; `full` is no peer): the rank target, one line.
fn verdict(name: &str, rho: f64, rows: &[StrategyRow]) -> Option<String> {
    let spend = StrategyRow::spend;
    let d = rows.iter().find(|s| s.name == "default")?;
    let best = rows
        .iter()
        .filter(|s| s.name != "default" && s.name != "full" && spend(s) >= spend(d))
        .min_by(|a, b| a.rank.total_cmp(&b.rank));
    let (peer, kept) = match best {
        Some(p) => (
            format!("{} {:.2} ({:.3})", p.name, p.rank, spend(p)),
            p.rank >= d.rank,
        ),
        None => ("none".into(), true),
    };
    Some(format!(
        "# verdict\t{name}\t{rho}\tdefault {:.2} ± {:.2} ({:.3})\tbest peer spending as much: {peer}\t{}",
        d.rank,
        d.rank_se,
        spend(d),
        if kept { "kept" } else { "LOST" }
    ))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let seeds: u64 = args.first().map_or(20, |s| s.parse().expect("SEEDS"));
    let first_seed: u64 = args.get(1).map_or(0, |s| s.parse().expect("FIRST_SEED"));
    let which = args.get(2).map_or("all", String::as_str);
    let sel: Vec<String> = args.iter().skip(3).cloned().collect();
    let mc = PiMethod::MonteCarlo(DEFAULT_MC_DRAWS);
    let coevolve: Vec<StrategyKind> = [Some(Estimator::Hajek), Some(Estimator::Residual), None]
        .into_iter()
        .map(|estimator| StrategyKind::Coevolve { estimator, pi: mc })
        .collect();
    let cheap = vec![
        StrategyKind::Full,
        StrategyKind::Fixed,
        StrategyKind::Resample,
        StrategyKind::Screen { minibatch: 3 },
        StrategyKind::Race,
    ];
    let strategies = match which {
        "default" => vec![StrategyKind::Default],
        "cheap" => cheap,
        "coevolve" => coevolve,
        "all" => [cheap, coevolve, vec![StrategyKind::Default]].concat(),
        name => {
            let options = StrategyOptions {
                estimator: Some(Estimator::Hajek),
                pi: mc,
                minibatch: 3,
            };
            vec![name
                .parse::<StrategyName>()
                .expect("strategy")
                .kind(&options)]
        }
    };
    // `RHO=0.2` runs one rho only (bench/replay.md times single runs).
    let rhos: Vec<f64> = match std::env::var("RHO") {
        Ok(r) => vec![r.parse().expect("RHO")],
        Err(_) => vec![0.2, 0.07],
    };
    println!("workload\trho\tstrategy\trank\trank_se\tevals\tcost_share\tpick_cov\tfield_cov");
    for (name, m) in workloads(&sel) {
        for &rho in &rhos {
            let cfg = ReplayConfig {
                strategies: strategies.clone(),
                rho,
                per_iter: 3,
                seeds,
                first_seed,
                split: true,
                threads: std::env::var("THREADS").map_or(1, |t| t.parse().expect("THREADS")),
            };
            let r = run(&m, &cfg);
            for s in &r.strategies {
                println!(
                    "{name}\t{rho}\t{}\t{:.2}\t{:.2}\t{:.3}\t{}\t{:.2}\t{:.2}\t{:.3}",
                    s.name,
                    s.rank,
                    s.rank_se,
                    s.evals_share,
                    s.cost_share.map_or("-".into(), |c| format!("{c:.3}")),
                    s.pick_coverage,
                    s.field_coverage,
                    s.field_rmse
                );
            }
            if which == "all" {
                if let Some(line) = verdict(&name, rho, &r.strategies) {
                    println!("{line}");
                }
            }
        }
    }
}
