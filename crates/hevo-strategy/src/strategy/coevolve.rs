//! `coevolve`: Task-CoEvolve as published.

use hevo_stats::design::{successive_inclusion_exact, successive_sample, McInclusion};
use hevo_stats::estimate::{
    choose_estimator, combine_strata, estimate_with, Design, Estimate, Estimator, Unit,
};
use hevo_stats::weights::coevolve_weights;

use super::{CandidateId, Core, Oracle, Outcome, Strategy};

/// `coevolve`: Task-CoEvolve as in the paper.
pub(crate) struct Coevolve {
    pub(super) core: Core,
    pub(super) name: String,
    pub(super) estimator: Option<Estimator>,
    pub(super) mc: Vec<Option<McInclusion>>,
}

impl Strategy for Coevolve {
    core_accessors!();

    fn phase0(&mut self, oracle: &mut dyn Oracle, seeds: &[CandidateId]) {
        self.core.phase0_full(oracle, seeds);
    }
    fn iteration(&mut self, oracle: &mut dyn Oracle, candidates: &[CandidateId]) {
        let core = &mut self.core;
        // Weights from the statistics of all previous iterations (updated after each one).
        let w = coevolve_weights(&core.stats, core.params);
        let p = core.stats.rates();
        let sizes = core.sizes();
        let mut per_stratum: Vec<(Vec<usize>, Vec<f64>)> = Vec::new();
        for (g, m) in core.strata.members.iter().enumerate() {
            let wg: Vec<f64> = m.iter().map(|&t| w[t]).collect();
            let local = successive_sample(&wg, sizes[g], &mut core.rng);
            let pi = match &mut self.mc[g] {
                Some(mc) => mc.inclusion(&wg, sizes[g]),
                None => successive_inclusion_exact(&wg, sizes[g]),
            };
            per_stratum.push((local, pi));
        }
        let cells: Vec<_> = candidates
            .iter()
            .flat_map(|&c| {
                per_stratum
                    .iter()
                    .zip(&core.strata.members)
                    .flat_map(move |((s, _), m)| s.iter().map(move |&i| (c, m[i])))
            })
            .collect();
        core.observe(oracle, &cells);
        let gw = 1.0 / core.strata.len() as f64;
        let mut parts: Vec<Vec<(Estimate, f64)>> = vec![Vec::new(); candidates.len()];
        for (g, m) in core.strata.members.iter().enumerate() {
            let (s, pi) = &per_stratum[g];
            let anchor_mean = m.iter().map(|&t| p[t]).sum::<f64>() / m.len() as f64;
            let pg: Vec<f64> = m.iter().map(|&t| p[t]).collect();
            let units: Vec<Vec<Unit>> = candidates
                .iter()
                .map(|&c| {
                    s.iter()
                        .map(|&i| Unit {
                            y: core.y(c, m[i]),
                            pi: pi[i],
                            anchor: p[m[i]],
                        })
                        .collect()
                })
                .collect();
            let which = match self.estimator {
                Some(e) => e,
                None => {
                    let batch: Vec<(&[Unit], f64)> =
                        units.iter().map(|u| (u.as_slice(), anchor_mean)).collect();
                    choose_estimator(
                        &[
                            Estimator::Hajek,
                            Estimator::Residual,
                            Estimator::HajekResidual,
                        ],
                        &batch,
                        m.len(),
                        Design::FixedSize,
                        Some((pi, &pg)),
                    )
                }
            };
            for (k, u) in units.iter().enumerate() {
                let e = estimate_with(which, u, anchor_mean, m.len(), Design::FixedSize);
                parts[k].push((e, gw));
            }
        }
        for (k, &c) in candidates.iter().enumerate() {
            core.estimates[c] = combine_strata(&parts[k]);
            let mut design: Vec<(usize, f64)> = Vec::new();
            for (g, m) in core.strata.members.iter().enumerate() {
                let (s, pi) = &per_stratum[g];
                design.extend(s.iter().map(|&i| (m[i], pi[i])));
            }
            design.sort_by_key(|&(t, _)| t);
            core.design[c] = design;
        }
    }
    fn finish(&mut self, _oracle: &mut dyn Oracle) -> Outcome {
        self.core.outcome()
    }
}
