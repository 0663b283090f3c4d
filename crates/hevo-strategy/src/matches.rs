//! For each peer's setting, the cheapest setting of one strategy that picks as well.
//!
//! The frontier says which settings nothing beats; a user weighing `default` against a peer
//! asks a narrower question: "for what share of `coevolve`'s dollars at rho 0.2 does
//! `default` pick at least as well, and at which rho?" [`Matches::of`] answers it for every
//! peer setting of several replays of one matrix (same seeds): among the strategy's own
//! settings whose mean pick rank is no worse than the peer's, the one that spends least, and
//! its spend as a share of the peer's. Ranks are means over seeds, so a match within a
//! standard error is a tie, not a win; the table prints both standard errors.

use std::fmt;

use serde::Serialize;

use crate::frontier::{settings, Setting, Spend};
use crate::replay::ReplayReport;

/// One peer setting and the cheapest setting of the strategy that ranks no worse.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Match {
    /// The peer's (strategy, rho) setting.
    pub peer: Setting,
    /// The strategy's cheapest setting whose mean rank is at most the peer's (on equal spend,
    /// the better rank); `None` when none of its settings ranks as well.
    pub cheapest: Option<Setting>,
    /// `cheapest`'s spend divided by the peer's (`None` without a match or at zero spend).
    pub spend_ratio: Option<f64>,
}

/// The matches of one strategy against every other strategy's settings.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Matches {
    /// The strategy matched (`default`).
    pub strategy: String,
    /// What spend counts (`"dollars"` or `"evaluations"` in JSON).
    pub spend: Spend,
    /// One row per peer setting, peers in the order they first appear, each peer's rhos in
    /// the replays' order.
    pub rows: Vec<Match>,
}

impl Matches {
    /// The matches of `strategy` in `reports`; `None` when it was not replayed or nothing
    /// else was.
    pub fn of(reports: &[ReplayReport], strategy: &str) -> Option<Matches> {
        let (spend, all) = settings(reports);
        let (own, peers): (Vec<Setting>, Vec<Setting>) =
            all.into_iter().partition(|s| s.name == strategy);
        if own.is_empty() || peers.is_empty() {
            return None;
        }
        let mut names: Vec<&str> = Vec::new();
        for p in &peers {
            if !names.contains(&p.name.as_str()) {
                names.push(&p.name);
            }
        }
        let rows = names
            .iter()
            .flat_map(|name| peers.iter().filter(move |p| p.name == *name))
            .map(|peer| {
                let cheapest = own
                    .iter()
                    .filter(|s| s.rank <= peer.rank)
                    .min_by(|a, b| a.spend.total_cmp(&b.spend).then(a.rank.total_cmp(&b.rank)))
                    .cloned();
                let spend_ratio = cheapest
                    .as_ref()
                    .filter(|_| peer.spend > 0.0)
                    .map(|s| s.spend / peer.spend);
                Match {
                    peer: peer.clone(),
                    cheapest,
                    spend_ratio,
                }
            })
            .collect();
        Some(Matches {
            strategy: strategy.to_string(),
            spend,
            rows,
        })
    }
}

/// The table `hevo replay` prints after the frontier.
impl fmt::Display for Matches {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = self.spend.word();
        let who = &self.strategy;
        writeln!(
            f,
            "{who} against each peer: the rho of its cheapest setting whose pick ranks no worse \
             ({what} share of full evaluation; ratio = its spend / the peer's; ranks within a \
             standard error are a tie)"
        )?;
        writeln!(
            f,
            "  {:<20} {:>5} {:>13} {:>6} | {:<7} {:>13} {:>6} {:>6}",
            "peer", "rho", "rank", "spend", who, "rank", "spend", "ratio"
        )?;
        let rank = |s: &Setting| format!("{:.2} ± {:.2}", s.rank, s.rank_se);
        for m in &self.rows {
            let p = &m.peer;
            write!(
                f,
                "  {:<20} {:>5} {:>13} {:>6.3} | ",
                p.name,
                p.rho,
                rank(p),
                p.spend
            )?;
            match (&m.cheapest, m.spend_ratio) {
                (Some(s), ratio) => {
                    let ratio = ratio.map_or("-".to_string(), |r| format!("{r:.2}"));
                    writeln!(
                        f,
                        "{:<7} {:>13} {:>6.3} {:>6}",
                        s.rho,
                        rank(s),
                        s.spend,
                        ratio
                    )?
                }
                (None, _) => writeln!(f, "no setting of {who} ranks as well")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::StrategyRow;
    use crate::replay_fixtures::{self as fixtures, report};

    /// A row whose evaluation and dollar shares are both `cost`.
    fn row(name: &str, rank: f64, cost: f64) -> StrategyRow {
        fixtures::row(name, rank, cost, Some(cost))
    }

    #[test]
    fn the_cheapest_own_setting_that_ranks_no_worse() {
        let reports = [
            report(
                0.2,
                vec![
                    row("full", 1.0, 1.0),
                    row("coevolve/hajek", 3.0, 0.30),
                    row("default", 1.2, 0.20),
                ],
            ),
            report(
                0.05,
                vec![
                    row("full", 1.0, 1.0),
                    row("coevolve/hajek", 6.0, 0.09),
                    // Ranks exactly as coevolve at 0.2: no worse, so it matches.
                    row("default", 3.0, 0.12),
                ],
            ),
        ];
        let m = Matches::of(&reports, "default").unwrap();
        assert_eq!(m.spend, Spend::Dollars);
        let got: Vec<(&str, f64, Option<f64>)> = m
            .rows
            .iter()
            .map(|r| {
                let own = r.cheapest.as_ref().map(|s| s.rho);
                (r.peer.name.as_str(), r.peer.rho, own)
            })
            .collect();
        // `full` ignores rho: one row. Nothing of `default` ranks 1.0. `coevolve` at 0.2 is
        // matched by `default` at 0.05 (rank 3.0 <= 3.0, cheaper than at 0.2); at 0.05 too.
        assert_eq!(
            got,
            vec![
                ("full", 0.2, None),
                ("coevolve/hajek", 0.2, Some(0.05)),
                ("coevolve/hajek", 0.05, Some(0.05)),
            ]
        );
        let ratio = m.rows[1].spend_ratio.unwrap();
        assert!((ratio - 0.12 / 0.30).abs() < 1e-12, "{ratio}");
        assert_eq!(m.rows[0].spend_ratio, None);
        let text = m.to_string();
        assert!(
            text.contains("no setting of default ranks as well"),
            "{text}"
        );
        assert!(text.contains("0.40"), "the ratio 0.12 / 0.30:\n{text}");
    }

    #[test]
    fn nothing_to_match_without_the_strategy_or_a_peer() {
        let only_default = [report(0.2, vec![row("default", 1.0, 0.2)])];
        assert_eq!(Matches::of(&only_default, "default"), None);
        let no_default = [report(0.2, vec![row("screen", 1.0, 0.2)])];
        assert_eq!(Matches::of(&no_default, "default"), None);
    }
}
