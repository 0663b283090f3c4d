//! What the parts of the page share: an estimate with its interval as text, and the color
//! of each proposer axis.

/// Colors of the proposer axes; any other axis gets [`OTHER_COLOR`].
const AXIS_COLORS: [(&str, &str); 3] = [
    ("seed", "#444444"),
    ("exploitation", "#1f77b4"),
    ("exploration", "#d62728"),
];
const OTHER_COLOR: &str = "#9467bd";

/// The color of a proposer axis, in the charts and in the candidate table.
pub(super) fn axis_color(axis: &str) -> &'static str {
    AXIS_COLORS
        .iter()
        .find(|(a, _)| *a == axis)
        .map_or(OTHER_COLOR, |(_, c)| c)
}

/// An estimate as `value [low, high]` to three places, or `–` when there is none.
pub(super) fn fmt_est(e: Option<hevo_stats::estimate::Estimate>) -> String {
    match e {
        Some(e) if e.value.is_finite() => {
            format!("{:.3} [{:.3}, {:.3}]", e.value, e.ci_low, e.ci_high)
        }
        _ => "–".into(),
    }
}
