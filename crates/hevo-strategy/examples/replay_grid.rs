//! The replay grid behind docs/replay.md: every workload (4 real matrices, 4 per-attempt
//! matrices, small per-attempt fields of 13 models x 5 attempts on 80 tasks, synthetic sd
//! 0.1 / 0.2 / 1.0, heavy-tailed costs) at rho 0.2 and 0.07, in one
//! process, one line per strategy. Each setting is exactly what `hevo replay` runs with the
//! flags in the first column (the CLI builds the same matrix and calls the same
//! `replay::run`).
//!
//! `cargo run --release -p hevo-strategy --example replay_grid -- SEEDS FIRST_SEED
//! [all|cheap|coevolve|STRATEGY] [WORKLOAD ...]` (workloads: real, att, small, rcost, synth, cost, or a single name as
//! printed in the first column; default all of them). `RHO=0.2` runs one rho; the matrices
//! are read from `HEVO_REPLAY_DATA` (default /work/shared/data/replay).

use std::path::Path;

use hevo_stats::design::DEFAULT_MC_DRAWS;
use hevo_stats::estimate::Estimator;
use hevo_stats::synth::SynthParams;
use hevo_strategy::replay::{run, Matrix, ReplayConfig};
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

fn synth(spread: f64, cost: f64) -> Matrix {
    let params = SynthParams {
        ability_spread: spread,
        ..SynthParams::near_identical()
    }
    .with_costs(cost);
    Matrix::synthetic(60, 200, &params, 1)
}

fn workloads(sel: &[String]) -> Vec<(String, Matrix)> {
    let want =
        |group: &str, name: &str| sel.is_empty() || sel.iter().any(|s| s == group || s == name);
    let data = std::env::var("HEVO_REPLAY_DATA").unwrap_or_else(|_| DATA.into());
    let mut out = Vec::new();
    for r in REAL {
        let name = format!("real:{r}");
        if want("real", &name) {
            let p = format!("{data}/{r}.csv");
            out.push((name, Matrix::from_csv(Path::new(&p), None).expect("matrix")));
        }
    }
    for r in REAL {
        let name = format!("att:{r}");
        if want("att", &name) {
            let p = format!("{data}/{r}.extra.csv");
            out.push((
                name,
                Matrix::from_attempts(Path::new(&p), 5, 1).expect("attempts"),
            ));
        }
    }
    for r in REAL {
        let name = format!("small:{r}");
        if want("small", &name) {
            let p = format!("{data}/{r}.extra.csv");
            let m = Matrix::from_attempts(Path::new(&p), 5, 1).expect("attempts");
            out.push((name, m.sample(13, 5, 80, 1)));
        }
    }
    for r in REAL {
        let name = format!("rcost:{r}");
        if want("rcost", &name) {
            let p = format!("{data}/{r}.csv");
            let m = Matrix::from_csv(Path::new(&p), None).expect("matrix");
            out.push((name, m.with_synthetic_costs(1.0, 1)));
        }
    }
    for sd in [0.1, 0.2, 1.0] {
        let name = format!("synth:{sd}");
        if want("synth", &name) {
            out.push((name, synth(sd, 0.0)));
        }
    }
    for cost in [1.0, 1.5] {
        let name = format!("cost:{cost}");
        if want("cost", &name) {
            out.push((name, synth(0.2, cost)));
        }
    }
    out
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
                    "{name}\t{rho}\t{}\t{:.2}\t{:.2}\t{:.3}\t{}\t{:.2}\t{:.2}",
                    s.name,
                    s.rank,
                    s.rank_se,
                    s.evals_share,
                    s.cost_share.map_or("-".into(), |c| format!("{c:.3}")),
                    s.pick_coverage,
                    s.field_coverage
                );
            }
        }
    }
}
