//! Pass rate against cost per trial: every candidate, the Pareto front and HarnessPro's
//! lite, medium and heavy picks, as a chart and a table.

use std::fmt::Write;

use super::format::axis_color;
use super::PARETO_CHART_ID;
use crate::view::series::pareto;
use crate::view::svg::{esc, score_ticks, value_ticks, Frame};
use crate::view::RunView;

/// Pass rate against cost: the note, the chart with the Pareto front, and the table of the
/// lite, medium and heavy picks.
pub(super) fn chart_pareto(run: &RunView) -> String {
    let p = pareto(run);
    let max_cost = p.points.iter().map(|x| x.2).fold(0.0, f64::max);
    let x_ticks = value_ticks(if max_cost > 0.0 { max_cost } else { 1.0 });
    let x_max = x_ticks.last().map_or(1.0, |t| t.0);
    let f = Frame::new(0.0, x_max, 0.0, 1.0);
    let tiers = ["lite", "medium", "heavy"];
    let mut s = format!(
        "<p class=\"note\">Each candidate's estimate against its mean {} on validation; \
         the line joins the Pareto front (no candidate is both better and cheaper), and \
         the lite, medium and heavy picks are HarnessPro's closest-to-ideal candidates \
         under cost-leaning, balanced and pass-rate-leaning weights, among those at least \
         as good as the best seed (picks are drawn larger; a dark ring marks the front).{}</p>\n",
        p.cost_label,
        if max_cost > 0.0 {
            ""
        } else {
            " No trial used a token here, so every candidate sits at cost 0."
        }
    );
    s += &f.open(
        PARETO_CHART_ID,
        "estimate against cost per trial, with the Pareto front",
    );
    s += &f.axes_with(p.cost_label, &x_ticks, "estimate", &score_ticks());
    let mut front: Vec<(f64, f64)> = p
        .points
        .iter()
        .filter(|x| p.front.contains(&x.0))
        .map(|x| (x.2, x.1))
        .collect();
    front.sort_by(|a, b| a.0.total_cmp(&b.0));
    if front.len() > 1 {
        let pts: Vec<String> = front
            .iter()
            .map(|(c, v)| format!("{:.1},{:.1}", f.x(*c), f.y(*v)))
            .collect();
        let _ = writeln!(
            s,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"#ff7f0e\" stroke-width=\"1.5\"/>",
            pts.join(" ")
        );
    }
    for &(seq, value, cost) in &p.points {
        let c = &run.candidates[run
            .candidates
            .iter()
            .position(|c| c.seq == seq)
            .unwrap_or(0)];
        let picked: Vec<&str> = tiers
            .iter()
            .zip(p.picks)
            .filter(|(_, k)| *k == Some(seq))
            .map(|(t, _)| *t)
            .collect();
        let on_front = p.front.contains(&seq);
        let (x, y) = (f.x(cost), f.y(value));
        let _ = writeln!(
            s,
            "<a href=\"#cand-{seq}\"><circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{}\" fill=\"{}\" stroke=\"#333\" stroke-width=\"{}\"><title>{}: {:.3} at {} {}{}</title></circle></a>",
            if picked.is_empty() { 4.5 } else { 6.5 },
            axis_color(&c.axis),
            if on_front { 1.5 } else { 0.0 },
            esc(&c.name),
            value,
            cost_text(p.cost_label, cost),
            esc(p.cost_label),
            if picked.is_empty() { String::new() } else { format!(" ({} pick)", picked.join(", ")) }
        );
    }
    s += &f.legend(0, "#ff7f0e", "Pareto front");
    s += "</svg>\n";
    let _ = writeln!(
        s,
        "<table class=\"small\"><tr><th>pick</th><th>candidate</th><th>estimate</th><th>{}</th></tr>",
        esc(p.cost_label)
    );
    for (tier, k) in tiers.iter().zip(p.picks) {
        let Some(&(seq, value, cost)) = k.and_then(|k| p.points.iter().find(|x| x.0 == k)) else {
            continue;
        };
        let name = run
            .candidates
            .iter()
            .find(|c| c.seq == seq)
            .map_or("", |c| c.name.as_str());
        let _ = writeln!(
            s,
            "<tr><td>{tier}</td><td><a href=\"#cand-{seq}\">{}</a></td><td class=\"num\">{value:.3}</td><td class=\"num\">{}</td></tr>",
            esc(name),
            cost_text(p.cost_label, cost)
        );
    }
    s += "</table>\n";
    s
}

/// A cost per trial as text: whole tokens, or dollars to a hundredth of a cent.
fn cost_text(label: &str, cost: f64) -> String {
    if label.starts_with("tokens") {
        format!("{cost:.0}")
    } else {
        format!("${cost:.4}")
    }
}
