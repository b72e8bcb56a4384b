//! The throughput panel: one group of bars per scenario (each on its own
//! scale), median operations per second with a min–max whisker.

use super::{Area, Svg, colour};
use crate::Results;
use crate::report::number;

/// One bar: an implementation's median and range.
#[derive(Clone, Debug)]
pub struct Bar {
    /// Implementation name.
    pub name: String,
    /// Median ops/s.
    pub median: f64,
    /// Slowest run.
    pub min: f64,
    /// Fastest run.
    pub max: f64,
}

/// The bars of one scenario.
#[derive(Clone, Debug)]
pub struct Group {
    /// Scenario name.
    pub title: String,
    /// One bar per implementation.
    pub bars: Vec<Bar>,
}

impl Group {
    /// The group of `scenario`, or `None` if it was not run.
    pub fn from_results(results: &Results, scenario: &str) -> Option<Self> {
        let bars: Vec<Bar> = results
            .implementation_names(scenario)
            .into_iter()
            .filter_map(|name| {
                let stat = results.summary(scenario, name)?.ops_per_s;
                Some(Bar {
                    name: name.to_owned(),
                    median: stat.median,
                    min: stat.min,
                    max: stat.max,
                })
            })
            .collect();
        (!bars.is_empty()).then(|| Self {
            title: format!("{scenario}: ops/s (median, whisker = min–max)"),
            bars,
        })
    }
}

/// Draws every group into `area`, `row` pixels per bar.
pub fn draw(svg: &mut Svg, area: Area, groups: &[Group], row: f64) {
    let mut y = area.y;
    for group in groups {
        svg.text(
            area.x - 190.0,
            y + 14.0,
            &group.title,
            "start",
            14.0,
            "bold",
        );
        y += row * 1.2;
        let top = group
            .bars
            .iter()
            .map(|b| b.max)
            .fold(0.0, f64::max)
            .max(1.0);
        let x_of = |value: f64| area.x + value / top * area.w;
        for bar in &group.bars {
            svg.text(
                area.x - 8.0,
                y + row * 0.62,
                &bar.name,
                "end",
                12.0,
                "normal",
            );
            svg.rect(
                area.x,
                y + 3.0,
                x_of(bar.median) - area.x,
                row - 6.0,
                colour(&bar.name),
            );
            let mid = y + row / 2.0;
            svg.line(
                (x_of(bar.min), mid),
                (x_of(bar.max), mid),
                "#000000",
                1.5,
                "",
            );
            svg.line(
                (x_of(bar.min), mid - 5.0),
                (x_of(bar.min), mid + 5.0),
                "#000000",
                1.5,
                "",
            );
            svg.line(
                (x_of(bar.max), mid - 5.0),
                (x_of(bar.max), mid + 5.0),
                "#000000",
                1.5,
                "",
            );
            svg.text(
                x_of(bar.max) + 8.0,
                y + row * 0.62,
                &number(bar.median),
                "start",
                12.0,
                "normal",
            );
            y += row;
        }
        y += row * 0.8;
    }
}
