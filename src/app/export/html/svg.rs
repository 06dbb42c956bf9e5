//! The page's charts as inline SVG: speedup intervals on a log axis, a strip plot of every
//! timed run, lines over time, and the pass@k / opt@k curves with their bands. Each chart
//! is `role="img"` with an accessible name that says what it shows in words; the numbers
//! are also in the page as text beside it. Coordinates are rounded to 0.1 px so that a
//! 1000-sample page stays small.

use std::fmt::Write;

use super::page::esc;

/// Colours by series, readable on white and distinct for the common colour blindnesses
/// (Okabe-Ito).
pub const PALETTE: [&str; 7] = [
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000",
];

/// Where a value lands on a logarithmic axis of `width` pixels from `lo` to `hi`.
#[derive(Debug, Clone, Copy)]
pub struct LogAxis {
    pub lo: f64,
    pub hi: f64,
    pub width: f64,
}

impl LogAxis {
    /// An axis that holds every value given (and 1 and the thresholds), padded a little and
    /// clamped to [1/64, 64] so one absurd figure cannot flatten the rest.
    pub fn spanning(values: impl IntoIterator<Item = f64>, width: f64) -> LogAxis {
        let (mut lo, mut hi) = (1.0f64, 1.0f64);
        for v in values.into_iter().filter(|v| v.is_finite() && *v > 0.0) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        LogAxis {
            lo: (lo / 1.1).max(1.0 / 64.0),
            hi: (hi * 1.1).min(64.0),
            width,
        }
    }

    /// Pixels from the left; the ends are kept `PAD` px inside so marks and labels there
    /// are not cut.
    pub fn x(&self, v: f64) -> f64 {
        const PAD: f64 = 9.0;
        let v = v.clamp(self.lo, self.hi);
        PAD + (v.ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln()) * (self.width - 2.0 * PAD)
    }

    /// Ticks at 1-2-5 steps and powers of two that fall on the axis.
    pub fn ticks(&self) -> Vec<f64> {
        let candidates = [
            0.02, 0.05, 0.1, 0.25, 0.5, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0,
        ];
        // 1 first, then the others that keep labels at least 24 px apart.
        let mut kept: Vec<f64> = vec![1.0];
        for t in candidates
            .into_iter()
            .filter(|t| *t >= self.lo && *t <= self.hi)
        {
            if kept.iter().all(|k| (self.x(*k) - self.x(t)).abs() >= 24.0) {
                kept.push(t);
            }
        }
        kept.sort_by(f64::total_cmp);
        kept
    }
}

/// One figure with its interval, and whether its decision is made.
#[derive(Debug, Clone, Copy)]
pub struct Mark {
    pub estimate: f64,
    pub interval: Option<(f64, f64)>,
    pub decided: bool,
}

/// A small chart of one speedup on the page's shared log axis: the interval as a bar, the
/// estimate as a dot (filled when decided, hollow when not), the threshold as a dashed
/// line and 1x as a thin one.
pub fn interval_mark(axis: &LogAxis, mark: Mark, threshold: f64, label: &str) -> String {
    let h = 18.0;
    let mut out = format!(
        "<svg class=\"mark\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"{}\">",
        esc(label),
        w = axis.width
    );
    let one = axis.x(1.0);
    let t = axis.x(threshold);
    let _ = write!(
        out,
        "<line x1=\"{one:.1}\" x2=\"{one:.1}\" y1=\"0\" y2=\"{h}\" class=\"unit\"/><line x1=\"{t:.1}\" x2=\"{t:.1}\" y1=\"0\" y2=\"{h}\" class=\"thr\"/>"
    );
    if let Some((lo, hi)) = mark.interval {
        let _ = write!(
            out,
            "<line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"9\" y2=\"9\" class=\"ci\"/>",
            axis.x(lo),
            axis.x(hi)
        );
    }
    let fill = if mark.decided { "est" } else { "est open" };
    let _ = write!(
        out,
        "<circle cx=\"{:.1}\" cy=\"9\" r=\"4\" class=\"{fill}\"/></svg>",
        axis.x(mark.estimate)
    );
    out
}

/// The colour key of series drawn in `PALETTE` order: a swatch and the name of each.
pub fn legend_keys(names: &[&str]) -> String {
    names
        .iter()
        .enumerate()
        .map(|(k, n)| {
            format!(
                "<span><i style=\"background:{}\"></i>{}</span>",
                PALETTE[k % PALETTE.len()],
                super::esc(n)
            )
        })
        .collect()
}

/// The shared axis drawn once above a table column: ticks and their labels.
pub fn axis_legend(axis: &LogAxis) -> String {
    let mut out = format!(
        "<svg class=\"mark\" width=\"{w}\" height=\"14\" viewBox=\"0 0 {w} 14\" role=\"img\" aria-label=\"log scale from {:.2}x to {:.2}x\">",
        axis.lo,
        axis.hi,
        w = axis.width
    );
    for t in axis.ticks() {
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"11\" text-anchor=\"middle\">{}</text>",
            axis.x(t),
            trim_number(t)
        );
    }
    out.push_str("</svg>");
    out
}

fn trim_number(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// One point of a strip plot: the round, the figure, and why the run is flagged, if it is.
#[derive(Debug, Clone)]
pub struct StripPoint {
    pub round: u32,
    pub value: f64,
    pub flag: Option<String>,
}

/// Every timed run of some variants: x the round, y the figure (linear, from 0), one colour
/// per variant, flagged runs drawn as red rings with the reason as their tooltip.
pub fn strip_plot(series: &[(String, Vec<StripPoint>)], unit: &str, label: &str) -> String {
    let (w, h, left, bottom) = (560.0, 150.0, 44.0, 18.0);
    let rounds = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|p| p.round))
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let top = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|p| p.value))
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max)
        .max(f64::MIN_POSITIVE)
        * 1.08;
    let n = series.len().max(1) as f64;
    let x = |round: u32, k: usize| {
        left + 6.0 + (round as f64 + (k as f64 + 0.5) / n * 0.6 - 0.3) / rounds * (w - left - 12.0)
    };
    let y = |v: f64| (h - bottom) - (v / top).clamp(0.0, 1.0) * (h - bottom - 6.0);
    let mut out = format!(
        "<svg class=\"chart\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"{}\">",
        esc(label)
    );
    for frac in [0.0, 0.5, 1.0] {
        let v = top / 1.08 * frac;
        let _ = write!(
            out,
            "<line x1=\"{left}\" x2=\"{w}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\" class=\"grid\"/><text x=\"{lx}\" y=\"{ty:.1}\" text-anchor=\"end\">{}</text>",
            format_value(v, unit),
            yy = y(v),
            lx = left - 4.0,
            ty = y(v) + 4.0
        );
    }
    let _ = write!(
        out,
        "<text x=\"{:.1}\" y=\"{h}\" text-anchor=\"middle\">round</text>",
        (w + left) / 2.0
    );
    for (k, (name, points)) in series.iter().enumerate() {
        let colour = PALETTE[k % PALETTE.len()];
        let mut path = String::new();
        for p in points
            .iter()
            .filter(|p| p.flag.is_none() && p.value.is_finite())
        {
            let _ = write!(path, "M{:.1} {:.1}h0", x(p.round, k), y(p.value));
        }
        let _ = write!(
            out,
            "<path d=\"{path}\" stroke=\"{colour}\" class=\"dots\"><title>{}</title></path>",
            esc(name)
        );
        for p in points
            .iter()
            .filter(|p| p.flag.is_some() && p.value.is_finite())
        {
            let _ = write!(
                out,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\" class=\"flagged\"><title>{} round {}: {}</title></circle>",
                x(p.round, k),
                y(p.value),
                esc(name),
                p.round,
                esc(p.flag.as_deref().unwrap_or(""))
            );
        }
    }
    out.push_str("</svg>");
    out
}

/// A figure with its unit: seconds as ms below one second.
pub fn format_value(v: f64, unit: &str) -> String {
    if unit == "s" {
        if v < 1.0 {
            format!("{:.1} ms", v * 1000.0)
        } else {
            format!("{v:.2} s")
        }
    } else {
        format!("{v:.3}")
    }
}

/// Lines over time (x in seconds from each series' start): one colour per series.
pub fn line_chart(series: &[(String, Vec<(f64, f64)>)], unit: &str, label: &str) -> String {
    let (w, h, left, bottom) = (280.0, 110.0, 40.0, 16.0);
    let t_end = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|p| p.0))
        .fold(0.0f64, f64::max)
        .max(1e-3);
    let top = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|p| p.1))
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.1;
    let x = |t: f64| left + t / t_end * (w - left - 4.0);
    let y = |v: f64| (h - bottom) - (v / top).clamp(0.0, 1.0) * (h - bottom - 4.0);
    let mut out = format!(
        "<svg class=\"chart small\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"{}\">",
        esc(label)
    );
    let _ = write!(
        out,
        "<line x1=\"{left}\" x2=\"{w}\" y1=\"{b}\" y2=\"{b}\" class=\"grid\"/><text x=\"{lx}\" y=\"12\" text-anchor=\"end\">{:.0}</text><text x=\"{lx}\" y=\"{b}\" text-anchor=\"end\">0</text><text x=\"{w}\" y=\"{h}\" text-anchor=\"end\">{:.2} s</text><text x=\"{left}\" y=\"{h}\">{}</text>",
        top / 1.1,
        t_end,
        esc(unit),
        b = h - bottom,
        lx = left - 3.0
    );
    for (k, (name, points)) in series.iter().enumerate() {
        let pts: Vec<String> = points
            .iter()
            .filter(|p| p.1.is_finite())
            .map(|(t, v)| format!("{:.1},{:.1}", x(*t), y(*v)))
            .collect();
        let _ = write!(
            out,
            "<polyline points=\"{}\" stroke=\"{}\" class=\"line\"><title>{}</title></polyline>",
            pts.join(" "),
            PALETTE[k % PALETTE.len()],
            esc(name)
        );
    }
    out.push_str("</svg>");
    out
}

/// One curve with its band: y values and [lo, hi] per k, in percent.
pub struct Curve<'a> {
    pub name: &'a str,
    pub values: &'a [f64],
    pub bands: &'a [[f64; 2]],
}

/// pass@k and opt@k over k = 1..K, 0-100%, each with its interval as a shaded band.
pub fn curves(curves: &[Curve], label: &str) -> String {
    let (w, h, left, bottom) = (420.0, 200.0, 40.0, 20.0);
    let k_max = curves
        .iter()
        .map(|c| c.values.len())
        .max()
        .unwrap_or(1)
        .max(2) as f64;
    let x = |k: usize| left + (k as f64 - 1.0) / (k_max - 1.0) * (w - left - 10.0);
    let y = |v: f64| (h - bottom) - v.clamp(0.0, 100.0) / 100.0 * (h - bottom - 8.0);
    let mut out = format!(
        "<svg class=\"chart\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"{}\">",
        esc(label)
    );
    for v in [0.0, 50.0, 100.0] {
        let _ = write!(
            out,
            "<line x1=\"{left}\" x2=\"{w}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\" class=\"grid\"/><text x=\"{lx}\" y=\"{ty:.1}\" text-anchor=\"end\">{v:.0}%</text>",
            yy = y(v),
            lx = left - 4.0,
            ty = y(v) + 4.0
        );
    }
    for k in 1..=k_max as usize {
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{h}\" text-anchor=\"middle\">{k}</text>",
            x(k)
        );
    }
    for (i, c) in curves.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let upper = c.bands.iter().enumerate().map(|(k, b)| (k + 1, b[1]));
        let lower = c.bands.iter().enumerate().rev().map(|(k, b)| (k + 1, b[0]));
        let band: Vec<String> = upper
            .chain(lower)
            .map(|(k, v)| format!("{:.1},{:.1}", x(k), y(v)))
            .collect();
        let line: Vec<String> = c
            .values
            .iter()
            .enumerate()
            .map(|(k, v)| format!("{:.1},{:.1}", x(k + 1), y(*v)))
            .collect();
        let _ = write!(
            out,
            "<polygon points=\"{}\" fill=\"{colour}\" class=\"band\"/><polyline points=\"{}\" stroke=\"{colour}\" class=\"line\"/><text x=\"{:.1}\" y=\"{:.1}\" fill=\"{colour}\">{}</text>",
            band.join(" "),
            line.join(" "),
            left + 6.0,
            14.0 + 14.0 * i as f64,
            esc(c.name)
        );
    }
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_axis_puts_one_and_its_ends_where_they_belong() {
        let axis = LogAxis::spanning([0.5, 2.0], 100.0);
        assert!((axis.x(axis.lo) - 9.0).abs() < 1e-9);
        assert!((axis.x(axis.hi) - 91.0).abs() < 1e-9);
        // Symmetric around 1 on a log axis.
        assert!((axis.x(1.0) - 50.0).abs() < 1e-6);
        assert!(axis.x(1e9) <= 91.0, "clamped");
        let wild = LogAxis::spanning([1e-9, 1e9], 100.0);
        assert_eq!((wild.lo, wild.hi), (1.0 / 64.0, 64.0));
    }

    #[test]
    fn chart_labels_are_escaped() {
        let s = strip_plot(
            &[(
                "<script>x</script>".into(),
                vec![StripPoint {
                    round: 0,
                    value: 1.0,
                    flag: Some("\"><img>".into()),
                }],
            )],
            "s",
            "<b>",
        );
        assert!(!s.contains("<script>") && !s.contains("<img>") && !s.contains("<b>"));
    }
}
