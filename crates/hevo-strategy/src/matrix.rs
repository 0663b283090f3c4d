//! Candidate x task outcome matrices for replay: logged CSVs, per-attempt matrices drawn
//! from pass@1 columns, and seeded synthetic Rasch matrices with a cost model.

use std::collections::HashMap;
use std::path::Path;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The most cells (candidates x tasks) a replay matrix may have: 10^7, 80 MB of outcomes
/// and as much again of costs. Larger `--synth` or `--attempts` matrices are refused before
/// anything is allocated.
pub const MAX_CELLS: usize = 10_000_000;

/// The most all the costs of a matrix may add up to (in its unit, e.g. dollars). A replay
/// sums the costs of a seed's cells and averages those sums over up to
/// [`crate::replay::MAX_SEEDS`] seeds: below this bound no sum overflows to infinity (which
/// would print `NaN` shares), and no real log comes near it.
pub const MAX_TOTAL_COST: f64 = 1e100;

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

/// The text of the file at `path`, or an error naming it.
fn read(path: &Path) -> Result<String, MatrixError> {
    std::fs::read_to_string(path).map_err(|e| MatrixError::Io {
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}

/// A CSV reader over `text` with a header row and trimmed fields. Windows line ends
/// (`\r\n`) are read as `\n` first: the csv crate counts a line only at the `\n` it
/// consumes, and after a `\r\n` record it reports the previous line (BurntSushi/rust-csv
/// issue 395), so every error would name the line above the bad row.
fn csv_reader(text: &str) -> csv::Reader<std::io::Cursor<Vec<u8>>> {
    csv::ReaderBuilder::new()
        .has_headers(true)
        .trim(csv::Trim::All)
        .from_reader(std::io::Cursor::new(
            text.replace("\r\n", "\n").into_bytes(),
        ))
}

fn parse_text(text: &str, origin: &str, want_outcome: bool) -> Result<Parsed, MatrixError> {
    let p = origin.to_string();
    let mut rdr = csv_reader(text);
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
        let columns = match want_outcome {
            true => "candidate,task,outcome[,cost_usd]",
            false => "candidate,task,cost_usd",
        };
        return Err(line_err(
            1,
            format!("the header must name the columns `{columns}`"),
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
        let text = read(path)?;
        let cost = match cost_path {
            Some(cp) => Some((read(cp)?, cp.display().to_string())),
            None => None,
        };
        Matrix::parse_csv(
            &text,
            &path.display().to_string(),
            cost.as_ref().map(|(t, o)| (t.as_str(), o.as_str())),
        )
    }

    /// [`Matrix::from_csv`], and how many cells that have a `cost_usd` of their own in the
    /// matrix file the cost file gives another (so the caller can say it overrode them).
    pub fn from_csv_counting_overrides(
        path: &Path,
        cost_path: &Path,
    ) -> Result<(Matrix, usize), MatrixError> {
        let cost = read(cost_path)?;
        parse_with_costs(
            &read(path)?,
            &path.display().to_string(),
            Some((&cost, &cost_path.display().to_string())),
        )
    }

    /// [`Matrix::from_csv`] on texts: the long CSV read from `origin` and optionally a cost
    /// CSV `(text, origin)`; every error names its origin (and line, where it has one).
    pub fn parse_csv(
        text: &str,
        origin: &str,
        cost: Option<(&str, &str)>,
    ) -> Result<Matrix, MatrixError> {
        parse_with_costs(text, origin, cost).map(|(m, _)| m)
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

    /// A per-attempt matrix: every candidate of a `candidate,task,pass_at_1` CSV (e.g. a
    /// `.extra.csv`) becomes `attempts` candidates `name#0 .. name#{attempts-1}`, each with
    /// an independent Bernoulli(`pass_at_1`) outcome per task, seeded by `seed`. Attempts
    /// of one candidate differ only by noise: the near-identical regime of a live search.
    pub fn from_attempts(path: &Path, attempts: usize, seed: u64) -> Result<Matrix, MatrixError> {
        Matrix::parse_attempts(&read(path)?, &path.display().to_string(), attempts, seed)
    }

    /// [`Matrix::from_attempts`] on the text of a `candidate,task,pass_at_1` CSV read from
    /// `origin`, which every error names (with the line, where it has one).
    pub fn parse_attempts(
        text: &str,
        origin: &str,
        attempts: usize,
        seed: u64,
    ) -> Result<Matrix, MatrixError> {
        let p = origin.to_string();
        let line_err = |line: u64, message: String| MatrixError::Line {
            path: p.clone(),
            line,
            message,
        };
        let mut rdr = csv_reader(text);
        let headers = rdr
            .headers()
            .map_err(|e| line_err(1, format!("cannot read the header: {e}")))?
            .clone();
        let col = |name: &str| headers.iter().position(|h| h == name);
        let (Some(ci), Some(ti), Some(pi)) = (col("candidate"), col("task"), col("pass_at_1"))
        else {
            return Err(line_err(
                1,
                "--attempts needs a CSV with the columns `candidate,task,pass_at_1` \
                 (a `.extra.csv`)"
                    .into(),
            ));
        };
        let mut cands: Vec<String> = Vec::new();
        let mut tasks: Vec<String> = Vec::new();
        let mut cidx: HashMap<String, usize> = HashMap::new();
        let mut tidx: HashMap<String, usize> = HashMap::new();
        let mut rate: HashMap<(usize, usize), f64> = HashMap::new();
        for rec in rdr.records() {
            let rec = rec.map_err(|e| {
                let line = e.position().map_or(0, |p| p.line());
                line_err(line, format!("malformed CSV record: {e}"))
            })?;
            let line = rec.position().map_or(0, |p| p.line());
            let get = |i: usize| rec.get(i).unwrap_or("");
            let v: f64 = get(pi)
                .parse()
                .ok()
                .filter(|v: &f64| (0.0..=1.0).contains(v))
                .ok_or_else(|| {
                    line_err(
                        line,
                        format!("pass_at_1 `{}` is not a number in [0, 1]", get(pi)),
                    )
                })?;
            let c = *cidx.entry(get(ci).to_string()).or_insert_with(|| {
                cands.push(get(ci).to_string());
                cands.len() - 1
            });
            let t = *tidx.entry(get(ti).to_string()).or_insert_with(|| {
                tasks.push(get(ti).to_string());
                tasks.len() - 1
            });
            if rate.insert((c, t), v).is_some() {
                return Err(line_err(
                    line,
                    format!(
                        "duplicate cell (candidate `{}`, task `{}`)",
                        get(ci),
                        get(ti)
                    ),
                ));
            }
        }
        let k = attempts.max(1);
        let cells = cands.len().saturating_mul(k).saturating_mul(tasks.len());
        if cells > MAX_CELLS {
            return Err(MatrixError::File {
                path: p,
                message: format!(
                    "{} candidates x {k} attempts x {} tasks make {cells} cells, more than \
                     the {MAX_CELLS} a replay holds; give a smaller --attempts",
                    cands.len(),
                    tasks.len()
                ),
            });
        }
        let mut names = Vec::new();
        let mut outcomes = Vec::new();
        for (c, name) in cands.iter().enumerate() {
            for a in 0..k {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                rng.set_stream((c * k + a) as u64);
                let mut row = Vec::with_capacity(tasks.len());
                for (t, task) in tasks.iter().enumerate() {
                    let Some(&r) = rate.get(&(c, t)) else {
                        return Err(MatrixError::File {
                            path: p,
                            message: format!(
                                "incomplete matrix: no pass_at_1 for candidate `{name}` and \
                                 task `{task}`"
                            ),
                        });
                    };
                    row.push((rng.gen::<f64>() < r) as u8 as f64);
                }
                names.push(format!("{name}#{a}"));
                outcomes.push(row);
            }
        }
        if names.len() < 3 || tasks.len() < 2 {
            return Err(MatrixError::File {
                path: p,
                message: "replay needs at least 3 candidates and 2 tasks".into(),
            });
        }
        Ok(Matrix {
            candidates: names,
            tasks,
            outcomes,
            cost: None,
        })
    }

    /// The sub-matrix of the candidate rows `candidates` and task columns `tasks`, in the
    /// order given (costs follow their cells).
    pub fn select(&self, candidates: &[usize], tasks: &[usize]) -> Matrix {
        let pick = |rows: &[Vec<f64>]| -> Vec<Vec<f64>> {
            candidates
                .iter()
                .map(|&c| tasks.iter().map(|&t| rows[c][t]).collect())
                .collect()
        };
        Matrix {
            candidates: candidates
                .iter()
                .map(|&c| self.candidates[c].clone())
                .collect(),
            tasks: tasks.iter().map(|&t| self.tasks[t].clone()).collect(),
            outcomes: pick(&self.outcomes),
            cost: self.cost.as_deref().map(pick),
        }
    }

    /// A seeded sample of `groups` candidate groups and `tasks` tasks: the candidates come
    /// in groups of `group` consecutive rows (the attempts of one model in a per-attempt
    /// matrix; 1 otherwise), and a group is kept or left whole. A small real-shaped field,
    /// e.g. 13 agents x 5 attempts on 80 tasks, from a larger logged matrix.
    pub fn sample(&self, groups: usize, group: usize, tasks: usize, seed: u64) -> Matrix {
        use rand::seq::SliceRandom;
        let group = group.max(1);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let n_groups = self.candidates.len() / group;
        let mut g: Vec<usize> = (0..n_groups).collect();
        g.shuffle(&mut rng);
        g.truncate(groups.min(n_groups));
        g.sort_unstable();
        let rows: Vec<usize> = g.iter().flat_map(|&i| i * group..(i + 1) * group).collect();
        let mut t: Vec<usize> = (0..self.tasks.len()).collect();
        t.shuffle(&mut rng);
        t.truncate(tasks.min(self.tasks.len()));
        t.sort_unstable();
        self.select(&rows, &t)
    }

    /// The matrix with seeded synthetic per-cell costs from the cost model of `--synth-cost`
    /// ([`hevo_stats::synth::cost_model`] and [`hevo_stats::synth::cell_costs`], with the
    /// cost knobs of `params`): per-task log-normal costs correlated with the task's failure
    /// rate, times a per-candidate multiplier, times the failure cost on failed cells.
    /// Heavy-tailed dollars on a real field.
    pub fn with_synthetic_costs(
        &self,
        params: &hevo_stats::synth::SynthParams,
        seed: u64,
    ) -> Matrix {
        let n_c = self.outcomes.len().max(1) as f64;
        let difficulty: Vec<f64> = (0..self.tasks.len())
            .map(|t| -self.outcomes.iter().map(|r| r[t]).sum::<f64>() / n_c)
            .collect();
        let (task, cand) =
            hevo_stats::synth::cost_model(&difficulty, self.outcomes.len(), params, seed);
        Matrix {
            cost: Some(hevo_stats::synth::cell_costs(
                &task,
                &cand,
                &self.outcomes,
                params.failure_cost,
            )),
            ..self.clone()
        }
    }

    /// Why the costs cannot be replayed, if they cannot: a cell whose cost is not a finite
    /// number >= 0, or costs adding up to more than [`MAX_TOTAL_COST`] (a seed's total would
    /// overflow, and its shares print `NaN`). `None` without costs.
    pub fn cost_problem(&self) -> Option<String> {
        let cost = self.cost.as_ref()?;
        let (mut total, mut dearest) = (0.0, (0, 0));
        for (c, row) in cost.iter().enumerate() {
            for (t, &k) in row.iter().enumerate() {
                if !(k.is_finite() && k >= 0.0) {
                    return Some(format!(
                        "candidate `{}`, task `{}` costs {k}, not a finite number >= 0",
                        self.candidates[c], self.tasks[t]
                    ));
                }
                total += k;
                if k > cost[dearest.0][dearest.1] {
                    dearest = (c, t);
                }
            }
        }
        if total <= MAX_TOTAL_COST {
            return None;
        }
        let (c, t) = dearest;
        Some(format!(
            "the costs add up past {MAX_TOTAL_COST:e}, the most a replay sums without \
             overflowing (to {}; candidate `{}`, task `{}` alone costs {:e})",
            if total.is_finite() {
                format!("{total:e}")
            } else {
                format!("more than {:e}", f64::MAX)
            },
            self.candidates[c],
            self.tasks[t],
            cost[c][t]
        ))
    }

    /// A seeded synthetic Rasch matrix ([`hevo_stats::synth::rasch_matrix`]), with its
    /// per-cell costs when the model has any (`cost_log_sd > 0`).
    pub fn synthetic(
        n_candidates: usize,
        n_tasks: usize,
        params: &hevo_stats::synth::SynthParams,
        seed: u64,
    ) -> Matrix {
        let s = hevo_stats::synth::rasch_matrix(n_candidates, n_tasks, params, seed);
        let with_cost = params.cost_log_sd > 0.0
            || params.candidate_cost_log_sd > 0.0
            || params.failure_cost != 1.0;
        let cost = with_cost.then(|| s.cell_costs());
        Matrix {
            cost,
            ..Matrix::from_outcomes(s.outcomes)
        }
    }
}

/// The body of [`Matrix::parse_csv`]: the matrix, and how many cells with a `cost_usd` of
/// their own the cost file gave another.
fn parse_with_costs(
    text: &str,
    origin: &str,
    cost: Option<(&str, &str)>,
) -> Result<(Matrix, usize), MatrixError> {
    let p = origin.to_string();
    // The file that gave the costs (or most of them): the cost file when there is one.
    let costs_from = cost.map_or(origin, |(_, o)| o).to_string();
    let (cands, tasks, cells) = parse_text(text, origin, true)?;
    let (nc, nt) = (cands.len(), tasks.len());
    let mut outcomes = vec![vec![0.0; nt]; nc];
    let mut cost_m = vec![vec![f64::NAN; nt]; nc];
    let mut any_cost = false;
    let mut overridden = 0;
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
    if let Some((cost_text, cost_origin)) = cost {
        let q = cost_origin.to_string();
        let (cc, ct, ccells) = parse_text(cost_text, cost_origin, false)?;
        // Names to rows and columns by hash: a search per cost cell would take time
        // quadratic in the number of tasks.
        let index = |names: &[String]| -> HashMap<String, usize> {
            names
                .iter()
                .enumerate()
                .map(|(i, n)| (n.clone(), i))
                .collect()
        };
        let (cand_at, task_at) = (index(&cands), index(&tasks));
        for ((c, t), cell) in ccells {
            let (Some(&ci), Some(&ti)) = (cand_at.get(&cc[c]), task_at.get(&ct[t])) else {
                return Err(MatrixError::File {
                    path: q,
                    message: format!(
                        "cost for unknown cell (candidate `{}`, task `{}`)",
                        cc[c], ct[t]
                    ),
                });
            };
            if let Some(k) = cell.cost {
                overridden += usize::from(!cost_m[ci][ti].is_nan());
                cost_m[ci][ti] = k;
                any_cost = true;
            }
        }
    }
    let cost = if any_cost {
        for (c, row) in cost_m.iter().enumerate() {
            for (t, v) in row.iter().enumerate() {
                if v.is_nan() {
                    // Named after the file that gave the costs: a cost file missing a cell
                    // is that file's gap, not the matrix's.
                    return Err(MatrixError::File {
                        path: costs_from,
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
    let matrix = Matrix {
        candidates: cands,
        tasks,
        outcomes,
        cost,
    };
    if let Some(problem) = matrix.cost_problem() {
        return Err(MatrixError::File {
            path: costs_from,
            message: format!("{problem}; give the costs in a smaller unit (e.g. dollars)"),
        });
    }
    Ok((matrix, overridden))
}
