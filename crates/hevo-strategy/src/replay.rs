//! Offline replay of evaluation strategies on a logged candidate x task outcome matrix
//! (SPEC.md section 5).
//!
//! For each seed: tasks are split 50/50 into val and test (unless `split` is off), the
//! candidates are shuffled, the first two are Phase 0 (full val evaluation) and the rest
//! arrive `per_iter` at a time. Each strategy evaluates them through a matrix-lookup
//! [`Oracle`] that counts evaluations and cost; the pick is compared with the truth.
//! Replay cannot show overfitting of a fixed subset: logged candidates do not react to
//! feedback ([`CAVEAT`]).

use std::fmt;

use hevo_stats::design::Strata;
use hevo_stats::estimate::Estimate;
use hevo_stats::rank::{rank_of, spearman_within};
use hevo_stats::weights::WeightParams;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

pub use crate::matrix::{Matrix, MatrixError};
use crate::strategy::{build, CandidateId, Observed, Oracle, StrategyConfig, StrategyKind};

/// The caveat every replay report carries.
pub const CAVEAT: &str = "Replay cannot show overfitting of a fixed subset: logged candidates \
do not react to feedback, so a strategy that reuses one subset (fixed) looks better here than \
in a live search.";

/// The most seeds `hevo replay` runs (`--seeds`): 100,000, a thousand times the 100 its
/// reported tables average over. Each seed's results are kept until the means are taken,
/// about 100 bytes per seed and strategy.
pub const MAX_SEEDS: u64 = 100_000;

/// One seed's per-strategy results, oracle test, val-best's test, number of val tasks.
type SeedOut = (Vec<SeedResult>, f64, f64, usize);

/// Replay settings.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayConfig {
    /// Strategies to compare.
    pub strategies: Vec<StrategyKind>,
    /// Subset share per candidate.
    pub rho: f64,
    /// New candidates per iteration.
    pub per_iter: usize,
    /// Number of seeds (`first_seed..first_seed + seeds`, the last of which must fit in a
    /// `u64`: `first_seed` = `u64::MAX` replays that seed alone with `seeds` = 1).
    pub seeds: u64,
    /// The first seed (0 by default; e.g. 100 to report on seeds no constant was tuned on).
    pub first_seed: u64,
    /// Split tasks 50/50 into val and test (off: val = test = all tasks).
    pub split: bool,
    /// Worker threads over seeds (at least 1).
    pub threads: usize,
}

/// One strategy's results, means over seeds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StrategyRow {
    /// Row name: the strategy, with its estimator for `coevolve` (e.g. `coevolve/hajek`).
    pub name: String,
    /// The `--strategy` name alone (`full`, `fixed`, `resample`, `coevolve`, `screen`,
    /// `race`, `default`).
    pub strategy: String,
    /// The estimator of `coevolve` (`hajek`, `residual`, `auto`); `null` for the others.
    pub estimator: Option<String>,
    /// True val rank of the pick (1 = best).
    pub rank: f64,
    /// True val score of the pick.
    pub val: f64,
    /// Test score of the pick.
    pub test: f64,
    /// Spearman of estimates vs true val scores over the non-Phase-0 candidates (scores
    /// within 1e-9 of each other tie, so estimates equal to the truth up to rounding give
    /// 1), over the seeds where it is defined (`NaN`, `null` in JSON, when every seed ties).
    pub spearman: f64,
    /// Share of full-search evaluations used.
    pub evals_share: f64,
    /// Share of full-search cost used (`null` without costs).
    pub cost_share: Option<f64>,
    /// Share of seeds where the pick is the true val-best candidate.
    pub top1: f64,
    /// Standard error over seeds of `rank`.
    pub rank_se: f64,
    /// Share of seeds whose pick's selection-adjusted 95% interval
    /// ([`crate::strategy::Outcome::pick_interval`]) covers the pick's true val score.
    pub pick_coverage: f64,
    /// Mean over seeds of the share of non-Phase-0 candidates whose own 95% interval covers
    /// their true val score.
    pub field_coverage: f64,
    /// Root mean square error of the non-Phase-0 candidates' estimates, clipped to `[0, 1]`
    /// as hevo prints them, against their true val scores (exactly known candidates count
    /// 0; a candidate without a finite estimate is left out): how far a printed point
    /// estimate lands, which coverage does not say. The square root of the mean over seeds
    /// of each seed's mean squared error.
    pub field_rmse: f64,
    /// Mean width of the pick's selection-adjusted interval.
    pub pick_width: f64,
    /// Mean dollars spent per seed (`null` without costs).
    pub cost_usd: Option<f64>,
    /// Whether both coverages reach [`COVERAGE_TARGET`].
    pub honest: bool,
}

impl StrategyRow {
    /// What the row spent, the unit strategies are compared in: the dollar share of full
    /// evaluation when the matrix has costs, else the evaluation share.
    pub fn spend(&self) -> f64 {
        self.cost_share.unwrap_or(self.evals_share)
    }
}

/// The coverage every interval should reach (95% nominal, 93% allowing for seed noise).
pub const COVERAGE_TARGET: f64 = 0.93;

/// The whole replay report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReplayReport {
    /// Number of candidates.
    pub candidates: usize,
    /// Number of val tasks per seed.
    pub val_tasks: usize,
    /// Number of test tasks per seed.
    pub test_tasks: usize,
    /// Settings echoed.
    pub rho: f64,
    /// New candidates per iteration.
    pub per_iter: usize,
    /// Number of seeds.
    pub seeds: u64,
    /// The first seed.
    pub first_seed: u64,
    /// Whether tasks were split.
    pub split: bool,
    /// One row per strategy.
    pub strategies: Vec<StrategyRow>,
    /// Mean over seeds of the best test score any candidate has.
    pub oracle_test: f64,
    /// Mean over seeds of the test score of the true val-best candidate.
    pub val_best_test: f64,
    /// [`CAVEAT`].
    pub caveat: String,
}

/// A matrix-lookup oracle counting evaluations and cost.
pub struct MatrixOracle<'a> {
    outcomes: &'a [Vec<f64>],
    cost: Option<&'a [Vec<f64>]>,
    /// Arrival index -> matrix row.
    rows: &'a [usize],
    /// Val position -> matrix column.
    cols: &'a [usize],
    /// Evaluations answered so far.
    pub evals: usize,
    /// Dollars spent so far.
    pub cost_usd: f64,
}

impl<'a> MatrixOracle<'a> {
    /// An oracle over `outcomes[rows[c]][cols[t]]`.
    pub fn new(
        outcomes: &'a [Vec<f64>],
        cost: Option<&'a [Vec<f64>]>,
        rows: &'a [usize],
        cols: &'a [usize],
    ) -> Self {
        MatrixOracle {
            outcomes,
            cost,
            rows,
            cols,
            evals: 0,
            cost_usd: 0.0,
        }
    }
}

impl Oracle for MatrixOracle<'_> {
    fn evaluate(&mut self, requests: &[(CandidateId, usize)]) -> Observed {
        self.evals += requests.len();
        let outcomes = requests
            .iter()
            .map(|&(c, t)| self.outcomes[self.rows[c]][self.cols[t]])
            .collect();
        let costs = self.cost.map(|cost| {
            requests
                .iter()
                .map(|&(c, t)| cost[self.rows[c]][self.cols[t]])
                .collect::<Vec<f64>>()
        });
        if let Some(k) = &costs {
            self.cost_usd += k.iter().sum::<f64>();
        }
        Observed { outcomes, costs }
    }
}

#[derive(Clone, Debug, Default)]
struct SeedResult {
    rank: f64,
    val: f64,
    test: f64,
    spearman: f64,
    evals_share: f64,
    cost_share: f64,
    cost_usd: f64,
    top1: f64,
    pick_cover: f64,
    field_cover: f64,
    field_sq_err: f64,
    pick_width: f64,
}

/// Scores closer than this are equal up to rounding: an estimate summed in another order
/// than the truth differs from it by a few ulps.
const ROUNDING: f64 = 1e-9;

/// Whether `[e.ci_low, e.ci_high]` contains `truth` (up to rounding).
fn covers(e: &Estimate, truth: f64) -> bool {
    e.ci_low - ROUNDING <= truth && truth <= e.ci_high + ROUNDING
}

/// The name that seeds a strategy: `coevolve` for every estimator variant.
fn family(kind: &StrategyKind) -> String {
    match kind {
        StrategyKind::Coevolve { .. } => "coevolve".into(),
        other => other.name(),
    }
}

/// Runs one seed of every strategy; returns per-strategy results and the oracle scores.
fn run_seed(m: &Matrix, cfg: &ReplayConfig, seed: u64) -> SeedOut {
    let nt = m.tasks.len();
    let nc = m.candidates.len();
    let mut rng = ChaCha8Rng::seed_from_u64(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xA5);
    let mut tasks: Vec<usize> = (0..nt).collect();
    let (val, test): (Vec<usize>, Vec<usize>) = if cfg.split {
        tasks.shuffle(&mut rng);
        let h = nt / 2;
        (tasks[..h].to_vec(), tasks[h..].to_vec())
    } else {
        (tasks.clone(), tasks)
    };
    let mut order: Vec<usize> = (0..nc).collect();
    order.shuffle(&mut rng);
    let mean = |r: usize, cols: &[usize]| {
        cols.iter().map(|&t| m.outcomes[r][t]).sum::<f64>() / cols.len() as f64
    };
    let truth: Vec<f64> = order.iter().map(|&r| mean(r, &val)).collect();
    let test_s: Vec<f64> = order.iter().map(|&r| mean(r, &test)).collect();
    let best_val = (0..nc).fold(0, |b, i| if truth[i] > truth[b] { i } else { b });
    let oracle_test = test_s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let full_evals = (nc * val.len()) as f64;
    let full_cost: f64 = m.cost.as_ref().map_or(0.0, |c| {
        order
            .iter()
            .map(|&r| val.iter().map(|&t| c[r][t]).sum::<f64>())
            .sum()
    });
    let n0 = 2.min(nc);
    let mut out = Vec::new();
    for kind in cfg.strategies.iter() {
        let config = StrategyConfig {
            strata: Strata::single(val.len()),
            rho: cfg.rho,
            expected_candidates: nc - n0,
            // Seeded by the strategy's family name, not its position: `--strategy X` and
            // `--strategy all` give X the same draws, and the `coevolve` estimator variants
            // share theirs (their samples do not depend on the estimator), so estimators
            // are compared on identical samples.
            seed: seed.wrapping_mul(1_000_003) ^ hevo_stats::seed::fnv1a(family(kind).as_bytes()),
            weights: WeightParams::default(),
        };
        let mut s = build(*kind, config);
        let mut oracle = MatrixOracle::new(&m.outcomes, m.cost.as_deref(), &order, &val);
        let seeds: Vec<CandidateId> = (0..n0).collect();
        s.phase0(&mut oracle, &seeds);
        let mut c = n0;
        while c < nc {
            let hi = (c + cfg.per_iter.max(1)).min(nc);
            let batch: Vec<CandidateId> = (c..hi).collect();
            s.iteration(&mut oracle, &batch);
            c = hi;
        }
        let outcome = s.finish(&mut oracle);
        let est: Vec<f64> = outcome.estimates.iter().map(|e| e.value).collect();
        let rank = rank_of(&truth, outcome.pick) as f64;
        let field: Vec<f64> = (n0..nc)
            .map(|c| covers(&outcome.estimates[c], truth[c]) as u8 as f64)
            .collect();
        let pi = outcome.pick_interval;
        let sp = if nc - n0 >= 2 {
            // Ties up to rounding: estimates equal to the truth correlate 1 with it.
            spearman_within(&est[n0..], &truth[n0..], ROUNDING)
        } else {
            f64::NAN
        };
        out.push(SeedResult {
            rank,
            val: truth[outcome.pick],
            test: test_s[outcome.pick],
            spearman: sp,
            evals_share: oracle.evals as f64 / full_evals,
            // A split whose val cells are all free costs nothing to evaluate in full, and
            // nothing was spent: a share of 0, not 0 / 0.
            cost_share: if full_cost > 0.0 {
                oracle.cost_usd / full_cost
            } else {
                0.0
            },
            cost_usd: oracle.cost_usd,
            pick_cover: covers(&pi, truth[outcome.pick]) as u8 as f64,
            field_cover: field.iter().sum::<f64>() / field.len().max(1) as f64,
            field_sq_err: {
                let errs: Vec<f64> = (n0..nc)
                    .filter(|&c| outcome.estimates[c].value.is_finite())
                    .map(|c| (outcome.estimates[c].value.clamp(0.0, 1.0) - truth[c]).powi(2))
                    .collect();
                errs.iter().sum::<f64>() / errs.len().max(1) as f64
            },
            pick_width: pi.ci_high - pi.ci_low,
            top1: if truth[outcome.pick] >= truth[best_val] {
                1.0
            } else {
                0.0
            },
        });
    }
    (out, oracle_test, test_s[best_val], val.len())
}

/// The seeds `first..first + count`, ending at `u64::MAX` inclusive (`first` = `u64::MAX`
/// and `count` = 1 is the last seed alone), without allocating them.
///
/// # Panics
///
/// If the range runs past `u64::MAX` (`hevo replay` refuses such a `--first-seed` first).
fn seed_range(first: u64, count: u64) -> impl Iterator<Item = u64> + Clone {
    let last = match count {
        0 => None,
        n => Some(
            first
                .checked_add(n - 1)
                .expect("replay: the seeds first_seed..first_seed + seeds must fit in a u64"),
        ),
    };
    last.into_iter().flat_map(move |last| first..=last)
}

/// Runs the replay (seeds in parallel over `threads` workers) and averages over seeds.
pub fn run(m: &Matrix, cfg: &ReplayConfig) -> ReplayReport {
    run_observed(m, cfg, &|| {})
}

/// [`run`], calling `seed_done` from the worker threads each time a seed finishes (every
/// strategy replayed on it), for progress lines on long replays.
pub fn run_observed(m: &Matrix, cfg: &ReplayConfig, seed_done: &(dyn Fn() + Sync)) -> ReplayReport {
    let seeds = seed_range(cfg.first_seed, cfg.seeds);
    let count = usize::try_from(cfg.seeds).unwrap_or(usize::MAX);
    let threads = cfg.threads.max(1).min(count.max(1));
    let mut results: Vec<(u64, SeedOut)> = Vec::new();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|w| {
                let seeds = seeds.clone();
                scope.spawn(move || {
                    seeds
                        .filter(|s| (*s as usize) % threads == w)
                        .map(|s| {
                            let out = run_seed(m, cfg, s);
                            seed_done();
                            (s, out)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for h in handles {
            results.extend(h.join().expect("replay worker panicked"));
        }
    });
    results.sort_by_key(|(s, _)| *s);
    let n = results.len().max(1) as f64;
    let nt = m.tasks.len();
    let val_tasks = results.first().map_or(nt, |r| r.1 .3);
    let rows = cfg
        .strategies
        .iter()
        .enumerate()
        .map(|(k, kind)| {
            // The mean over the seeds where `f` is defined: every seed, but for the Spearman
            // column, undefined (`NaN`) where every score ties. Any other column counts every
            // seed, so that a seed whose column came out infinite or `NaN` shows in the mean
            // instead of leaving it silently.
            let mean_over = |f: &dyn Fn(&SeedResult) -> f64, defined: fn(f64) -> bool| -> f64 {
                let v: Vec<f64> = results
                    .iter()
                    .map(|(_, r)| f(&r.0[k]))
                    .filter(|&x| defined(x))
                    .collect();
                if v.is_empty() {
                    f64::NAN
                } else {
                    v.iter().sum::<f64>() / v.len() as f64
                }
            };
            let col = |f: &dyn Fn(&SeedResult) -> f64| mean_over(f, |_| true);
            let ranks: Vec<f64> = results.iter().map(|(_, r)| r.0[k].rank).collect();
            let rm = ranks.iter().sum::<f64>() / n;
            let rsd = if ranks.len() > 1 {
                (ranks.iter().map(|x| (x - rm) * (x - rm)).sum::<f64>() / (n - 1.0)).sqrt()
            } else {
                0.0
            };
            StrategyRow {
                name: kind.name(),
                strategy: family(kind),
                estimator: match kind {
                    StrategyKind::Coevolve { estimator, .. } => {
                        Some(estimator.map_or("auto", |e| e.name()).to_string())
                    }
                    _ => None,
                },
                rank: rm,
                val: col(&|r| r.val),
                test: col(&|r| r.test),
                spearman: mean_over(&|r| r.spearman, f64::is_finite),
                evals_share: col(&|r| r.evals_share),
                cost_share: m.cost.as_ref().map(|_| col(&|r| r.cost_share)),
                top1: col(&|r| r.top1),
                rank_se: rsd / n.sqrt(),
                pick_coverage: col(&|r| r.pick_cover),
                field_coverage: col(&|r| r.field_cover),
                field_rmse: col(&|r| r.field_sq_err).sqrt(),
                pick_width: col(&|r| r.pick_width),
                cost_usd: m.cost.as_ref().map(|_| col(&|r| r.cost_usd)),
                honest: col(&|r| r.pick_cover) >= COVERAGE_TARGET
                    && col(&|r| r.field_cover) >= COVERAGE_TARGET,
            }
        })
        .collect();
    ReplayReport {
        candidates: m.candidates.len(),
        val_tasks,
        test_tasks: if cfg.split { nt - val_tasks } else { nt },
        rho: cfg.rho,
        per_iter: cfg.per_iter,
        seeds: cfg.seeds,
        first_seed: cfg.first_seed,
        split: cfg.split,
        strategies: rows,
        oracle_test: results.iter().map(|(_, r)| r.1).sum::<f64>() / n,
        val_best_test: results.iter().map(|(_, r)| r.2).sum::<f64>() / n,
        caveat: CAVEAT.to_string(),
    }
}

impl fmt::Display for ReplayReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "replay: {} candidates, {} val / {} test tasks, rho {}, {} per iteration, {} seeds from {}{}",
            self.candidates,
            self.val_tasks,
            self.test_tasks,
            self.rho,
            self.per_iter,
            self.seeds,
            self.first_seed,
            if self.split { "" } else { " (no split)" }
        )?;
        writeln!(
            f,
            "{:<26} {:>11} {:>6} {:>7} {:>7} {:>9} {:>7} {:>6} {:>9} {:>9} {:>10}",
            "strategy",
            "rank ± se",
            "top1",
            "val",
            "test",
            "spearman",
            "evals",
            "cost",
            "pick-cov",
            "field-cov",
            "field-rmse"
        )?;
        let mut dishonest = Vec::new();
        for r in &self.strategies {
            let cost = r
                .cost_share
                .map_or("-".to_string(), |c| format!("{:.3}", c));
            // Undefined on every seed (every true score or every estimate ties): `-`, as
            // `null` in the JSON.
            let spearman = if r.spearman.is_finite() {
                format!("{:.3}", r.spearman)
            } else {
                "-".to_string()
            };
            // `*` on each coverage below the target, not only the last column.
            let cov = |c: f64| {
                let mark = if c < COVERAGE_TARGET { "*" } else { " " };
                format!("{c:.3}{mark}")
            };
            writeln!(
                f,
                "{:<26} {:>11} {:>6.2} {:>7.4} {:>7.4} {:>9} {:>7.3} {:>6} {:>9} {:>9} {:>10.3}",
                r.name,
                format!("{:.2} ± {:.2}", r.rank, r.rank_se),
                r.top1,
                r.val,
                r.test,
                spearman,
                r.evals_share,
                cost,
                cov(r.pick_coverage),
                cov(r.field_coverage),
                r.field_rmse
            )?;
            if !r.honest {
                dishonest.push(r.name.as_str());
            }
        }
        if !dishonest.is_empty() {
            writeln!(
                f,
                "* intervals below the {:.0}% coverage target here: {} (do not trust their \
                 printed intervals on this workload)",
                COVERAGE_TARGET * 100.0,
                dishonest.join(", ")
            )?;
        }
        writeln!(
            f,
            "rank: the pick's true val rank (1 = best); top1: share of seeds picking the true \
             best; val, test: the pick's true scores; evals, cost: share of full evaluation's \
             trials and dollars; pick-cov, field-cov: share of 95% intervals covering the true \
             val score (the pick's, selection-adjusted; every candidate's); field-rmse: root \
             mean square error of every candidate's printed estimate against its true val score"
        )?;
        writeln!(
            f,
            "oracle test (best test score of any candidate): {:.4}; test score of the true val-best: {:.4}",
            self.oracle_test, self.val_best_test
        )?;
        writeln!(f, "note: {}", self.caveat)
    }
}
