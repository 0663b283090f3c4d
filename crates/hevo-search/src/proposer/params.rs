//! The built-in `params` proposer: evolutionary search over a harness's declared `[params]`.
//!
//! A candidate of this proposer is the seed harness's code plus one value per parameter.
//! Each iteration proposes `k` new configurations, **coverage first**: while some parameter
//! (of more than one value) holds a single value across the whole history, each proposal
//! is a **coverage step**: the incumbent with one such parameter set to a value no
//! configuration has held yet (the parameter and the value drawn with the seeded
//! generator). So within its first `m` proposals (`m` = the parameters that have more than
//! one value) a history touches every parameter once, each change measured on its own
//! against the incumbent of its iteration, before any parameter is mutated twice. Then
//! exploitation, by
//!
//! - **mutation** of the incumbent (the best estimate so far) or of a frontier member: one
//!   parameter changes (two with probability 0.3); for a parameter whose values are all
//!   numbers, the new value is a neighbour in the declared order with probability 0.7 (a
//!   local step), otherwise any other value;
//! - **crossover** of the incumbent with another frontier member: each parameter is taken
//!   from either parent with probability 1/2;
//! - an occasional **random restart**: every parameter drawn uniformly.
//!
//! No configuration is ever proposed twice (neither one already evaluated nor two in the
//! same batch). Proposals are a pure function of the space, the history, the seed and the
//! iteration number, so a resumed search asks for exactly the same candidates again.

use std::collections::{BTreeMap, HashSet};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

/// The values each declared parameter may take, by parameter name (declaration order kept
/// by the sorted map; values in their declared order).
pub type ParamSpace = BTreeMap<String, Vec<Value>>;

/// One choice of a value for every parameter.
pub type ParamConfig = BTreeMap<String, Value>;

/// An evaluated configuration, as the proposer sees it (validation estimates only).
#[derive(Clone, Debug)]
pub struct Scored {
    /// The configuration.
    pub config: ParamConfig,
    /// Its estimated validation score.
    pub estimate: f64,
}

/// How a proposal was made; recorded as the candidate's hypothesis and axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Move {
    /// The first change of a parameter no configuration has varied yet (exploration).
    Coverage,
    /// A small change of one or two parameters of a parent (exploitation).
    Mutation,
    /// A mix of two good parents (exploitation).
    Crossover,
    /// A configuration drawn uniformly (exploration).
    Restart,
}

impl Move {
    /// The archive's `axis` tag for this move.
    pub fn axis(self) -> &'static str {
        match self {
            Move::Mutation | Move::Crossover => "exploitation",
            Move::Coverage | Move::Restart => "exploration",
        }
    }
}

/// One proposed configuration with where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Proposal {
    /// The configuration to evaluate.
    pub config: ParamConfig,
    /// Index into the history of the main parent, if any.
    pub parent: Option<usize>,
    /// How it was made.
    pub how: Move,
    /// A one-line human-readable hypothesis (what changed and why).
    pub hypothesis: String,
}

/// Tuning of the evolutionary moves.
#[derive(Clone, Copy, Debug)]
pub struct ParamsOptions {
    /// Probability of a random restart.
    pub restart_prob: f64,
    /// Probability of a crossover (when there are two parents to cross).
    pub crossover_prob: f64,
    /// How many of the best configurations form the parent pool besides the incumbent.
    pub frontier_size: usize,
}

impl Default for ParamsOptions {
    fn default() -> Self {
        ParamsOptions {
            restart_prob: 0.1,
            crossover_prob: 0.3,
            frontier_size: 4,
        }
    }
}

/// Canonical text of a configuration, used to detect duplicates.
pub fn config_key(config: &ParamConfig) -> String {
    serde_json::to_string(config).expect("a map of JSON values always serializes")
}

/// The number of distinct configurations in a space (saturating).
pub fn space_size(space: &ParamSpace) -> u64 {
    space
        .values()
        .fold(1u64, |acc, v| acc.saturating_mul(v.len() as u64))
}

/// Proposes up to `k` new configurations for iteration `iteration`.
///
/// Returns fewer than `k` only when the space has fewer unseen configurations left.
/// `history` lists every evaluated configuration in evaluation order (earliest first).
pub fn propose(
    space: &ParamSpace,
    history: &[Scored],
    k: usize,
    seed: u64,
    iteration: u64,
    opts: &ParamsOptions,
) -> Vec<Proposal> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ iteration.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut seen: HashSet<String> = history.iter().map(|s| config_key(&s.config)).collect();
    let parents = parent_pool(history, opts.frontier_size);
    let remaining = space_size(space).saturating_sub(seen.len() as u64);
    let want = (k as u64).min(remaining) as usize;
    let mut out = Vec::with_capacity(want);
    while out.len() < want {
        let Some(proposal) = coverage_step(space, history, &out, &parents, &mut rng) else {
            break;
        };
        seen.insert(config_key(&proposal.config));
        out.push(proposal);
    }
    let mut attempts = 0usize;
    while out.len() < want && attempts < 1000 + 200 * k {
        attempts += 1;
        let proposal = one_move(space, history, &parents, &mut rng, opts, attempts > 500);
        if seen.insert(config_key(&proposal.config)) {
            out.push(proposal);
        }
    }
    if out.len() < want {
        // Random moves kept colliding: enumerate the unseen rest deterministically.
        for config in enumerate(space) {
            if out.len() >= want {
                break;
            }
            if seen.insert(config_key(&config)) {
                out.push(Proposal {
                    config,
                    parent: None,
                    how: Move::Restart,
                    hypothesis: "an untried configuration (the neighbourhood is exhausted)".into(),
                });
            }
        }
    }
    out
}

/// The parameters (of more than one value) that hold a single value across `history` and
/// the proposals already made: the ones coverage has not touched yet, in declaration order.
pub fn untouched(space: &ParamSpace, history: &[Scored], made: &[Proposal]) -> Vec<String> {
    let configs = history
        .iter()
        .map(|s| &s.config)
        .chain(made.iter().map(|p| &p.config));
    let mut held: BTreeMap<&str, HashSet<String>> = BTreeMap::new();
    for config in configs {
        for name in space.keys() {
            let v = value_or_default(space, config, name);
            held.entry(name.as_str()).or_default().insert(v.to_string());
        }
    }
    space
        .iter()
        .filter(|(name, values)| {
            values.len() > 1 && held.get(name.as_str()).map_or(0, HashSet::len) <= 1
        })
        .map(|(name, _)| name.clone())
        .collect()
}

/// A coverage step, while a parameter is untouched: the incumbent (the seed when nothing is
/// scored) with one untouched parameter, drawn uniformly, set to a value drawn uniformly from
/// those no configuration holds. The result is new, as no configuration holds that value.
fn coverage_step(
    space: &ParamSpace,
    history: &[Scored],
    made: &[Proposal],
    parents: &[usize],
    rng: &mut ChaCha8Rng,
) -> Option<Proposal> {
    let open = untouched(space, history, made);
    if open.is_empty() || history.is_empty() {
        return None;
    }
    let parent = parents.first().copied().unwrap_or(0);
    let name = &open[rng.gen_range(0..open.len())];
    let held = value_or_default(space, &history[parent].config, name);
    let fresh: Vec<&Value> = space[name].iter().filter(|v| **v != held).collect();
    let value = fresh[rng.gen_range(0..fresh.len())].clone();
    let mut config: ParamConfig = space
        .keys()
        .map(|k| {
            (
                k.clone(),
                value_or_default(space, &history[parent].config, k),
            )
        })
        .collect();
    config.insert(name.clone(), value.clone());
    Some(Proposal {
        config,
        parent: Some(parent),
        how: Move::Coverage,
        hypothesis: format!(
            "coverage of #{parent}: try {name}={value}, a parameter not varied yet"
        ),
    })
}

/// Indices of the parent pool: the best `size` configurations, best first, earliest on ties.
fn parent_pool(history: &[Scored], size: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..history.len())
        .filter(|&i| history[i].estimate.is_finite())
        .collect();
    idx.sort_by(|&a, &b| {
        history[b]
            .estimate
            .total_cmp(&history[a].estimate)
            .then(a.cmp(&b))
    });
    idx.truncate(size.max(1));
    idx
}

fn one_move(
    space: &ParamSpace,
    history: &[Scored],
    parents: &[usize],
    rng: &mut ChaCha8Rng,
    opts: &ParamsOptions,
    force_restart: bool,
) -> Proposal {
    let u: f64 = rng.gen();
    if parents.is_empty() || force_restart || u < opts.restart_prob {
        let config = space
            .iter()
            .map(|(k, v)| (k.clone(), v[rng.gen_range(0..v.len())].clone()))
            .collect();
        return Proposal {
            config,
            parent: None,
            how: Move::Restart,
            hypothesis: "random restart: explore a distant configuration".into(),
        };
    }
    if parents.len() >= 2 && u < opts.restart_prob + opts.crossover_prob {
        let a = parents[0];
        let b = parents[rng.gen_range(1..parents.len())];
        let config = space
            .keys()
            .map(|k| {
                let from = if rng.gen_bool(0.5) { a } else { b };
                (k.clone(), value_or_default(space, &history[from].config, k))
            })
            .collect();
        return Proposal {
            config,
            parent: Some(a),
            how: Move::Crossover,
            hypothesis: format!("crossover of #{a} and #{b}: combine what each got right"),
        };
    }
    // Mutation: the incumbent with probability 0.6, else another frontier member.
    let parent = if parents.len() == 1 || rng.gen_bool(0.6) {
        parents[0]
    } else {
        parents[rng.gen_range(1..parents.len())]
    };
    let mut config: ParamConfig = space
        .keys()
        .map(|k| {
            (
                k.clone(),
                value_or_default(space, &history[parent].config, k),
            )
        })
        .collect();
    let mutable: Vec<&String> = space
        .iter()
        .filter(|(_, v)| v.len() > 1)
        .map(|(k, _)| k)
        .collect();
    let mut changed = Vec::new();
    if !mutable.is_empty() {
        let n_changes = if mutable.len() > 1 && rng.gen_bool(0.3) {
            2
        } else {
            1
        };
        for _ in 0..n_changes {
            let name = mutable[rng.gen_range(0..mutable.len())];
            let values = &space[name];
            let current = values
                .iter()
                .position(|v| Some(v) == config.get(name))
                .unwrap_or(0);
            let next = mutate_index(values, current, rng);
            config.insert(name.clone(), values[next].clone());
            // The same parameter drawn twice: the second value is the one tried.
            changed.retain(|(n, _): &(&String, String)| *n != name);
            changed.push((name, values[next].to_string()));
        }
    }
    let changed: Vec<String> = changed.iter().map(|(n, v)| format!("{n}={v}")).collect();
    Proposal {
        config,
        parent: Some(parent),
        how: Move::Mutation,
        hypothesis: format!("mutate #{parent}: try {}", changed.join(", ")),
    }
}

/// The value a configuration holds for `name`, or the first declared value if it holds none
/// or holds one the space no longer declares.
fn value_or_default(space: &ParamSpace, config: &ParamConfig, name: &str) -> Value {
    let values = &space[name];
    match config.get(name) {
        Some(v) if values.contains(v) => v.clone(),
        _ => values[0].clone(),
    }
}

/// A different index: a neighbour for ordered numeric values (probability 0.7), else uniform.
fn mutate_index(values: &[Value], current: usize, rng: &mut ChaCha8Rng) -> usize {
    let n = values.len();
    debug_assert!(n > 1);
    let numeric = values.iter().all(Value::is_number);
    if numeric && rng.gen_bool(0.7) {
        return match current {
            0 => 1,
            c if c + 1 == n => c - 1,
            c => {
                if rng.gen_bool(0.5) {
                    c - 1
                } else {
                    c + 1
                }
            }
        };
    }
    let pick = rng.gen_range(0..n - 1);
    if pick >= current {
        pick + 1
    } else {
        pick
    }
}

/// Every configuration of the space in lexicographic order of value indices.
fn enumerate(space: &ParamSpace) -> impl Iterator<Item = ParamConfig> + '_ {
    let dims: Vec<(&String, &Vec<Value>)> = space.iter().collect();
    let total = space_size(space);
    (0..total).map(move |mut i| {
        let mut config = ParamConfig::new();
        for (name, values) in dims.iter().rev() {
            let n = values.len() as u64;
            config.insert((*name).clone(), values[(i % n) as usize].clone());
            i /= n;
        }
        config
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn space() -> ParamSpace {
        let mut s = ParamSpace::new();
        s.insert("shots".into(), vec![json!(0), json!(2), json!(4), json!(8)]);
        s.insert(
            "retrieval".into(),
            vec![json!("random"), json!("tfidf"), json!("char-ngram")],
        );
        s.insert("calibrate".into(), vec![json!(false), json!(true)]);
        s
    }

    fn seed_history(space: &ParamSpace) -> Vec<Scored> {
        let config = space
            .iter()
            .map(|(k, v)| (k.clone(), v[0].clone()))
            .collect();
        vec![Scored {
            config,
            estimate: 0.5,
        }]
    }

    /// A deterministic objective with a unique optimum, for search tests.
    fn objective(c: &ParamConfig) -> f64 {
        let shots = c["shots"].as_f64().unwrap();
        let r = if c["retrieval"] == json!("tfidf") {
            0.2
        } else {
            0.0
        };
        let cal = if c["calibrate"] == json!(true) {
            0.1
        } else {
            0.0
        };
        0.3 + 0.04 * shots + r + cal
    }

    #[test]
    fn never_proposes_a_duplicate_and_exhausts_the_space_exactly() {
        let s = space();
        let mut history = seed_history(&s);
        let mut it = 0;
        loop {
            it += 1;
            let props = propose(&s, &history, 3, 7, it, &ParamsOptions::default());
            if props.is_empty() {
                break;
            }
            for p in props {
                let estimate = objective(&p.config);
                history.push(Scored {
                    config: p.config,
                    estimate,
                });
            }
            assert!(it < 100, "the search should exhaust 24 configurations");
        }
        let keys: HashSet<String> = history.iter().map(|h| config_key(&h.config)).collect();
        assert_eq!(
            keys.len(),
            history.len(),
            "duplicate configuration proposed"
        );
        assert_eq!(history.len() as u64, space_size(&s));
    }

    #[test]
    fn proposals_are_a_pure_function_of_inputs() {
        let s = space();
        let h = seed_history(&s);
        let a = propose(&s, &h, 3, 42, 5, &ParamsOptions::default());
        let b = propose(&s, &h, 3, 42, 5, &ParamsOptions::default());
        assert_eq!(a, b);
        let c = propose(&s, &h, 3, 42, 6, &ParamsOptions::default());
        assert_ne!(a, c, "different iterations should explore differently");
    }

    #[test]
    fn mutations_change_one_or_two_parameters_of_their_parent() {
        let s = space();
        let h = seed_history(&s);
        for it in 0..50 {
            for p in propose(&s, &h, 3, 1, it, &ParamsOptions::default()) {
                if p.how == Move::Mutation {
                    let parent = &h[p.parent.unwrap()].config;
                    let diff = s.keys().filter(|k| parent[*k] != p.config[*k]).count();
                    assert!((1..=2).contains(&diff), "{diff} changes in {:?}", p.config);
                }
            }
        }
    }

    /// A mutation's hypothesis names each parameter once, with the value it tries: one that
    /// drew the same parameter twice said "try threshold=10, threshold=6" and tried 6.
    #[test]
    fn a_mutations_hypothesis_names_each_parameter_once_with_its_value() {
        let s = space();
        let mut mutations = 0;
        for seed in 0..40 {
            let mut history = seed_history(&s);
            for it in 1..=6 {
                for p in propose(&s, &history, 3, seed, it, &ParamsOptions::default()) {
                    history.push(Scored {
                        config: p.config.clone(),
                        estimate: objective(&p.config),
                    });
                    if p.how != Move::Mutation {
                        continue;
                    }
                    mutations += 1;
                    let tried = p.hypothesis.split("try ").nth(1).unwrap();
                    let mut names = Vec::new();
                    for part in tried.split(", ") {
                        let (name, value) = part.split_once('=').unwrap();
                        assert_eq!(value, p.config[name].to_string(), "{}", p.hypothesis);
                        names.push(name);
                    }
                    let before = names.len();
                    names.dedup();
                    names.sort();
                    names.dedup();
                    assert_eq!(names.len(), before, "{}", p.hypothesis);
                }
            }
        }
        assert!(mutations > 100, "{mutations}");
    }

    #[test]
    fn search_finds_the_optimum_much_faster_than_random_order() {
        // 4 numeric parameters x 6 values = 1,296 configurations and a separable objective
        // with a unique optimum. Proposing in random order needs about 648 evaluations on
        // average; hill climbing by neighbour steps should need far fewer.
        let mut s = ParamSpace::new();
        for name in ["a", "b", "c", "d"] {
            s.insert(name.into(), (0..6).map(|v| json!(v)).collect());
        }
        let target = [4.0, 1.0, 5.0, 3.0];
        let f = |c: &ParamConfig| -> f64 {
            -["a", "b", "c", "d"]
                .iter()
                .zip(target)
                .map(|(k, t)| (c[*k].as_f64().unwrap() - t).powi(2))
                .sum::<f64>()
        };
        let mut evals_needed = Vec::new();
        for seed in 0..20 {
            let mut history = seed_history(&s);
            let mut found = None;
            for it in 1..=150 {
                for p in propose(&s, &history, 3, seed, it, &ParamsOptions::default()) {
                    let estimate = f(&p.config);
                    history.push(Scored {
                        config: p.config,
                        estimate,
                    });
                    if estimate == 0.0 && found.is_none() {
                        found = Some(history.len());
                    }
                }
                if found.is_some() {
                    break;
                }
            }
            evals_needed.push(found.expect("optimum never found in 450 evaluations") as f64);
        }
        let mean = evals_needed.iter().sum::<f64>() / evals_needed.len() as f64;
        assert!(mean < 150.0, "mean evaluations to the optimum {mean}");
    }

    /// A space of `n` parameters with 2 to 5 values each, some numeric, drawn from `seed`.
    fn random_space(seed: u64, n: usize) -> ParamSpace {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..n)
            .map(|i| {
                let m = rng.gen_range(2..=5);
                let values: Vec<Value> = if rng.gen_bool(0.5) {
                    (0..m).map(|v| json!(v)).collect()
                } else {
                    (0..m).map(|v| json!(format!("v{v}"))).collect()
                };
                (format!("p{i}"), values)
            })
            .collect()
    }

    #[test]
    fn every_parameter_is_touched_within_its_first_m_proposals() {
        // Over 200 seeds, spaces of 1 to 8 parameters, batches of 1 to 4 and scores that
        // move the incumbent around: the first m proposals (m = parameters) vary every
        // parameter once, each a one-parameter change of the incumbent of its iteration.
        for seed in 0..200u64 {
            let s = random_space(seed, 1 + (seed % 8) as usize);
            let m = s.len();
            let k = 1 + (seed % 4) as usize;
            let mut history = seed_history(&s);
            let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xABCD);
            let mut it = 0;
            while history.len() - 1 < m {
                it += 1;
                let parents = parent_pool(&history, 4);
                let props = propose(&s, &history, k, seed, it, &ParamsOptions::default());
                assert!(!props.is_empty(), "seed {seed}: nothing proposed");
                for p in props {
                    if history.len() - 1 < m {
                        assert_eq!(p.how, Move::Coverage, "seed {seed}: {p:?}");
                        assert_eq!(p.parent, Some(parents[0]), "seed {seed}");
                        let parent = &history[parents[0]].config;
                        let diff = s.keys().filter(|n| parent[*n] != p.config[*n]).count();
                        assert_eq!(diff, 1, "seed {seed}: {p:?}");
                    }
                    let estimate = rng.gen::<f64>();
                    history.push(Scored {
                        config: p.config,
                        estimate,
                    });
                }
            }
            let first: Vec<Scored> = history[..=m].to_vec();
            assert!(
                untouched(&s, &first, &[]).is_empty(),
                "seed {seed}: {:?} untouched after {m} proposals",
                untouched(&s, &first, &[])
            );
        }
    }

    #[test]
    fn coverage_draws_every_parameter_first_about_equally_often() {
        // The parameter a coverage step varies is drawn uniformly: over 4,000 seeds each of
        // 5 parameters comes first 800 times in expectation (binomial sd 25); allow 5 sd.
        let s = random_space(9, 5);
        let mut first: BTreeMap<String, usize> = BTreeMap::new();
        for seed in 0..4000u64 {
            let h = seed_history(&s);
            let p = &propose(&s, &h, 1, seed, 1, &ParamsOptions::default())[0];
            let name = s.keys().find(|n| p.config[*n] != h[0].config[*n]).unwrap();
            *first.entry(name.clone()).or_default() += 1;
        }
        assert_eq!(first.len(), 5, "{first:?}");
        for (name, n) in &first {
            assert!((675..=925).contains(n), "{name} first {n} times of 4000");
        }
    }

    #[test]
    fn after_coverage_the_evolutionary_moves_take_over() {
        let s = space();
        let mut history = seed_history(&s);
        for it in 1..=10 {
            for p in propose(&s, &history, 3, 5, it, &ParamsOptions::default()) {
                if it > 1 {
                    assert_ne!(p.how, Move::Coverage, "iteration {it}: {p:?}");
                }
                let estimate = objective(&p.config);
                history.push(Scored {
                    config: p.config,
                    estimate,
                });
            }
        }
        assert!(history.len() > 4);
    }

    #[test]
    fn a_single_valued_space_yields_nothing_new() {
        let mut s = ParamSpace::new();
        s.insert("only".into(), vec![json!(1)]);
        let h = seed_history(&s);
        assert!(propose(&s, &h, 3, 0, 1, &ParamsOptions::default()).is_empty());
    }

    #[test]
    fn stale_values_fall_back_to_the_first_declared_value() {
        let s = space();
        let mut config: ParamConfig = s.iter().map(|(k, v)| (k.clone(), v[1].clone())).collect();
        config.insert("shots".into(), json!(99));
        let h = vec![Scored {
            config,
            estimate: 0.9,
        }];
        for p in propose(&s, &h, 3, 3, 1, &ParamsOptions::default()) {
            assert!(s["shots"].contains(&p.config["shots"]));
        }
    }
}
