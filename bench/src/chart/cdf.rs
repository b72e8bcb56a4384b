//! The handoff panel: for each implementation, the fraction of handoffs
//! (y) completed within a gap (x, log scale).

use super::{Area, Svg, colour};
use crate::report::number;

/// Most points drawn per line.
const POINTS: usize = 400;

/// One implementation's handoff gaps.
#[derive(Clone, Debug)]
pub struct Series {
    /// Implementation name.
    pub name: String,
    /// Every gap, ascending, in microseconds.
    pub sorted_us: Vec<f64>,
    /// Median gap.
    pub p50_us: f64,
    /// 99th percentile gap.
    pub p99_us: f64,
}

/// Draws the panel into `area`.
pub fn draw(svg: &mut Svg, area: Area, series: &[Series]) {
    svg.text(
        area.x,
        area.y - 14.0,
        "handoff: release call → blocked waiter's acquire returns (CDF of all rounds, log scale)",
        "start",
        14.0,
        "bold",
    );
    let all = series.iter().flat_map(|s| s.sorted_us.iter().copied());
    let (low, high) = all.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if low > high {
        svg.text(
            area.x,
            area.y + 20.0,
            "(handoff not run)",
            "start",
            12.0,
            "normal",
        );
        return;
    }
    let first_decade = low.max(1.0).log10().floor() as i32;
    let last_decade = (high.max(10.0).log10().ceil() as i32).max(first_decade + 1);
    let span = f64::from(last_decade - first_decade);
    let x_of = |us: f64| area.x + (us.max(1.0).log10() - f64::from(first_decade)) / span * area.w;
    let y_of = |fraction: f64| area.y + area.h * (1.0 - fraction);

    for decade in first_decade..=last_decade {
        let x = x_of(10f64.powi(decade));
        svg.line((x, area.y), (x, area.y + area.h), "#dddddd", 1.0, "");
        svg.text(
            x,
            area.y + area.h + 16.0,
            &duration_label(decade),
            "middle",
            11.0,
            "normal",
        );
    }
    for (fraction, label) in [
        (0.0, "0"),
        (0.25, "0.25"),
        (0.5, "0.5 (p50)"),
        (0.75, "0.75"),
        (0.99, ""),
        (1.0, "1"),
    ] {
        let y = y_of(fraction);
        let dash = if fraction == 0.5 || fraction == 0.99 {
            "4 3"
        } else {
            ""
        };
        svg.line((area.x, y), (area.x + area.w, y), "#dddddd", 1.0, dash);
        svg.text(area.x - 6.0, y + 4.0, label, "end", 11.0, "normal");
    }
    svg.text(
        area.x + area.w + 4.0,
        y_of(0.99) + 4.0,
        "p99",
        "start",
        11.0,
        "normal",
    );
    svg.line(
        (area.x, area.y + area.h),
        (area.x + area.w, area.y + area.h),
        "#333333",
        1.0,
        "",
    );
    svg.line(
        (area.x, area.y),
        (area.x, area.y + area.h),
        "#333333",
        1.0,
        "",
    );
    svg.text(
        area.x + area.w / 2.0,
        area.y + area.h + 34.0,
        "gap (log scale)",
        "middle",
        12.0,
        "normal",
    );

    for (index, line) in series.iter().enumerate() {
        let n = line.sorted_us.len();
        let step = (n / POINTS).max(1);
        let mut points: Vec<(f64, f64)> = Vec::with_capacity(n / step + 2);
        for (i, &us) in line.sorted_us.iter().enumerate() {
            if i % step == 0 || i + 1 == n {
                points.push((x_of(us), y_of((i + 1) as f64 / n as f64)));
            }
        }
        svg.polyline(&points, colour(&line.name), 2.0);
        // Under the axis label, one row each, so no line is ever hidden.
        let legend_y = area.y + area.h + 54.0 + index as f64 * 16.0;
        let legend_x = area.x;
        svg.line(
            (legend_x, legend_y - 4.0),
            (legend_x + 24.0, legend_y - 4.0),
            colour(&line.name),
            3.0,
            "",
        );
        let text = format!(
            "{}: p50 {} µs, p99 {} µs (n = {n})",
            line.name,
            number(line.p50_us),
            number(line.p99_us)
        );
        svg.text(legend_x + 30.0, legend_y, &text, "start", 12.0, "normal");
    }
}

/// "10 µs", "1 ms", "1 s" for the decade 10^`decade` µs.
fn duration_label(decade: i32) -> String {
    match decade {
        d if d < 3 => format!("{} µs", 10u64.pow(d.max(0).unsigned_abs())),
        d if d < 6 => format!("{} ms", 10u64.pow((d - 3).unsigned_abs())),
        d => format!("{} s", 10u64.pow((d - 6).unsigned_abs())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decade_labels() {
        assert_eq!(duration_label(1), "10 µs");
        assert_eq!(duration_label(3), "1 ms");
        assert_eq!(duration_label(5), "100 ms");
        assert_eq!(duration_label(6), "1 s");
    }
}
