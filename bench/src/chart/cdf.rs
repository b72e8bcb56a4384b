//! The handoff panel: for each implementation, the fraction of handoffs
//! (y) completed within a gap (x, log scale).

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{DrawResult, colour};
use crate::report::number;

/// One implementation's handoff gaps.
#[derive(Clone, Debug)]
pub struct Series {
    /// Implementation name.
    pub name: String,
    /// The distribution: (gap in µs, fraction of rounds at or below it).
    pub cdf_us: Vec<(f64, f64)>,
    /// Median gap.
    pub p50_us: f64,
    /// 99th percentile gap.
    pub p99_us: f64,
    /// Rounds measured.
    pub count: usize,
}

/// Draws the panel into `area`.
pub fn draw<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, series: &[Series]) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let caption =
        "handoff: release call → blocked waiter's acquire returns (CDF of all rounds, log scale)";
    let gaps = series
        .iter()
        .flat_map(|s| s.cdf_us.iter().map(|&(us, _)| us));
    let (low, high) = gaps.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if low > high {
        area.draw_text(
            "(handoff not run)",
            &("sans-serif", 12).into_font().into(),
            (80, 20),
        )?;
        return Ok(());
    }
    // Whole decades around the data, at least one.
    let first = 10f64.powf(low.max(1.0).log10().floor());
    let last = 10f64.powf(high.max(10.0).log10().ceil()).max(first * 10.0);
    let mut chart = ChartBuilder::on(area)
        .caption(
            caption,
            ("sans-serif", 14).into_font().style(FontStyle::Bold),
        )
        .margin_left(20)
        .margin_right(40)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((first..last).log_scale(), 0f64..1f64)?;
    chart
        .configure_mesh()
        .x_desc("gap (log scale)")
        .y_desc("fraction of rounds")
        .x_label_formatter(&|us| duration_label(*us))
        .y_label_formatter(&|fraction| format!("{fraction:.2}"))
        .light_line_style(WHITE)
        .draw()?;
    for line in series {
        let colour = colour(&line.name);
        let label = format!(
            "{}: p50 {} µs, p99 {} µs (n = {})",
            line.name,
            number(line.p50_us),
            number(line.p99_us),
            line.count
        );
        chart
            .draw_series(LineSeries::new(
                line.cdf_us.iter().copied(),
                colour.stroke_width(2),
            ))?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 24, y)], colour.stroke_width(3))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font(("sans-serif", 12))
        .draw()?;
    Ok(())
}

/// "10 µs", "1 ms", "1 s" for a gap of `us` microseconds.
fn duration_label(us: f64) -> String {
    if us < 1_000.0 {
        format!("{} µs", number(us))
    } else if us < 1_000_000.0 {
        format!("{} ms", number(us / 1_000.0))
    } else {
        format!("{} s", number(us / 1_000_000.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gap_labels() {
        assert_eq!(duration_label(10.0), "10 µs");
        assert_eq!(duration_label(1_000.0), "1 ms");
        assert_eq!(duration_label(100_000.0), "100 ms");
        assert_eq!(duration_label(1_000_000.0), "1 s");
        assert_eq!(duration_label(2_500.0), "2.50 ms");
    }
}
