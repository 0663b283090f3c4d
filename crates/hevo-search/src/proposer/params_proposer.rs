//! The built-in `params` proposer: evolutionary search over the seeds' `[params]`.

use std::collections::BTreeMap;

use super::{ProposeContext, ProposeError, Proposer};
use crate::archive::CandidateMeta;
use crate::proposer::params::{propose, ParamsOptions, Scored};
use crate::proposer::params_writer::{read_params, write_candidate};

/// The built-in `params` proposer: evolutionary search over the seeds' `[params]`.
///
/// Candidates descend from a seed (their *family*: the same code, other parameter values).
/// Each iteration gives about two thirds of the `k` proposals to the family of the
/// incumbent and the rest to the next best family, so a seed that starts behind is not
/// forgotten. Within a family, [`crate::proposer::params::propose`] first varies every
/// parameter once (coverage), then mutates the incumbent and frontier members, crosses
/// them over and restarts occasionally, never repeating a configuration.
#[derive(Debug, Default)]
pub struct ParamsProposer {
    /// Tuning of the evolutionary moves.
    pub options: ParamsOptions,
}

impl Proposer for ParamsProposer {
    fn deterministic(&self) -> bool {
        true
    }

    fn propose(&mut self, ctx: &ProposeContext<'_>) -> Result<(), ProposeError> {
        // Families: the root seed of each candidate, by following parents.
        let by_name: BTreeMap<&str, &crate::archive::Candidate> = ctx
            .history
            .iter()
            .map(|(c, _)| (c.meta.name.as_str(), c))
            .collect();
        let root_of = |name: &str| -> String {
            let mut cur = name;
            for _ in 0..1000 {
                match by_name.get(cur).and_then(|c| c.meta.parent.as_deref()) {
                    Some(p) if by_name.contains_key(p) => cur = p,
                    _ => break,
                }
            }
            cur.to_string()
        };
        let mut families: BTreeMap<String, Vec<(usize, Scored)>> = BTreeMap::new();
        for (i, (c, e)) in ctx.history.iter().enumerate() {
            let Ok((_, config)) = read_params(&c.code()) else {
                continue;
            };
            families.entry(root_of(&c.meta.name)).or_default().push((
                i,
                Scored {
                    config,
                    estimate: e.value,
                },
            ));
        }
        // Rank families by their best estimate (earliest on ties).
        let mut ranked: Vec<(String, f64, usize)> = families
            .iter()
            .map(|(name, members)| {
                let best = members
                    .iter()
                    .map(|(_, s)| s.estimate)
                    .filter(|v| v.is_finite())
                    .fold(f64::NEG_INFINITY, f64::max);
                let first = members.iter().map(|(i, _)| *i).min().unwrap_or(usize::MAX);
                (name.clone(), best, first)
            })
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.2.cmp(&b.2)));
        let k = ctx.k as usize;
        let shares: Vec<usize> = if ranked.len() >= 2 && k >= 2 {
            let first = (2 * k).div_ceil(3);
            vec![first, k - first]
        } else {
            vec![k]
        };
        let mut written = 0;
        for ((family, _, _), share) in ranked.iter().zip(shares) {
            let members = &families[family];
            let root = by_name[family.as_str()];
            let Ok((space, _)) = read_params(&root.code()) else {
                continue;
            };
            let history: Vec<Scored> = members.iter().map(|(_, s)| s.clone()).collect();
            let family_seed = ctx.seed ^ hevo_stats::seed::fnv1a(family.as_bytes());
            for (j, p) in propose(
                &space,
                &history,
                share,
                family_seed,
                ctx.iteration as u64,
                &self.options,
            )
            .into_iter()
            .enumerate()
            {
                let parent = p
                    .parent
                    .map(|pi| &ctx.history[members[pi].0].0)
                    .unwrap_or(root);
                let name = format!("{family}.i{}c{}", ctx.iteration, written + j);
                let meta = CandidateMeta {
                    name: name.clone(),
                    parent: Some(parent.meta.name.clone()),
                    iteration: ctx.iteration,
                    hypothesis: p.hypothesis.clone(),
                    axis: p.how.axis().into(),
                    components: vec!["params".into()],
                };
                let dest = ctx.archive.pending_dir().join(&name);
                write_candidate(&parent.code(), &p.config, &meta, &dest)?;
            }
            written += share;
        }
        Ok(())
    }
}
