//! The throughput panel: one group of bars per scenario (each on its own
//! scale), median operations per second with a min–max whisker.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{DrawResult, colour};
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

/// The height of `group`'s panel, `row` pixels per bar plus its title.
pub fn height(group: &Group, row: u32) -> u32 {
    (u32::try_from(group.bars.len()).unwrap_or(u32::MAX) + 3).saturating_mul(row)
}

/// Draws one group into `area`: a bar per implementation, on a scale of
/// its own.
pub fn draw<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, group: &Group) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let top = group
        .bars
        .iter()
        .map(|b| b.max.max(b.median))
        .fold(0.0, f64::max)
        .max(1.0);
    let rows = u32::try_from(group.bars.len()).unwrap_or(u32::MAX);
    let names: Vec<&str> = group.bars.iter().map(|b| b.name.as_str()).collect();
    let mut chart = ChartBuilder::on(area)
        .caption(
            &group.title,
            ("sans-serif", 14).into_font().style(FontStyle::Bold),
        )
        .margin_left(20)
        .margin_right(120)
        .y_label_area_size(150)
        // A segmented range of `0..n` has a segment for `n` too: stop one short.
        .build_cartesian_2d(0f64..top, (0u32..rows.saturating_sub(1)).into_segmented())?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .disable_x_axis()
        .disable_y_mesh()
        .y_labels(names.len())
        .y_label_formatter(&|at| match at {
            SegmentValue::CenterOf(index) => names
                .get(*index as usize)
                .map_or_else(String::new, |name| (*name).to_owned()),
            _ => String::new(),
        })
        .draw()?;
    for (index, bar) in (0u32..).zip(&group.bars) {
        let mut rectangle = Rectangle::new(
            [
                (0.0, SegmentValue::Exact(index)),
                (bar.median, SegmentValue::Exact(index + 1)),
            ],
            colour(&bar.name).filled(),
        );
        rectangle.set_margin(3, 3, 0, 0);
        chart.draw_series(std::iter::once(rectangle))?;
        let middle = SegmentValue::CenterOf(index);
        chart.draw_series(std::iter::once(ErrorBar::new_horizontal(
            middle.clone(),
            bar.min,
            bar.median,
            bar.max,
            BLACK.stroke_width(1),
            10,
        )))?;
        // The median's value, a few pixels right of the whisker's end.
        let style = ("sans-serif", 12)
            .into_font()
            .into_text_style(area)
            .pos(Pos::new(HPos::Left, VPos::Center));
        chart.draw_series(std::iter::once(
            EmptyElement::at((bar.max, middle)) + Text::new(number(bar.median), (8, 0), style),
        ))?;
    }
    Ok(())
}
