//! The SVG chart: handoff latency distributions (a CDF on a log scale) and
//! throughput (median bars with min–max whiskers), drawn with `plotters`'
//! SVG backend.

mod bars;
mod cdf;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::Results;
use crate::scenarios::{HANDOFF, MACRO_OVERHEAD, PARALLEL_64, UNCONTENDED_PAIR};
use crate::setup::{self, Setup};

/// Chart width in pixels.
const WIDTH: u32 = 960;
/// Height of the title and subtitle.
const TITLE_HEIGHT: u32 = 60;
/// Height of the CDF panel.
const CDF_HEIGHT: u32 = 460;
/// Height of one bar row.
const ROW: u32 = 22;

/// The colour of an implementation's line or bar.
pub fn colour(implementation: &str) -> RGBColor {
    match implementation {
        "project" => RGBColor(0x1f, 0x77, 0xb4),
        "project_pool1" => RGBColor(0x9e, 0xca, 0xe1),
        "project_pool2" => RGBColor(0x6b, 0xae, 0xd6),
        "project_pool4" => RGBColor(0x31, 0x82, 0xbd),
        "raw" => RGBColor(0x7f, 0x7f, 0x7f),
        "raw_own_thread" => RGBColor(0xbd, 0xbd, 0xbd),
        "rslock" => RGBColor(0xd6, 0x27, 0x28),
        "macro" => RGBColor(0x2c, 0xa0, 0x2c),
        "handwritten" => RGBColor(0x94, 0x67, 0xbd),
        _ => RGBColor(0xff, 0x7f, 0x0e),
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
    let series: Vec<cdf::Series> = results
        .implementation_names(HANDOFF)
        .into_iter()
        .filter_map(|implementation| {
            let mut samples = results.pooled_samples(HANDOFF, implementation);
            (!samples.is_empty()).then(|| cdf::Series {
                name: implementation.to_owned(),
                p50_us: samples.quantile_us(0.5),
                p99_us: samples.quantile_us(0.99),
                count: samples.len(),
                cdf_us: samples.cdf_us(),
            })
        })
        .collect();
    let bars_height: u32 = groups.iter().map(|g| bars::height(g, ROW)).sum();
    let height = TITLE_HEIGHT + CDF_HEIGHT + bars_height;

    let mut svg = String::new();
    let drawn = draw(&mut svg, (WIDTH, height), subtitle, &series, &groups);
    // Drawing into a string fails only on a plotting bug; the benchmark's
    // numbers are worth more than its picture, so say so in the picture.
    if let Err(error) = drawn {
        svg = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"40\">\
             <text x=\"10\" y=\"24\">chart not drawn: {error}</text></svg>\n"
        );
    }
    svg
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

fn draw(
    svg: &mut String,
    size: (u32, u32),
    subtitle: &str,
    series: &[cdf::Series],
    groups: &[bars::Group],
) -> DrawResult {
    let root = SVGBackend::with_string(svg, size).into_drawing_area();
    root.fill(&WHITE)?;
    let (title, rest) = root.split_vertically(TITLE_HEIGHT);
    let centre = i32::try_from(size.0 / 2).unwrap_or(0);
    let centred =
        |font: FontDesc<'static>| TextStyle::from(font).pos(Pos::new(HPos::Center, VPos::Top));
    title.draw_text(
        "lock-bench: handoff latency and throughput",
        &centred(("sans-serif", 18).into_font().style(FontStyle::Bold)),
        (centre, 10),
    )?;
    title.draw_text(
        subtitle,
        &centred(("sans-serif", 12).into_font()),
        (centre, 36),
    )?;
    let (cdf_area, mut bars_area) = rest.split_vertically(CDF_HEIGHT);
    cdf::draw(&cdf_area, series)?;
    for group in groups {
        let (area, below) = bars_area.split_vertically(bars::height(group, ROW));
        bars::draw(&area, group)?;
        bars_area = below;
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::report::number;
    use crate::{RunResult, Samples};

    #[test]
    fn renders_every_panel() {
        let mut results = Results::default();
        let mut expected_rslock_p50 = 0.0;
        for (implementation, micros) in [("project", 400), ("rslock", 90_000)] {
            let mut samples = Samples::default();
            for i in 1..=100 {
                samples.push(Duration::from_micros(micros + i));
            }
            if implementation == "rslock" {
                expected_rslock_p50 = samples.quantile_us(0.5);
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
        assert!(
            svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
            "{svg}"
        );
        assert!(!svg.contains("chart not drawn"), "{svg}");
        // One line per implementation, in its colour (axes and ticks are
        // thin black polylines).
        let lines: Vec<&str> = svg
            .split("<polyline")
            .skip(1)
            .filter(|line| line.contains("stroke-width=\"2\""))
            .collect();
        assert_eq!(lines.len(), 2, "{svg}");
        assert!(lines[0].contains("stroke=\"#1F77B4\""), "{}", lines[0]);
        assert!(lines[1].contains("stroke=\"#D62728\""), "{}", lines[1]);
        let legend = format!("rslock: p50 {} µs", number(expected_rslock_p50));
        assert!(svg.contains(&legend), "no `{legend}` in {svg}");
        assert!(svg.contains("uncontended_pair: ops/s"), "{svg}");
        assert!(svg.contains("redlock-3/parallel_64: ops/s"), "{svg}");
        // Each bar labelled with its median.
        assert_eq!(svg.matches("\n5,000\n").count(), 2, "{svg}");
    }

    #[test]
    fn renders_without_a_handoff_run() {
        let svg = render(&Results::default(), "nothing run");
        assert!(svg.contains("(handoff not run)"), "{svg}");
        assert!(!svg.contains("chart not drawn"), "{svg}");
    }
}
