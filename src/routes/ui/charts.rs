//! Hand-drawn SVG charts: this module computes the geometry of stacked bars
//! (columns over time, rows per label) and `templates/_chart.html` writes
//! the SVG, so every text that came from a webhook or a strategy (labels,
//! tooltips) goes through askama's escaping. Each bar segment carries a
//! `<title>` of the form `label: count`: the figure a reader hovers over is
//! the figure a test reads.

/// A colour of the palette (`.s0` … `.s7` in app.css) per series.
const PALETTE: usize = 8;

pub struct Segment {
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
    pub class: String,
    pub title: String,
}

pub struct Label {
    pub x: f64,
    pub y: f64,
    pub text: String,
    pub anchor: &'static str,
}

/// A reference line (a threshold).
pub struct Rule {
    pub x1: f64,
    pub y1: f64,
    pub x2: f64,
    pub y2: f64,
    pub title: String,
}

pub struct Legend {
    pub class: String,
    pub label: String,
}

pub struct Chart {
    pub id: &'static str,
    pub title: String,
    pub width: u32,
    pub height: u32,
    pub segments: Vec<Segment>,
    pub labels: Vec<Label>,
    pub rules: Vec<Rule>,
    pub legend: Vec<Legend>,
    /// Nothing to draw: the page says so instead.
    pub empty: bool,
}

/// One bar: its label and its stacked parts `(series, value, tooltip)`.
pub struct Bar {
    pub label: String,
    pub parts: Vec<(String, f64, String)>,
}

fn round(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

fn legend(series: &[String]) -> Vec<Legend> {
    series
        .iter()
        .enumerate()
        .map(|(i, s)| Legend {
            class: format!("s{}", i % PALETTE),
            label: s.clone(),
        })
        .collect()
}

fn class_of(series: &[String], name: &str) -> String {
    let i = series.iter().position(|s| s == name).unwrap_or(0);
    format!("s{}", i % PALETTE)
}

/// Vertical stacked bars, left to right (a time axis); every `label_every`th
/// bar is labelled under the axis.
pub fn columns(
    id: &'static str,
    title: String,
    series: &[String],
    bars: &[Bar],
    label_every: usize,
) -> Chart {
    const WIDTH: f64 = 720.0;
    const HEIGHT: f64 = 240.0;
    const TOP: f64 = 16.0;
    const BOTTOM: f64 = 24.0;
    const LEFT: f64 = 40.0;
    let max = bars
        .iter()
        .map(|b| b.parts.iter().map(|p| p.1).sum::<f64>())
        .fold(0.0, f64::max);
    let plot = HEIGHT - TOP - BOTTOM;
    let step = (WIDTH - LEFT) / bars.len().max(1) as f64;
    let mut segments = Vec::new();
    let mut labels = vec![
        Label {
            x: LEFT - 4.0,
            y: TOP + 4.0,
            text: format!("{max}"),
            anchor: "end",
        },
        Label {
            x: LEFT - 4.0,
            y: HEIGHT - BOTTOM,
            text: "0".to_owned(),
            anchor: "end",
        },
    ];
    for (i, bar) in bars.iter().enumerate() {
        let x = LEFT + i as f64 * step;
        let mut y = HEIGHT - BOTTOM;
        for (name, value, tooltip) in &bar.parts {
            let h = if max > 0.0 { value / max * plot } else { 0.0 };
            y -= h;
            segments.push(Segment {
                x: round(x + 1.0),
                y: round(y),
                w: round((step - 2.0).max(1.0)),
                h: round(h),
                class: class_of(series, name),
                title: tooltip.clone(),
            });
        }
        if label_every > 0 && i % label_every == 0 {
            labels.push(Label {
                x: round(x + step / 2.0),
                y: HEIGHT - 8.0,
                text: bar.label.clone(),
                anchor: "middle",
            });
        }
    }
    Chart {
        id,
        title,
        width: WIDTH as u32,
        height: HEIGHT as u32,
        empty: max <= 0.0,
        segments,
        labels,
        rules: Vec::new(),
        legend: legend(series),
    }
}

/// Horizontal stacked bars, one row per label, scaled to `max` (or to the
/// longest row); `rule` draws a vertical reference line at that value.
pub fn rows(
    id: &'static str,
    title: String,
    series: &[String],
    bars: &[Bar],
    max: Option<f64>,
    rule: Option<(f64, String)>,
) -> Chart {
    const WIDTH: f64 = 720.0;
    const ROW: f64 = 22.0;
    const LEFT: f64 = 260.0;
    const RIGHT: f64 = 16.0;
    let longest = bars
        .iter()
        .map(|b| b.parts.iter().map(|p| p.1).sum::<f64>())
        .fold(0.0, f64::max);
    let max = max.unwrap_or(longest).max(longest);
    let height = ROW * bars.len() as f64 + 8.0;
    let plot = WIDTH - LEFT - RIGHT;
    let scale = |v: f64| if max > 0.0 { v / max * plot } else { 0.0 };
    let mut segments = Vec::new();
    let mut labels = Vec::new();
    for (i, bar) in bars.iter().enumerate() {
        let y = 4.0 + i as f64 * ROW;
        labels.push(Label {
            x: LEFT - 6.0,
            y: round(y + ROW * 0.65),
            text: bar.label.clone(),
            anchor: "end",
        });
        let mut x = LEFT;
        for (name, value, tooltip) in &bar.parts {
            let w = scale(*value);
            segments.push(Segment {
                x: round(x),
                y: round(y + 2.0),
                w: round(w),
                h: ROW - 4.0,
                class: class_of(series, name),
                title: tooltip.clone(),
            });
            x += w;
        }
    }
    let rules = rule
        .into_iter()
        .map(|(at, title)| {
            let x = round(LEFT + scale(at));
            Rule {
                x1: x,
                y1: 0.0,
                x2: x,
                y2: round(height),
                title,
            }
        })
        .collect();
    Chart {
        id,
        title,
        width: WIDTH as u32,
        height: height.ceil() as u32,
        empty: bars.is_empty(),
        segments,
        labels,
        rules,
        legend: legend(series),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bar(label: &str, parts: &[(&str, f64)]) -> Bar {
        Bar {
            label: label.to_owned(),
            parts: parts
                .iter()
                .map(|(s, v)| (s.to_string(), *v, format!("{label} {s}: {v}")))
                .collect(),
        }
    }

    #[test]
    fn stacked_columns_fill_the_plot_for_the_tallest_bar_and_keep_proportions() {
        let series = vec!["process".to_owned(), "ignore".to_owned()];
        let chart = columns(
            "c",
            "t".into(),
            &series,
            &[
                bar("a", &[("process", 3.0), ("ignore", 1.0)]),
                bar("b", &[("process", 2.0)]),
            ],
            1,
        );
        let heights: Vec<f64> = chart.segments.iter().map(|s| s.h).collect();
        assert_eq!(heights, [150.0, 50.0, 100.0]);
        assert_eq!(chart.segments[1].class, "s1");
        assert_eq!(
            chart.segments[1].y + chart.segments[1].h,
            chart.segments[0].y
        );
        assert!(!chart.empty);
    }

    #[test]
    fn rows_scale_to_the_given_maximum_and_place_the_rule() {
        let series = vec!["rate".to_owned()];
        let chart = rows(
            "r",
            "t".into(),
            &series,
            &[bar("x", &[("rate", 0.25)])],
            Some(1.0),
            Some((0.5, "threshold".into())),
        );
        assert_eq!(chart.segments[0].w, 111.0);
        assert_eq!(chart.rules[0].x1, 260.0 + 222.0);
        let empty = rows("r", "t".into(), &series, &[], None, None);
        assert!(empty.empty);
    }
}
