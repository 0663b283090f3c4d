//! The spend frontier of several replays of one matrix: which (strategy, rho) settings pick
//! best for what they spend.
//!
//! Replaying at several budgets (`hevo replay --rho 0.2,0.1,0.05`) answers the question a
//! paying user asks: what is the cheapest setting that picks as well as a given one? A
//! setting is on the frontier when no other setting has a mean pick rank at least as good
//! for at most its spend, one of them strictly. Spend is the dollar share of full
//! evaluation when the matrix has costs, else the evaluation share. Ranks are means over
//! seeds: two settings whose ranks differ by less than their standard errors are not told
//! apart by this replay, and the table prints the standard errors beside the ranks.

use std::fmt;

use serde::Serialize;

use crate::replay::ReplayReport;

/// One (strategy, rho) setting of a replay: its pick's mean rank and what it spent.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Setting {
    /// The strategy row's name (e.g. `default`, `coevolve/hajek`).
    pub name: String,
    /// The replay's rho.
    pub rho: f64,
    /// Mean true val rank of the pick.
    pub rank: f64,
    /// Standard error over seeds of `rank`.
    pub rank_se: f64,
    /// The dollar share of full evaluation (with costs), else the evaluation share.
    pub spend: f64,
}

/// What a frontier's spend counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Spend {
    /// The dollar share of full evaluation (every row has one: the matrix has costs).
    Dollars,
    /// The evaluation share of full evaluation.
    Evaluations,
}

impl Spend {
    /// The word for what is counted: `dollar` or `evaluation` (as in "dollar share").
    pub fn word(self) -> &'static str {
        match self {
            Spend::Dollars => "dollar",
            Spend::Evaluations => "evaluation",
        }
    }
}

/// The frontier of several replays of one matrix (one per rho, same seeds).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Frontier {
    /// What spend counts (`"dollars"` or `"evaluations"` in JSON).
    pub spend: Spend,
    /// The settings no other beats, cheapest first; on equal spend, the better rank first. A
    /// setting that gives the same row at several rhos (`full` ignores rho) is listed once,
    /// at the first of them.
    pub points: Vec<Setting>,
}

impl Frontier {
    /// The frontier of `reports`.
    pub fn of(reports: &[ReplayReport]) -> Frontier {
        let (spend, all) = settings(reports);
        let beaten = |p: &Setting| {
            all.iter().any(|q| {
                q.rank <= p.rank && q.spend <= p.spend && (q.rank < p.rank || q.spend < p.spend)
            })
        };
        let mut points: Vec<Setting> = all.iter().filter(|p| !beaten(p)).cloned().collect();
        points.sort_by(|a, b| a.spend.total_cmp(&b.spend).then(a.rank.total_cmp(&b.rank)));
        Frontier { spend, points }
    }
}

/// Every (strategy, rho) setting of `reports`, in report then row order, and what their
/// spend counts. A strategy that ignores rho (`full`) gives the same row at every rho: it is
/// listed once, at the first.
pub fn settings(reports: &[ReplayReport]) -> (Spend, Vec<Setting>) {
    let dollars = reports
        .iter()
        .flat_map(|r| &r.strategies)
        .all(|s| s.cost_share.is_some());
    let mut all: Vec<Setting> = Vec::new();
    for r in reports {
        for s in &r.strategies {
            let p = Setting {
                name: s.name.clone(),
                rho: r.rho,
                rank: s.rank,
                rank_se: s.rank_se,
                spend: if dollars { s.spend() } else { s.evals_share },
            };
            let same = |q: &Setting| (&q.name, q.rank, q.spend) == (&p.name, p.rank, p.spend);
            if !all.iter().any(same) {
                all.push(p);
            }
        }
    }
    let spend = if dollars {
        Spend::Dollars
    } else {
        Spend::Evaluations
    };
    (spend, all)
}

/// The table `hevo replay` prints after several rhos.
impl fmt::Display for Frontier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = self.spend.word();
        writeln!(
            f,
            "frontier: the settings no other picks better for less ({what} share of full \
             evaluation; ranks within a standard error are a tie)"
        )?;
        writeln!(
            f,
            "{:>7} {:>13}  {:<26} {:>6}",
            "spend", "rank", "strategy", "rho"
        )?;
        for p in &self.points {
            let rank = format!("{:.2} ± {:.2}", p.rank, p.rank_se);
            writeln!(
                f,
                "{:>7.3} {:>13}  {:<26} {:>6}",
                p.spend, rank, p.name, p.rho
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay_fixtures::{report, row};

    #[test]
    fn keeps_the_settings_nothing_beats_cheapest_first() {
        let reports = [
            report(
                0.2,
                vec![
                    row("full", 1.0, 1.0, Some(1.0)),
                    row("coevolve/hajek", 3.0, 0.25, Some(0.30)),
                    row("default", 1.2, 0.25, Some(0.20)),
                ],
            ),
            report(
                0.05,
                vec![
                    row("full", 1.0, 1.0, Some(1.0)),
                    row("coevolve/hajek", 6.0, 0.08, Some(0.09)),
                    row("default", 2.0, 0.15, Some(0.12)),
                ],
            ),
        ];
        let f = Frontier::of(&reports);
        let got: Vec<(&str, f64)> = f.points.iter().map(|p| (p.name.as_str(), p.rho)).collect();
        // coevolve at 0.2 is beaten by default at 0.05 (better rank, fewer dollars); full
        // gives the same row at both rhos: listed once, at the first.
        assert_eq!(
            got,
            vec![
                ("coevolve/hajek", 0.05),
                ("default", 0.05),
                ("default", 0.2),
                ("full", 0.2),
            ]
        );
        assert_eq!(f.spend, Spend::Dollars);
        assert_eq!(
            f.points[1].spend, 0.12,
            "dollar shares when every row has one"
        );
        let text = f.to_string();
        assert!(text.contains("dollar share"), "{text}");
        assert!(text.contains("2.00 ± 0.10"), "{text}");
    }

    #[test]
    fn without_costs_spend_is_the_evaluation_share() {
        let reports = [report(
            0.2,
            vec![row("fixed", 2.0, 0.2, None), row("screen", 2.0, 0.1, None)],
        )];
        let f = Frontier::of(&reports);
        assert_eq!(f.spend, Spend::Evaluations);
        assert_eq!(f.points.len(), 1, "screen ranks as well for less");
        let p = &f.points[0];
        assert_eq!((p.name.as_str(), p.spend), ("screen", 0.1));
        assert!(f.to_string().contains("evaluation share"));
    }
}
