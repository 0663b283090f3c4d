//! Offline replay of evaluation strategies on a logged candidate x task outcome matrix
//! (SPEC.md section 5).
//!
//! For each seed: tasks are split 50/50 into val and test (unless `split` is off), the
//! candidates are shuffled, the first two are Phase 0 (full val evaluation) and the rest
//! arrive `per_iter` at a time. Each strategy evaluates them through a matrix-lookup
//! [`Oracle`] that counts evaluations and cost; the pick is compared with the truth.
//! Replay cannot show overfitting of a fixed subset: logged candidates do not react to
//! feedback ([`CAVEAT`]).

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use hevo_stats::design::Strata;
use hevo_stats::rank::{rank_of, spearman};
use hevo_stats::weights::WeightParams;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::strategy::{build, CandidateId, Oracle, StrategyConfig, StrategyKind};

/// The caveat every replay report carries.
pub const CAVEAT: &str = "Replay cannot show overfitting of a fixed subset: logged candidates \
do not react to feedback, so a strategy that reuses one subset (fixed) looks better here than \
in a live search.";

/// A complete candidate x task outcome matrix, with optional per-cell cost.
#[derive(Clone, Debug, PartialEq)]
pub struct Matrix {
    /// Candidate names, in order of first appearance.
    pub candidates: Vec<String>,
    /// Task names, in order of first appearance.
    pub tasks: Vec<String>,
    /// `outcomes[c][t]` in `[0, 1]`.
    pub outcomes: Vec<Vec<f64>>,
    /// `cost[c][t]` in dollars, when given.
    pub cost: Option<Vec<Vec<f64>>>,
}

/// A malformed or incomplete matrix: the message names the file and line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MatrixError {
    /// The file could not be read.
    #[error("{path}: cannot read: {reason}")]
    Io {
        /// File.
        path: String,
        /// Why.
        reason: String,
    },
    /// A problem at a line of the file.
    #[error("{path}:{line}: {message}")]
    Line {
        /// File.
        path: String,
        /// 1-based line.
        line: u64,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// A problem with the file as a whole (e.g. a missing cell).
    #[error("{path}: {message}")]
    File {
        /// File.
        path: String,
        /// What is wrong and how to fix it.
        message: String,
    },
}

struct Cell {
    outcome: f64,
    cost: Option<f64>,
}

/// Candidate names, task names and the cells of one parsed file.
type Parsed = (Vec<String>, Vec<String>, HashMap<(usize, usize), Cell>);

/// One seed's per-strategy results, oracle test, val-best's test, number of val tasks.
type SeedOut = (Vec<SeedResult>, f64, f64, usize);

fn parse_file(path: &Path, want_outcome: bool) -> Result<Parsed, MatrixError> {
    let p = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| MatrixError::Io {
        path: p.clone(),
        reason: e.to_string(),
    })?;
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let line_err = |line: u64, message: String| MatrixError::Line {
        path: p.clone(),
        line,
        message,
    };
    let headers = rdr
        .headers()
        .map_err(|e| line_err(1, format!("cannot read the header: {e}")))?
        .clone();
    let col = |name: &str| headers.iter().position(|h| h == name);
    let (Some(ci), Some(ti)) = (col("candidate"), col("task")) else {
        return Err(line_err(
            1,
            "the header must name the columns `candidate,task,outcome[,cost_usd]`".into(),
        ));
    };
    let oi = col("outcome");
    let ki = col("cost_usd");
    if want_outcome && oi.is_none() {
        return Err(line_err(1, "missing column `outcome` in the header".into()));
    }
    if !want_outcome && ki.is_none() {
        return Err(line_err(
            1,
            "a cost file needs the header `candidate,task,cost_usd`".into(),
        ));
    }
    let mut cands: Vec<String> = Vec::new();
    let mut tasks: Vec<String> = Vec::new();
    let mut cidx: HashMap<String, usize> = HashMap::new();
    let mut tidx: HashMap<String, usize> = HashMap::new();
    let mut cells: HashMap<(usize, usize), Cell> = HashMap::new();
    let mut first_line: HashMap<(usize, usize), u64> = HashMap::new();
    for rec in rdr.records() {
        let rec = rec.map_err(|e| {
            let line = e.position().map_or(0, |p| p.line());
            line_err(line, format!("malformed CSV record: {e}"))
        })?;
        let line = rec.position().map_or(0, |p| p.line());
        let get = |i: usize| rec.get(i).unwrap_or("");
        let cand = get(ci);
        let task = get(ti);
        if cand.is_empty() || task.is_empty() {
            return Err(line_err(line, "empty candidate or task name".into()));
        }
        let number = |i: Option<usize>, what: &str| -> Result<Option<f64>, MatrixError> {
            let Some(i) = i else { return Ok(None) };
            let s = get(i);
            if s.is_empty() && what == "cost_usd" {
                return Ok(None);
            }
            s.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .map(Some)
                .ok_or_else(|| line_err(line, format!("{what} `{s}` is not a number")))
        };
        let outcome = number(if want_outcome { oi } else { None }, "outcome")?;
        if let Some(o) = outcome {
            if !(0.0..=1.0).contains(&o) {
                return Err(line_err(
                    line,
                    format!("outcome {o} is outside [0, 1]; outcomes are pass rates"),
                ));
            }
        }
        let cost = number(ki, "cost_usd")?;
        if let Some(c) = cost {
            if c < 0.0 {
                return Err(line_err(line, format!("cost_usd {c} is negative")));
            }
        }
        let c = *cidx.entry(cand.to_string()).or_insert_with(|| {
            cands.push(cand.to_string());
            cands.len() - 1
        });
        let t = *tidx.entry(task.to_string()).or_insert_with(|| {
            tasks.push(task.to_string());
            tasks.len() - 1
        });
        if let Some(prev) = first_line.get(&(c, t)) {
            return Err(line_err(
                line,
                format!(
                    "duplicate cell (candidate `{cand}`, task `{task}`), first at line {prev}; \
                     keep one row per cell (average repeated trials first)"
                ),
            ));
        }
        first_line.insert((c, t), line);
        cells.insert(
            (c, t),
            Cell {
                outcome: outcome.unwrap_or(f64::NAN),
                cost,
            },
        );
    }
    if cands.is_empty() {
        return Err(MatrixError::File {
            path: p,
            message: "no data rows".into(),
        });
    }
    Ok((cands, tasks, cells))
}

impl Matrix {
    /// Reads a long CSV `candidate,task,outcome[,cost_usd]` (and optionally a separate cost
    /// file `candidate,task,cost_usd`), rejecting missing, duplicate or malformed cells.
    pub fn from_csv(path: &Path, cost_path: Option<&Path>) -> Result<Matrix, MatrixError> {
        let p = path.display().to_string();
        let (cands, tasks, cells) = parse_file(path, true)?;
        let (nc, nt) = (cands.len(), tasks.len());
        let mut outcomes = vec![vec![0.0; nt]; nc];
        let mut cost_m = vec![vec![f64::NAN; nt]; nc];
        let mut any_cost = false;
        for c in 0..nc {
            for t in 0..nt {
                let Some(cell) = cells.get(&(c, t)) else {
                    return Err(MatrixError::File {
                        path: p,
                        message: format!(
                            "incomplete matrix: no row for candidate `{}` and task `{}` \
                             ({} candidates x {} tasks need {} rows, found {}); replay needs \
                             every cell",
                            cands[c],
                            tasks[t],
                            nc,
                            nt,
                            nc * nt,
                            cells.len()
                        ),
                    });
                };
                outcomes[c][t] = cell.outcome;
                if let Some(k) = cell.cost {
                    cost_m[c][t] = k;
                    any_cost = true;
                }
            }
        }
        if let Some(cp) = cost_path {
            let q = cp.display().to_string();
            let (cc, ct, ccells) = parse_file(cp, false)?;
            for ((c, t), cell) in ccells {
                let (Some(ci), Some(ti)) = (
                    cands.iter().position(|x| *x == cc[c]),
                    tasks.iter().position(|x| *x == ct[t]),
                ) else {
                    return Err(MatrixError::File {
                        path: q,
                        message: format!(
                            "cost for unknown cell (candidate `{}`, task `{}`)",
                            cc[c], ct[t]
                        ),
                    });
                };
                if let Some(k) = cell.cost {
                    cost_m[ci][ti] = k;
                    any_cost = true;
                }
            }
        }
        let cost = if any_cost {
            for (c, row) in cost_m.iter().enumerate() {
                for (t, v) in row.iter().enumerate() {
                    if v.is_nan() {
                        return Err(MatrixError::File {
                            path: p,
                            message: format!(
                                "cost_usd is given for some cells but not for candidate `{}`, \
                                 task `{}`; give it for every cell or for none",
                                cands[c], tasks[t]
                            ),
                        });
                    }
                }
            }
            Some(cost_m)
        } else {
            None
        };
        if nc < 3 {
            return Err(MatrixError::File {
                path: p,
                message: format!("replay needs at least 3 candidates (2 for Phase 0), found {nc}"),
            });
        }
        if nt < 2 {
            return Err(MatrixError::File {
                path: p,
                message: format!("replay needs at least 2 tasks, found {nt}"),
            });
        }
        Ok(Matrix {
            candidates: cands,
            tasks,
            outcomes,
            cost,
        })
    }

    /// A matrix from outcomes alone (synthetic data), with generated names.
    pub fn from_outcomes(outcomes: Vec<Vec<f64>>) -> Matrix {
        let nt = outcomes.first().map_or(0, |r| r.len());
        Matrix {
            candidates: (0..outcomes.len()).map(|c| format!("c{c}")).collect(),
            tasks: (0..nt).map(|t| format!("t{t}")).collect(),
            outcomes,
            cost: None,
        }
    }
}

/// Replay settings.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayConfig {
    /// Strategies to compare.
    pub strategies: Vec<StrategyKind>,
    /// Subset share per candidate.
    pub rho: f64,
    /// New candidates per iteration.
    pub per_iter: usize,
    /// Number of seeds (`0..seeds`).
    pub seeds: u64,
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
    /// Spearman of estimates vs true val scores over the non-Phase-0 candidates.
    pub spearman: f64,
    /// Share of full-search evaluations used.
    pub evals_share: f64,
    /// Share of full-search cost used (`null` without costs).
    pub cost_share: Option<f64>,
    /// Share of seeds where the pick is the true val-best candidate.
    pub top1: f64,
    /// Standard error over seeds of `rank`.
    pub rank_se: f64,
}

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
    fn evaluate(&mut self, requests: &[(CandidateId, usize)]) -> Vec<f64> {
        self.evals += requests.len();
        requests
            .iter()
            .map(|&(c, t)| {
                let (r, k) = (self.rows[c], self.cols[t]);
                if let Some(cost) = self.cost {
                    self.cost_usd += cost[r][k];
                }
                self.outcomes[r][k]
            })
            .collect()
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
    top1: f64,
}

/// The name that seeds a strategy: `coevolve` for every estimator variant.
fn family(kind: &StrategyKind) -> String {
    match kind {
        StrategyKind::Coevolve { .. } => "coevolve".into(),
        other => other.name(),
    }
}

/// FNV-1a hash (stable across platforms and releases, unlike `DefaultHasher`).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
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
            seed: seed.wrapping_mul(1_000_003) ^ fnv1a(family(kind).as_bytes()),
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
        let sp = if nc - n0 >= 2 {
            spearman(&est[n0..], &truth[n0..])
        } else {
            f64::NAN
        };
        out.push(SeedResult {
            rank,
            val: truth[outcome.pick],
            test: test_s[outcome.pick],
            spearman: sp,
            evals_share: oracle.evals as f64 / full_evals,
            cost_share: if full_cost > 0.0 {
                oracle.cost_usd / full_cost
            } else {
                f64::NAN
            },
            top1: if truth[outcome.pick] >= truth[best_val] {
                1.0
            } else {
                0.0
            },
        });
    }
    (out, oracle_test, test_s[best_val], val.len())
}

/// Runs the replay (seeds in parallel over `threads` workers) and averages over seeds.
pub fn run(m: &Matrix, cfg: &ReplayConfig) -> ReplayReport {
    let seeds: Vec<u64> = (0..cfg.seeds).collect();
    let threads = cfg.threads.max(1).min(seeds.len().max(1));
    let mut results: Vec<(u64, SeedOut)> = Vec::new();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|w| {
                let seeds = &seeds;
                scope.spawn(move || {
                    seeds
                        .iter()
                        .filter(|s| (**s as usize) % threads == w)
                        .map(|&s| (s, run_seed(m, cfg, s)))
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
            let col = |f: &dyn Fn(&SeedResult) -> f64| -> f64 {
                let v: Vec<f64> = results
                    .iter()
                    .map(|(_, r)| f(&r.0[k]))
                    .filter(|x| x.is_finite())
                    .collect();
                if v.is_empty() {
                    f64::NAN
                } else {
                    v.iter().sum::<f64>() / v.len() as f64
                }
            };
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
                spearman: col(&|r| r.spearman),
                evals_share: col(&|r| r.evals_share),
                cost_share: m.cost.as_ref().map(|_| col(&|r| r.cost_share)),
                top1: col(&|r| r.top1),
                rank_se: rsd / n.sqrt(),
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
            "replay: {} candidates, {} val / {} test tasks, rho {}, {} per iteration, {} seeds{}",
            self.candidates,
            self.val_tasks,
            self.test_tasks,
            self.rho,
            self.per_iter,
            self.seeds,
            if self.split { "" } else { " (no split)" }
        )?;
        writeln!(
            f,
            "{:<26} {:>7} {:>6} {:>7} {:>7} {:>9} {:>7} {:>6}",
            "strategy", "rank", "top1", "val", "test", "spearman", "evals", "cost"
        )?;
        for r in &self.strategies {
            let cost = r
                .cost_share
                .map_or("-".to_string(), |c| format!("{:.3}", c));
            writeln!(
                f,
                "{:<26} {:>7.2} {:>6.2} {:>7.4} {:>7.4} {:>9.3} {:>7.3} {:>6}",
                r.name, r.rank, r.top1, r.val, r.test, r.spearman, r.evals_share, cost
            )?;
        }
        writeln!(
            f,
            "oracle test (best test score of any candidate): {:.4}; test score of the true val-best: {:.4}",
            self.oracle_test, self.val_best_test
        )?;
        writeln!(f, "note: {}", self.caveat)
    }
}
