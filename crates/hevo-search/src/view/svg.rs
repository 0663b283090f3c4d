//! A small SVG plotting frame: linear scales, axes with ticks, and escaping. The charts of
//! the report are drawn with it (no chart library, no script, no network).

use std::fmt::Write;

use hevo_runtime::printable::printable;

/// Escapes text for HTML and SVG (element content and quoted attributes). Control and
/// bidirectional formatting characters (U+202E, U+2066, ...) are first shown as `\u{..}`,
/// by the terminal's rule ([`printable`]): text from a proposer must not reorder what a
/// cell shows.
pub fn esc(s: &str) -> String {
    let shown = printable(s);
    let mut out = String::with_capacity(shown.len());
    for c in shown.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A plot area with linear x and y scales.
pub struct Frame {
    /// Width of the whole SVG.
    pub w: f64,
    /// Height of the whole SVG.
    pub h: f64,
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
}

impl Frame {
    /// A frame showing `x0..x1` by `y0..y1` (ranges of zero width are widened).
    pub fn new(x0: f64, x1: f64, y0: f64, y1: f64) -> Frame {
        let widen = |a: f64, b: f64| {
            if b - a <= 0.0 {
                (a - 0.5, a + 0.5)
            } else {
                (a, b)
            }
        };
        let (x0, x1) = widen(x0, x1);
        let (y0, y1) = widen(y0, y1);
        Frame {
            w: 900.0,
            h: 300.0,
            left: 64.0,
            right: 150.0,
            top: 16.0,
            bottom: 44.0,
            x0,
            x1,
            y0,
            y1,
        }
    }

    /// The SVG x coordinate of `v`.
    pub fn x(&self, v: f64) -> f64 {
        self.left + (v - self.x0) / (self.x1 - self.x0) * (self.w - self.left - self.right)
    }

    /// The SVG y coordinate of `v`.
    pub fn y(&self, v: f64) -> f64 {
        self.h
            - self.bottom
            - (v - self.y0) / (self.y1 - self.y0) * (self.h - self.top - self.bottom)
    }

    /// The x position where the legend starts.
    pub fn legend_x(&self) -> f64 {
        self.w - self.right + 12.0
    }

    /// Opens the `<svg>` element with `id` and an accessible label.
    pub fn open(&self, id: &str, label: &str) -> String {
        format!(
            "<svg id=\"{}\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" \
             width=\"{}\" height=\"{}\" role=\"img\" aria-label=\"{}\">\n",
            esc(id),
            self.w,
            self.h,
            self.w,
            self.h,
            esc(label)
        )
    }

    /// Axes with integer x ticks (iterations) and the given y ticks with their labels.
    pub fn axes(&self, x_label: &str, y_label: &str, y_ticks: &[(f64, String)]) -> String {
        let first = self.x0.ceil() as i64;
        let last = self.x1.floor() as i64;
        let step = ((last - first) / 12).max(1);
        let x_ticks: Vec<(f64, String)> = (first..=last)
            .step_by(step as usize)
            .map(|i| (i as f64, i.to_string()))
            .collect();
        self.axes_with(x_label, &x_ticks, y_label, y_ticks)
    }

    /// Axes with the given ticks on both.
    pub fn axes_with(
        &self,
        x_label: &str,
        x_ticks: &[(f64, String)],
        y_label: &str,
        y_ticks: &[(f64, String)],
    ) -> String {
        let mut s = String::new();
        let (bx, by) = (self.x(self.x0), self.y(self.y0));
        let (ex, ey) = (self.x(self.x1), self.y(self.y1));
        for (v, label) in y_ticks {
            let y = self.y(*v);
            let _ = writeln!(
                s,
                "<line class=\"grid\" x1=\"{bx:.1}\" y1=\"{y:.1}\" x2=\"{ex:.1}\" y2=\"{y:.1}\"/>\
                 <text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                bx - 6.0,
                y + 4.0,
                esc(label)
            );
        }
        for (v, label) in x_ticks {
            let x = self.x(*v);
            let _ = writeln!(
                s,
                "<line class=\"axis\" x1=\"{x:.1}\" y1=\"{by:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\"/>\
                 <text class=\"tick\" x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                by + 4.0,
                by + 18.0,
                esc(label)
            );
        }
        let _ = writeln!(
            s,
            "<line class=\"axis\" x1=\"{bx:.1}\" y1=\"{by:.1}\" x2=\"{ex:.1}\" y2=\"{by:.1}\"/>\
             <line class=\"axis\" x1=\"{bx:.1}\" y1=\"{by:.1}\" x2=\"{bx:.1}\" y2=\"{ey:.1}\"/>\
             <text class=\"label\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\
             <text class=\"label\" transform=\"translate(14 {:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
            (bx + ex) / 2.0,
            self.h - 6.0,
            esc(x_label),
            (by + ey) / 2.0,
            esc(y_label)
        );
        s
    }

    /// One legend entry (a colored square and a label), the `row`-th from the top.
    pub fn legend(&self, row: usize, color: &str, label: &str) -> String {
        let x = self.legend_x();
        let y = self.top + 8.0 + 20.0 * row as f64;
        format!(
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"12\" height=\"12\" fill=\"{}\"/>\
             <text class=\"legend\" x=\"{:.1}\" y=\"{:.1}\">{}</text>\n",
            y - 10.0,
            esc(color),
            x + 18.0,
            y,
            esc(label)
        )
    }
}

/// Ticks 0, 0.25, .., 1 for scores.
pub fn score_ticks() -> Vec<(f64, String)> {
    (0..=4)
        .map(|i| {
            let v = i as f64 / 4.0;
            (v, format!("{v:.2}"))
        })
        .collect()
}

/// About five round ticks from 0 to `max`, labelled as integers (counts).
pub fn count_ticks(max: f64) -> Vec<(f64, String)> {
    round_ticks(max, 1.0)
}

/// About five round ticks (steps of 1, 2 or 5 times a power of ten) from 0 to the first
/// tick at or above `max`, labelled with as many decimals as the step needs.
pub fn value_ticks(max: f64) -> Vec<(f64, String)> {
    round_ticks(max, 0.0)
}

fn round_ticks(max: f64, min_step: f64) -> Vec<(f64, String)> {
    if max <= 0.0 || !max.is_finite() {
        return vec![(0.0, "0".into())];
    }
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
        .max(min_step);
    let digits = (-step.log10().floor()).max(0.0) as usize;
    let mut out = Vec::new();
    for i in 0.. {
        let v = step * i as f64;
        out.push((v, format!("{v:.digits$}")));
        if v >= max - 1e-12 {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_leaves_no_markup() {
        assert_eq!(
            esc("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
        assert_eq!(
            esc("a\u{202e}txt.exe\x1b[2J\u{2066}b\n\tc"),
            "a\\u{202e}txt.exe\\u{1b}[2J\\u{2066}b\n\tc"
        );
    }

    #[test]
    fn count_ticks_are_round_and_cover_the_maximum() {
        let t: Vec<f64> = count_ticks(230.0).into_iter().map(|(v, _)| v).collect();
        assert_eq!(t, vec![0.0, 50.0, 100.0, 150.0, 200.0, 250.0]);
        assert_eq!(count_ticks(3.0).len(), 4);
        let v: Vec<String> = value_ticks(0.0031).into_iter().map(|(_, l)| l).collect();
        assert_eq!(v, ["0.000", "0.001", "0.002", "0.003", "0.004"]);
        let v: Vec<String> = value_ticks(302.0).into_iter().map(|(_, l)| l).collect();
        assert_eq!(v, ["0", "100", "200", "300", "400"]);
    }
}
