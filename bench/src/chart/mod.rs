//! The SVG chart: handoff latency distributions (a CDF on a log scale) and
//! throughput (median bars with min–max whiskers), drawn by hand so the
//! benchmark needs no plotting crate.

mod bars;
mod cdf;
mod svg;

use crate::Results;
use crate::scenarios::{HANDOFF, MACRO_OVERHEAD, PARALLEL_64, UNCONTENDED_PAIR};
use crate::setup::{self, Setup};

pub use svg::Svg;

/// Chart width in pixels.
const WIDTH: f64 = 960.0;
/// Height of the CDF panel.
const CDF_HEIGHT: f64 = 430.0;
/// Height of one bar row.
const ROW: f64 = 22.0;

/// A rectangle of the drawing, in pixels.
#[derive(Clone, Copy, Debug)]
pub struct Area {
    /// Left edge.
    pub x: f64,
    /// Top edge.
    pub y: f64,
    /// Width.
    pub w: f64,
    /// Height.
    pub h: f64,
}

/// The colour of an implementation's line or bar.
pub fn colour(implementation: &str) -> &'static str {
    match implementation {
        "project" => "#1f77b4",
        "project_pool1" => "#9ecae1",
        "project_pool2" => "#6baed6",
        "project_pool4" => "#3182bd",
        "raw" => "#7f7f7f",
        "raw_own_thread" => "#bdbdbd",
        "rslock" => "#d62728",
        "macro" => "#2ca02c",
        "handwritten" => "#9467bd",
        _ => "#ff7f0e",
    }
}

/// The whole chart for `results`, with `subtitle` (mode, machine) under the title.
pub fn render(results: &Results, subtitle: &str) -> String {
    let other_setups = setup::ALL.into_iter().filter(|s| *s != Setup::Single);
    let scenarios: Vec<String> = [UNCONTENDED_PAIR, PARALLEL_64, MACRO_OVERHEAD]
        .into_iter()
        .map(str::to_owned)
        .chain(other_setups.flat_map(|s| s.scenarios().iter().map(move |name| s.key(name))))
        .collect();
    let groups: Vec<bars::Group> = scenarios
        .iter()
        .filter_map(|scenario| bars::Group::from_results(results, scenario))
        .collect();
    let rows: usize = groups.iter().map(|g| g.bars.len() + 2).sum();
    let bars_height = 40.0 + rows as f64 * ROW;
    let height = 60.0 + CDF_HEIGHT + bars_height;
    let mut svg = Svg::new(WIDTH, height);
    svg.text(
        WIDTH / 2.0,
        24.0,
        "lock-bench: handoff latency and throughput",
        "middle",
        18.0,
        "bold",
    );
    svg.text(WIDTH / 2.0, 44.0, subtitle, "middle", 12.0, "normal");

    let series: Vec<cdf::Series> = results
        .implementation_names(HANDOFF)
        .into_iter()
        .filter_map(|implementation| {
            let mut samples = results.pooled_samples(HANDOFF, implementation);
            (!samples.is_empty()).then(|| cdf::Series {
                name: implementation.to_owned(),
                p50_us: samples.quantile_us(0.5),
                p99_us: samples.quantile_us(0.99),
                sorted_us: samples.sorted_us(),
            })
        })
        .collect();
    let cdf_area = Area {
        x: 80.0,
        y: 80.0,
        w: WIDTH - 120.0,
        h: CDF_HEIGHT - 120.0,
    };
    cdf::draw(&mut svg, cdf_area, &series);

    let bars_area = Area {
        x: 200.0,
        y: 60.0 + CDF_HEIGHT + 30.0,
        w: WIDTH - 340.0,
        h: bars_height - 40.0,
    };
    bars::draw(&mut svg, bars_area, &groups, ROW);
    svg.finish()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{RunResult, Samples};

    #[test]
    fn renders_every_panel() {
        let mut results = Results::default();
        for (implementation, micros) in [("project", 400), ("rslock", 90_000)] {
            let mut samples = Samples::default();
            for i in 1..=100 {
                samples.push(Duration::from_micros(micros + i));
            }
            let mut run = RunResult::from_samples(1.0, &mut samples);
            run.samples = Some(samples);
            results.record(HANDOFF, implementation, run);
        }
        let pair = RunResult {
            ops_per_s: 5_000.0,
            ..RunResult::default()
        };
        results.record(UNCONTENDED_PAIR, "raw", pair.clone());
        results.record(&setup::ALL[1].key(PARALLEL_64), "rslock", pair);
        let svg = render(&results, "test");
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("rslock: p50 90,050 µs"));
        assert!(svg.contains("uncontended_pair: ops/s"));
        assert!(svg.contains("redlock-3/parallel_64: ops/s"));
    }
}
